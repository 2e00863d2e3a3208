import Foundation
import Loadable
import LoadableCaching
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

// MARK: - 8. Invalidation

@Suite("LoadableStore: invalidate(where:) and invalidateAll()")
@MainActor
struct StoreInvalidationTests {
    @Test("leased matching entries sync at once; retained ones only turn stale, and sync on the next lease")
    func leasedSyncRetainedStale() throws {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let leased = store.lease(1)
        leased.loadable.setDidSyncSuccessfully(1)
        let retainedLease = store.lease(2)
        retainedLease.loadable.setDidSyncSuccessfully(2)
        retainedLease.release()
        let notMatching = store.lease(3)
        notMatching.loadable.setDidSyncSuccessfully(3)
        let retained = try #require(store.peek(2))

        store.invalidate { $0 != 3 }
        #expect(leased.loadable.doSyncCount == 1)
        #expect(leased.loadableState == .syncing)
        #expect(retained.doSyncCount == 0)
        #expect(retained.isStale)
        #expect(retained.loadableState == .didSyncSuccessfully)
        #expect(retained.contents == 2)
        #expect(notMatching.loadable.doSyncCount == 0)
        #expect(!notMatching.loadable.isStale)
        #expect(store.syncingCount == 1)

        let again = store.lease(2)
        #expect(retained.doSyncCount == 0)  // a lease alone does not sync
        again.syncIfNeeded()
        #expect(retained.doSyncCount == 1)
        #expect(log.doSyncCount == 2)
        #expect(log.made == [1, 2, 3])
    }

    @Test("a leased entry invalidated while syncing syncs once more after the running sync")
    func invalidatedWhileSyncing() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let lease = store.lease(1)
        lease.syncIfNeeded()
        store.invalidate { $0 == 1 }
        store.invalidateAll()
        #expect(lease.loadable.doSyncCount == 1)
        lease.loadable.setDidSyncSuccessfully(1)
        #expect(lease.loadable.doSyncCount == 2)
        #expect(lease.loadableState == .syncing)
        #expect(store.syncingCount == 1)
        lease.loadable.setDidSyncSuccessfully(2)
        #expect(lease.loadable.doSyncCount == 2)
        #expect(store.syncingCount == 0)
    }

    @Test("invalidateAll() invalidates every entry, leased and retained")
    func invalidateAll() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let a = store.lease(1)
        let b = store.lease(2)
        let c = store.lease(3)
        for lease in [a, b, c] { lease.loadable.setDidSyncSuccessfully(0) }
        c.release()
        store.invalidateAll()
        #expect(a.loadable.doSyncCount == 1)
        #expect(b.loadable.doSyncCount == 1)
        #expect(c.loadable.doSyncCount == 0)
        #expect(c.loadable.isStale)
        #expect(store.syncingCount == 2)
        #expect(log.doSyncCount == 2)
    }

    @Test("entries are invalidated in the order they were made")
    func order() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        var seen: [Int] = []
        var tokens: [LoadableObservation] = []
        var leases: [CountedLease] = []
        for key in [5, 3, 9, 1] {
            let lease = store.lease(key)
            tokens.append(lease.loadable.addObserver { _ in seen.append(key) })
            leases.append(lease)
        }
        store.invalidateAll()
        #expect(seen == [5, 3, 9, 1])
        for lease in leases { lease.loadable.setDidSyncSuccessfully(0) }
        seen.removeAll()
        store.invalidate { $0 != 3 }
        #expect(seen == [5, 9, 1])
        withExtendedLifetime(tokens) {}
    }

    @Test("an observer that leases, releases and removes during invalidate(where:) is safe")
    func observerChangesTheStore() async throws {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let ref = StoreRef<Counted>()
        ref.store = store
        var one: CountedLease? = store.lease(1)
        let two = store.lease(2)
        var three: CountedLease? = store.lease(3)
        three?.release()  // retained
        three = nil
        for key in 1...3 { store.peek(key)?.setDidSyncSuccessfully(key) }
        let removed = try #require(store.peek(2))

        var leasedInObserver: [CountedLease] = []
        var reactions = 0
        let token = one?.loadable.addObserver { loadable in
            guard loadable.loadableState == .syncing, reactions == 0, let store = ref.store else { return }
            reactions += 1
            store.remove(2)
            leasedInObserver.append(store.lease(3))  // retained: leased again
            leasedInObserver.append(store.lease(4))  // new
            one?.release()  // the entry being invalidated loses its last lease
        }
        store.invalidateAll()
        #expect(reactions == 1)
        #expect(log.made == [1, 2, 3, 4])
        #expect(store.count == 3)
        #expect(store.peek(2) == nil)
        // 2 left the store before its turn: not invalidated. Its lease still reads it.
        #expect(!removed.isStale)
        #expect(two.loadable === removed)
        #expect(two.contents == 2)
        // 1 synced (it was in use when invalidated) and is now retained while syncing.
        let first = try #require(store.peek(1))
        #expect(first.doSyncCount == 1)
        #expect(first.loadableState == .syncing)
        #expect(!first.isInUse)
        // 3 was leased again before its turn: in use when invalidated, so it synced.
        #expect(store.peek(3)?.doSyncCount == 1)
        #expect(store.peek(3)?.isInUse == true)
        // 4 was made during the call: not one of the entries invalidated.
        #expect(store.peek(4)?.doSyncCount == 0)
        #expect(store.syncingCount == 2)

        // 1 expires while syncing: cancelled.
        one = nil
        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(store.peek(1) == nil)
        #expect(log.doCancelSyncCount == 1)
        #expect(store.syncingCount == 1)
        #expect(store.count == 2)
        // The token, not `observing(_:_:body:)`, which would keep the loadable this test lets go.
        withExtendedLifetime((token, leasedInObserver)) {}
    }

    @Test("a type of the app's own: leased entries are asked to syncIfNeeded() after invalidate(); retained ones not")
    func ownType() throws {
        let clock = ManualClock()
        var made: [Int] = []
        let store = LoadableStore<Int, OwnLoadable>(retention: .seconds(10), clock: clock) { key in
            made.append(key)
            return OwnLoadable()
        }
        let leased = store.lease(1)
        store.lease(2).release()
        let retained = try #require(store.peek(2))
        store.invalidateAll()
        #expect(leased.loadable.invalidateCount == 1)
        #expect(leased.loadable.syncIfNeededCount == 1)
        #expect(leased.loadable.syncCount == 1)
        #expect(retained.invalidateCount == 1)
        #expect(retained.syncIfNeededCount == 0)
        #expect(retained.syncCount == 0)
        #expect(store.syncingCount == 0)  // a type of the app's own is not counted
        #expect(!leased.loadable.isInUse)  // nor known to be in use
        #expect(made == [1, 2])
    }
}

