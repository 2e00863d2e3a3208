import Loadable
import LoadableTestSupport
import LoadableTesting
import Testing

/// What an observer saw at one notification, for the watchdog tests.
private struct WatchdogNote: Equatable {
    var state: LoadableState
    var isSlowSync: Bool
    var isTimedOut: Bool
    var cancels: Int

    @MainActor
    init(_ loadable: ManualLoadable) {
        state = loadable.loadableState
        isSlowSync = loadable.isSlowSync
        isTimedOut = loadable.error as? LoadableError == .timedOut
        cancels = loadable.doCancelSyncCount
    }

    init(_ state: LoadableState, slow isSlowSync: Bool = false, timedOut isTimedOut: Bool = false, cancels: Int = 0) {
        self.state = state
        self.isSlowSync = isSlowSync
        self.isTimedOut = isTimedOut
        self.cancels = cancels
    }
}

@Suite("Watchdog: syncTimeout and slowSyncAfter")
@MainActor
struct WatchdogTests {
    let clock = ManualClock()

    /// How a sync ends, for the parameterized tests.
    enum Ending: String, CaseIterable, Sendable {
        case success, failure, cancel
    }

    /// Ends `loadable`'s running sync as `ending` says; returns the state it should then be in
    /// (every sync in these tests starts from idle).
    private func end(_ loadable: ManualLoadable, _ ending: Ending) -> LoadableState {
        switch ending {
        case .success:
            loadable.setDidSyncSuccessfully(2)
            return .didSyncSuccessfully
        case .failure:
            loadable.setDidFailToSync(TestError())
            return .didFailToSync
        case .cancel:
            loadable.cancelSync()
            return .idle
        }
    }

    // MARK: - syncTimeout

