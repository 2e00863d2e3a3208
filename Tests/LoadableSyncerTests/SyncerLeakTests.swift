import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// What the syncer, the waiters and the autosync loadable own, and that nothing of theirs outlives
/// the last token or task: released objects are gone (`weak` is `nil`), their timers are cancelled
/// (no pending sleep once the clock settled) and they stop observing.
@Suite("Syncers, waiters and autosync release what they do not own")
@MainActor
struct SyncerLeakTests {
    let clock = ManualClock()

    func makeSyncer(for target: TestLoadable<Int>, period: Duration? = nil) -> LoadableSyncer {
        LoadableSyncer(
            target,
            timeoutPolicy: BackoffTimeoutPolicy(period: period, min: .seconds(1), max: .seconds(8)),
            clock: clock
        )
    }

    /// Lets the clock's sleepers settle: cancelled sleeps end, armed ones start.
    func settleClock() async {
        await clock.advance(by: .zero)
    }

    // MARK: - LoadableSyncer

    @Test("The syncer holds its target weakly: a released target is gone and its retry does nothing")
    func syncerReleasesTarget() async {
        var target: TestLoadable<Int>? = TestLoadable()
        let syncer = makeSyncer(for: target!)
        target!.setDidFailToSync(nil)
        await clock.waitForSleepers()
        weak let weakTarget = target
        target = nil
        #expect(weakTarget == nil)
        #expect(syncer.loadable == nil)
        await clock.advance(by: .seconds(100))
        #expect(clock.pendingSleepCount == 0)
        #expect(clock.requestedSleeps == [.seconds(1)])
        syncer.appDidBecomeActive()
        await settleClock()
        #expect(clock.pendingSleepCount == 0)
        withExtendedLifetime(syncer) {}
    }

    @Test("The syncer of a released target reports no scheduled sync once its timer fell due")
    func syncerOfReleasedTargetSchedulesNothing() async {
        var target: TestLoadable<Int>? = TestLoadable()
        let syncer = makeSyncer(for: target!, period: .seconds(10))
        target!.setDidSyncSuccessfully()
        await clock.waitForSleepers()
        target = nil
        await clock.advance(by: .seconds(10))
        #expect(clock.pendingSleepCount == 0)
        // The timer is over even though there was nothing left to sync.
        #expect(syncer.nextSyncIn == nil)
        withExtendedLifetime(syncer) {}
    }

    @Test("A released syncer is gone at once, cancels its timer and stops observing its target")
    func releasedSyncerStops() async {
        let target = TestLoadable<Int>()
        var syncer: LoadableSyncer? = makeSyncer(for: target)
        target.setDidFailToSync(nil)
        await clock.waitForSleepers()
        #expect(target.hasObservers)
        weak let weakSyncer = syncer
        syncer = nil
        #expect(weakSyncer == nil)
        #expect(!target.hasObservers)
        await settleClock()
        #expect(clock.pendingSleepCount == 0)
        await clock.advance(by: .seconds(100))
        #expect(target.syncCount == 0)
        #expect(clock.requestedSleeps == [.seconds(1)])
    }

    @Test("A syncer with a refresh timer does not keep itself alive through the timer task")
    func refreshTimerDoesNotRetainSyncer() async {
        let target = TestLoadable<Int>()
        var syncer: LoadableSyncer? = makeSyncer(for: target, period: .seconds(60))
        target.setDidSyncSuccessfully(1)
        await clock.waitForSleepers()
        weak let weakSyncer = syncer
        syncer = nil
        #expect(weakSyncer == nil)
        await settleClock()
        #expect(clock.pendingSleepCount == 0)
        #expect(!target.hasObservers)
    }

    // MARK: - LoadableWaiter

    @Test("A waiter that never waited is released with its owner and never observed its target")
    func idleWaiterIsReleased() async {
        let target = TestLoadable<Int>()
        var waiter: LoadableWaiter? = LoadableWaiter(target, timeout: .seconds(10), clock: clock)
        weak let weakWaiter = waiter
        waiter = nil
        #expect(weakWaiter == nil)
        #expect(target.addObserverCount == 0)
    }

