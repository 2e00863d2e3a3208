import LoadableSyncer
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

@MainActor
@Suite struct AutosyncLoadableTests {
    let clock = ManualClock()

    @Test("The first observer syncs it, then it refreshes every interval while observed")
    func refreshesWhileObserved() async {
        let loadable = CountingAutosync(autosyncInterval: .seconds(60), clock: clock)
        #expect(!loadable.isAutosyncing)
        let observation = loadable.observe { _ in }
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
        observation.cancel()
    }

    @Test("A tick while a sync is running is skipped")
    func skipsWhileSyncing() async {
        let loadable = CountingAutosync(autosyncInterval: .seconds(10), clock: clock)
        let observation = loadable.observe { _ in }
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(10))
        #expect(loadable.syncs == 1)
        #expect(loadable.loadableState == .syncing)
        observation.cancel()
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

        let third = loadable.observe { _ in }
        #expect(loadable.syncs == 1)  // synced already: nothing needed
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(10))
        #expect(loadable.syncs == 2)
        third.cancel()
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
}
