import Loadable
import LoadableSupport
import LoadableTestSupport
import Testing

/// Every duration up to `.seconds(Int64.max)` ("practically never") is accepted on the real clock:
/// the timer sleeps, and nothing stops the program.
///
/// `ContinuousClock` stops the program ("Not enough bits to represent the passed value") when a
/// deadline passes `Int64.max` seconds, which `now + .seconds(Int64.max)` does; a `ManualClock`
/// hides it. Each test runs in a child process, arms the timer on a `ContinuousClock`, gives the
/// timer task turns until its sleep has started, and ends cleanly. Nothing waits for real time.
@Suite("Durations of centuries never trap on the real clock")
struct LongDurationExitTests {
    @Test("a ClockTimer armed for .seconds(Int64.max) on ContinuousClock sleeps without trapping")
    func clockTimer() async {
        await #expect(processExitsWith: .success) {
            await LongDurationExitTests.armClockTimer(after: .seconds(Int64.max))
        }
    }

    @Test("a ClockTimer armed for 35,000 years on ContinuousClock sleeps without trapping")
    func clockTimerForMillennia() async {
        await #expect(processExitsWith: .success) {
            await LongDurationExitTests.armClockTimer(after: .seconds(1 << 40))
        }
    }

    @Test("maxAge, syncTimeout and slowSyncAfter of .seconds(Int64.max) on ContinuousClock arm their timer")
    func freshnessSettings() async {
        await #expect(processExitsWith: .success) {
            await LongDurationExitTests.syncWithCenturiesOfSettings()
        }
    }

    @MainActor
    static func armClockTimer(after delay: Duration) async {
        var timer = ClockTimer()
        var fired = false
        timer.arm(after: delay, on: ElapsedClock(ContinuousClock())) { _ in fired = true }
        await letTimersStartSleeping()
        #expect(timer.isArmed)
        #expect(!fired)
        timer.cancel()
    }

    @MainActor
    static func syncWithCenturiesOfSettings() async {
        let loadable = ManualLoadable(contents: 1)
        loadable.maxAge = .seconds(Int64.max)
        loadable.syncTimeout = .seconds(Int64.max)
        loadable.slowSyncAfter = .seconds(Int64.max)
        await observing(loadable, { _ in }) {
            loadable.setContents(2)
            loadable.sync()
            await letTimersStartSleeping()
            #expect(loadable.loadableState == .syncing)
            #expect(!loadable.isSlowSync)
            #expect(!loadable.isStale)
        }
    }
}

/// Gives the main actor and the global executor turns, so that a timer task armed before starts
/// its sleep (the task runs on the main actor; `ContinuousClock` enqueues the sleep on the global
/// executor).
@MainActor
private func letTimersStartSleeping() async {
    for _ in 0..<50 {
        await Task.yield()
        await Task.detached {}.value
    }
}