    /// How the waits of a waiter end.
    enum Ending: CaseIterable {
        case success, timeout, cancel
    }

    @Test(
        "A waiter whose waits all ended is released, stops observing and leaves no timer",
        arguments: Ending.allCases)
    func finishedWaiterIsReleased(ending: Ending) async {
        var target: TestLoadable<Int>? = TestLoadable()
        var waiter: LoadableWaiter? = LoadableWaiter(target!, timeout: .seconds(10), clock: clock)
        var outcomes: [String] = []
        let handle = waiter!.wait { outcomes.append(outcome($0)) }
        // Returns nothing: a task keeps its result, and the result would be the target.
        let task = Task { [waiter] in _ = try await waiter!.wait() }
        await settle { waiter!.pendingWaitCount == 2 }
        target!.setDidFailToSync(nil)  // the waiter's syncer arms a retry
        await clock.waitForSleepers(count: 2)
        #expect(target!.hasObservers)
        switch ending {
        case .success:
            target!.setDidSyncSuccessfully(1)
        case .timeout:
            await clock.advance(by: .seconds(10))
        case .cancel:
            handle.cancel()
            task.cancel()
        }
        _ = await task.result
        #expect(outcomes.count == 1)
        #expect(waiter!.pendingWaitCount == 0)
        #expect(!target!.hasObservers)
        await settleClock()
        #expect(clock.pendingSleepCount == 0)
        let syncCount = target!.syncCount
        await clock.advance(by: .seconds(100))
        #expect(target!.syncCount == syncCount)  // the retries stopped with the last wait

        weak let weakWaiter = waiter
        weak let weakTarget = target
        waiter = nil
        target = nil
        await settle { weakWaiter == nil && weakTarget == nil }
        #expect(weakWaiter == nil)
        #expect(weakTarget == nil)  // held by the waiter only
        withExtendedLifetime(handle) {}
    }

    @Test("A released waiter with a pending wait lives until that wait ends, then nothing is left")
    func releasedWaiterWithPendingWait() async {
        let target = TestLoadable<Int>()
        var waiter: LoadableWaiter? = LoadableWaiter(target, timeout: .seconds(10), clock: clock)
        var outcomes: [String] = []
        waiter!.wait { outcomes.append(outcome($0)) }
        target.setDidFailToSync(nil)
        await clock.waitForSleepers(count: 2)
        weak let weakWaiter = waiter
        waiter = nil
        #expect(weakWaiter != nil)  // the pending wait keeps it alive...
        await clock.advance(by: .seconds(10))
        #expect(outcomes == ["Timed out waiting for the loadable"])
        await settle { weakWaiter == nil }
        #expect(weakWaiter == nil)  // ...until it ends
        #expect(!target.hasObservers)
        #expect(clock.pendingSleepCount == 0)
    }

    @Test("A handle does not keep its waiter alive, and cancelling it after the waiter is gone does nothing")
    func handleDoesNotRetainWaiter() async {
        let target = TestLoadable<Int>(contents: 1)
        var waiter: LoadableWaiter? = LoadableWaiter(target, timeout: .seconds(10), clock: clock)
        let handle = waiter!.wait { _ in }
        weak let weakWaiter = waiter
        waiter = nil
        #expect(weakWaiter == nil)
        #expect(!handle.isPending)
        handle.cancel()
    }

    // MARK: - SimpleLoadableWaiter

    @Test("A discarded simple waiter lets its target go after it completes")
    func simpleWaiterReleasesTargetAfterCompletion() {
        var target: TestLoadable<Int>? = TestLoadable()
        target!.sync()
        var calls = 0
        weak let weakWaiter = SimpleLoadableWaiter.whenDoneSyncing(target!) { calls += 1 }
        weak let weakTarget = target
        #expect(weakWaiter != nil)  // kept alive by the target's observer list while pending
        target!.setDidFailToSync(nil)
        #expect(calls == 1)
        #expect(weakWaiter == nil)
        #expect(!target!.hasObservers)
        target = nil
        #expect(weakTarget == nil)
    }

