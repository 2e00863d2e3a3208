import Foundation
import Loadable
import LoadableCaching
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

// MARK: - 1. One entry per key

@Suite("LoadableStore: one entry per key")
@MainActor
struct StoreEntryIdentityTests {
    @Test("make runs once per entry, every lease of it has the same loadable, and taking a lease does not sync")
    func makeOncePerEntry() {
        let clock = ManualClock()
        var made: [Int] = []
        let store = LoadableStore<Int, TestLoadable<String>>(retention: .seconds(10), clock: clock) { key in
            made.append(key)
            return TestLoadable()
        }
        #expect(store.count == 0)
        let a = store.lease(1)
        let b = store.lease(1)
        let c = store.lease(1)
        #expect(made == [1])
        #expect(a.loadable === b.loadable)
        #expect(b.loadable === c.loadable)
        #expect(store.peek(1) === a.loadable)
        #expect(store.count == 1)
        #expect(a.loadable.syncCount == 0)
        #expect(a.loadable.syncIfNeededCount == 0)
        #expect(a.loadable.loadableState == .idle)

        let other = store.lease(2)
        #expect(made == [1, 2])
        #expect(other.loadable !== a.loadable)
        #expect(store.count == 2)
        #expect(other.loadable.syncCount == 0)
        #expect(store.syncingCount == 0)
    }

    @Test("ten leases and ten syncIfNeeded() calls start one sync")
    func tenLeasesOneSync() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        var leases: [CountedLease] = []
        for _ in 0..<10 {
            let lease = store.lease(1)
            lease.syncIfNeeded()
            leases.append(lease)
        }
        #expect(log.made == [1])
        #expect(log.doSyncCount == 1)
        #expect(leases.allSatisfy { $0.loadable === leases[0].loadable })
        #expect(leases[0].loadable.doSyncCount == 1)
        #expect(leases.allSatisfy { $0.loadableState == .syncing })
        #expect(store.count == 1)
        #expect(store.syncingCount == 1)

        leases[3].loadable.setDidSyncSuccessfully(7)
        for lease in leases { lease.syncIfNeeded() }
        #expect(log.doSyncCount == 1)  // fresh contents: nothing to sync
        #expect(leases.allSatisfy { $0.contents == 7 })
        #expect(store.syncingCount == 0)
    }

    @Test("peek neither makes an entry nor takes a lease")
    func peek() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        #expect(store.peek(1) == nil)
        #expect(log.made.isEmpty)
        #expect(store.count == 0)

        let lease = store.lease(1)
        lease.release()
        let peeked = store.peek(1)
        #expect(peeked === lease.loadable)
        #expect(peeked?.isInUse == false)
        #expect(log.made == [1])
    }
}

// MARK: - 2. The entry keeps its loadable in use

@Suite("LoadableStore: the entry keeps its loadable in use")
@MainActor
struct StoreInUseTests {
    @Test("the loadable is in use while at least one lease lives, and syncs at once when invalidated then")
    func inUseWhileLeased() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let first = store.lease(1)
        let loadable = first.loadable
        #expect(loadable.isInUse)
        let second = store.lease(1)
        first.release()
        #expect(loadable.isInUse)
        loadable.setDidSyncSuccessfully(1)
        loadable.invalidate()
        #expect(loadable.doSyncCount == 1)  // in use: synced at once
        loadable.setDidSyncSuccessfully(2)

        second.release()
        #expect(!loadable.isInUse)
        loadable.invalidate()
        #expect(loadable.doSyncCount == 1)  // retained: only stale
        #expect(loadable.isStale)
    }

    @Test("a lease of a leased entry does not end or begin the loadable's use again")
    func oneUseForAllLeases() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let first = store.lease(1)
        let changes = ChangeCounter()
        withObservationTracking {
            _ = first.loadable.isInUse
        } onChange: {
            changes.count += 1
        }
        let second = store.lease(1)
        second.release()
        let third = store.lease(1)
        #expect(changes.count == 0)
        first.release()
        third.release()
        #expect(changes.count == 1)
        #expect(!first.loadable.isInUse)
    }

    @Test("a loadable's own lease and the store's leases add up: the loadable stays in use until both end")
    func ownLeaseAndStoreLease() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let storeLease = store.lease(1)
        let ownLease = storeLease.loadable.lease()
        storeLease.release()
        #expect(ownLease.loadable.isInUse)
        #expect(store.count == 1)
        ownLease.release()
        #expect(!ownLease.loadable.isInUse)
    }
}

