import Foundation
import LoadableHTTP
import LoadableTesting
import Testing

// The samples of `Docs/HTTP.md` (and the HTTP sample of `Docs/Testing.md`), verbatim
// (`GuideSamplesTests` checks it), compiled and run against a `LoopbackHTTPServer`. The samples
// written as whole tests are at the end, at file scope; the `Feed` they decode is the one of
// `HTTPLoadableTests.swift`.

/// The types the samples share.
enum Guide {
    struct Item: Decodable, Sendable, Equatable {
        let id: Int
    }

    struct Feed: Decodable, Sendable, Equatable {
        let items: [Item]
    }

    struct Profile: Decodable, Sendable, Equatable {
        let name: String
    }

    /// "A feed", compiled but not run: it would ask api.example.com. `aFeedAndItsErrors` runs the
    /// same against a `LoopbackHTTPServer`.
    @MainActor static func aFeed() {
        struct Feed: Decodable, Sendable {
            let items: [Item]
        }

        let feed = HTTPLoadable<Feed>(request: URLRequest(url: URL(string: "https://api.example.com/feed")!))
        feed.sync()
        // The view shows feed.contents, feed.loadableState, feed.error, as with any loadable.
    }
}

func message(for error: (any Error)?) -> String? {
    switch error as? HTTPLoadableError {
    case .status(code: 404, _, _)?: "Not found"
    case .status(let code, _, _)?: "The server answered \(code)"
    case .transport?: "You seem to be offline"
    case .decoding?, .tooLarge?: "Something went wrong"
    case nil: error.map { "\($0)" }
    }
}

