import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableTesting
import Testing

/// A store of `PersistedLoadable<Int>` on `cache`.
@MainActor
private func store(on cache: any LoadableCache) -> LoadableStore<Int, PersistedLoadable<Int>> {
    LoadableStore(cache: cache, cacheKey: { "\($0)" }) { _ in PersistedLoadable<Int>(clock: ManualClock()) }
}

/// A store owns its cache (its `removeAll()` clears it): two live stores on the same entries
/// without separate scopes stop the program with a message that names `scoped(_:)`.
@Suite("LoadableStore: a cache shared without scopes stops with a clear message")
struct StoreCacheClaimExitTests {
    @Test("the same unscoped cache object given to a second store names scoped(_:)")
    func sameCacheTwice() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cache = InMemoryLoadableCache()
                let first = store(on: cache)
                let second = store(on: cache)
                withExtendedLifetime((first, second)) {}
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("LoadableStore: the whole cache of InMemoryLoadableCache overlaps the whole cache"))
            #expect(text.contains("give each store its own scope: cache.scoped(\"posts/\")"))
        }
    }

    @Test("a scope of a cache that a store owns whole, and overlapping scopes, name scoped(_:)")
    func overlappingScopes() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cache = InMemoryLoadableCache()
                let whole = store(on: cache)
                let scope = store(on: cache.scoped("posts/"))
                withExtendedLifetime((whole, scope)) {}
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("the scope \"posts/\" of InMemoryLoadableCache overlaps the whole cache"))
            #expect(text.contains("scoped("))
        }
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cache = InMemoryLoadableCache()
                let posts = store(on: cache.scoped("posts/"))
                let drafts = store(on: cache.scoped("posts/drafts/"))
                withExtendedLifetime((posts, drafts)) {}
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("the scope \"posts/drafts/\" of InMemoryLoadableCache overlaps the scope \"posts/\""))
        }
    }

    @Test("two file cache objects on one folder are one cache: a store on each names scoped(_:)")
    func twoObjectsOnOneFolder() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let directory = FileManager.default.temporaryDirectory.appendingPathComponent("claims-\(UUID())")
                let first = store(on: FileLoadableCache(directory: directory))
                let second = store(on: FileLoadableCache(directory: directory))
                withExtendedLifetime((first, second)) {}
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("of FileLoadableCache overlaps the whole cache"))
        }
    }
}

/// What stores on shared caches may do: separate scopes, and a cache taken again once its store
/// has gone.
@Suite("LoadableStore: caches shared through scopes")
@MainActor
struct StoreCacheClaimTests {
    @Test("stores on separate scopes of one cache, and a cache given again after its store went away")
    func separateScopesAndReuse() async {
        let cache = InMemoryLoadableCache()
        var posts: LoadableStore<Int, PersistedLoadable<Int>>? = store(on: cache.scoped("posts/"))
        let users = store(on: cache.scoped("users/"))
        posts = nil
        // The first store of the scope is gone: its scope can be given to a new one.
        _ = posts
        let again = store(on: cache.scoped("posts/"))
        withExtendedLifetime((users, again)) {}
    }
}
