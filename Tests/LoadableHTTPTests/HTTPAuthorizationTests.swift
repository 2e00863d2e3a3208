import Foundation
import LoadableHTTP
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Hands out access tokens `t1`, `t2`, … (or what `tokens` says); while gated, each request waits
/// until the test releases it.
@MainActor
final class TokenIssuer {
    private(set) var issuedCount = 0
    var tokens: (Int) -> String = { "t\($0)" }
    var isGated = false
    private var pending: [CheckedContinuation<Void, Never>] = []

    var pendingCount: Int { pending.count }

    func next() async -> String {
        if isGated { await withCheckedContinuation { pending.append($0) } }
        issuedCount += 1
        return tokens(issuedCount)
    }

    /// Lets every waiting request through, and the later ones too.
    func release() {
        isGated = false
        let waiting = pending
        pending = []
        for continuation in waiting { continuation.resume() }
    }
}

let tokenURL = URL(string: "http://example.test/token")!

/// The sample of `Docs/HTTP.md`, "Authorized requests": telling "log in again" from a slow network.
func message(forProfileError error: (any Error)?) -> String? {
    switch error {
    case LoadableWaiterError.targetFailed(let tokenError)?:
        "Please sign in again (\(tokenError))"
    case LoadableWaiterError.timedOut?:
        "The server is slow to answer"
    default:
        error.map { "\($0)" }
    }
}