@MainActor
@Suite(.timeLimit(.minutes(5))) struct HTTPGuideTests {
    typealias Feed = Guide.Feed
    typealias Profile = Guide.Profile

    @Test func aFeedAndItsErrors() async throws {
        let server = try LoopbackHTTPServer { request in
            request.path == "/feed" ? .json(#"{"items":[{"id":1}]}"#) : .status(404)
        }
        let feed = HTTPLoadable<Feed>(request: URLRequest(url: server.url("/feed")))
        try await feed.synced()
        #expect(feed.contents == Feed(items: [.init(id: 1)]))
        let missing = HTTPLoadable<Feed>(request: URLRequest(url: server.url("/gone")))
        try? await missing.synced()
        #expect(message(for: missing.error) == "Not found")
        #expect(
            message(for: HTTPLoadableError.status(code: 500, headers: [:], bodyPrefix: Data()))
                == "The server answered 500")
        #expect(message(for: HTTPLoadableError.transport(URLError(.timedOut))) == "You seem to be offline")
        #expect(message(for: HTTPLoadableError.tooLarge(maxBodySize: 1)) == "Something went wrong")
        #expect(message(for: nil) == nil)
    }

    @Test func aSyncerRetriesA503AfterItsRetryAfterAndNotA404() async throws {
        let server = try LoopbackHTTPServer { request in
            request.path == "/busy" ? .status(503, headers: [.init("Retry-After", "120")]) : .status(404)
        }
        func follow(_ feed: HTTPLoadable<Feed>) -> LoadableSyncer {
            let syncer = LoadableSyncer(
                feed,
                timeoutPolicy: BackoffTimeoutPolicy(period: .seconds(300), min: .seconds(1), max: .seconds(60))
            )
            // A 503 with `Retry-After: 120`: syncer.nextSyncIn == .seconds(120).
            // A 404: no retry (syncer.nextSyncIn == nil) until someone syncs again.
            return syncer
        }

        let busy = HTTPLoadable<Feed>(request: URLRequest(url: server.url("/busy")))
        let busySyncer = follow(busy)
        try? await busy.synced()
        let nextSyncIn = try #require(busySyncer.nextSyncIn)  // on the real clock: a little less by now
        #expect(nextSyncIn > .seconds(110) && nextSyncIn <= .seconds(120))

        let gone = HTTPLoadable<Feed>(request: URLRequest(url: server.url("/gone")))
        let goneSyncer = follow(gone)
        try? await gone.synced()
        #expect(goneSyncer.nextSyncIn == nil)
    }

    @Test func aBearerTokenSharedByTwoLoadables() async throws {
        let server = try LoopbackHTTPServer { request in
            switch request.path {
            case "/token": return .json(#"{"value":"abc"}"#)
            case "/me": return .json(#"{"name":"Ann"}"#)
            default: return .json(#"{"items":[]}"#)
            }
        }
        let (tokenURL, profileURL, feedURL) = (server.url("/token"), server.url("/me"), server.url("/feed"))

        struct AccessToken: Decodable, Sendable {
            let value: String
        }

        let token = HTTPLoadable<AccessToken>(request: URLRequest(url: tokenURL))
        let auth = HTTPAuthorization.bearer(LoadableWaiter(token, timeout: .seconds(30))) { $0.value }

        let profile = HTTPLoadable<Profile>(request: URLRequest(url: profileURL), authorization: auth)
        let feed = HTTPLoadable<Feed>(request: URLRequest(url: feedURL), authorization: auth)
        profile.sync()
        feed.sync()  // both wait for one token sync, then send `Authorization: Bearer <value>`

        try await profile.doneSyncing()
        try await feed.doneSyncing()
        #expect(profile.contents == Profile(name: "Ann"))
        #expect(feed.contents == Feed(items: []))
        let requests = server.requests
        #expect(requests.filter { $0.path == "/token" }.count == 1)
        #expect(requests.filter { $0.path != "/token" }.allSatisfy { $0.header("Authorization") == "Bearer abc" })
    }

    @Test func yourOwnTransport() async throws {
        let data = Data(#"{"items":[{"id":2}]}"#.utf8)
        let feedURL = URL(string: "https://api.example.com/feed")!

        struct ScriptedTransport: HTTPTransport {
            let answer: @Sendable (URLRequest) -> (status: Int, body: Data)

            func send(_ request: URLRequest, maxBodySize: Int) async throws -> (HTTPURLResponse, Data) {
                let (status, body) = answer(request)
                guard body.count <= maxBodySize else { throw HTTPLoadableError.tooLarge(maxBodySize: maxBodySize) }
                let response = HTTPURLResponse(
                    url: request.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: [:])!
                return (response, body)
            }
        }

        let feed = HTTPLoadable<Feed>(
            request: URLRequest(url: feedURL), transport: ScriptedTransport { _ in (200, data) })

        try await feed.synced()
        #expect(feed.contents == Feed(items: [.init(id: 2)]))
        let small = HTTPLoadable<Feed>(
            request: URLRequest(url: feedURL),
            transport: ScriptedTransport { _ in (200, data) },
            maxBodySize: 4
        )
        try? await small.synced()
        #expect(small.error.map { "\($0)" } == "response body over maxBodySize (4 bytes)")
    }
}

// "Testing against a real server" of `Docs/HTTP.md`.

@Test @MainActor func revalidates() async throws {
    let server = try LoopbackHTTPServer { request in
        request.header("If-None-Match") == "\"v1\""
            ? .status(304)
            : .json(#"{"items":[]}"#, headers: [.init("ETag", "\"v1\"")])
    }
    let feed = HTTPLoadable<Feed>(request: URLRequest(url: server.url("/feed")))
    try await feed.synced(forceSync: true)
    try await feed.synced(forceSync: true)
    #expect(server.requests.map { $0.header("If-None-Match") } == [nil, "\"v1\""])
}

// "Testing HTTP code against a real server" of `Docs/Testing.md`.

@Test @MainActor func cancelsAHeldRequest() async throws {
    let server = try LoopbackHTTPServer { _ in .hold }
    let feed = HTTPLoadable<Feed>(request: URLRequest(url: server.url("/feed")))
    feed.sync()
    await server.waitForRequests(1)
    feed.cancelSync()
    await server.waitUntilNoConnectionIsHeld()  // the client closed its connection
    #expect(feed.loadableState == .idle)
}

/// The samples of "Testing HTTP code against a real server" in `Docs/Testing.md` and of "Testing
/// against a real server" in `Docs/HTTP.md` that answer later or stream, verbatim.
extension HTTPGuideTests {
    @Test @MainActor func showsSyncingWhileTheServerIsSlow() async throws {
        let gate = LoopbackHTTPServer.Gate()
        let server = try LoopbackHTTPServer { _ in .gated(gate, .json(#"{"items":[]}"#)) }
        let feed = HTTPLoadable<Feed>(request: URLRequest(url: server.url("/feed")))
        feed.sync()
        await server.waitForRequests(1)
        #expect(feed.loadableState == .syncing)
        gate.open()  // this answer and every later one go out
        try await feed.doneSyncing()
        #expect(feed.contents == Feed(items: []))
    }

    @Test @MainActor func answersAfterTwoSeconds() async throws {
        let clock = ManualClock()
        let server = try LoopbackHTTPServer { _ in .after(.seconds(2), on: clock, .json(#"{"items":[]}"#)) }
        let feed = HTTPLoadable<Feed>(request: URLRequest(url: server.url("/feed")))
        feed.sync()
        await server.waitForRequests(1)
        await clock.advance(by: .seconds(1))
        #expect(feed.loadableState == .syncing)
        await clock.advance(by: .seconds(1))
        try await feed.doneSyncing()
        #expect(feed.contents == Feed(items: []))
    }

    @Test @MainActor func refusesABodyOverTheLimit() async throws {
        let server = try LoopbackHTTPServer { _ in .stream(byteCount: 20 << 20, contentLength: false) }
        let feed = HTTPLoadable<Feed>(request: URLRequest(url: server.url("/feed")), maxBodySize: 1 << 20)
        try? await feed.synced()
        #expect(feed.error.map { "\($0)" } == "response body over maxBodySize (1048576 bytes)")
    }
}
