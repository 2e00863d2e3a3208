import Loadable
import LoadableCaching
import LoadableTestSupport
import LoadableTesting
import Testing

/// A loadable whose syncs the test finishes by hand; counts `doCancelSync()` in a log that
/// outlives it.
private final class LeakProbe: Loadable<Int> {
    let log: LeakLog

    init(log: LeakLog) {
        self.log = log
        super.init()
    }

    override func doSync() {}

    override func doCancelSync() {
        log.doCancelSyncCount += 1
    }
}

/// What the loadables of one store did, kept by the test.
@MainActor
private final class LeakLog {
    var made = 0
    var doCancelSyncCount = 0
}

/// A weak reference to a store, for a `make` that leases from the store it belongs to.
@MainActor
private final class LeakStoreRef {
    weak var store: LoadableStore<Int, LeakProbe>?
}

private typealias ProbeLease = LoadableLease<LeakProbe>

/// A store of `LeakProbe` loadables on `clock`.
@MainActor
private func probeStore(
    retention: Duration = .seconds(10),
    maxRetained: Int? = nil,
    clock: ManualClock,
    log: LeakLog
) -> LoadableStore<Int, LeakProbe> {
    LoadableStore(retention: retention, maxRetained: maxRetained, clock: clock) { _ in
        log.made += 1
        return LeakProbe(log: log)
    }
}

/// Nothing a store made outlives its last user: not the store, its entries, their loadables, its
/// timer, nor the leases.
@Suite("LoadableStore: leaks")
@MainActor
struct StoreLeakTests {
    @Test("a store nobody holds is released, with its retained entries, their loadables and its timer")
    func storeReleased() async {
        let clock = ManualClock()
        let log = LeakLog()
        var store: LoadableStore<Int, LeakProbe>? = probeStore(clock: clock, log: log)
        store?.lease(1).release()
        var syncing = store?.lease(2)
        syncing?.syncIfNeeded()
        syncing = nil  // retained while syncing
        #expect(syncing == nil)
        weak let retained = store?.peek(1)
        weak let retainedSyncing = store?.peek(2)
        #expect(store?.syncingCount == 1)
        _ = store?.count  // Observation's registrar made
        await waitForTimer(clock)
        #expect(clock.pendingSleepCount == 1)

        weak let weakStore = store
        store = nil
        #expect(weakStore == nil)
        #expect(retained == nil)
        #expect(retainedSyncing == nil)
        await yield { clock.pendingSleepCount == 0 }  // the timer's sleep was cancelled
        #expect(log.made == 2)
    }

    @Test("an empty store that was never used is released")
    func emptyStoreReleased() {
        let clock = ManualClock()
        let log = LeakLog()
        var store: LoadableStore<Int, LeakProbe>? = probeStore(clock: clock, log: log)
        weak let weakStore = store
        store = nil
        #expect(weakStore == nil)
        #expect(log.made == 0)
    }

    @Test("a released lease is freed, and an observed one too; the loadable keeps no observer of it")
    func leaseReleased() {
        let clock = ManualClock()
        let log = LeakLog()
        let store = probeStore(clock: clock, log: log)
        var lease: ProbeLease? = store.lease(1)
        weak let weakLease = lease
        lease?.release()
        lease = nil
        #expect(weakLease == nil)

        var observed: ProbeLease? = store.lease(1)
        weak let weakObserved = observed
        let token = observed?.addObserver { _ in }
        #expect(store.peek(1)?.hasObservers == true)
        observed = nil
        #expect(weakObserved == nil)
        #expect(token?.isActive == false)
        #expect(store.peek(1)?.hasObservers == false)
        #expect(store.peek(1)?.isInUse == false)
    }

    @Test("a lease that goes away without release() is freed and ends its use")
    func leaseGoneWithoutRelease() {
        let clock = ManualClock()
        let log = LeakLog()
        let store = probeStore(clock: clock, log: log)
        var lease: ProbeLease? = store.lease(1)
        weak let weakLease = lease
        lease = nil
        #expect(weakLease == nil)
        #expect(store.peek(1)?.isInUse == false)
        #expect(store.count == 1)
    }

    @Test("a loadable is freed when its entry expires")
    func loadableFreedAfterExpiry() async {
        let clock = ManualClock()
        let log = LeakLog()
        let store = probeStore(clock: clock, log: log)
        var lease: ProbeLease? = store.lease(1)
        weak let loadable = lease?.loadable
        lease = nil
        #expect(loadable != nil)  // retained
        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(loadable == nil)
        #expect(store.count == 0)
    }

