import LoadableCaching
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

// Every sample of Docs/Caching.md, verbatim (`GuideSamplesTests` checks it), compiled and run.

// MARK: - The worked example (guide types)

struct Post: Sendable, Equatable {
    let id: Int
    var title: String
}

/// The server, as far as the screens are concerned.
@MainActor
protocol PostsAPI: AnyObject {
    func post(_ id: Int) async throws -> Post
}

/// The app's store of posts: one `AsyncLoadable` per post id, kept 5 minutes after its last screen.
@MainActor
func makePostStore(
    api: any PostsAPI, clock: any Clock<Duration> = ContinuousClock()
) -> LoadableStore<Int, AsyncLoadable<Post>> {
    LoadableStore(retention: .seconds(300), clock: clock) { id in
        AsyncLoadable(clock: clock) { try await api.post(id) }
    }
}

/// A row of the list: shows the post's title.
@MainActor
final class PostRow {
    let post: LoadableLease<AsyncLoadable<Post>>

    init(id: Int, store: LoadableStore<Int, AsyncLoadable<Post>>) {
        post = store.lease(id)
        post.syncIfNeeded()
    }

    var title: String { post.contents?.title ?? "…" }
}

/// The detail page of a post.
@MainActor
final class PostDetail {
    let post: LoadableLease<AsyncLoadable<Post>>

    init(id: Int, store: LoadableStore<Int, AsyncLoadable<Post>>) {
        post = store.lease(id)
        post.syncIfNeeded()  // joins the row's sync, or does nothing: its contents are fresh
    }
}

// MARK: - Test doubles

/// Answers every request at once with a numbered title, and counts the requests.
@MainActor
final class FakePostsAPI: PostsAPI {
    /// The requests, per post.
    var requestsByPost: [Int: Int] = [:]
    /// The requests, all posts together.
    var requests: Int { requestsByPost.values.reduce(0, +) }

    func post(_ id: Int) async throws -> Post {
        requestsByPost[id, default: 0] += 1
        return Post(id: id, title: "post \(id) v\(requestsByPost[id] ?? 0)")
    }
}

/// A post that loads at once, inside `sync()`, or stays syncing until the test answers.
final class ScriptedPost: Loadable<Post> {
    let id: Int
    let answersAtOnce: Bool

    init(id: Int, answersAtOnce: Bool) {
        self.id = id
        self.answersAtOnce = answersAtOnce
        super.init()
    }

    override func doSync() {
        if answersAtOnce { answer() }
    }

    func answer() {
        setDidSyncSuccessfully(Post(id: id, title: "post \(id)"))
    }
}

@Suite("Docs/Caching.md")
@MainActor
struct CachingGuideTests {
    @Test("a list row and a detail page share one entry, one object and one request")
    func workedExample() async throws {
        let api = FakePostsAPI()

        let store = makePostStore(api: api)
        let row = PostRow(id: 42, store: store)
        let detail = PostDetail(id: 42, store: store)
        // One entry, one object, one request:
        // store.count == 1, row.post.loadable === detail.post.loadable, api.requests == 1

        #expect(store.count == 1)
        #expect(row.post.loadable === detail.post.loadable)
        try await detail.post.synced()
        #expect(api.requests == 1)
        #expect(row.title == "post 42 v1")
        #expect(detail.post.contents?.title == "post 42 v1")

        // A third screen opening on fresh contents makes no request.
        let banner = PostRow(id: 42, store: store)
        try await banner.post.synced()
        #expect(api.requests == 1)
    }

    @Test("after a change on the server, the open post refreshes once for both screens")
    func invalidationOfAnOpenPost() async throws {
        let api = FakePostsAPI()
        let store = makePostStore(api: api)
        let row = PostRow(id: 42, store: store)
        let detail = PostDetail(id: 42, store: store)
        try await row.post.synced()

        store.invalidate { $0 == 42 }
        #expect(row.post.loadableState == .syncing)  // leased: syncs at once
        try await detail.post.synced()
        #expect(api.requestsByPost[42] == 2)
        #expect(row.title == "post 42 v2")
    }