// MARK: - 3. Retention

@Suite("LoadableStore: retention after the last lease")
@MainActor
struct StoreRetentionTests {
    @Test("retention − 1 ms: a new lease reuses the entry (same object, contents kept, no sync, no make)")
    func reusedJustBeforeExpiry() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        let lease = store.lease(1)
        lease.syncIfNeeded()
        lease.loadable.setDidSyncSuccessfully(42)
        let loadable = lease.loadable
        lease.release()
        #expect(store.count == 1)
        #expect(!loadable.isInUse)

        await waitForTimer(clock)
        await clock.advance(by: .seconds(10) - .milliseconds(1))
        #expect(store.count == 1)
        let again = store.lease(1)
        again.syncIfNeeded()
        #expect(again.loadable === loadable)
        #expect(again.contents == 42)
        #expect(log.made == [1])
        #expect(log.doSyncCount == 1)
        #expect(log.doCancelSyncCount == 0)
        #expect(loadable.isInUse)

        // Leased again, it no longer expires: past the first deadline it is still there.
        await clock.advance(by: .seconds(5))
        #expect(store.count == 1)
        #expect(store.peek(1) === loadable)
        withExtendedLifetime(again) {}
    }

    @Test("retention + 1 ms: the entry is gone and a new lease makes a new one")
    func newEntryJustAfterExpiry() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        var lease: CountedLease? = store.lease(1)
        lease?.loadable.setDidSyncSuccessfully(42)
        weak let first = lease?.loadable
        lease?.release()
        lease = nil

        await waitForTimer(clock)
        await clock.advance(by: .seconds(10) + .milliseconds(1))
        #expect(store.count == 0)
        #expect(store.peek(1) == nil)
        #expect(first == nil)
        #expect(log.doCancelSyncCount == 0)  // not syncing: nothing to cancel

        let again = store.lease(1)
        #expect(log.made == [1, 1])
        #expect(again.contents == nil)
        #expect(store.count == 1)
    }

    @Test("an entry expires exactly retention after its release")
    func expiresAtRetention() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        store.lease(1).release()
        await waitForTimer(clock)
        #expect(clock.requestedSleeps == [.seconds(10)])
        await clock.advance(by: .seconds(10))
        #expect(store.count == 0)
        #expect(clock.pendingSleepCount == 0)
    }

    @Test("a lease object that goes away without release() retains its entry, like release()")
    func leaseObjectGoesAway() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        var lease: CountedLease? = store.lease(1)
        let loadable = store.peek(1)
        lease = nil
        #expect(lease == nil)
        #expect(loadable?.isInUse == false)
        #expect(store.count == 1)
        await waitForTimer(clock)
        #expect(clock.pendingSleepCount == 1)
        await clock.advance(by: .seconds(10))
        #expect(store.count == 0)
    }

    @Test("an entry leased again and released again expires retention after its latest release")
    func latestReleaseCounts() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        store.lease(1).release()
        await waitForTimer(clock)
        await clock.advance(by: .seconds(6))
        store.lease(1).release()  // released again at 6 s: expires at 16 s
        await clock.advance(by: .seconds(6))  // 12 s: the first deadline passed
        #expect(store.count == 1)
        #expect(log.made == [1])
        await waitForTimer(clock)
        await clock.advance(by: .seconds(4) - .milliseconds(1))
        #expect(store.count == 1)
        await clock.advance(by: .milliseconds(1))
        #expect(store.count == 0)
    }
}
