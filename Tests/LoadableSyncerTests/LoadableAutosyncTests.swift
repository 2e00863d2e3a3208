import Loadable
import LoadableSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// A plain loadable whose syncs the test finishes by hand.
@MainActor
private final class CountingLoadable: Loadable<Int> {
    var syncs = 0

    override func doSync() {
        syncs += 1
    }
}

/// `Loadable.autosync(every:clock:activity:)` (issue 45): the refresh-while-observed timer of
/// `AutosyncLoadable`, attached to any loadable.
@MainActor
@Suite struct LoadableAutosyncTests {
    let clock = ManualClock()

    @Test("attached to a plain Loadable: the first observer syncs it, then it refreshes every interval")
    func plainLoadable() async {
        let loadable = CountingLoadable(clock: clock)
        let autosync = loadable.autosync(every: .seconds(60), clock: clock, activity: ActivityMonitor())
        #expect(autosync.interval == .seconds(60))
        #expect(!autosync.isAutosyncing)
        #expect(loadable.syncs == 0)
        await observing(loadable, { _ in }) {
            #expect(autosync.isAutosyncing)
            #expect(loadable.syncs == 1)
            loadable.setDidSyncSuccessfully(1)
            for expected in 2...3 {
                await clock.waitForSleepers()
                await clock.advance(by: .seconds(60))
                #expect(loadable.syncs == expected)
                loadable.setDidSyncSuccessfully(expected)
            }
        }
        #expect(!autosync.isAutosyncing)
        #expect(clock.pendingSleepCount == 0)
    }

    @Test("attached to a PagedLoadable: a tick refreshes from the first page; paging stays on demand")
    func pagedLoadable() async throws {
        var asked: [Int?] = []
        let list = PagedLoadable<Int, Int>(clock: clock) { cursor in
            asked.append(cursor)
            return cursor == nil ? .init(items: [1, 2], nextCursor: 2) : .init(items: [3], nextCursor: nil)
        }
        list.autosync(every: .seconds(10), clock: clock, activity: ActivityMonitor())
        try await observing(list, { _ in }) {
            try await list.doneSyncing()
            list.loadNextPage()
            try await list.doneLoadingNextPage()
            #expect(list.contents == [1, 2, 3])
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(10))
            try await list.doneSyncing()
            #expect(list.contents == [1, 2])
        }
        #expect(asked == [nil, 2, nil])
    }

    @Test("attached while observed, it starts at once; stop() ends it; autosync again replaces the previous one")
    func attachedWhileObservedStopAndReplace() async {
        let loadable = CountingLoadable(clock: clock)
        await observing(loadable, { _ in }) {
            let first = loadable.autosync(every: .seconds(5), clock: clock, activity: ActivityMonitor())
            #expect(first.isAutosyncing)
            #expect(loadable.syncs == 1)
            loadable.setDidSyncSuccessfully(1)
            let second = loadable.autosync(every: .seconds(7), clock: clock, activity: ActivityMonitor())
            #expect(first.isStopped)
            #expect(!first.isAutosyncing)
            #expect(second.isAutosyncing)
            await clock.waitForSleepers()
            #expect(clock.pendingSleepCount == 1)
            await clock.advance(by: .seconds(7))
            #expect(loadable.syncs == 2)
            second.stop()
            second.stop()  // a no-op
            #expect(clock.pendingSleepCount == 0)
            await clock.advance(by: .seconds(70))
            #expect(loadable.syncs == 2)
        }
    }

    @Test("releasing an observed loadable stops its timer")
    func releasedLoadable() async {
        var loadable: CountingLoadable? = CountingLoadable(clock: clock)
        let autosync = loadable!.autosync(every: .seconds(10), clock: clock, activity: ActivityMonitor())
        let observation = loadable!.observe { _ in }
        await clock.waitForSleepers()
        weak let weakLoadable = loadable
        loadable = nil
        #expect(weakLoadable == nil)
        #expect(!observation.isActive)
        // The handle kept here outlives the loadable: its tick finds nothing and stops.
        await clock.advance(by: .seconds(10))
        #expect(clock.pendingSleepCount == 0)
        #expect(autosync.isStopped || !autosync.isAutosyncing)
    }

    @Test("released on another thread, an observed loadable's autosync goes with it and its timer stops")
    func releasedOnAnotherThread() async {
        let box = Locked<CountingLoadable?>(CountingLoadable(clock: clock))
        weak let weakLoadable = box.withLock { $0 }
        weak let weakAutosync = box.withLock {
            $0?.autosync(every: .seconds(10), clock: clock, activity: ActivityMonitor())
        }
        let observation = box.withLock { $0?.observe { _ in } }
        await clock.waitForSleepers()
        #expect(clock.pendingSleepCount == 1)
        releaseOnAnotherThread(box)
        #expect(weakLoadable == nil)
        #expect(observation?.isActive == false)
        #expect(weakAutosync == nil)
        _ = await settle { clock.pendingSleepCount == 0 }
        #expect(clock.pendingSleepCount == 0)
    }

    @Test("attached from inside an observer's notification: it starts at once, and ticks")
    func attachedFromAnObserver() async {
        let loadable = CountingLoadable(clock: clock)
        var autosync: LoadableAutosync?
        await observing(
            loadable,
            { [clock] loadable in
                guard autosync == nil, loadable.loadableState == .didSyncSuccessfully else { return }
                autosync = loadable.autosync(
                    every: .seconds(3), clock: clock, activity: ActivityMonitor())
            }
        ) {
            loadable.setDidSyncSuccessfully(1)
            #expect(autosync?.isAutosyncing == true)
            #expect(loadable.syncs == 0)  // fresh: nothing needed
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(3))
            #expect(loadable.syncs == 1)
        }
    }

    @Test("inactive: a first observer does not sync; the ticks pause and a due one runs on return")
    func followsActivity() async {
        let activity = ActivityMonitor()
        activity.isActive = false
        let loadable = CountingLoadable(clock: clock)
        let autosync = loadable.autosync(every: .seconds(60), clock: clock, activity: activity)
        await observing(loadable, { _ in }) {
            #expect(loadable.syncs == 0)
            #expect(autosync.isAutosyncing)
            await clock.advance(by: .seconds(100))
            #expect(loadable.syncs == 0)
            activity.isActive = true
            #expect(loadable.syncs == 1)
        }
    }

    @Test("a zero interval stops the program with a message naming interval")
    func zeroIntervalExits() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                _ = CountingLoadable().autosync(every: .zero, clock: ManualClock(), activity: ActivityMonitor())
            }
        }
        #expect(bytes(result?.standardErrorContent ?? [], contain: "autosync(every:): interval must be > .zero"))
    }
}