// MARK: - 9. Removal

@Suite("LoadableStore: remove(_:) and removeAll()")
@MainActor
struct StoreRemovalTests {
    @Test("remove drops the entry and cancels its sync; live leases keep their object; a new lease makes a new entry")
    func remove() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let old = store.lease(1)
        let oldSecond = store.lease(1)
        old.syncIfNeeded()
        let oldLoadable = old.loadable
        #expect(store.syncingCount == 1)

        store.remove(1)
        #expect(log.doCancelSyncCount == 1)
        #expect(oldLoadable.loadableState == .idle)
        #expect(store.count == 0)
        #expect(store.peek(1) == nil)
        #expect(store.syncingCount == 0)
        #expect(old.loadable === oldLoadable)
        #expect(oldLoadable.isInUse)  // its leases still live

        // The old object is no longer the store's: its syncs are not counted.
        old.sync()
        #expect(oldLoadable.doSyncCount == 2)
        #expect(store.syncingCount == 0)

        let new = store.lease(1)
        #expect(log.made == [1, 1])
        #expect(new.loadable !== oldLoadable)
        #expect(store.peek(1) === new.loadable)
        #expect(store.count == 1)

        // Releasing the old leases does not touch the new entry.
        old.release()
        oldSecond.release()
        #expect(!oldLoadable.isInUse)
        #expect(new.loadable.isInUse)
        #expect(store.count == 1)
        await letTasksRun()
        #expect(clock.pendingSleepCount == 0)  // nothing was retained
        new.release()
        #expect(store.count == 1)
        await waitForTimer(clock)
        #expect(clock.pendingSleepCount == 1)
    }

    @Test("remove of a retained entry drops it, and its expiry later does nothing")
    func removeRetained() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        store.lease(1).release()
        weak let loadable = store.peek(1)
        await waitForTimer(clock)
        store.remove(1)
        #expect(loadable == nil)
        #expect(store.count == 0)
        let later = store.lease(1)
        later.release()  // retained at 0 s too
        await clock.advance(by: .seconds(5))
        store.remove(2)  // a key without an entry: ignored
        #expect(store.count == 1)
        await clock.advance(by: .seconds(5))
        #expect(store.count == 0)
        #expect(log.made == [1, 1])
    }

    @Test("removeAll drops every entry and cancels every sync; leases keep their objects; new leases make new entries")
    func removeAll() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let syncing = store.lease(1)
        syncing.syncIfNeeded()
        let idle = store.lease(2)
        var retainedSyncing: CountedLease? = store.lease(3)
        retainedSyncing?.syncIfNeeded()
        weak let retained = retainedSyncing?.loadable
        retainedSyncing = nil
        store.lease(4).release()
        weak let retainedIdle = store.peek(4)
        #expect(store.count == 4)
        #expect(store.syncingCount == 2)

        store.removeAll()
        #expect(store.count == 0)
        #expect(store.syncingCount == 0)
        #expect(log.doCancelSyncCount == 2)
        #expect(retained == nil)
        #expect(retainedIdle == nil)
        for key in 1...4 { #expect(store.peek(key) == nil) }
        #expect(syncing.loadableState == .idle)
        #expect(syncing.loadable.isInUse)

        let newOne = store.lease(1)
        #expect(newOne.loadable !== syncing.loadable)
        #expect(log.made == [1, 2, 3, 4, 1])
        syncing.release()
        idle.release()
        #expect(store.count == 1)
        #expect(newOne.loadable.isInUse)

        // The old timer finds nothing to drop.
        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(store.count == 1)
        #expect(store.peek(1) === newOne.loadable)
    }
}
