import Foundation
import Loadable
import LoadableCaching
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

// MARK: - 4, 5. Expiry of a syncing entry, retention zero

@Suite("LoadableStore: syncing entries at expiry, and retention zero")
@MainActor
struct StoreExpiryTests {
    @Test("an entry syncing at expiry is cancelled and released")
    func syncingAtExpiry() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        var lease: CountedLease? = store.lease(1)
        lease?.syncIfNeeded()
        weak let loadable = lease?.loadable
        var states: [LoadableState] = []
        let token = lease?.loadable.addObserver { states.append($0.loadableState) }
        lease = nil
        #expect(store.syncingCount == 1)
        #expect(loadable?.loadableState == .syncing)  // retained while syncing: the sync goes on

        await waitForTimer(clock)
        await clock.advance(by: .seconds(10) - .milliseconds(1))
        #expect(log.doCancelSyncCount == 0)
        await clock.advance(by: .milliseconds(1))
        #expect(log.doCancelSyncCount == 1)
        #expect(states == [.idle])  // cancelled: back to the state before the sync
        #expect(loadable == nil)
        #expect(store.count == 0)
        #expect(store.syncingCount == 0)
        #expect(token?.isActive == false)
    }

    @Test("retention zero drops an entry as soon as its last lease ends, cancelling its sync")
    func retentionZero() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .zero, clock: clock, log: log)
        let first = store.lease(1)
        let second = store.lease(1)
        first.release()
        #expect(store.count == 1)  // still leased
        second.release()
        #expect(store.count == 0)
        #expect(log.doCancelSyncCount == 0)

        var syncing: CountedLease? = store.lease(2)
        syncing?.syncIfNeeded()
        weak let loadable = syncing?.loadable
        #expect(store.syncingCount == 1)
        syncing = nil
        #expect(loadable == nil)
        #expect(log.doCancelSyncCount == 1)
        #expect(store.count == 0)
        #expect(store.syncingCount == 0)

        _ = store.lease(1)
        #expect(log.made == [1, 2, 1])
        await letTasksRun()
        #expect(clock.pendingSleepCount == 0)  // nothing retained: no timer
    }

    @Test("a loadable that shows another one's state (a mapped loadable) syncing at expiry or removal is cancelled")
    func mappedSyncingAtExpiry() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = LoadableStore<Int, MappedLoadable<Counted, String>>(retention: .seconds(10), clock: clock) { key in
            log.made.append(key)
            let source = Counted(key: key, log: log)
            if key == 4 { source.sync() }
            return source.map { "\($0)" }
        }
        var lease: LoadableLease<MappedLoadable<Counted, String>>? = store.lease(1)
        lease?.syncIfNeeded()
        weak let source = lease?.loadable.source
        #expect(log.doSyncCount == 1)
        #expect(lease?.loadableState == .syncing)
        lease = nil
        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(log.doCancelSyncCount == 1)
        #expect(source == nil)
        #expect(store.count == 0)

        let removed = store.lease(2)
        removed.syncIfNeeded()
        store.remove(2)
        #expect(log.doCancelSyncCount == 2)
        #expect(removed.loadableState == .idle)

        let cleared = store.lease(3)
        cleared.syncIfNeeded()
        store.removeAll()
        #expect(log.doCancelSyncCount == 3)
        #expect(cleared.loadableState == .idle)

        // Not counted in syncingCount (its own core never syncs), however it enters and leaves.
        let madeSyncing = store.lease(4)
        #expect(madeSyncing.loadableState == .syncing)
        #expect(store.syncingCount == 0)
        store.remove(4)
        #expect(log.doCancelSyncCount == 4)
        #expect(store.syncingCount == 0)
    }

    @Test("a type of the app's own syncing at expiry, or when removed, is cancelled")
    func ownTypeSyncingAtExpiry() async {
        let clock = ManualClock()
        var made: [OwnLoadable] = []
        let store = LoadableStore<Int, OwnLoadable>(retention: .seconds(10), clock: clock) { _ in
            let loadable = OwnLoadable()
            made.append(loadable)
            return loadable
        }
        store.lease(1).sync()
        store.lease(2).sync()
        made[1].finish()
        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(store.count == 0)
        #expect(made[0].cancelSyncCount == 1)
        #expect(made[0].loadableState == .idle)
        #expect(made[1].cancelSyncCount == 0)  // not syncing: nothing to cancel

        let removed = store.lease(3)
        removed.sync()
        store.remove(3)
        #expect(made[2].cancelSyncCount == 1)
        #expect(store.syncingCount == 0)
    }
}

