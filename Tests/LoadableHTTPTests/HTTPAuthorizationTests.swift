import Foundation
import Loadable
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

/// The kinds of token loadable an app may hand to `HTTPAuthorization.bearer`.
enum TokenKind: String, CaseIterable, CustomTestStringConvertible {
    /// A subclass of the package's `Loadable`, with its freshness rules.
    case loadableSubclass
    /// `TestLoadable`, whose `invalidate()` only counts and whose syncs the test ends.
    case testLoadable
    /// An app's own class, conforming to `SyncableLoadable & ContentsLoadable` without the
    /// package's core (no staleness, `invalidate()` does nothing).
    case handWritten

    var testDescription: String { rawValue }
}

/// A token loadable of the app's own: a `Loadable` subclass that asks `issuer` for each token.
@MainActor
final class IssuedTokenLoadable: Loadable<String> {
    let issuer: TokenIssuer

    init(issuer: TokenIssuer) {
        self.issuer = issuer
        super.init()
    }

    override func doSync() {
        Task { setDidSyncSuccessfully(await issuer.next()) }
    }
}

/// A token loadable written by hand, without the package's core: no staleness, an `invalidate()`
/// that does nothing, its state kept by a `PushLoadable` inside.
@MainActor
final class HandWrittenToken: SyncableLoadable, ContentsLoadable {
    private let inner = PushLoadable<String>()
    let issuer: TokenIssuer
    private(set) var syncCount = 0

    init(issuer: TokenIssuer) {
        self.issuer = issuer
    }

    var loadableState: LoadableState { inner.loadableState }
    var error: (any Error)? { inner.error }
    var isContentsAvailable: Bool { inner.isContentsAvailable }
    var contents: String? { inner.contents }
    var needsSync: Bool { loadableState == .idle || loadableState == .didFailToSync || !isContentsAvailable }

    func sync() {
        guard inner.loadableState != .syncing else { return }
        syncCount += 1
        inner.setSyncing()
        Task { inner.setDidSyncSuccessfully(await issuer.next()) }
    }

    func syncIfNeeded() {
        if needsSync { sync() }
    }

    func invalidate() {}

    func cancelSync() {}

    func addObserver(_ handler: @escaping @MainActor (any PureLoadable) -> Void) -> LoadableObservation {
        inner.addObserver(handler)
    }
}

/// A token of one ``TokenKind`` whose syncs `issuer` answers, with a waiter of the given condition.
@MainActor
struct TokenUnderTest {
    let authorization: HTTPAuthorization
    let waiter: AnyObject
    /// Keeps what ends the syncs of a `TestLoadable` alive.
    let keepAlive: [AnyObject]
    /// The token's state.
    let state: @MainActor () -> LoadableState

    init(
        _ kind: TokenKind,
        condition: LoadableWaiter<TestLoadable<String>>.Condition,
        issuer: TokenIssuer,
        clock: ManualClock
    ) {
        switch kind {
        case .loadableSubclass:
            let token = IssuedTokenLoadable(issuer: issuer)
            let waiter = LoadableWaiter(token, condition: .init(condition), timeout: .seconds(10), clock: clock)
            authorization = .bearer(waiter)
            self.waiter = waiter
            keepAlive = [token]
            state = { token.loadableState }
        case .testLoadable:
            let token = TestLoadable<String>()
            // The token server: each sync of the token ends with the issuer's next token.
            let observation = token.addObserver { _ in
                guard token.loadableState == .syncing else { return }
                Task { token.setDidSyncSuccessfully(await issuer.next()) }
            }
            let waiter = LoadableWaiter(token, condition: condition, timeout: .seconds(10), clock: clock)
            authorization = .bearer(waiter)
            self.waiter = waiter
            keepAlive = [token, observation]
            state = { token.loadableState }
        case .handWritten:
            let token = HandWrittenToken(issuer: issuer)
            let waiter = LoadableWaiter(token, condition: .init(condition), timeout: .seconds(10), clock: clock)
            authorization = .bearer(waiter)
            self.waiter = waiter
            keepAlive = [token]
            state = { token.loadableState }
        }
    }
}

