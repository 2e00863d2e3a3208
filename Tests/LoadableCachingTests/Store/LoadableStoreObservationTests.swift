import Foundation
import Loadable
import LoadableCaching
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

// MARK: - 12. syncingCount and Observation

@Suite("LoadableStore: syncingCount and Observation")
@MainActor
struct StoreSyncingCountTests {
    @Test("syncingCount follows starts, ends, failures, cancels, removals and expiries")
    func syncingCount() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        let a = store.lease(1)
        let b = store.lease(2)
        #expect(store.syncingCount == 0)
        a.syncIfNeeded()
        #expect(store.syncingCount == 1)
        b.syncIfNeeded()
        #expect(store.syncingCount == 2)
        a.loadable.setDidSyncSuccessfully(1)  // ends
        #expect(store.syncingCount == 1)
        a.invalidate()  // in use: syncs again
        #expect(store.syncingCount == 2)
        a.cancelSync()  // cancelled
        #expect(store.syncingCount == 1)
        #expect(log.doCancelSyncCount == 1)
        b.loadable.setDidFailToSync(TestError())  // fails
        #expect(store.syncingCount == 0)
        b.sync()
        #expect(store.syncingCount == 1)
        store.remove(2)  // leaves the store while syncing
        #expect(store.syncingCount == 0)
        b.sync()  // no longer the store's
        #expect(b.loadableState == .syncing)
        #expect(store.syncingCount == 0)

        a.sync()
        a.release()  // retained while syncing
        #expect(store.syncingCount == 1)
        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))  // expires while syncing
        #expect(store.syncingCount == 0)
        #expect(store.count == 0)
    }

    @Test("an entry whose loadable is already syncing when made counts as syncing")
    func madeSyncing() {
        let clock = ManualClock()
        let log = CallLog()
        let store = LoadableStore<Int, Counted>(retention: .seconds(10), clock: clock) { key in
            let loadable = Counted(key: key, log: log)
            loadable.sync()
            return loadable
        }
        let lease = store.lease(1)
        #expect(store.syncingCount == 1)
        lease.loadable.setDidSyncSuccessfully(1)
        #expect(store.syncingCount == 0)
    }

    @Test("TestLoadable entries are counted too")
    func testLoadable() {
        let clock = ManualClock()
        let store = LoadableStore<Int, TestLoadable<Int>>(retention: .seconds(10), clock: clock) { _ in
            TestLoadable()
        }
        let lease = store.lease(1)
        lease.loadable.setSyncing()
        #expect(store.syncingCount == 1)
        lease.loadable.setSyncing()  // no change of syncing
        #expect(store.syncingCount == 1)
        lease.cancelSync()
        #expect(lease.loadable.cancelSyncCount == 1)
        #expect(store.syncingCount == 0)
    }

    @Test("count is tracked by Observation: made and dropped entries report a change, leases of live ones do not")
    func countObservation() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        func track() -> ChangeCounter {
            let counter = ChangeCounter()
            withObservationTracking {
                _ = store.count
            } onChange: {
                counter.count += 1
            }
            return counter
        }
        let made = track()
        let lease = store.lease(1)
        #expect(made.count == 1)

        let unchanged = track()
        let second = store.lease(1)
        second.release()
        lease.release()  // retained: still counted
        lease.loadable.sync()
        #expect(unchanged.count == 0)

        let expired = track()
        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(expired.count == 1)
        #expect(store.count == 0)

        _ = store.lease(2)
        let removed = track()
        store.remove(2)
        #expect(removed.count == 1)
    }

    /// A change of `count` with no read since the last change told skips Observation's registrar:
    /// these are the trackings that must still be told.
    @Test("count: a tracking made after a change, or by an observer while a change is told, is told of the next change")
    func countTrackingsAfterSkippedChanges() async {
        let clock = ManualClock()
        let store = countedStore(retention: .seconds(10), clock: clock, log: CallLog())
        let first = ChangeCounter()
        let second = ChangeCounter()
        withObservationTracking {
            _ = store.count
        } onChange: {
            first.count += 1
            // Made while the registrar tells of the first change (on the main actor, which
            // makes the change).
            MainActor.assumeIsolated {
                withObservationTracking {
                    _ = store.count
                } onChange: {
                    second.count += 1
                }
            }
        }
        _ = store.lease(1)
        #expect(first.count == 1)
        #expect(second.count == 0)
        _ = store.lease(2)
        #expect(second.count == 1)
        // Changes nobody tracks, then a new tracking: told of the next change, whichever kind.
        _ = store.lease(3)
        store.remove(3)
        for change in ["made", "removed", "expired", "all removed"] {
            let counter = ChangeCounter()
            withObservationTracking {
                _ = store.count
            } onChange: {
                counter.count += 1
            }
            switch change {
            case "made": store.lease(4).release()
            case "removed": store.remove(4)
            case "expired":
                store.lease(5).release()
                #expect(counter.count == 1)  // made
                withObservationTracking {
                    _ = store.count
                } onChange: {
                    counter.count += 1
                }
                await waitForTimer(clock)
                await clock.advance(by: .seconds(10))
                #expect(counter.count == 2, "\(change)")
                continue
            default: store.removeAll()
            }
            #expect(counter.count == 1, "\(change)")
        }
        #expect(store.count == 0)
    }

    /// `withObservationTracking` installs its observer after its closure returns: a change made
    /// inside the closure after the read must not stop the next change from being told.
    @Test("count: a tracking whose closure reads count and then makes an entry is told of the next change")
    func countChangedInsideTrackingClosure() {
        let store = countedStore(retention: .seconds(10), clock: ManualClock(), log: CallLog())
        let counter = ChangeCounter()
        var leases: [CountedLease] = []
        withObservationTracking {
            _ = store.count
            leases.append(store.lease(1))  // a view body that reads count, then leases a key
        } onChange: {
            counter.count += 1
        }
        #expect(counter.count == 0)
        leases.append(store.lease(2))
        #expect(counter.count == 1)
        #expect(store.count == 2)
    }

    @Test("syncingCount is tracked by Observation")
    func syncingCountObservation() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let lease = store.lease(1)
        let started = ChangeCounter()
        withObservationTracking {
            _ = store.syncingCount
        } onChange: {
            started.count += 1
        }
        lease.syncIfNeeded()
        #expect(started.count == 1)

        let ended = ChangeCounter()
        withObservationTracking {
            _ = store.syncingCount
        } onChange: {
            ended.count += 1
        }
        _ = store.lease(2)  // a new entry changes count, not syncingCount
        #expect(ended.count == 0)
        lease.loadable.setDidSyncSuccessfully(1)
        #expect(ended.count == 1)
    }
}
