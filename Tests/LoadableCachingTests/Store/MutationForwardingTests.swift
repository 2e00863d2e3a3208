import Foundation
import Loadable
import LoadableCaching
import LoadableTestSupport
import LoadableTesting
import Testing

/// Optimistic changes through a store: a lease and a keyed proxy forward
/// `mutate(optimistic:commit:reconcile:)` to their loadable, and persistence saves the base
/// contents only.
@Suite("Optimistic changes through leases, keyed proxies and persistence")
@MainActor
struct MutationForwardingTests {
    struct Post: Codable, Equatable, Sendable {
        var title: String
        var isLiked = false
    }

    final class PostLoadable: Loadable<Post> {
        override func doSync() {}
    }

    /// A store of posts that synced with `isLiked == false`.
    private func store() -> LoadableStore<Int, PostLoadable> {
        LoadableStore<Int, PostLoadable>(clock: ManualClock()) { id in
            let post = PostLoadable()
            post.setDidSyncSuccessfully(Post(title: "Post \(id)"))
            return post
        }
    }

    /// A commit held on a continuation until the test resumes it.
    @MainActor
    final class HeldCommit {
        var continuation: CheckedContinuation<Void, any Error>?
        func run() async throws { try await withCheckedThrowingContinuation { continuation = $0 } }
    }

    @Test("a lease forwards mutate to its loadable: the change shows, and rolls back on failure")
    func leaseForwards() async {
        let posts = store()
        let lease = posts.lease(1)
        let recorder = Recorder(lease)
        let held = HeldCommit()
        let task = Task { @MainActor in
            try await lease.mutate {
                $0.isLiked = true
            } commit: {
                try await held.run()
            }
        }
        await yield(until: { held.continuation != nil })
        #expect(lease.contents?.isLiked == true)
        #expect(lease.loadable.contents?.isLiked == true)
        held.continuation?.resume(throwing: TestError("offline"))
        await #expect(throws: TestError("offline")) { try await task.value }
        #expect(lease.contents?.isLiked == false)
        #expect(recorder.count == 2)
    }

