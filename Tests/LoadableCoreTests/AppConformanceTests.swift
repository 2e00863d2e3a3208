import Foundation
import Loadable
import LoadableCaching
import LoadableGroup
import LoadableHTTP
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// An app's own conformance to `SyncableLoadable` (not a subclass of the package's classes) works
/// with every consumer of the package: groups, chains, syncers, waiters, stores, proxies, leases,
/// mapped loadables and `HTTPAuthorization`. It lacks only what `PureLoadable`'s documentation
/// says (untracked reads, immediate observers, use counting).
@MainActor
@Suite("An app's own SyncableLoadable works with every consumer")
struct AppConformanceTests {
    /// A loadable of the app's own: it keeps its state in a `TestLoadable` and tells observers
    /// itself; counts sync requests.
    final class AppLoadable: SyncableLoadable, ContentsLoadable {
        private let inner = TestLoadable<String>()
        var syncCount = 0
        var cancelCount = 0

        var loadableState: LoadableState { inner.loadableState }
        var error: (any Error)? { inner.error }
        var isContentsAvailable: Bool { inner.isContentsAvailable }
        var contents: String? { inner.contents }
        var needsSync: Bool { loadableState != .syncing && loadableState != .didSyncSuccessfully }

        func sync() {
            syncCount += 1
            if loadableState != .syncing { inner.setSyncing() }
        }

        func syncIfNeeded() {
            if needsSync { sync() }
        }

        func invalidate() {}

        func cancelSync() {
            cancelCount += 1
            if loadableState == .syncing { inner.setIdle() }
        }

        func finish(_ contents: String = "t1") { inner.setDidSyncSuccessfully(contents) }
        func fail() { inner.setDidFailToSync(LoadableError.unspecified) }

        func addObserver(_ handler: @escaping @MainActor (any PureLoadable) -> Void) -> LoadableObservation {
            inner.addObserver { [unowned self] _ in handler(self) }
        }
    }

    @Test("a group syncs it and follows it, with each policy", arguments: PureLoadableGroup.Policy.allCases)
    func group(policy: PureLoadableGroup.Policy) {
        let first = AppLoadable()
        let second = AppLoadable()
        let group = LoadableGroup([first, second], policy: policy)
        group.sync()
        #expect(first.syncCount == 1)
        #expect(second.syncCount == 1)
        #expect(group.loadableState == .syncing)
        group.cancelSync()
        #expect(first.cancelCount == 1)
        #expect(second.cancelCount == 1)
        group.sync()
        first.finish()
        second.finish()
        #expect(group.loadableState == .didSyncSuccessfully)
        #expect(group.isContentsAvailable)
    }

    @Test("a chain syncs it and moves on when it has contents")
    func chain() {
        let first = AppLoadable()
        let second = AppLoadable()
        let chain = LoadableChain([.init(first), .init(second)], clock: ManualClock())
        chain.sync()
        #expect(first.syncCount == 1)
        #expect(second.syncCount == 0)
        first.finish()
        #expect(second.syncCount == 1)
        second.finish()
        #expect(chain.loadableState == .didSyncSuccessfully)
    }

    @Test("a syncer retries its failure on the clock")
    func syncer() async {
        let clock = ManualClock()
        let loadable = AppLoadable()
        let syncer = LoadableSyncer(
            loadable, timeoutPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(1)), clock: clock,
            activity: ActivityMonitor())
        loadable.sync()
        loadable.fail()
        await LoadableTestSupport.settle { clock.pendingSleepCount == 1 }
        await clock.advance(by: .seconds(1))
        #expect(loadable.syncCount == 2)
        withExtendedLifetime(syncer) {}
    }

    @Test("a waiter syncs it and ends its wait when it has contents")
    func waiter() async throws {
        let loadable = AppLoadable()
        let waiter = LoadableWaiter(loadable, timeout: .seconds(30), clock: ManualClock())
        let wait = Task { try await waiter.wait().contents }
        await LoadableTestSupport.settle { loadable.syncCount == 1 }
        #expect(loadable.syncCount == 1)
        loadable.finish("done")
        #expect(try await wait.value == "done")
    }

    @Test("a store leases it; the lease follows it and passes syncs on, and it is never in use")
    func store() {
        let store = LoadableStore<Int, AppLoadable>(clock: ManualClock()) { _ in AppLoadable() }
        let lease = store.lease(1)
        lease.sync()
        #expect(lease.loadable.syncCount == 1)
        #expect(lease.loadableState == .syncing)
        lease.loadable.finish("one")
        #expect(lease.contents == "one")
        #expect(!lease.loadable.isInUse, "a type of the app's own has no use count")
        #expect(store.lease(1).loadable === lease.loadable)
    }

    @Test("a proxy, a lease and a mapped loadable stand for it")
    func forwarding() {
        let loadable = AppLoadable()
        let proxy = LoadableProxy(target: loadable)
        let lease = loadable.lease()
        let mapped = loadable.map { $0.count }
        proxy.sync()
        #expect(loadable.syncCount == 1)
        #expect(lease.loadableState == .syncing)
        #expect(mapped.loadableState == .syncing)
        loadable.finish("four")
        #expect(proxy.loadableState == .didSyncSuccessfully)
        #expect(lease.contents == "four")
        #expect(mapped.contents == 4)
        // A mapped loadable of a syncable source is syncable to a group.
        let group = LoadableGroup([mapped])
        loadable.cancelCount = 0
        group.sync()
        #expect(loadable.syncCount == 2)
    }

    @Test("HTTPAuthorization's waiter reads its contents as the token")
    func authorization() async throws {
        let server = try LoopbackHTTPServer { _ in .json(#""ok""#) }
        let token = AppLoadable()
        token.finish("t1")
        let feed = HTTPLoadable<String>(
            request: URLRequest(url: server.url("/feed")),
            authorization: .bearer(LoadableWaiter(token, timeout: .seconds(30), clock: ManualClock())))
        try await feed.synced()
        #expect(feed.contents == "ok")
        #expect(server.requests.last?.header("Authorization") == "Bearer t1")
    }
}
