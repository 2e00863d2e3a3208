import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// An autosync loadable whose syncs the test finishes by hand.
@MainActor
final class CountingAutosync: AutosyncLoadable<Int> {
    var syncs = 0

    override func doSync() {
        syncs += 1
    }
}

/// A subclass that overrides the observer hooks without calling `super`.
@MainActor
private final class HookedAutosync: AutosyncLoadable<Int> {
    var syncs = 0
    var hooks: [String] = []

    override func doSync() {
        syncs += 1
    }

    override func didAddFirstObserver() {
        hooks.append("first")
    }

    override func didRemoveLastObserver() {
        hooks.append("last")
    }
}

@MainActor
@Suite struct AutosyncLoadableTests {
    let clock = ManualClock()

    @Test("The first observer syncs it, then it refreshes every interval while observed")
    func refreshesWhileObserved() async {
        let loadable = CountingAutosync(autosyncInterval: .seconds(60), clock: clock)
        #expect(!loadable.isAutosyncing)
        await observing(loadable, { _ in }) {
            #expect(loadable.isAutosyncing)
            #expect(loadable.syncs == 1)
            loadable.setDidSyncSuccessfully(1)
            for expected in 2...4 {
                await clock.waitForSleepers()
                await clock.advance(by: .seconds(60))
                #expect(loadable.syncs == expected)
                loadable.setDidSyncSuccessfully(expected)
            }
            await clock.waitForSleepers()  // the next tick is armed
            #expect(clock.requestedSleeps == Array(repeating: .seconds(60), count: 4))
        }
    }