    @Test("a released lease changes nothing and commits nothing: CancellationError")
    func releasedLease() async {
        let posts = store()
        let lease = posts.lease(1)
        lease.release()
        var commits = 0
        await #expect(throws: CancellationError.self) {
            try await lease.mutate {
                $0.isLiked = true
            } commit: {
                commits += 1
            }
        }
        #expect(commits == 0)
        #expect(lease.loadable.contents?.isLiked == false)
    }

    @Test("a keyed proxy forwards mutate to its entry; the change stays with that entry when the key changes")
    func keyedProxyForwards() async throws {
        let posts = store()
        let proxy = KeyedLoadableProxy(store: posts, key: 1)
        let first = try #require(proxy.loadable)
        let held = HeldCommit()
        let task = Task { @MainActor in
            try await proxy.mutate {
                $0.isLiked = true
            } commit: {
                try await held.run()
            }
        }
        await yield(until: { held.continuation != nil })
        #expect(proxy.contents?.isLiked == true)
        proxy.key = 2
        #expect(proxy.contents == Post(title: "Post 2"))
        held.continuation?.resume()
        try await task.value
        #expect(first.contents == Post(title: "Post 1", isLiked: true))
        #expect(proxy.contents?.isLiked == false)
        proxy.key = 1
        #expect(proxy.contents?.isLiked == true)
    }

    @Test("a keyed proxy without a key changes nothing and commits nothing: CancellationError")
    func keyedProxyWithoutKey() async {
        let proxy = KeyedLoadableProxy(store: store())
        var commits = 0
        await #expect(throws: CancellationError.self) {
            try await proxy.mutate {
                $0.isLiked = true
            } commit: {
                commits += 1
            }
        }
        #expect(commits == 0)
    }

    @Test("with persistence, only the base is saved: never a pending change, always a committed one")
    func persistenceSavesTheBase() async throws {
        let cache = InMemoryLoadableCache()
        let post = PostLoadable()
        let persistence = post.persist(in: cache, key: "post")
        post.setDidSyncSuccessfully(Post(title: "A"))
        await persistence.saved()
        let held = HeldCommit()
        let task = Task { @MainActor in
            try await post.mutate {
                $0.isLiked = true
            } commit: {
                try await held.run()
            }
        }
        await yield(until: { held.continuation != nil })
        // A write of the base while the change is pending saves the base without the change.
        post.setContents(Post(title: "B"))
        await persistence.saved()
        #expect(try await saved(in: cache) == Post(title: "B"))
        #expect(post.contents == Post(title: "B", isLiked: true))
        held.continuation?.resume()
        try await task.value
        await persistence.saved()
        #expect(try await saved(in: cache) == Post(title: "B", isLiked: true))
    }

    @Test("a rolled-back change saves nothing")
    func rollbackSavesNothing() async throws {
        let cache = InMemoryLoadableCache()
        let post = PostLoadable()
        let persistence = post.persist(in: cache, key: "post")
        post.setDidSyncSuccessfully(Post(title: "A"))
        await persistence.saved()
        await cache.removeAll()
        await #expect(throws: TestError.self) {
            try await post.mutate {
                $0.isLiked = true
            } commit: {
                throw TestError()
            }
        }
        await persistence.saved()
        #expect(await cache.keys.isEmpty)
    }

    @Test("after a commit, store.invalidate(where:) refreshes the other entries that show the item")
    func invalidateOthersAfterCommit() async throws {
        let posts = store()
        let detail = posts.lease(1)
        let other = posts.lease(2)
        try await detail.mutate {
            $0.isLiked = true
        } commit: {
        }
        posts.invalidate { $0 != 1 }
        #expect(other.loadableState == .syncing)  // in use: syncs at once
        #expect(detail.loadableState == .didSyncSuccessfully)
    }

    // The store sample of Docs/Mutations.md, verbatim (`GuideSamplesTests` checks it).

    protocol PostsAPI: Sendable {
        func setLiked(_ isLiked: Bool, postID: Int) async throws -> Post
    }

    final class FeedLoadable: Loadable<[Int]> {
        private(set) var syncs = 0
        override func doSync() { syncs += 1 }
    }

    @MainActor
    func like(
        _ postID: Int, in posts: LoadableStore<Int, PostLoadable>, lists: LoadableStore<String, FeedLoadable>,
        api: any PostsAPI
    ) async throws {
        let lease = posts.lease(postID)
        defer { lease.release() }
        try await lease.mutate {
            $0.isLiked = true
        } commit: {
            try await api.setLiked(true, postID: postID)
        } reconcile: {
            $0 = $1
        }
        lists.invalidate { _ in true }  // the feeds that show the post sync again
    }

    struct AgreeingAPI: PostsAPI {
        func setLiked(_ isLiked: Bool, postID: Int) async throws -> Post {
            Post(title: "Post \(postID) (server)", isLiked: isLiked)
        }
    }

    @Test("the guide's store sample: the answer joins the entry, and the open feeds sync again")
    func guideStoreSample() async throws {
        let posts = store()
        let lists = LoadableStore<String, FeedLoadable>(clock: ManualClock()) { _ in FeedLoadable() }
        let home = lists.lease("home")
        home.loadable.setDidSyncSuccessfully([7])
        try await like(7, in: posts, lists: lists, api: AgreeingAPI())
        #expect(posts.peek(7)?.contents == Post(title: "Post 7 (server)", isLiked: true))
        #expect(home.loadable.syncs == 1)
    }

    /// The post saved in `cache`, decoded.
    private func saved(in cache: InMemoryLoadableCache) async throws -> Post? {
        guard let entry = await cache.load(key: "post") else { return nil }
        return try JSONDecoder().decode(Post.self, from: entry.data)
    }
}