    @Test("a loadable syncing at expiry is cancelled and freed")
    func syncingLoadableFreedAfterExpiry() async {
        let clock = ManualClock()
        let log = LeakLog()
        let store = probeStore(clock: clock, log: log)
        var lease: ProbeLease? = store.lease(1)
        lease?.syncIfNeeded()
        weak let loadable = lease?.loadable
        lease = nil
        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(loadable == nil)
        #expect(log.doCancelSyncCount == 1)
        #expect(store.syncingCount == 0)
    }

    @Test("a removed loadable lives while an old lease holds it, and is freed with the lease")
    func loadableFreedAfterRemove() {
        let clock = ManualClock()
        let log = LeakLog()
        let store = probeStore(clock: clock, log: log)
        var lease: ProbeLease? = store.lease(1)
        weak let loadable = lease?.loadable
        store.remove(1)
        #expect(loadable != nil)
        lease?.release()
        #expect(loadable != nil)  // the released lease still reads it
        lease = nil
        #expect(loadable == nil)
        #expect(store.count == 0)

        store.lease(2).release()
        weak let retained = store.peek(2)
        store.remove(2)
        #expect(retained == nil)
    }

    @Test("removeAll frees every loadable nothing else holds")
    func loadablesFreedAfterRemoveAll() {
        let clock = ManualClock()
        let log = LeakLog()
        let store = probeStore(clock: clock, log: log)
        var lease: ProbeLease? = store.lease(1)
        lease?.syncIfNeeded()
        weak let leased = lease?.loadable
        store.lease(2).release()
        weak let retained = store.peek(2)
        store.removeAll()
        #expect(retained == nil)
        #expect(leased != nil)
        lease = nil
        #expect(leased == nil)
        #expect(log.doCancelSyncCount == 1)
    }

    @Test("with retention zero, and beyond maxRetained, dropped loadables are freed")
    func loadablesFreedWhenNotRetained() {
        let clock = ManualClock()
        let log = LeakLog()
        let zero = probeStore(retention: .zero, clock: clock, log: log)
        var lease: ProbeLease? = zero.lease(1)
        weak let dropped = lease?.loadable
        lease = nil
        #expect(dropped == nil)

        let limited = probeStore(maxRetained: 1, clock: clock, log: log)
        limited.lease(1).release()
        weak let oldest = limited.peek(1)
        limited.lease(2).release()
        #expect(oldest == nil)
        #expect(limited.count == 1)
    }

    @Test("the store released while leases live: the store goes at once, the entry and loadable with the last lease")
    func storeReleasedWhileLeased() async {
        let clock = ManualClock()
        let log = LeakLog()
        var store: LoadableStore<Int, LeakProbe>? = probeStore(clock: clock, log: log)
        var first: ProbeLease? = store?.lease(1)
        var second: ProbeLease? = store?.lease(1)
        weak let loadable = first?.loadable
        weak let weakStore = store
        store = nil
        #expect(weakStore == nil)
        #expect(loadable != nil)

        first?.syncIfNeeded()
        first = nil
        #expect(loadable?.isInUse == true)
        second?.release()
        #expect(loadable?.isInUse == false)
        #expect(loadable != nil)  // the released lease still holds it
        second = nil
        #expect(loadable == nil)
        #expect(log.doCancelSyncCount == 0)
        await clock.advance(by: .seconds(20))
        #expect(clock.pendingSleepCount == 0)
    }

    @Test("a store whose make leases other keys is freed, and so are all its loadables")
    func storeWithLeasesInsideMake() {
        let clock = ManualClock()
        let log = LeakLog()
        let ref = LeakStoreRef()
        var inner: [ProbeLease] = []
        var store: LoadableStore<Int, LeakProbe>? = LoadableStore(retention: .seconds(10), clock: clock) { key in
            log.made += 1
            if key == 1, let store = ref.store {
                let lease = store.lease(2)
                inner.append(lease)
            }
            return LeakProbe(log: log)
        }
        ref.store = store
        store?.lease(1).release()
        weak let one = store?.peek(1)
        weak let two = store?.peek(2)
        #expect(log.made == 2)
        #expect(two?.isInUse == true)
        inner.removeAll()
        #expect(two?.isInUse == false)
        #expect(store?.count == 2)

        weak let weakStore = store
        store = nil
        #expect(weakStore == nil)
        #expect(one == nil)
        #expect(two == nil)
    }

    @Test("prefetch leaves no lease and no observer behind")
    func prefetchLeavesNothing() async throws {
        let clock = ManualClock()
        let log = LeakLog()
        let store = probeStore(clock: clock, log: log)
        let task = Task { @MainActor in try await store.prefetch(1) }
        await yield { store.peek(1)?.hasObservers == true }
        store.peek(1)?.setDidSyncSuccessfully(1)
        try await task.value
        weak let loadable = store.peek(1)
        #expect(loadable?.hasObservers == false)
        #expect(loadable?.isInUse == false)
        store.remove(1)
        #expect(loadable == nil)
    }
}
