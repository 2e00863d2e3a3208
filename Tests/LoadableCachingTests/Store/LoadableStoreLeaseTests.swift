import Foundation
import Loadable
import LoadableCaching
import LoadableSupport
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

// MARK: - 13. Leases

@Suite("LoadableStore: leases")
@MainActor
struct StoreLeaseTests {
    @Test("a lease released twice: the second release is a no-op")
    func releasedTwice() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let first = store.lease(1)
        let second = store.lease(1)
        first.release()
        first.release()
        #expect(first.isReleased)
        #expect(second.loadable.isInUse)  // the second lease's use was not ended
        await letTasksRun()
        #expect(clock.pendingSleepCount == 0)  // not retained

        second.release()
        #expect(!second.loadable.isInUse)
        await waitForTimer(clock)
        let third = store.lease(1)
        first.release()
        second.release()
        #expect(third.loadable.isInUse)  // old releases do not end the new lease's use
        #expect(third.loadable === first.loadable)
        await clock.advance(by: .seconds(10))
        #expect(store.count == 1)  // leased: not expired
    }

    @Test("a released lease that goes away ends nothing more")
    func releasedThenGone() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        var first: CountedLease? = store.lease(1)
        let second = store.lease(1)
        first?.release()
        first = nil
        #expect(first == nil)
        #expect(second.loadable.isInUse)
    }

    @Test("a lease released on another thread hands its end to the main actor; the entry is then retained")
    func releasedOnAnotherThread() async throws {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        let box = Locked<CountedLease?>(store.lease(1))
        let loadable = try #require(store.peek(1))
        loadable.setDidSyncSuccessfully(1)
        releaseOnAnotherThread(box)
        // The main actor has not run since: the end is still on its way.
        #expect(loadable.isInUse)
        #expect(clock.pendingSleepCount == 0)
        await yield { !loadable.isInUse }
        #expect(store.count == 1)
        #expect(store.peek(1) === loadable)
        loadable.invalidate()
        #expect(loadable.doSyncCount == 0)  // retained: only stale
        await waitForTimer(clock)
        #expect(clock.pendingSleepCount == 1)
        await clock.advance(by: .seconds(10))
        #expect(store.count == 0)
        #expect(log.made == [1])
    }

    @Test("a lease released on another thread while another lease lives does not end the entry's use")
    func releasedOnAnotherThreadWithOtherLease() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        let kept = store.lease(1)
        let box = Locked<CountedLease?>(store.lease(1))
        releaseOnAnotherThread(box)
        await letTasksRun()
        #expect(kept.loadable.isInUse)
        #expect(clock.pendingSleepCount == 0)
        kept.release()
        #expect(!kept.loadable.isInUse)
    }

    @Test("after release(), a lease still reads its loadable; sync, syncIfNeeded, invalidate, cancelSync do nothing")
    func releasedLeaseIsInert() {
        let clock = ManualClock()
        let store = LoadableStore<Int, TestLoadable<Int>>(retention: .seconds(10), clock: clock) { _ in
            TestLoadable()
        }
        let lease = store.lease(1)
        let other = store.lease(1)
        lease.release()
        lease.sync()
        lease.syncIfNeeded()
        lease.invalidate()
        other.sync()
        lease.cancelSync()
        let loadable = lease.loadable
        #expect(loadable.syncCount == 1)
        #expect(loadable.syncIfNeededCount == 0)
        #expect(loadable.invalidateCount == 0)
        #expect(loadable.cancelSyncCount == 0)
        #expect(store.syncingCount == 1)
        loadable.setDidSyncSuccessfully(3)
        #expect(lease.contents == 3)
        #expect(lease.loadableState == .didSyncSuccessfully)
        #expect(store.peek(1) === loadable)
    }
}

// MARK: - 14. Re-entrancy

@Suite("LoadableStore: re-entrancy")
@MainActor
struct StoreReentrancyTests {
    @Test("a lease taken inside make for another key works, nested")
    func leaseInsideMake() {
        let clock = ManualClock()
        let log = CallLog()
        let ref = StoreRef<Counted>()
        var inner: [Int: CountedLease] = [:]
        let store = LoadableStore<Int, Counted>(retention: .seconds(10), clock: clock) { key in
            log.made.append(key)
            if key < 3, let store = ref.store {
                let lease = store.lease(key + 1)
                inner[key] = lease
            }
            return Counted(key: key, log: log)
        }
        ref.store = store
        let outer = store.lease(1)
        #expect(log.made == [1, 2, 3])
        #expect(store.count == 3)
        #expect(inner[1]?.loadable === store.peek(2))
        #expect(inner[2]?.loadable === store.peek(3))
        #expect(outer.loadable === store.peek(1))
        for key in 1...3 { #expect(store.peek(key)?.isInUse == true) }
        #expect(log.doSyncCount == 0)

        let again = store.lease(2)
        #expect(again.loadable === inner[1]?.loadable)
        #expect(log.made == [1, 2, 3])
    }

    @Test("a lease taken inside an expiry (an observer of the cancelled sync) gets a new entry")
    func leaseInsideExpiry() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        let ref = StoreRef<Counted>()
        ref.store = store
        var lease: CountedLease? = store.lease(1)
        lease?.syncIfNeeded()
        weak let old = lease?.loadable
        var leasedInExpiry: [CountedLease] = []
        let token = lease?.loadable.addObserver { loadable in
            guard loadable.loadableState != .syncing, leasedInExpiry.isEmpty, let store = ref.store else { return }
            leasedInExpiry.append(store.lease(1))
        }
        lease = nil

        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(log.doCancelSyncCount == 1)
        #expect(log.made == [1, 1])
        #expect(leasedInExpiry.count == 1)
        #expect(old == nil)
        #expect(store.count == 1)
        #expect(store.peek(1) === leasedInExpiry.first?.loadable)
        #expect(store.peek(1)?.isInUse == true)
        #expect(store.peek(1)?.loadableState == .idle)
        #expect(store.syncingCount == 0)

        // The new entry is leased: it does not expire.
        await clock.advance(by: .seconds(20))
        #expect(store.count == 1)
        // The token, not `observing(_:_:body:)`, which would keep the loadable this test lets go.
        withExtendedLifetime(token) {}
    }