    @Test(
        "A simple waiter that is kept lets its target go after it completes or is cancelled", arguments: [true, false])
    func keptSimpleWaiterReleasesTarget(cancelled: Bool) {
        var target: TestLoadable<Int>? = TestLoadable()
        target!.sync()
        var calls = 0
        let waiter = SimpleLoadableWaiter.whenDoneSyncing(target!) { calls += 1 }
        weak let weakTarget = target
        if cancelled {
            waiter.cancel()
        } else {
            target!.setDidSyncSuccessfully(1)
        }
        target = nil
        #expect(weakTarget == nil)
        #expect(calls == (cancelled ? 0 : 1))
        #expect(!waiter.isPending)
        withExtendedLifetime(waiter) {}
    }

    @Test("A discarded simple waiter keeps its syncing target alive until the sync ends, then both go away")
    func simpleWaiterGoesAwayWithCancelledTarget() {
        var target: TestLoadable<Int>? = TestLoadable()
        target!.sync()
        weak let weakWaiter = SimpleLoadableWaiter.whenDoneSyncing(target!) {}
        weak let weakTarget = target
        // The waiter keeps the target alive while pending: a cycle that only the end of the sync
        // (or cancel) breaks. Releasing our reference does not free either...
        target = nil
        #expect(weakTarget != nil)
        #expect(weakWaiter != nil)
        // ...ending the sync does.
        weakTarget?.setDidSyncSuccessfully(1)
        #expect(weakWaiter == nil)
        #expect(weakTarget == nil)
    }

    // MARK: - AutosyncLoadable

    @Test("An autosync loadable without observers has no timer and is released when dropped")
    func unobservedAutosyncIsReleased() async {
        var loadable: CountingAutosync? = CountingAutosync(autosyncInterval: .seconds(10), clock: clock)
        #expect(!loadable!.isAutosyncing)
        await settleClock()
        #expect(clock.pendingSleepCount == 0)
        weak let weakLoadable = loadable
        loadable = nil
        #expect(weakLoadable == nil)
        #expect(clock.requestedSleeps.isEmpty)
    }

    @Test("Releasing the last observation token of an autosync loadable stops its timer; then it is released")
    func autosyncStopsWhenLastTokenGoes() async {
        var loadable: CountingAutosync? = CountingAutosync(autosyncInterval: .seconds(10), clock: clock)
        var tokens = [loadable!.observe { _ in }, loadable!.observe { _ in }]
        await clock.waitForSleepers()
        tokens.removeFirst()
        #expect(loadable!.isAutosyncing)
        #expect(clock.pendingSleepCount == 1)
        tokens.removeAll()
        #expect(!loadable!.isAutosyncing)
        await settleClock()
        #expect(clock.pendingSleepCount == 0)
        await clock.advance(by: .seconds(100))
        #expect(loadable!.syncs == 1)
        weak let weakLoadable = loadable
        loadable = nil
        #expect(weakLoadable == nil)
    }

    @Test("An observed autosync loadable is released when dropped: its timer does not keep it alive")
    func observedAutosyncIsReleased() async {
        var loadable: CountingAutosync? = CountingAutosync(autosyncInterval: .seconds(10), clock: clock)
        let observation = loadable!.observe { _ in }
        await clock.waitForSleepers()
        weak let weakLoadable = loadable
        loadable = nil
        #expect(weakLoadable == nil)
        await settleClock()
        #expect(clock.pendingSleepCount == 0)
        #expect(!observation.isActive)
        await clock.advance(by: .seconds(100))
        #expect(clock.requestedSleeps == [.seconds(10)])
    }
}
