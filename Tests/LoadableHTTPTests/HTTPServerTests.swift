import Foundation
import LoadableHTTP
import LoadableSupport
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `HTTPLoadable` against a real HTTP server on 127.0.0.1, through `URLSession`: the scripted cases.
///
/// Each test starts its own `LoopbackHTTPServer` (stopped when the test releases it) and its own
/// ephemeral session. Nothing sleeps: a test waits for the server to see requests, or for the
/// loadable to end its sync.
@MainActor
@Suite(.timeLimit(.minutes(5))) final class HTTPServerTests {
    let session: URLSession

    init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = 64
        // FoundationNetworking times a request out 60 s after it began, whatever arrives: a test
        // that holds a request must not fail because a loaded machine kept it from its next step.
        configuration.timeoutIntervalForRequest = 300
        session = URLSession(configuration: configuration)
    }

    deinit {
        session.invalidateAndCancel()
    }

    func feed(
        _ server: LoopbackHTTPServer,
        path: String = "/feed",
        maxBodySize: Int = 10_000,
        authorization: HTTPAuthorization? = nil,
        clock: any Clock<Duration> = ContinuousClock()
    ) -> HTTPLoadable<Feed> {
        HTTPLoadable<Feed>(
            request: URLRequest(url: server.url(path)),
            transport: session,
            maxBodySize: maxBodySize,
            authorization: authorization,
            clock: clock
        )
    }

    /// A syncer for `feed` with a backoff from 1 s to 60 s, on `clock`, always active and online.
    func syncer(for feed: HTTPLoadable<Feed>, clock: ManualClock) -> LoadableSyncer {
        LoadableSyncer(
            feed,
            timeoutPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(60)),
            clock: clock,
            activity: ActivityMonitor()
        )
    }

    /// Syncs `loadable` and waits for the sync to end.
    func sync(_ loadable: some SyncableLoadable) async {
        loadable.sync()
        try? await loadable.doneSyncing()
    }

    func httpError(_ loadable: HTTPLoadable<Feed>) throws -> HTTPLoadableError {
        try #require(loadable.error as? HTTPLoadableError, "error: \(String(describing: loadable.error))")
    }

    @Test func a200WithAnETagThenA304() async throws {
        let server = try LoopbackHTTPServer { request in
            if request.header("If-None-Match") == #""v1""# { return .status(304, headers: [.init("ETag", #""v1""#)]) }
            return .json(#"{"items":[1,2,3]}"#, headers: [.init("ETag", #""v1""#)])
        }
        let feed = feed(server)
        await sync(feed)
        #expect(feed.contents == Feed(items: [1, 2, 3]))
        let recorder = Recorder(feed)
        await sync(feed)
        #expect(feed.loadableState == .didSyncSuccessfully)
        #expect(feed.contents == Feed(items: [1, 2, 3]))
        #expect(recorder.states == [.syncing, .didSyncSuccessfully])
        #expect(server.requests.map { $0.header("If-None-Match") } == [nil, #""v1""#])
    }

    @Test func a429WithRetryAfterSetsTheSyncersDelay() async throws {
        let server = try LoopbackHTTPServer { _ in
            .status(429, headers: [.init("Retry-After", "120")], body: Data("slow down".utf8))
        }
        let clock = ManualClock()
        let feed = feed(server, clock: clock)
        let syncer = syncer(for: feed, clock: clock)
        await sync(feed)
        let error = try httpError(feed)
        #expect(error.retryAfter == .seconds(120))
        #expect(error.isRetryable)
        #expect(error.description == "HTTP 429 (Retry-After: 120): slow down")
        #expect(syncer.nextSyncIn == .seconds(120))
    }

    @Test func a500ThenA200UnderASyncer() async throws {
        let server = try LoopbackHTTPServer(
            firstAnswer: .status(500, body: Data("down".utf8)), then: .json(#"{"items":[7]}"#))
        let clock = ManualClock()
        let feed = feed(server, clock: clock)
        let syncer = syncer(for: feed, clock: clock)
        await sync(feed)
        #expect(feed.loadableState == .didFailToSync)
        #expect(syncer.nextSyncIn == .seconds(1))
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(1))
        await server.waitForRequests(2)
        try? await feed.doneSyncing()
        #expect(feed.loadableState == .didSyncSuccessfully)
        #expect(feed.contents == Feed(items: [7]))
    }

    @Test func aSyncerDoesNotRetryA404() async throws {
        let server = try LoopbackHTTPServer { _ in .status(404) }
        let clock = ManualClock()
        let feed = feed(server, clock: clock)
        let syncer = syncer(for: feed, clock: clock)
        await sync(feed)
        #expect(try httpError(feed).isRetryable == false)
        #expect(syncer.nextSyncIn == nil)
    }

    @Test func malformedJSONFailsAndKeepsTheContents() async throws {
        let server = try LoopbackHTTPServer(firstAnswer: .json(#"{"items":[1]}"#), then: .json(#"{"items":[1,"#))
        let feed = feed(server)
        await sync(feed)
        await sync(feed)
        guard case .decoding = try httpError(feed) else {
            Issue.record("expected .decoding, got \(String(describing: feed.error))")
            return
        }
        #expect(feed.contents == Feed(items: [1]))
    }

    @Test func aBodyOverTheLimitWithItsLengthDeclared() async throws {
        let server = try LoopbackHTTPServer { _ in
            .json(#"{"items":[\#(Array(repeating: "1", count: 5_000).joined(separator: ","))]}"#)
        }
        let feed = feed(server, maxBodySize: 1_000)
        await sync(feed)
        guard case .tooLarge(1_000) = try httpError(feed) else {
            Issue.record("expected .tooLarge, got \(String(describing: feed.error))")
            return
        }
    }

    @Test func aBodyOverTheLimitThatNeverEndsIsStoppedWhileItArrives() async throws {
        // No length, 64 KB of body, then nothing more: a transport that buffered the whole body
        // before checking would wait here until the time limit.
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
        let server = try LoopbackHTTPServer { _ in
            .raw(Data(head.utf8) + Data(repeating: UInt8(ascii: " "), count: 65_536), thenHold: true)
        }
        let feed = feed(server, maxBodySize: 1_000)
        await sync(feed)
        guard case .tooLarge(1_000) = try httpError(feed) else {
            Issue.record("expected .tooLarge, got \(String(describing: feed.error))")
            return
        }
        await server.waitUntilNoConnectionIsHeld()
    }

    @Test(
        "a body that arrives in several pieces comes whole, and one at the limit is kept",
        arguments: [true, false]
    )
    func aBodyInSeveralPiecesComesWhole(contentLength: Bool) async throws {
        // 1 MB in pieces of 256 KB: the transport keeps the first piece as it came and appends the others.
        let byteCount = 1 << 20
        let server = try LoopbackHTTPServer { _ in .stream(byteCount: byteCount, contentLength: contentLength) }
        let (response, body) = try await session.send(URLRequest(url: server.url("/body")), maxBodySize: byteCount)
        #expect(response.statusCode == 200)
        #expect(body.count == byteCount)
        #expect(body.startIndex == 0)
        #expect(body.allSatisfy { $0 == 0 })
        let error = await #expect(throws: HTTPLoadableError.self) {
            _ = try await self.session.send(URLRequest(url: server.url("/body")), maxBodySize: byteCount - 1)
        }
        guard case .tooLarge(byteCount - 1)? = error else {
            Issue.record("expected .tooLarge, got \(String(describing: error))")
            return
        }
    }

    @Test func cancelSyncDuringAResponseHeldOpen() async throws {
        let server = try LoopbackHTTPServer { request in
            request.path == "/hold" ? .hold : .json(#"{"items":[1]}"#)
        }
        let feed = feed(server, path: "/hold")
        feed.sync()
        await server.waitForRequests(1)
        #expect(server.heldConnectionCount == 1)
        feed.cancelSync()
        #expect(feed.loadableState == .idle)
        // The request was cancelled for real: the client closed its connection.
        await server.waitUntilNoConnectionIsHeld()
        #expect(server.heldConnectionCount == 0)
        #expect(feed.error == nil)
    }

    @Test func aRevokedTokenCausesOneRefreshFor50ConcurrentRequests() async throws {
        struct TokenState {
            var issued = 0
            var valid: String?
            var rejected = 0
        }
        let state = Locked(TokenState())
        let server = try LoopbackHTTPServer { request in
            switch request.path {
            case "/token":
                let token = state.withLock { state in
                    state.issued += 1
                    state.valid = "t\(state.issued)"
                    return state.valid!
                }
                return .json("\"\(token)\"")
            case "/revoke":
                state.withLock { $0.valid = nil }
                return .status(204)
            default:
                let isValid = state.withLock { state in
                    let isValid = state.valid.map { request.header("Authorization") == "Bearer \($0)" } ?? false
                    if !isValid { state.rejected += 1 }
                    return isValid
                }
                return isValid ? .json(#"{"items":[1]}"#) : .status(401, headers: [.init("WWW-Authenticate", "Bearer")])
            }
        }
        let token = HTTPLoadable<String>(request: URLRequest(url: server.url("/token")), transport: session)
        // A manual clock: the waiter's timeout is not what this test is about, and a loaded
        // machine must not reach it.
        let auth = HTTPAuthorization.bearer(LoadableWaiter(token, timeout: .seconds(30), clock: ManualClock()))
        let feeds = (0..<50).map { _ in feed(server, authorization: auth) }
        for feed in feeds { feed.sync() }
        for feed in feeds { try? await feed.doneSyncing() }
        #expect(feeds.allSatisfy { $0.loadableState == .didSyncSuccessfully })
        #expect(state.withLock { $0.issued } == 1)

        _ = try await session.data(from: server.url("/revoke"))
        for feed in feeds { feed.sync() }
        for feed in feeds { try? await feed.doneSyncing() }
        #expect(feeds.allSatisfy { $0.loadableState == .didSyncSuccessfully })
        #expect(state.withLock { $0.issued } == 2)
        #expect(state.withLock { $0.rejected } == 50)
        // Every retry carried the new token; the rejected one was sent only once per request.
        let sentAfterRevoke = server.requests.drop { $0.path != "/revoke" }.filter { $0.path == "/feed" }
        #expect(sentAfterRevoke.count == 100)
        #expect(sentAfterRevoke.filter { $0.header("Authorization") == "Bearer t1" }.count == 50)
        #expect(sentAfterRevoke.filter { $0.header("Authorization") == "Bearer t2" }.count == 50)
    }

    // MARK: - Bad input from the server

    @Test(arguments: [
        ("garbage headers", "HTTP/1.1 200 OK\r\nthis is not a header\r\n\u{1}\u{2}: \r\n\r\n{\"items\":[2]}"),
        ("a negative Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n{\"items\":[2]}"),
        ("a body that ends early", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"items\":[2"),
        ("a status line that is not one", "HTTP/1.1 abc\r\nContent-Length: 2\r\n\r\n{}"),
        ("no status line at all", "hello\r\n\r\n"),
        ("nothing", ""),
        ("a huge Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n{}"),
    ])
    func badResponsesFailClearlyAndKeepTheContents(case name: String, response: String) async throws {
        let server = try LoopbackHTTPServer(firstAnswer: .json(#"{"items":[1]}"#), then: .raw(Data(response.utf8)))
        let feed = feed(server)
        await sync(feed)
        #expect(feed.contents == Feed(items: [1]))
        await sync(feed)
        // The transport refuses every one of them (on Linux, through FoundationNetworking); the
        // loadable fails with an HTTPLoadableError and keeps its contents.
        #expect(feed.loadableState == .didFailToSync, "\(name)")
        let error = try httpError(feed)
        #expect(!error.isRetryable || error.description.hasPrefix("transport failed: "), "\(name): \(error)")
        #expect(feed.contents != nil, "\(name)")
    }

    @Test(arguments: ["-5", "soon", "", "1.5", "Sun, 06 Nov 1994 08:49:37 GMT"])
    func aRetryAfterThatIsNotValidIsIgnored(value: String) async throws {
        // The server sends no Date header, so a date is not read either.
        let server = try LoopbackHTTPServer { _ in
            .raw(Data("HTTP/1.1 503 Service Unavailable\r\nRetry-After: \(value)\r\nContent-Length: 0\r\n\r\n".utf8))
        }
        let clock = ManualClock()
        let feed = feed(server, clock: clock)
        let syncer = syncer(for: feed, clock: clock)
        await sync(feed)
        let error = try httpError(feed)
        #expect(error.retryAfter == nil)
        #expect(syncer.nextSyncIn == .seconds(1))
    }
}

extension LoopbackHTTPServer {
    /// A server that answers its first request with `first` and every later one with `later`.
    convenience init(firstAnswer first: Response, then later: Response) throws {
        let answered = Locked(0)
        try self.init { _ in
            let count = answered.withLock { count in
                count += 1
                return count
            }
            return count == 1 ? first : later
        }
    }
}
