import Foundation
import Loadable
import LoadableCaching
import LoadableHTTP
import LoadableSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A refusal that asks for credentials: a `401` with `WWW-Authenticate` or a `407` with
/// `Proxy-Authenticate`.
struct Challenge: Sendable, CustomTestStringConvertible {
    var status = 401
    var header = "WWW-Authenticate"
    let value: String

    /// The refusal, with a body that explains it.
    var response: LoopbackHTTPServer.Response {
        .status(status, headers: [.init(header, value)], body: Data("wrong password".utf8))
    }

    var testDescription: String { "\(status) \(header): \(value)" }

    /// Every scheme, and several in one header: FoundationNetworking answers `Basic` with a
    /// challenge to the delegate, the others not.
    static let all = [
        Challenge(value: #"Basic realm="Realm""#),
        Challenge(value: #"Digest realm="r", nonce="n", qop="auth""#),
        Challenge(value: "Negotiate"),
        Challenge(value: #"Bearer realm="x""#),
        Challenge(value: "Foo bar=1"),
        Challenge(value: #"Negotiate, Basic realm="a", Digest realm="b", nonce="n""#),
        Challenge(status: 407, header: "Proxy-Authenticate", value: #"Basic realm="Realm""#),
    ]
}

/// A 401 (or 407) that asks for credentials completes as the status it is, through a real socket,
/// whatever its scheme: on Linux, FoundationNetworking never completes a task whose 401 carries
/// a `Basic` challenge when its delegate asks for default handling.
@MainActor
@Suite("A 401 or 407 with a challenge completes as a status", .timeLimit(.minutes(3)))
struct AuthenticationChallengeTests {
    /// Checks that `error` is `challenge`'s refusal, not retryable.
    private func expectRefusal(
        _ error: (any Error)?, of challenge: Challenge, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        guard let error = error as? HTTPLoadableError, case .status(let code, _, let bodyPrefix) = error else {
            Issue.record(
                "expected HTTPLoadableError.status, got \(String(describing: error))", sourceLocation: sourceLocation)
            return
        }
        #expect(code == challenge.status, sourceLocation: sourceLocation)
        #expect(error.header(challenge.header) == challenge.value, sourceLocation: sourceLocation)
        #expect(bodyPrefix == Data("wrong password".utf8), sourceLocation: sourceLocation)
        #expect(!error.isRetryable, sourceLocation: sourceLocation)
    }

    @Test("an HTTPLoadable's sync fails with the status, not retryable", arguments: Challenge.all)
    func aLoadableSync(challenge: Challenge) async throws {
        let server = try LoopbackHTTPServer { _ in challenge.response }
        let feed = HTTPLoadable<Feed>(request: URLRequest(url: server.url("/feed")))
        let error = try await withRealTimeLimit("the sync of a \(challenge.testDescription)") {
            await failure { try await feed.synced() }
        }
        #expect(feed.loadableState == .didFailToSync)
        expectRefusal(error, of: challenge)
        expectRefusal(feed.error, of: challenge)
        #expect(server.requestCount == 1)
    }

    @Test("HTTPService.send throws the status", arguments: Challenge.all)
    func aServiceSend(challenge: Challenge) async throws {
        let server = try LoopbackHTTPServer { _ in challenge.response }
        let api = HTTPService(baseURL: server.url("/api"))
        let error = try await withRealTimeLimit("the send of a \(challenge.testDescription)") {
            await failure { try await api.send(.post, "comments", json: Comment(text: "Hi")) }
        }
        expectRefusal(error, of: challenge)
        #expect(server.requestCount == 1)
    }

    @Test("URLSession's transport returns the refusal as a response", arguments: Challenge.all)
    func theTransport(challenge: Challenge) async throws {
        let server = try LoopbackHTTPServer { _ in challenge.response }
        let request = URLRequest(url: server.url("/feed"))
        let (response, body) = try await withRealTimeLimit("the transfer of a \(challenge.testDescription)") {
            try await URLSession.shared.send(request, maxBodySize: 1 << 20)
        }
        #expect(response.statusCode == challenge.status)
        #expect(response.value(forHTTPHeaderField: challenge.header) == challenge.value)
        #expect(body == Data("wrong password".utf8))
    }

    @Test("a send with an authorization renews the token once and is retried once after a Basic challenge")
    func anAuthorizedSendIsRetried() async throws {
        let issued = Locked(0)
        let server = try LoopbackHTTPServer { request in
            if request.path == "/token" {
                return .json(
                    issued.withLock { count in
                        count += 1
                        return "\"t\(count)\""
                    })
            }
            // The first token is refused, with a challenge; the second is taken.
            return request.header("Authorization") == "Bearer t2"
                ? .status(204) : Challenge(value: #"Basic realm="api""#).response
        }
        let token = HTTPLoadable<String>(request: URLRequest(url: server.url("/token")))
        let api = HTTPService(
            baseURL: server.url("/api"),
            authorization: .bearer(LoadableWaiter(token, timeout: .seconds(30), clock: ManualClock())))
        try await withRealTimeLimit("an authorized send refused with a Basic challenge") {
            try await api.send(.post, "comments", json: Comment(text: "Hi"))
        }
        #expect(issued.withLock { $0 } == 2)
        let sent = server.requests.filter { $0.path == "/api/comments" }
        #expect(sent.map { $0.header("Authorization") } == ["Bearer t1", "Bearer t2"])
    }

    @Test("an outbox item refused with a Basic challenge becomes failed, and the next item is sent")
    func anOutboxGoesOn() async throws {
        let server = try LoopbackHTTPServer { request in
            request.path == "/api/comments/locked" ? Challenge(value: #"Basic realm="Realm""#).response : .status(204)
        }
        let api = HTTPService(baseURL: server.url("/api"))
        let outbox = LoadableOutbox<String>(
            cache: InMemoryLoadableCache(), activity: ActivityMonitor(), clock: ManualClock()
        ) { path, idempotencyKey in
            try await api.send(.post, "comments/\(path)", idempotencyKey: idempotencyKey)
        }
        outbox.enqueue("locked")
        outbox.enqueue("open")
        try await withRealTimeLimit("an outbox whose first item is refused with a Basic challenge") {
            await changes(of: outbox) { outbox.items.map(\.state) == [.failed] && !outbox.isSending }
        }
        #expect(outbox.items.map(\.change) == ["locked"])
        expectRefusal(outbox.items.first?.lastError, of: Challenge(value: #"Basic realm="Realm""#))
        #expect(server.requests.map(\.path) == ["/api/comments/locked", "/api/comments/open"])
    }
}

/// Returns once `condition` holds, checking it after each change of `outbox` that Observation
/// reports (never polling).
@MainActor
func changes<Change>(of outbox: LoadableOutbox<Change>, until condition: @MainActor () -> Bool) async {
    while !condition() {
        await withCheckedContinuation { continuation in
            withObservationTracking {
                _ = outbox.items
                _ = outbox.isSending
            } onChange: {
                continuation.resume()
            }
        }
    }
}