    @Test("a sync running past syncTimeout is cancelled and fails with timedOut, contents kept")
    func timeoutFailsTheSync() async {
        let loadable = ManualLoadable(contents: 1, clock: clock)
        loadable.syncTimeout = .seconds(5)
        var notes: [WatchdogNote] = []
        await observing(loadable, { notes.append(WatchdogNote($0)) }) {
            loadable.sync()
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(5) - .nanoseconds(1))
            #expect(loadable.loadableState == .syncing)
            #expect(loadable.doCancelSyncCount == 0)
            await clock.advance(by: .nanoseconds(1))
            // doCancelSync ran before observers were told of the failure.
            #expect(notes == [WatchdogNote(.syncing), WatchdogNote(.didFailToSync, timedOut: true, cancels: 1)])
            #expect(loadable.error as? LoadableError == .timedOut)
            #expect(loadable.lastError as? LoadableError == .timedOut)
            #expect(loadable.consecutiveFailures == 1)
            #expect(loadable.contents == 1)
            #expect(loadable.doSyncCount == 1)
            await clock.advance(by: .seconds(100))
            #expect(notes.count == 2)
            #expect(loadable.doCancelSyncCount == 1)
            #expect(clock.pendingSleepCount == 0)
        }
    }

    @Test("a sync that ends before syncTimeout is not failed later", arguments: Ending.allCases)
    func syncEndingInTimeIsLeftAlone(ending: Ending) async {
        let loadable = ManualLoadable(clock: clock)
        loadable.syncTimeout = .seconds(5)
        var count = 0
        await observing(loadable, { _ in count += 1 }) {
            loadable.sync()
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(5) - .nanoseconds(1))
            let state = end(loadable, ending)
            #expect(count == 2)
            await clock.advance(by: .seconds(100))
            #expect(count == 2)
            #expect(loadable.loadableState == state)
            #expect(loadable.error as? LoadableError != .timedOut)
            #expect(loadable.doCancelSyncCount == (ending == .cancel ? 1 : 0))
        }
    }

    @Test("each sync gets the whole syncTimeout from its own start", arguments: [false, true])
    func timeoutFromEachStart(withStaleTimer: Bool) async {
        let loadable = ManualLoadable(contents: 1, clock: clock)
        loadable.syncTimeout = .seconds(5)
        var token: LoadableObservation?
        if withStaleTimer {
            // Keeps the one timer armed for the first sync's deadline after that sync ended.
            loadable.maxAge = .seconds(100)
            token = loadable.observe { _ in }
        }
        loadable.sync()
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(3))
        loadable.setDidSyncSuccessfully(2)
        loadable.sync()  // began at 3 s: times out at 8 s
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(2))
        #expect(loadable.loadableState == .syncing)
        await clock.advance(by: .seconds(3) - .nanoseconds(1))
        #expect(loadable.loadableState == .syncing)
        #expect(loadable.doCancelSyncCount == 0)
        await clock.advance(by: .nanoseconds(1))
        #expect(loadable.loadableState == .didFailToSync)
        #expect(loadable.error as? LoadableError == .timedOut)
        #expect(loadable.doCancelSyncCount == 1)
        #expect(loadable.contents == 2)
        withExtendedLifetime(token) {}
    }

    @Test("a sync after a timed-out one gets a fresh budget")
    func syncAfterTimeout() async {
        let loadable = ManualLoadable(clock: clock)
        loadable.syncTimeout = .seconds(5)
        loadable.sync()
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(5))
        #expect(loadable.error as? LoadableError == .timedOut)
        await clock.advance(by: .seconds(2))
        loadable.sync()
        #expect(loadable.snapshot.isRetrying)
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(5) - .nanoseconds(1))
        #expect(loadable.loadableState == .syncing)
        await clock.advance(by: .nanoseconds(1))
        #expect(loadable.error as? LoadableError == .timedOut)
        #expect(loadable.consecutiveFailures == 2)
        #expect(loadable.doCancelSyncCount == 2)
    }

    @Test("syncTimeout set while a sync runs applies from the next sync")
    func timeoutSetDuringSync() async {
        let loadable = ManualLoadable(clock: clock)
        await clock.advance(by: .seconds(3))
        loadable.sync()
        await clock.advance(by: .seconds(1))
        loadable.syncTimeout = .seconds(5)
        for _ in 0..<5 { await Task.yield() }
        await clock.advance(by: .seconds(60))
        #expect(loadable.loadableState == .syncing)
        #expect(loadable.doCancelSyncCount == 0)
        loadable.setDidSyncSuccessfully(1)
        loadable.sync()
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(5))
        #expect(loadable.error as? LoadableError == .timedOut)
    }

    @Test("slowSyncAfter set while a sync runs applies from the next sync")
    func slowSyncAfterSetDuringSync() async {
        let loadable = ManualLoadable(clock: clock)
        await clock.advance(by: .seconds(3))
        loadable.sync()
        await clock.advance(by: .seconds(1))
        var count = 0
        await observing(loadable, { _ in count += 1 }) {
            loadable.slowSyncAfter = .seconds(2)
            for _ in 0..<5 { await Task.yield() }
            await clock.advance(by: .seconds(60))
            #expect(!loadable.isSlowSync)
            #expect(count == 0)
            loadable.setDidSyncSuccessfully(1)
            loadable.sync()
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(2))
            #expect(loadable.isSlowSync)
        }
    }

    @Test("a sync begun with setSyncing() is not timed out by an earlier sync's deadline")
    func setSyncingAfterWatchedSync() async {
        let loadable = ManualLoadable(clock: clock)
        loadable.syncTimeout = .seconds(5)
        loadable.slowSyncAfter = .seconds(2)
        loadable.sync()
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(1))
        loadable.setDidSyncSuccessfully(1)
        await clock.advance(by: .seconds(100))
        loadable.setSyncing()
        for _ in 0..<5 { await Task.yield() }
        await clock.advance(by: .seconds(2) - .nanoseconds(1))
        #expect(loadable.loadableState == .syncing)
        #expect(!loadable.isSlowSync)
        await clock.advance(by: .seconds(3))
        #expect(loadable.loadableState == .syncing)
        #expect(loadable.doCancelSyncCount == 0)
        #expect(loadable.error == nil)
    }

    @Test("an AsyncLoadable that times out keeps the failure when its load's result arrives late")
    func asyncTimeoutThenLateResult() async {
        let pending = PendingLoad()
        var loadSawCancellation = false
        let loadable = AsyncLoadable(contents: 1, clock: clock) {
            let value = try await pending.load()
            loadSawCancellation = Task.isCancelled
            return value
        }
        loadable.syncTimeout = .seconds(5)
        var states: [LoadableState] = []
        await observing(loadable, { states.append($0.loadableState) }) {
            loadable.sync()
            await yield(until: { pending.pending == 1 })
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(5))
            #expect(loadable.loadableState == .didFailToSync)
            #expect(loadable.error as? LoadableError == .timedOut)
            pending.finish(.success(99))
            await yield(until: { loadSawCancellation })
            for _ in 0..<20 { await Task.yield() }
            #expect(loadable.loadableState == .didFailToSync)
            #expect(loadable.error as? LoadableError == .timedOut)
            #expect(loadable.contents == 1)
            #expect(states == [.syncing, .didFailToSync])
        }
    }

    @Test("invalidate() during a sync that then times out starts exactly one more sync")
    func invalidatedSyncTimesOut() async {
        let loadable = ManualLoadable(contents: 1, clock: clock)
        loadable.syncTimeout = .seconds(5)
        var notes: [WatchdogNote] = []
        await observing(loadable, { notes.append(WatchdogNote($0)) }) {
            loadable.sync()
            loadable.invalidate()
            loadable.invalidate()
            #expect(notes.count == 1)
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(5))
            // The failure is stored and the next sync begins in one notification.
            #expect(notes == [WatchdogNote(.syncing), WatchdogNote(.syncing, cancels: 1)])
            #expect(loadable.doSyncCount == 2)
            #expect(loadable.lastError as? LoadableError == .timedOut)
            #expect(loadable.consecutiveFailures == 1)
            #expect(loadable.isStale)
            // The extra sync has a budget of its own, and nothing follows it.
            await clock.advance(by: .seconds(5) - .nanoseconds(1))
            #expect(loadable.loadableState == .syncing)
            await clock.advance(by: .nanoseconds(1))
            #expect(notes.last == WatchdogNote(.didFailToSync, timedOut: true, cancels: 2))
            #expect(notes.count == 3)
            #expect(loadable.doSyncCount == 2)
            await clock.advance(by: .seconds(60))
            #expect(loadable.doSyncCount == 2)
            #expect(notes.count == 3)
        }
    }

    // MARK: - slowSyncAfter

    @Test(
        "a sync past slowSyncAfter is slow, with one notification and no state change, until it ends",
        arguments: Ending.allCases)
    func slowSync(ending: Ending) async {
        let loadable = ManualLoadable(clock: clock)
        loadable.slowSyncAfter = .seconds(2)
        var notes: [WatchdogNote] = []
        await observing(loadable, { notes.append(WatchdogNote($0)) }) {
            loadable.sync()
            #expect(!loadable.isSlowSync)
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(2) - .nanoseconds(1))
            #expect(!loadable.isSlowSync)
            #expect(notes.count == 1)
            await clock.advance(by: .nanoseconds(1))
            #expect(loadable.isSlowSync)
            #expect(notes == [WatchdogNote(.syncing), WatchdogNote(.syncing, slow: true)])
            await clock.advance(by: .seconds(60))
            #expect(notes.count == 2)
            #expect(loadable.loadableState == .syncing)
            #expect(loadable.doCancelSyncCount == 0)

            let state = end(loadable, ending)
            #expect(notes.count == 3)
            #expect(notes.last == WatchdogNote(state, cancels: ending == .cancel ? 1 : 0))
            #expect(!loadable.isSlowSync)

            // The next sync starts fast and becomes slow on its own schedule.
            loadable.sync()
            #expect(!loadable.isSlowSync)
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(2))
            #expect(loadable.isSlowSync)
            #expect(notes.count == 5)
        }
    }

    @Test("a sync that ends before slowSyncAfter never becomes slow")
    func fastSyncNeverSlow() async {
        let loadable = ManualLoadable(clock: clock)
        loadable.slowSyncAfter = .seconds(2)
        var count = 0
        await observing(loadable, { _ in count += 1 }) {
            loadable.sync()
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(1))
            loadable.setDidSyncSuccessfully(1)
            await clock.advance(by: .seconds(10))
            #expect(count == 2)
            #expect(!loadable.isSlowSync)
        }
    }

    @Test("a slow sync that times out is no longer slow in its failure notification")
    func slowThenTimedOut() async {
        let loadable = ManualLoadable(clock: clock)
        loadable.slowSyncAfter = .seconds(2)
        loadable.syncTimeout = .seconds(5)
        var notes: [WatchdogNote] = []
        await observing(loadable, { notes.append(WatchdogNote($0)) }) {
            loadable.sync()
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(5))
            #expect(
                notes == [
                    WatchdogNote(.syncing),
                    WatchdogNote(.syncing, slow: true),
                    WatchdogNote(.didFailToSync, timedOut: true, cancels: 1),
                ])
        }
    }

    // MARK: - Lifetime

    enum Deadline: String, CaseIterable, Sendable {
        case syncTimeout, slowSyncAfter, maxAge
    }

    @Test("an armed timer does not keep the loadable alive", arguments: Deadline.allCases)
    func timerDoesNotRetain(deadline: Deadline) async {
        var loadable: ManualLoadable? = ManualLoadable(clock: clock)
        weak let weakLoadable = loadable
        var token: LoadableObservation?
        switch deadline {
        case .syncTimeout:
            loadable?.syncTimeout = .seconds(5)
            loadable?.sync()
        case .slowSyncAfter:
            loadable?.slowSyncAfter = .seconds(5)
            loadable?.sync()
        case .maxAge:
            loadable?.maxAge = .seconds(5)
            token = loadable?.observe { _ in }
            loadable?.setContents(1)
        }
        await clock.waitForSleepers()
        #expect(clock.pendingSleepCount == 1)
        loadable = nil
        #expect(weakLoadable == nil)
        #expect(clock.pendingSleepCount == 0)  // releasing it cancelled the timer
        await clock.advance(by: .seconds(60))
        #expect(token?.isActive == (deadline == .maxAge ? false : nil))
    }

    // MARK: - Settings of centuries

    @Test("a setting of centuries means never; it does not hide the other deadlines")
    func hugeSettingsSaturate() async {
        let loadable = ManualLoadable(contents: 1, clock: clock)
        loadable.syncTimeout = .seconds(Int64.max)
        loadable.slowSyncAfter = .seconds(2)
        loadable.sync()
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(2))
        #expect(loadable.isSlowSync)
        await clock.advance(by: .seconds(3600 * 24 * 365))
        #expect(loadable.loadableState == .syncing)
        loadable.setDidSyncSuccessfully(2)

        // The first loadable's timer may still sleep on the shared clock: wait for one more.
        let sleepersBefore = clock.pendingSleepCount
        let observed = ManualLoadable(contents: 1, clock: clock)
        observed.maxAge = .seconds(Int64.max)
        observed.syncTimeout = .seconds(5)
        await observing(observed, { _ in }) {
            observed.setContents(2)
            observed.sync()
            await clock.waitForSleepers(count: sleepersBefore + 1)
            await clock.advance(by: .seconds(5))
            #expect(observed.error as? LoadableError == .timedOut)
            #expect(!observed.isStale)
        }
    }
}
