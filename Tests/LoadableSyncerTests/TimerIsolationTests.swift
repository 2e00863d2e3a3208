import Loadable
import LoadableSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// A `ManualClock` that reports where the framework's timers sleep: through the `Clock`
/// requirement (on the global executor) or through `CallerIsolatedClock` (on the caller's actor).
final class IsolationReportingClock: Clock, CallerIsolatedClock, Sendable {
    let base = ManualClock()
    @MainActor private(set) var sleeps: [String] = []

    var now: ManualClock.Instant { base.now }
    var minimumResolution: Duration { .zero }

    func sleep(until deadline: ManualClock.Instant, tolerance: Duration?) async throws {
        await record("global executor")
        try await base.sleep(until: deadline, tolerance: tolerance)
    }

    nonisolated(nonsending) func sleepOnCallersActor(for duration: Duration) async throws {
        let isolation = #isolation
        await record((isolation as AnyObject?) === MainActor.shared ? "main actor" : "\(String(describing: isolation))")
        try await base.sleep(for: duration)
    }

    @MainActor private func record(_ place: String) { sleeps.append(place) }
}

/// On a `ManualClock`, the timers sleep on the main actor, so `advance(by:)` sees each woken timer
/// back on the main actor instead of guessing when it hopped back from the global executor.
@MainActor
@Suite struct TimerIsolationTests {
    let clock = IsolationReportingClock()

    @Test("The syncer's retry timer sleeps on the main actor")
    func syncerTimer() async {
        let token = TestLoadable<String>()
        let syncer = LoadableSyncer(
            token, timeoutPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(4)), clock: clock)
        token.sync()
        token.setDidFailToSync(nil)
        await clock.base.waitForSleepers()
        #expect(clock.sleeps == ["main actor"])
        await clock.base.advance(by: .seconds(1))
        #expect(token.syncCount == 2)
        withExtendedLifetime(syncer) {}
    }

    @Test("The waiter's timeout timer sleeps on the main actor")
    func waiterTimer() async {
        let token = TestLoadable<String>()
        let waiter = LoadableWaiter(token, timeout: .seconds(5), syncsIfPossible: false, clock: clock)
        var outcome: Result<TestLoadable<String>, any Error>?
        let handle = waiter.wait { outcome = $0 }
        await clock.base.waitForSleepers()
        #expect(clock.sleeps == ["main actor"])
        await clock.base.advance(by: .seconds(5))
        #expect(throws: LoadableWaiterError.timedOut) { try outcome?.get() }
        withExtendedLifetime(handle) {}
    }

    @Test("AutosyncLoadable's refresh timer sleeps on the main actor")
    func autosyncTimer() async {
        let loadable = CountingAutosync(autosyncInterval: .seconds(60), clock: clock)
        await observing(loadable, { _ in }) {
            loadable.setDidSyncSuccessfully(1)
            await clock.base.waitForSleepers()
            #expect(clock.sleeps == ["main actor"])
            await clock.base.advance(by: .seconds(60))
            #expect(loadable.syncs == 2)
        }
    }
}