    @Test("Overriding the observer hooks without super leaves the timer running and stopping")
    func hooksOverriddenWithoutSuper() async {
        let loadable = HookedAutosync(autosyncInterval: .seconds(60), clock: clock)
        await observing(loadable, { _ in }) {
            #expect(loadable.isAutosyncing)
            #expect(loadable.syncs == 1)
            loadable.setDidSyncSuccessfully(1)
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(60))
            #expect(loadable.syncs == 2)
        }
        #expect(!loadable.isAutosyncing)
        #expect(loadable.hooks == ["first", "last"])
    }

    @Test("A tick while a sync is running is skipped")
    func skipsWhileSyncing() async {
        let loadable = CountingAutosync(autosyncInterval: .seconds(10), clock: clock)
        await observing(loadable, { _ in }) {
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(10))
            #expect(loadable.syncs == 1)
            #expect(loadable.loadableState == .syncing)
        }
    }

    @Test("The timer stops when the last observer leaves and resumes with the next one")
    func stopsAndResumes() async {
        let loadable = CountingAutosync(autosyncInterval: .seconds(10), clock: clock)
        let first = loadable.observe { _ in }
        let second = loadable.observe { _ in }
        loadable.setDidSyncSuccessfully(1)
        await clock.waitForSleepers()
        first.cancel()
        #expect(loadable.isAutosyncing)
        second.cancel()
        #expect(!loadable.isAutosyncing)
        #expect(clock.pendingSleepCount == 0)
        await clock.advance(by: .seconds(100))
        #expect(loadable.syncs == 1)

        await observing(loadable, { _ in }) {
            #expect(loadable.syncs == 1)  // synced already: nothing needed
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(10))
            #expect(loadable.syncs == 2)
        }
    }

    @Test("Releasing an observed autosync loadable stops its timer")
    func releasedLoadable() async {
        var loadable: CountingAutosync? = CountingAutosync(autosyncInterval: .seconds(10), clock: clock)
        let observation = loadable!.observe { _ in }
        await clock.waitForSleepers()
        weak let weakLoadable = loadable
        loadable = nil
        #expect(weakLoadable == nil)
        #expect(clock.pendingSleepCount == 0)
        #expect(!observation.isActive)
    }

    @Test("A zero interval stops the program with a message naming autosyncInterval")
    func zeroIntervalExits() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                _ = CountingAutosync(autosyncInterval: .zero, clock: ManualClock())
            }
        }
        #expect(bytes(result?.standardErrorContent ?? [], contain: "autosyncInterval must be > .zero"))
    }

    // MARK: - Following an activity monitor

    @Test("Inactive for 100 s with a 60 s interval: no tick while inactive, one sync at activation")
    func pausesWhileInactive() async {
        let activity = ActivityMonitor()
        let loadable = CountingAutosync(autosyncInterval: .seconds(60), clock: clock, activity: activity)
        await observing(loadable, { _ in }) {
            loadable.setDidSyncSuccessfully(1)
            await clock.waitForSleepers()
            activity.isActive = false
            #expect(clock.pendingSleepCount == 0)
            #expect(loadable.isAutosyncing)
            await clock.advance(by: .seconds(100))
            #expect(loadable.syncs == 1)
            activity.isActive = true
            #expect(loadable.syncs == 2)
            loadable.setDidSyncSuccessfully(2)
            await clock.waitForSleepers()
            #expect(clock.requestedSleeps == [.seconds(60), .seconds(60)])
            await clock.advance(by: .seconds(60))
            #expect(loadable.syncs == 3)
        }
    }

    @Test("A pause shorter than the interval keeps the cadence and syncs only what needs it")
    func shortPauseKeepsCadence() async {
        let activity = ActivityMonitor()
        let loadable = CountingAutosync(autosyncInterval: .seconds(60), clock: clock, activity: activity)
        await observing(loadable, { _ in }) {
            loadable.setDidSyncSuccessfully(1)
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(20))
            activity.connectivity = .offline
            await clock.advance(by: .seconds(10))
            activity.connectivity = .online
            #expect(loadable.syncs == 1)  // fresh: nothing to catch up
            await clock.waitForSleepers()
            #expect(clock.requestedSleeps == [.seconds(60), .seconds(30)])
            await clock.advance(by: .seconds(30))
            #expect(loadable.syncs == 2)
        }
    }

    @Test("A failure while offline waits for the network and syncs when it is back")
    func failureWaitsForNetwork() async {
        let activity = ActivityMonitor()
        let loadable = CountingAutosync(autosyncInterval: .seconds(60), clock: clock, activity: activity)
        let observation = loadable.observe { _ in }
        #expect(!loadable.isWaitingForNetwork)
        activity.connectivity = .offline
        loadable.setDidFailToSync(TestError())
        #expect(loadable.isWaitingForNetwork)
        activity.connectivity = .online
        #expect(!loadable.isWaitingForNetwork)
        #expect(loadable.syncs == 2)
        observation.cancel()
        activity.connectivity = .offline
        loadable.setDidFailToSync(TestError())
        #expect(!loadable.isWaitingForNetwork)  // nobody observes it
    }

    @Test("A first observer while paused syncs nothing; the catch-up syncs it")
    func firstObserverWhilePaused() async {
        let activity = ActivityMonitor(isActive: false)
        let loadable = CountingAutosync(autosyncInterval: .seconds(60), clock: clock, activity: activity)
        let observation = loadable.observe { _ in }
        #expect(loadable.syncs == 0)
        #expect(loadable.isAutosyncing)
        #expect(clock.pendingSleepCount == 0)
        activity.isActive = true
        #expect(loadable.syncs == 1)
        await clock.waitForSleepers()
        #expect(clock.requestedSleeps == [.seconds(60)])
        observation.cancel()
        #expect(!loadable.isAutosyncing)
        activity.isActive = false
        activity.isActive = true
        #expect(loadable.syncs == 1)  // unobserved: nothing to catch up
    }

    @Test("Flapping never starts a second sync while one runs")
    func flappingWhileSyncing() async {
        let activity = ActivityMonitor()
        let loadable = CountingAutosync(autosyncInterval: .seconds(10), clock: clock, activity: activity)
        await observing(loadable, { _ in }) {
            await clock.waitForSleepers()
            activity.isActive = false
            await clock.advance(by: .seconds(30))
            for _ in 0..<5 {
                activity.isActive = true
                activity.isActive = false
            }
            #expect(loadable.syncs == 1)
            #expect(loadable.loadableState == .syncing)
        }
    }
}
