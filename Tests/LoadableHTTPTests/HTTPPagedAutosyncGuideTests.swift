import Foundation
import LoadableHTTP
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The sample of Docs/HTTP.md, "A paged list that refreshes itself" (issue 45: paging, HTTP and
// autosync combine), verbatim.

struct PostPage: Decodable, Sendable {
    let items: [String]
    let next: Int?
}

@Test @MainActor func anHTTPPagedListThatAutosyncs() async throws {
    let server = try LoopbackHTTPServer { request in
        switch request.path {
        case "/api/posts": .json(#"{"items":["a","b"],"next":2}"#)
        case "/api/posts/after/2": .json(#"{"items":["c"],"next":null}"#)
        default: .status(404)
        }
    }
    let api = HTTPService(baseURL: server.url("/api"))
    let posts = PagedLoadable<String, Int> { cursor in
        let page = try await api.send(.get, cursor.map { "posts/after/\($0)" } ?? "posts", as: PostPage.self)
        return .init(items: page.items, nextCursor: page.next)
    }
    let clock = ManualClock()
    let activity = ActivityMonitor()
    posts.autosync(every: .seconds(60), clock: clock, activity: activity)

    let token = posts.observe { _ in }  // the first observer: the first page loads
    try await posts.doneSyncing()
    #expect(posts.contents == ["a", "b"])
    posts.loadNextPage()  // the last row appeared: the next page appends
    try await posts.doneLoadingNextPage()
    #expect(posts.contents == ["a", "b", "c"])

    await clock.waitForSleepers()
    await clock.advance(by: .seconds(60))  // observed: a refresh from the first page
    try await posts.doneSyncing()
    #expect(posts.contents == ["a", "b"])
    #expect(server.requests.map(\.path) == ["/api/posts", "/api/posts/after/2", "/api/posts"])

    activity.isActive = false  // in the background: no refresh
    await clock.advance(by: .seconds(120))
    #expect(server.requests.count == 3)
    token.cancel()
}

/// The same list with its work stated as an `HTTPLoadable` would: the first page's answer
/// revalidated with its `ETag`, refreshed while observed.
@MainActor
@Suite(.timeLimit(.minutes(5))) struct HTTPAutosyncTests {
    @Test("an HTTPLoadable with autosync attached revalidates every interval while observed, with a 304")
    func httpLoadableAutosyncs() async throws {
        let server = try LoopbackHTTPServer { request in
            request.header("If-None-Match") == "\"v1\""
                ? .status(304)
                : .json(#"{"items":["a"],"next":null}"#, headers: [.init("ETag", "\"v1\"")])
        }
        let clock = ManualClock()
        let feed = HTTPLoadable<PostPage>(request: URLRequest(url: server.url("/feed")), clock: clock)
        let autosync = feed.autosync(every: .seconds(30), clock: clock, activity: ActivityMonitor())
        await observing(feed, { _ in }) {
            try? await feed.doneSyncing()
            #expect(feed.etag == "\"v1\"")
            #expect(autosync.isAutosyncing)
            for _ in 0..<2 {
                await clock.waitForSleepers()
                await clock.advance(by: .seconds(30))
                try? await feed.doneSyncing()
            }
        }
        #expect(!autosync.isAutosyncing)
        #expect(server.requests.map { $0.header("If-None-Match") } == [nil, "\"v1\"", "\"v1\""])
        #expect(feed.contents?.items == ["a"])
        #expect(feed.loadableState == .didSyncSuccessfully)
    }

    @Test("HTTPLoadable states its work once: its load is a value, the answer with its validators as metadata")
    func httpLoadableWorkStatedOnce() async throws {
        let server = try LoopbackHTTPServer { request in
            request.header("If-None-Match") == "\"v1\""
                ? .status(304, headers: [.init("ETag", "\"v2\"")])
                : .json(#"{"items":["a"],"next":null}"#, headers: [.init("ETag", "\"v1\"")])
        }
        let feed = HTTPLoadable<PostPage>(request: URLRequest(url: server.url("/feed")), clock: ManualClock())
        guard case .loaded(let page, let metadata) = try await feed.loadResult() else {
            Issue.record("a 200 is .loaded")
            return
        }
        #expect(page.items == ["a"])
        #expect(metadata == ["ETag": "\"v1\""])
        #expect(feed.contents == nil)  // a value: returning it changed nothing
        #expect(feed.etag == nil)
        try await feed.synced()
        #expect(feed.etag == "\"v1\"")
        guard case .confirmed(let confirmation) = try await feed.loadResult() else {
            Issue.record("a 304 is .confirmed")
            return
        }
        #expect(confirmation == ["ETag": "\"v2\""])
        #expect(feed.etag == "\"v1\"")
        #expect(try await feed.load().items == ["a"])  // load(): the contents a 304 confirms
        try await feed.synced(forceSync: true)
        #expect(feed.etag == "\"v2\"")  // the sync's 304 brought a new ETag
        #expect(server.requests.count == 5)
    }
}