extension LoadableWaiter.Condition {
    /// The same condition, for a waiter of another target type.
    init<Other>(_ other: LoadableWaiter<Other>.Condition) {
        switch other {
        case .contentsAvailable: self = .contentsAvailable
        case .didSyncSuccessfully: self = .didSyncSuccessfully
        }
    }
}

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
        // A retry with the rejected token, which nobody answers, fails the test instead of waiting.
        await settle(until: { feed.loadableState != .syncing || transport.requests.count > 1 })
        #expect(statusCode(of: feed.error) == 401)
        #expect(transport.requests.count == 1)
        #expect(issuer.issuedCount == 3)
        feed.cancelSync()
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

    nonisolated static let renewalCases: [(TokenKind, LoadableWaiter<TestLoadable<String>>.Condition)] = TokenKind
        .allCases
        .flatMap { kind in LoadableWaiter<TestLoadable<String>>.Condition.allCases.map { (kind, $0) } }

    @Test(
        "A 401 brings a new token whatever the waiter's condition and the token's type",
        arguments: renewalCases
    )
    func a401RefreshesEveryKindOfToken(
        kind: TokenKind, condition: LoadableWaiter<TestLoadable<String>>.Condition
    )
        async throws
    {
        let token = TokenUnderTest(kind, condition: condition, issuer: issuer, clock: clock)
        let feed = makeFeed(token.authorization)
        feed.sync()
        await transport.waitForRequests(1)
        #expect(bearer(0) == "Bearer t1")
        transport.answer(0, status: 401)
        await settle(until: { transport.requests.count == 2 || feed.loadableState != .syncing })
        #expect(transport.requests.count == 2)
        guard transport.requests.count == 2 else { return }
        #expect(bearer(1) == "Bearer t2")
        #expect(issuer.issuedCount == 2)
        transport.answer(1, body: #"{"items":[1]}"#)
        try await feed.doneSyncing()
        #expect(feed.loadableState == .didSyncSuccessfully)
        // Later requests carry the new token, with no more refreshes.
        feed.sync()
        await transport.waitForRequests(3)
        #expect(bearer(2) == "Bearer t2")
        transport.answer(2, body: #"{"items":[2]}"#)
        try await feed.doneSyncing()
        #expect(issuer.issuedCount == 2)
    }

    @Test(
        "Concurrent 401s, before and during the refresh, cause one token sync whatever the condition and type",
        arguments: renewalCases
    )
    func concurrent401sRefreshOnce(
        kind: TokenKind, condition: LoadableWaiter<TestLoadable<String>>.Condition
    )
        async throws
    {
        let token = TokenUnderTest(kind, condition: condition, issuer: issuer, clock: clock)
        let feeds = (0..<10).map { _ in makeFeed(token.authorization) }
        for feed in feeds { feed.sync() }
        await transport.waitForRequests(10)
        #expect((0..<10).allSatisfy { bearer($0) == "Bearer t1" })
        issuer.isGated = true
        for index in 0..<5 { transport.answer(index, status: 401) }
        await settle(until: { issuer.pendingCount == 1 })
        #expect(issuer.pendingCount == 1)
        for index in 5..<10 { transport.answer(index, status: 401) }
        await settle(until: { transport.openCount == 0 })
        issuer.release()
        await settle(until: { transport.requests.count == 20 || feeds.contains { $0.loadableState != .syncing } })
        #expect(transport.requests.count == 20)
        guard transport.requests.count == 20 else { return }
        #expect((10..<20).allSatisfy { bearer($0) == "Bearer t2" })
        for index in 10..<20 { transport.answer(index, body: #"{"items":[\#(index)]}"#) }
        for feed in feeds { try await feed.doneSyncing() }
        #expect(feeds.allSatisfy { $0.loadableState == .didSyncSuccessfully })
        await settle(until: { token.state() != .syncing })
        #expect(issuer.issuedCount == 2)
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

    @Test(
        "A 401 after a refresh that failed waits for the waiter's retry instead of syncing the token again",
        arguments: LoadableWaiter<TestLoadable<String>>.Condition.allCases
    )
    func a401AfterAFailedRefreshKeepsTheBackoff(
        condition: LoadableWaiter<TestLoadable<String>>.Condition
    )
        async throws
    {
        let token = HTTPLoadable<String>(request: URLRequest(url: tokenURL), transport: transport)
        let auth = HTTPAuthorization.bearer(
            LoadableWaiter(token, condition: .init(condition), timeout: .seconds(30), clock: clock))
        let first = makeFeed(auth)
        let second = makeFeed(auth)
        first.sync()
        await transport.waitForRequests(1)
        transport.answer(0, body: #""t1""#)
        second.sync()
        await transport.waitForRequests(3)
        transport.answer(1, status: 401)
        await transport.waitForRequests(4)
        #expect(transport.requests[3].url == tokenURL)
        transport.answer(3, status: 503)  // the refresh fails; the waiter's syncer retries in 1 s
        await clock.waitForSleepers(count: 2)
        transport.answer(2, status: 401)  // the second request, rejected after the failed refresh
        await settle(until: { transport.requests.count > 4 })
        #expect(transport.requests.count == 4)
        await clock.advance(by: .seconds(1))
        await transport.waitForRequests(5)
        #expect(transport.requests[4].url == tokenURL)
        transport.answer(4, body: #""t2""#)
        await transport.waitForRequests(7)
        #expect(bearer(5) == "Bearer t2" && bearer(6) == "Bearer t2")
        transport.answer(5, body: #"{"items":[]}"#)
        transport.answer(6, body: #"{"items":[]}"#)
        try await first.doneSyncing()
        try await second.doneSyncing()
        #expect(first.loadableState == .didSyncSuccessfully && second.loadableState == .didSyncSuccessfully)
        #expect(transport.requests.filter { $0.url == tokenURL }.count == 3)
    }

    @Test(
        "A refresh after a 401 that the token endpoint refuses fails the request at once with targetFailed",
        arguments: LoadableWaiter<TestLoadable<String>>.Condition.allCases
    )
    func aRefusedRefreshFailsTheRequestAtOnce(condition: LoadableWaiter<TestLoadable<String>>.Condition) async throws {
        let token = HTTPLoadable<String>(request: URLRequest(url: tokenURL), transport: transport)
        let auth = HTTPAuthorization.bearer(
            LoadableWaiter(token, condition: .init(condition), timeout: .seconds(30), clock: clock))
        let feed = makeFeed(auth)
        feed.sync()
        await transport.waitForRequests(1)
        transport.answer(0, body: #""t1""#)
        await transport.waitForRequests(2)
        #expect(bearer(1) == "Bearer t1")
        transport.answer(1, status: 401)
        await transport.waitForRequests(3)
        #expect(transport.requests[2].url == tokenURL)
        transport.answer(2, status: 401, body: "revoked")
        await settle(until: { feed.loadableState != .syncing })
        guard case .targetFailed(let tokenError)? = feed.error as? LoadableWaiterError else {
            Issue.record("expected targetFailed, got \(feed.error.map { "\($0)" } ?? "nil")")
            await clock.advance(by: .seconds(30))
            return
        }
        #expect(statusCode(of: tokenError) == 401)
        #expect(transport.requests.count == 3)
        #expect(clock.now.offset == .zero)
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

    @Test("The authorization and its waiter read the token without Observation: it gets no registrar")
    func readsTheTokenUntracked() async throws {
        // A `TestLoadable` makes a registrar only when a tracked getter is read, and the test
        // ends its syncs without reading it.
        let token = TestLoadable<String>()
        let feed = makeFeed(.bearer(LoadableWaiter(token, timeout: .seconds(10), clock: clock)))
        feed.sync()
        await settle(until: { token.syncCount == 1 })
        token.setDidSyncSuccessfully("t1")
        await transport.waitForRequests(1)
        transport.answer(0, status: 401)
        await settle(until: { token.syncCount == 2 })
        token.setDidSyncSuccessfully("t2")
        await transport.waitForRequests(2)
        #expect(bearer(1) == "Bearer t2")
        transport.answer(1, body: #"{"items":[]}"#)
        try await feed.doneSyncing()
        #expect(!token.core.hasObservationRegistrar)
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