    @Test("an observer that, during an expiry batch, leases another key expiring at the same instant keeps it")
    func leaseOfAnotherKeyInsideExpiry() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        let ref = StoreRef<Counted>()
        ref.store = store
        var first: CountedLease? = store.lease(1)
        first?.syncIfNeeded()
        var second: CountedLease? = store.lease(2)
        second?.loadable.setDidSyncSuccessfully(2)
        weak let secondLoadable = second?.loadable
        var kept: [CountedLease] = []
        let token = first?.loadable.addObserver { loadable in
            guard loadable.loadableState != .syncing, kept.isEmpty, let store = ref.store else { return }
            kept.append(store.lease(2))
        }
        // Released with release(), in this order: an optimized build may end a local's lifetime
        // after its last use, so setting the variables to nil would not fix the order.
        first?.release()  // released first: expires first
        second?.release()

        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(log.doCancelSyncCount == 1)
        #expect(kept.count == 1)
        #expect(store.count == 1)
        #expect(store.peek(1) == nil)
        #expect(store.peek(2) === secondLoadable)
        #expect(kept.first?.loadable === secondLoadable)
        #expect(kept.first?.contents == 2)
        #expect(secondLoadable?.isInUse == true)
        #expect(log.made == [1, 2])

        await clock.advance(by: .seconds(20))
        #expect(store.count == 1)
        first = nil  // released leases still hold their loadables
        second = nil
        kept.removeAll()
        #expect(secondLoadable?.isInUse == false)
        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(store.count == 0)
        #expect(secondLoadable == nil)
        // The token, not `observing(_:_:body:)`, which would keep the loadable this test lets go.
        withExtendedLifetime(token) {}
    }

    @Test("an observer that releases a lease during an expiry retains that entry for a full retention")
    func releaseInsideExpiry() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        var first: CountedLease? = store.lease(1)
        first?.syncIfNeeded()
        var other: CountedLease? = store.lease(2)
        let token = first?.loadable.addObserver { loadable in
            guard loadable.loadableState != .syncing else { return }
            other = nil
        }
        first = nil
        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(other == nil)
        #expect(store.peek(1) == nil)
        #expect(store.count == 1)  // 2 released at 10 s: expires at 20 s
        await waitForTimer(clock)
        await clock.advance(by: .seconds(10) - .milliseconds(1))
        #expect(store.count == 1)
        await clock.advance(by: .milliseconds(1))
        #expect(store.count == 0)
        // The token, not `observing(_:_:body:)`, which would keep the loadable this test lets go.
        withExtendedLifetime(token) {}
    }
}

// MARK: - 16. The store released while leases live

@Suite("LoadableStore: released while leases live")
@MainActor
struct StoreReleasedTests {
    @Test("leases outlive their store: they keep working and releasing them does not crash")
    func leasesOutliveStore() async throws {
        let clock = ManualClock()
        let log = CallLog()
        var store: LoadableStore<Int, Counted>? = countedStore(retention: .seconds(10), clock: clock, log: log)
        let lease = try #require(store).lease(1)
        let second = try #require(store).lease(1)
        try #require(store).lease(2).release()  // retained: the store's timer is armed
        await waitForTimer(clock)
        weak let weakStore = store
        store = nil
        #expect(weakStore == nil)

        lease.syncIfNeeded()
        #expect(log.doSyncCount == 1)
        lease.loadable.setDidSyncSuccessfully(5)
        #expect(second.contents == 5)
        lease.invalidate()  // still in use: syncs at once
        #expect(log.doSyncCount == 2)
        second.release()
        #expect(lease.loadable.isInUse)
        lease.release()
        #expect(!lease.loadable.isInUse)
        await clock.advance(by: .seconds(20))
        #expect(log.doCancelSyncCount == 0)
        #expect(lease.loadableState == .syncing)
    }
}