// MARK: - 6. maxRetained

@Suite("LoadableStore: maxRetained")
@MainActor
struct StoreMaxRetainedTests {
    @Test("beyond maxRetained, the least recently released entry is dropped first")
    func leastRecentlyReleasedFirst() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), maxRetained: 2, clock: clock, log: log)
        let one = store.lease(1)
        let two = store.lease(2)
        let three = store.lease(3)
        let four = store.lease(4)
        // Released in the order 2, 1, 3: made first is not released first.
        two.release()
        one.release()
        #expect(store.count == 4)
        three.release()
        #expect(store.count == 3)
        #expect(store.peek(2) == nil)
        #expect(store.peek(1) != nil)
        #expect(store.peek(3) != nil)

        // Leased again, 1 leaves the retained entries; released, it is the most recent.
        let oneAgain = store.lease(1)
        #expect(oneAgain.loadable === one.loadable)
        oneAgain.release()
        four.release()  // retained now: 3, 1, 4
        #expect(store.peek(3) == nil)
        #expect(store.peek(1) === one.loadable)
        #expect(store.peek(4) === four.loadable)
        #expect(store.count == 2)
        #expect(log.made == [1, 2, 3, 4])
        #expect(log.doCancelSyncCount == 0)
    }

    @Test("an entry dropped by maxRetained while syncing is cancelled and released")
    func syncingDropped() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), maxRetained: 1, clock: clock, log: log)
        var first: CountedLease? = store.lease(1)
        first?.syncIfNeeded()
        weak let loadable = first?.loadable
        first = nil
        #expect(store.syncingCount == 1)
        store.lease(2).release()
        #expect(loadable == nil)
        #expect(log.doCancelSyncCount == 1)
        #expect(store.syncingCount == 0)
        #expect(store.count == 1)
        #expect(store.peek(2) != nil)
    }

    @Test("maxRetained 0 behaves like retention zero")
    func maxRetainedZero() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), maxRetained: 0, clock: clock, log: log)
        store.lease(1).release()
        #expect(store.count == 0)
        var syncing: CountedLease? = store.lease(2)
        syncing?.syncIfNeeded()
        weak let loadable = syncing?.loadable
        syncing = nil
        #expect(loadable == nil)
        #expect(log.doCancelSyncCount == 1)
        #expect(store.count == 0)
        #expect(store.syncingCount == 0)
        await letTasksRun()
        #expect(clock.pendingSleepCount == 0)
    }
}

// MARK: - 7. One timer

@Suite("LoadableStore: one timer for all retained entries")
@MainActor
struct StoreTimerTests {
    @Test("1,000 leases released at one instant wait on one sleep of the clock")
    func oneTimerForAThousand() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        var leases = (0..<1_000).map { store.lease($0) }
        #expect(store.count == 1_000)
        leases.removeAll()
        #expect(store.count == 1_000)
        await waitForTimer(clock)
        await letTasksRun()
        #expect(clock.pendingSleepCount == 1)
        #expect(clock.requestedSleeps == [.seconds(10)])

        await clock.advance(by: .seconds(10))
        #expect(store.count == 0)
        #expect(clock.pendingSleepCount == 0)
        #expect(clock.requestedSleeps.count == 1)
    }

    @Test("entries released at different instants expire each at its own time, one sleep at a time")
    func staggeredExpiry() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        store.lease(1).release()
        await waitForTimer(clock)
        await clock.advance(by: .seconds(1))
        store.lease(2).release()
        await clock.advance(by: .seconds(1))
        store.lease(3).release()
        await letTasksRun()
        #expect(clock.pendingSleepCount == 1)

        await clock.advance(by: .seconds(8))  // 10 s
        #expect(store.peek(1) == nil)
        #expect(store.count == 2)
        await waitForTimer(clock)
        #expect(clock.pendingSleepCount == 1)
        await clock.advance(by: .seconds(1))  // 11 s
        #expect(store.peek(2) == nil)
        #expect(store.count == 1)
        await waitForTimer(clock)
        await clock.advance(by: .seconds(1) - .milliseconds(1))
        #expect(store.count == 1)
        await clock.advance(by: .milliseconds(1))  // 12 s
        #expect(store.count == 0)
        #expect(clock.pendingSleepCount == 0)
        #expect(clock.requestedSleeps == [.seconds(10), .seconds(1), .seconds(1)])
    }
}
