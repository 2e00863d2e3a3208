import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// The access-token recipe of Docs/Syncing.md, under load: a server that revokes tokens, and many
/// requests in flight when it does.
///
/// The client, `Transport` and `TransportError` are the guide's own, declared in
/// SyncingGuideTests.swift as Docs/Syncing.md prints them; this file adds the server and the load.
enum AccessTokenRecipe {
    /// A token endpoint that issues numbered tokens (`token-1`, `token-2`, …) after 50 ms on its
    /// clock, and can revoke every token issued so far.
    @MainActor
    final class TokenServer {
        private let clock: ManualClock
        /// The number of tokens issued.
        private(set) var issued = 0
        /// Tokens numbered up to this one are revoked.
        private var revokedThrough = 0

        init(clock: ManualClock) {
            self.clock = clock
        }

        func newToken() async throws -> String {
            try await clock.sleep(for: .milliseconds(50))
            issued += 1
            return "token-\(issued)"
        }

        /// Revokes every token issued so far.
        func revokeAll() {
            revokedThrough = issued
        }

        /// Whether `bearer` is a token this server issued and did not revoke.
        func accepts(_ bearer: String) -> Bool {
            guard bearer.hasPrefix("token-"), let number = Int(bearer.dropFirst("token-".count)) else { return false }
            return number > revokedThrough && number <= issued
        }
    }

    /// An API that answers after 100 ms on its clock: with the request and the bearer, or with
    /// `TransportError.unauthorized` for a token its server does not accept.
    @MainActor
    final class FakeAPI: Transport {
        /// A 401 answer.
        struct Rejection {
            var request: String
            var bearer: String
            /// When the request was sent.
            var sentAt: ManualClock.Instant
            /// When the 401 came back.
            var answeredAt: ManualClock.Instant
        }

        private let server: TokenServer
        private let clock: ManualClock
        /// The 401 answers, in order.
        private(set) var rejections: [Rejection] = []
        /// When each request was first sent.
        private(set) var firstSent: [String: ManualClock.Instant] = [:]

        init(server: TokenServer, clock: ManualClock) {
            self.server = server
            self.clock = clock
        }

        func send(_ request: String, bearer: String) async throws -> String {
            let sentAt = clock.now
            if firstSent[request] == nil { firstSent[request] = sentAt }
            try await clock.sleep(for: .milliseconds(100))
            guard server.accepts(bearer) else {
                rejections.append(Rejection(request: request, bearer: bearer, sentAt: sentAt, answeredAt: clock.now))
                throw TransportError.unauthorized
            }
            return "\(request) as \(bearer)"
        }
    }
}

extension AccessTokenRecipe {
    @Suite("Access-token recipe under revocation")
    @MainActor
    struct Tests {
        let clock = ManualClock()
        let server: TokenServer
        let token: AsyncLoadable<String>
        let api: FakeAPI
        let client: APIClient

        init() {
            server = TokenServer(clock: clock)
            token = AsyncLoadable<String> { [server] in try await server.newToken() }
            api = FakeAPI(server: server, clock: clock)
            client = APIClient(token: token, transport: api, clock: clock)
        }

        /// Sends `count` requests, one every 7 ms (which never falls on the 50 ms and 100 ms
        /// latencies), then moves the clock past the waiter's 30 s timeout, so that every request
        /// ends; returns their answers (or why they failed).
        func sendBatch(_ first: Int, count: Int) async -> [String] {
            var tasks: [Task<String, any Error>] = []
            for index in first..<(first + count) {
                tasks.append(Task { try await client.send("GET /item/\(index)") })
                await clock.advance(by: .milliseconds(7))
            }
            await clock.advance(by: .seconds(31))
            var answers: [String] = []
            for task in tasks {
                do {
                    answers.append(try await task.value)
                } catch {
                    answers.append("failed: \(error)")
                }
            }
            return answers
        }

        @Test("90 requests in three batches, every token revoked between batches: one new token each time")
        func revocations() async {
            var answers: [String] = []
            for batch in 0..<3 {
                if batch > 0 { server.revokeAll() }
                let rejectedBefore = api.rejections.count
                let requests = (batch * 30)..<(batch * 30 + 30)
                answers += await sendBatch(requests.lowerBound, count: requests.count)
                let rejections = api.rejections[rejectedBefore...]
                guard batch > 0 else {
                    #expect(rejections.isEmpty)
                    continue
                }
                // Only the requests in flight when the first 401 came back get one: those sent with
                // the revoked token before the client knew (100 ms at one request every 7 ms).
                let learnedAt = rejections.map(\.answeredAt).min() ?? .init(offset: .zero)
                let inFlight = requests.filter { api.firstSent["GET /item/\($0)"].map { $0 <= learnedAt } ?? false }
                #expect(rejections.count >= 1 && rejections.count <= inFlight.count, "batch \(batch)")
                #expect(inFlight.count <= 16, "batch \(batch)")
                #expect(rejections.allSatisfy { $0.sentAt <= learnedAt && $0.bearer == "token-\(batch)" })
            }

            #expect(answers.filter { !$0.hasPrefix("GET /item/") } == [])  // every request succeeded
            #expect(answers.count == 90)
            #expect(server.issued == 3)  // the revocations + 1
            #expect(answers.suffix(30).allSatisfy { $0.hasSuffix(" as token-3") })
            let rejectedRequests = api.rejections.map(\.request)
            #expect(Set(rejectedRequests).count == rejectedRequests.count)  // each request at most once
        }

        @Test("a 401 that arrives while the token is being refreshed waits for a token issued after it")
        func unauthorizedDuringRefresh() async throws {
            #expect(await sendBatch(0, count: 1) == ["GET /item/0 as token-1"])
            server.revokeAll()
            let request = Task { try await client.send("GET /profile") }
            await expectSleepers(1, on: clock)  // sent with token-1: the 401 comes back in 100 ms
            await clock.advance(by: .milliseconds(80))
            token.sync()  // a refresh by someone else, whose token comes 50 ms later: after the 401
            await expectSleepers(2, on: clock)
            await clock.advance(by: .seconds(31))
            #expect(try await request.value == "GET /profile as token-3")
            // The refresh under way, then the one more sync that the invalidation during it asked for.
            #expect(server.issued == 3)
            #expect(api.rejections.map(\.bearer) == ["token-1"])
        }

        @Test("marking the token failed on a 401 does not replace it: the waiter hands the rejected one back")
        func failureDoesNotReplaceTheToken() async {
            let waiter = LoadableWaiter(token, timeout: .seconds(30), clock: clock)
            var tokens: [String] = []
            func waitForToken() {
                waiter.wait { result in tokens.append((try? result.get().contents) ?? "failed") }
            }
            waitForToken()
            await expectSleepers(2, on: clock)  // the wait's timeout and the token endpoint
            await clock.advance(by: .milliseconds(50))
            #expect(tokens == ["token-1"])

            token.setDidFailToSync(TransportError.unauthorized)  // what an old guide showed
            waitForToken()
            #expect(tokens == ["token-1", "token-1"])  // at once, the rejected token
            #expect(server.issued == 1)

            token.invalidate()  // what the recipe does
            waitForToken()
            #expect(tokens.count == 2)
            await expectSleepers(2, on: clock)
            await clock.advance(by: .milliseconds(50))
            #expect(tokens == ["token-1", "token-1", "token-2"])
        }
    }
}