    @Test("the enum key sample invalidates a post and its comments, nothing else")
    func enumKeys() {
        let store = LoadableStore<APIKey, TestLoadable<String>> { _ in TestLoadable(contents: "x") }
        let leases = [APIKey.post(42), .comments(post: 42), .post(7), .user(3)].map { store.lease($0) }

        enum APIKey: Hashable, Sendable {
            case post(Int)
            case comments(post: Int)
            case user(Int)
        }

        // The server says post 42 changed: its post and its comments.
        store.invalidate { key in
            switch key {
            case .post(42), .comments(post: 42): true
            default: false
            }
        }
        #expect(leases.map(\.loadable.invalidateCount) == [1, 1, 0, 0])
    }

    @Test("setContents(_:for:) puts an answer in the store; the next screen shows it at once")
    func setContentsSample() async throws {
        let api = FakePostsAPI()
        let store = makePostStore(api: api)
        let post = Post(id: 5, title: "written by an action")
        store.setContents(post, for: post.id)
        #expect(store.count == 1)
        #expect(api.requests == 0)

        let row = PostRow(id: 5, store: store)
        #expect(row.title == "written by an action")
        // The entry never synced (idle), so the row's syncIfNeeded() confirms it: a refresh with
        // the contents on screen, not a spinner.
        #expect(row.post.loadableState == .syncing)
        #expect(row.post.isContentsAvailable)
        store.updateContents(for: 5) { $0.title = "renamed" }
        #expect(row.title == "renamed")
        try await row.post.synced()
        #expect(api.requests == 1)
    }

    @Test("the selected-item sample: the previous post stays as a placeholder until the new one loads")
    func selectedItem() {
        // Post 42 loads at once; post 7 takes a while.
        let store = LoadableStore<Int, ScriptedPost> { id in ScriptedPost(id: id, answersAtOnce: id == 42) }

        let selected = KeyedLoadableProxy(store: store, placeholder: .previousContents)
        selected.key = 42
        selected.syncIfNeeded()
        // Later, the user selects another post: post 42 stays on screen, marked as a placeholder,
        // until post 7 has something of its own to show.
        selected.key = 7
        selected.syncIfNeeded()

        #expect(selected.isPlaceholder)
        #expect(selected.contents?.title == "post 42")
        #expect(selected.loadableState == .syncing)
        store.peek(7)?.answer()
        #expect(!selected.isPlaceholder)
        #expect(selected.contents?.title == "post 7")
        #expect(store.count == 2)  // post 42 is retained
    }

    @Test("the testing sample: a retained entry is reused until retention ends, then dropped")
    func testingSample() async {
        let api = FakePostsAPI()

        let clock = ManualClock()
        let store = makePostStore(api: api, clock: clock)
        var row: PostRow? = PostRow(id: 42, store: store)
        #expect(row?.title == "…")  // not loaded yet
        row = nil  // the last lease ends: retained
        await clock.waitForSleepers()  // the store's one timer is armed
        await clock.advance(by: .seconds(299))
        #expect(store.count == 1)  // a new row now would reuse the entry
        await clock.advance(by: .seconds(1))
        #expect(store.count == 0)  // dropped
    }

    @Test("count and syncingCount are Observable")
    func observingTheStore() {
        let store = LoadableStore<Int, TestLoadable<String>> { _ in TestLoadable() }
        let changes = ChangeCount()
        withObservationTracking {
            _ = store.syncingCount
        } onChange: {
            changes.value += 1
        }
        let lease = store.lease(1)
        #expect(changes.value == 0)  // a new entry that is not syncing
        lease.sync()
        #expect(changes.value == 1)
        #expect(store.syncingCount == 1)
    }
}

/// Counts Observation's change reports (`onChange` must be `@Sendable`; here it runs on the main
/// actor, inside the change).
final class ChangeCount: @unchecked Sendable {
    var value = 0
}