/// A token endpoint that refuses the credentials, against a real server.
@MainActor
@Suite(.timeLimit(.minutes(5))) struct RefusedTokenTests {
    @Test("A token endpoint answering 401 fails the request at once with targetFailed, the guide's message says so")
    func aRefusedTokenOverHTTP() async throws {
        let server = try LoopbackHTTPServer { request in
            request.path == "/token" ? .status(401) : .json(#"{"items":[]}"#)
        }
        let clock = ManualClock()
        let token = HTTPLoadable<String>(request: URLRequest(url: server.url("/token")))
        let auth = HTTPAuthorization.bearer(LoadableWaiter(token, timeout: .seconds(30), clock: clock))
        let profile = HTTPLoadable<Feed>(request: URLRequest(url: server.url("/feed")), authorization: auth)
        try? await profile.synced()
        #expect(statusCode(of: token.error) == 401)
        guard case .targetFailed(let tokenError)? = profile.error as? LoadableWaiterError else {
            Issue.record("expected targetFailed, got \(profile.error.map { "\($0)" } ?? "nil")")
            return
        }
        #expect(statusCode(of: tokenError) == 401)
        #expect(message(forProfileError: profile.error)?.hasPrefix("Please sign in again (HTTP 401") == true)
        #expect(message(forProfileError: LoadableWaiterError.timedOut) == "The server is slow to answer")
        #expect(server.requests.map(\.path) == ["/token"])
        #expect(clock.now.offset == .zero)
    }
}

/// The 401 rule of `HTTPAuthorization.bearer`, through a transport the test answers by hand.
@MainActor
@Suite(.timeLimit(.minutes(5))) struct HTTPAuthorizationTests {
    let transport = ScriptedTransport()
    let issuer = TokenIssuer()
    let token: AsyncLoadable<String>
    let waiter: LoadableWaiter<AsyncLoadable<String>>
    let clock = ManualClock()

    init() {
        let issuer = issuer
        token = AsyncLoadable<String> { await issuer.next() }
        waiter = LoadableWaiter(token, timeout: .seconds(10), clock: clock)
    }

    func makeFeed(_ authorization: HTTPAuthorization? = nil) -> HTTPLoadable<Feed> {
        HTTPLoadable<Feed>(
            request: URLRequest(url: feedURL),
            transport: transport,
            authorization: authorization ?? .bearer(waiter)
        )
    }

    func bearer(_ index: Int) -> String? {
        transport.requests[index].value(forHTTPHeaderField: "Authorization")
    }

    @Test func eachRequestWaitsForTheTokenAndCarriesIt() async throws {
        let feed = makeFeed()
        feed.sync()
        await transport.waitForRequests(1)
        #expect(bearer(0) == "Bearer t1")
        transport.answer(0, body: #"{"items":[1]}"#)
        try await feed.doneSyncing()
        #expect(feed.contents == Feed(items: [1]))
        // The token is still good: the next request uses it without a new one.
        feed.sync()
        await transport.waitForRequests(2)
        #expect(bearer(1) == "Bearer t1")
        #expect(issuer.issuedCount == 1)
        transport.answer(1, body: #"{"items":[2]}"#)
        try await feed.doneSyncing()
    }

    @Test func aStructTokenIsReadWithTheTokenClosure() async throws {
        struct AccessToken: Sendable { let value: String }
        let issuer = issuer
        let token = AsyncLoadable<AccessToken> { AccessToken(value: "s-\(await issuer.next())") }
        let auth = HTTPAuthorization.bearer(LoadableWaiter(token, timeout: .seconds(10), clock: ManualClock())) {
            $0.value
        }
        let feed = makeFeed(auth)
        feed.sync()
        await transport.waitForRequests(1)
        #expect(bearer(0) == "Bearer s-t1")
        transport.answer(0, body: #"{"items":[]}"#)
        try await feed.doneSyncing()
    }

    @Test func a401RefreshesTheTokenOnceAndRetriesWithTheNewOne() async throws {
        let feed = makeFeed()
        feed.sync()
        await transport.waitForRequests(1)
        transport.answer(0, status: 401)
        await transport.waitForRequests(2)
        #expect(bearer(1) == "Bearer t2")
        #expect(issuer.issuedCount == 2)
        transport.answer(1, body: #"{"items":[1]}"#)
        try await feed.doneSyncing()
        #expect(feed.loadableState == .didSyncSuccessfully)
    }

    @Test func aSecond401FailsTheSyncAfterOneRefresh() async throws {
        let feed = makeFeed()
        feed.sync()
        await transport.waitForRequests(1)
        transport.answer(0, status: 401, body: "bad token")
        await transport.waitForRequests(2)
        transport.answer(1, status: 401, body: "still bad")
        try? await feed.doneSyncing()
        let error = try #require(feed.error as? HTTPLoadableError)
        guard case .status(401, _, let body) = error else {
            Issue.record("expected .status(401), got \(error)"); return
        }
        #expect(String(decoding: body, as: UTF8.self) == "still bad")
        #expect(issuer.issuedCount == 2)
        #expect(transport.requests.count == 2)
    }

    @Test func theRejectedTokenIsNeverSentAgain() async throws {
        // The token server keeps handing out the rejected token: two refreshes, then the sync
        // fails with the 401 without sending it again.
        issuer.tokens = { _ in "same" }
        let feed = makeFeed()
        feed.sync()
        await transport.waitForRequests(1)
        transport.answer(0, status: 401)
        try? await feed.doneSyncing()
        #expect(statusCode(of: feed.error) == 401)
        #expect(transport.requests.count == 1)
        #expect(issuer.issuedCount == 3)
    }

    @Test func fiftyConcurrent401sCauseOneRefresh() async throws {
        let feeds = (0..<50).map { _ in makeFeed() }
        for feed in feeds { feed.sync() }
        await transport.waitForRequests(50)
        #expect((0..<50).allSatisfy { bearer($0) == "Bearer t1" })
        issuer.isGated = true
        // 20 rejections before the refresh starts, 20 while it runs, 10 after it ended.
        for index in 0..<20 { transport.answer(index, status: 401) }
        await settle(until: { issuer.pendingCount == 1 })
        #expect(token.loadableState == .syncing)
        for index in 20..<40 { transport.answer(index, status: 401) }
        await settle(until: { transport.openCount == 10 })
        issuer.release()
        await transport.waitForRequests(90)
        for index in 40..<50 { transport.answer(index, status: 401) }
        await transport.waitForRequests(100)
        #expect(issuer.issuedCount == 2)
        #expect((50..<100).allSatisfy { bearer($0) == "Bearer t2" })
        for index in 50..<100 { transport.answer(index, body: #"{"items":[\#(index)]}"#) }
        for feed in feeds { try await feed.doneSyncing() }
        #expect(feeds.allSatisfy { $0.loadableState == .didSyncSuccessfully })
        await settle(until: { token.loadableState != .syncing })
        #expect(issuer.issuedCount == 2)
        #expect(!token.isStale)
    }

    @Test func a401DuringATokenSyncSomeoneElseStartedWaitsForThatSync() async throws {
        let feed = makeFeed()
        feed.sync()
        await transport.waitForRequests(1)
        issuer.isGated = true
        token.sync()  // not an invalidation: the token stays fresh while it syncs
        await settle(until: { issuer.pendingCount == 1 })
        transport.answer(0, status: 401)
        await settle(until: { transport.openCount == 0 })
        #expect(!token.isStale)
        #expect(transport.requests.count == 1)
        issuer.release()
        await transport.waitForRequests(2)
        #expect(bearer(1) == "Bearer t2")
        #expect(issuer.issuedCount == 2)
        transport.answer(1, body: #"{"items":[]}"#)
        try await feed.doneSyncing()
        // No refresh is left pending: the 401 did not invalidate the syncing token.
        await settle(until: { token.loadableState != .syncing })
        #expect(issuer.issuedCount == 2)
        #expect(!token.isStale)
    }

    @Test(
        "A token endpoint that refuses the credentials fails the request at once with targetFailed",
        arguments: [401, 400]
    )
    func aRefusedTokenFailsRequestsAtOnce(status: Int) async throws {
        let token = HTTPLoadable<String>(request: URLRequest(url: tokenURL), transport: transport)
        let auth = HTTPAuthorization.bearer(LoadableWaiter(token, timeout: .seconds(30), clock: clock))
        let profile = makeFeed(auth)
        profile.sync()
        await transport.waitForRequests(1)
        #expect(transport.requests[0].url == tokenURL)
        transport.answer(0, status: status, body: "bad credentials")
        await settle(until: { profile.loadableState != .syncing })
        #expect(profile.loadableState == .didFailToSync)
        guard case .targetFailed(let tokenError)? = profile.error as? LoadableWaiterError else {
            Issue.record("expected targetFailed, got \(profile.error.map { "\($0)" } ?? "nil")")
            await clock.advance(by: .seconds(30))
            return
        }
        #expect(statusCode(of: tokenError) == status)
        #expect(clock.now.offset == .zero)
        // A later request fails at once too, without asking the token endpoint again.
        let feed = makeFeed(auth)
        feed.sync()
        await settle(until: { feed.loadableState != .syncing })
        #expect(feed.loadableState == .didFailToSync)
        #expect(transport.requests.count == 1)
        // A new login: the token syncs again and requests go through.
        token.sync()
        await transport.waitForRequests(2)
        transport.answer(1, body: #""t2""#)
        try await token.doneSyncing()
        feed.sync()
        await transport.waitForRequests(3)
        #expect(bearer(2) == "Bearer t2")
        transport.answer(2, body: #"{"items":[]}"#)
        try await feed.doneSyncing()
        #expect(feed.loadableState == .didSyncSuccessfully)
    }

    @Test("A loadable's syncer does not retry a request whose token cannot be had")
    func targetFailedIsNotRetried() async throws {
        let token = HTTPLoadable<String>(request: URLRequest(url: tokenURL), transport: transport)
        let auth = HTTPAuthorization.bearer(LoadableWaiter(token, timeout: .seconds(30), clock: clock))
        let profile = makeFeed(auth)
        let syncer = LoadableSyncer(
            profile,
            timeoutPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(60)),
            clock: clock,
            activity: ActivityMonitor()
        )
        profile.sync()
        await transport.waitForRequests(1)
        transport.answer(0, status: 401)
        await settle(until: { profile.loadableState != .syncing })
        #expect(profile.error is LoadableWaiterError)
        #expect(syncer.nextSyncIn == nil)
    }

    @Test func aWaiterTimeoutFailsTheSyncWithTheWaitersError() async throws {
        issuer.isGated = true
        let feed = makeFeed()
        feed.sync()
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(10))
        try? await feed.doneSyncing()
        #expect(feed.error as? LoadableWaiterError == .timedOut)
        #expect(transport.requests.isEmpty)
        issuer.release()
    }

    @Test func aTokenAHeaderCannotCarryIsNeverSent() async throws {
        issuer.tokens = { _ in "abc\r\nX-Injected: 1" }
        let feed = makeFeed()
        feed.sync()
        try? await feed.doneSyncing()
        let error = try #require(feed.error as? HTTPLoadableError)
        guard case .transport(let urlError) = error else { Issue.record("expected .transport, got \(error)"); return }
        #expect(urlError.code == .userAuthenticationRequired)
        #expect(transport.requests.isEmpty)
    }

    @Test func a401WithoutAuthorizationIsAStatusError() async throws {
        let feed = HTTPLoadable<Feed>(request: URLRequest(url: feedURL), transport: transport)
        feed.sync()
        await transport.waitForRequests(1)
        transport.answer(0, status: 401)
        try? await feed.doneSyncing()
        #expect(statusCode(of: feed.error) == 401)
        #expect((feed.error as? HTTPLoadableError)?.isRetryable == false)
    }

    @Test func cancellingDuringTheRetryEndsTheSync() async throws {
        let feed = makeFeed()
        feed.sync()
        await transport.waitForRequests(1)
        transport.answer(0, status: 401)
        await transport.waitForRequests(2)
        feed.cancelSync()
        await settle(until: { transport.cancelledCount == 1 })
        #expect(transport.openCount == 0)
        #expect(feed.loadableState == .idle)
    }
}
