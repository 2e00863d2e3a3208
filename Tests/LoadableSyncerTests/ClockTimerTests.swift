import Loadable
import LoadableSupport
import LoadableTesting
import Testing

/// `ClockTimer`, the one timer the syncer, the waiter and `AutosyncLoadable` share.
@MainActor
@Suite struct ClockTimerTests {
    /// The generations a timer's `fire` was called with, in order.
    @MainActor final class FireLog {
        /// The generations, in the order the calls came.
        var generations: [Int] = []
    }

    /// The clock the timers sleep on.
    let clock = ManualClock()
    /// Where the timers armed by ``arm(_:after:)`` record their firings.
    let log = FireLog()

    /// Arms `timer` to record its firings in ``log``.
    func arm(_ timer: inout ClockTimer, after delay: Duration) {
        let log = log
        timer.arm(after: delay, on: ElapsedClock(clock)) { generation in
            log.generations.append(generation)
        }
    }

    @Test("An armed timer fires once after its delay; fired(_:) accepts that generation once")
    func firesAfterDelay() async {
        var timer = ClockTimer()
        #expect(!timer.isArmed)
        arm(&timer, after: .seconds(2))
        #expect(timer.isArmed)
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(1))
        #expect(log.generations.isEmpty)
        await clock.advance(by: .seconds(1))
        #expect(log.generations.count == 1)
        let generation = log.generations[0]
        let accepted = timer.fired(generation)
        let acceptedAgain = timer.fired(generation)
        #expect(accepted)
        #expect(!acceptedAgain)
        #expect(!timer.isArmed)
        #expect(clock.requestedSleeps == [.seconds(2)])
    }

    @Test("Arming again replaces the armed timer: only the new arming fires and is accepted")
    func armingAgainReplaces() async {
        var timer = ClockTimer()
        arm(&timer, after: .seconds(1))
        await clock.waitForSleepers()
        arm(&timer, after: .seconds(5))
        await clock.waitForSleepers()
        #expect(clock.pendingSleepCount == 1)
        await clock.advance(by: .seconds(10))
        #expect(log.generations.count == 1)
        let generation = log.generations[0]
        let previousAccepted = timer.fired(generation - 1)
        let accepted = timer.fired(generation)
        #expect(!previousAccepted)
        #expect(accepted)
        #expect(clock.requestedSleeps == [.seconds(1), .seconds(5)])
    }

    @Test("cancel() ends the sleep at once, and the timer never fires")
    func cancelStops() async {
        var timer = ClockTimer()
        arm(&timer, after: .seconds(1))
        await clock.waitForSleepers()
        timer.cancel()
        #expect(!timer.isArmed)
        #expect(clock.pendingSleepCount == 0)
        await clock.advance(by: .seconds(10))
        #expect(log.generations.isEmpty)
    }

    @Test("A fire that arrives after the timer was cancelled or armed again is not accepted")
    func staleFireIsRejected() async {
        var timer = ClockTimer()
        arm(&timer, after: .seconds(1))
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(1))
        #expect(log.generations.count == 1)
        timer.cancel()  // the owner cancelled before it handled the fire
        let acceptedAfterCancel = timer.fired(log.generations[0])
        #expect(!acceptedAfterCancel)

        arm(&timer, after: .seconds(1))
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(1))
        #expect(log.generations.count == 2)
        arm(&timer, after: .seconds(1))  // armed again before the fire was handled
        let acceptedAfterRearm = timer.fired(log.generations[1])
        #expect(!acceptedAfterRearm)
        #expect(timer.isArmed)
    }

    @Test("cancelTask() ends the sleep at once without changing the timer, for a deinit")
    func cancelTaskForDeinit() async {
        var timer = ClockTimer()
        arm(&timer, after: .seconds(1))
        await clock.waitForSleepers()
        timer.cancelTask()
        #expect(clock.pendingSleepCount == 0)
        #expect(timer.isArmed)
        await clock.advance(by: .seconds(10))
        #expect(log.generations.isEmpty)
    }

    @Test("The timer's task sleeps on the main actor when the clock allows it")
    func sleepsOnMainActor() async {
        let reporting = IsolationReportingClock()
        var timer = ClockTimer()
        let log = log
        timer.arm(after: .seconds(1), on: ElapsedClock(reporting)) { generation in
            log.generations.append(generation)
        }
        await reporting.base.waitForSleepers()
        #expect(reporting.sleeps == ["main actor"])
        await reporting.base.advance(by: .seconds(1))
        #expect(log.generations.count == 1)
    }

    @Test("A delay longer than 2^31 s is slept in chunks of at most 2^31 s, and fires once it all passed")
    func longDelaysSleepInChunks() async {
        let longest = Duration.seconds(1 << 31)
        var timer = ClockTimer()
        arm(&timer, after: longest * 2 + .seconds(5))
        await clock.waitForSleepers()
        await clock.advance(by: longest * 2)
        #expect(log.generations.isEmpty)
        await clock.advance(by: .seconds(4))
        #expect(log.generations.isEmpty)
        await clock.advance(by: .seconds(1))
        #expect(log.generations.count == 1)
        #expect(clock.requestedSleeps == [longest, longest, .seconds(5)])
    }

    @Test("A delay of exactly 2^31 s is one sleep; .seconds(Int64.max) sleeps 2^31 s at a time")
    func longestSleep() async {
        let longest = Duration.seconds(1 << 31)
        var timer = ClockTimer()
        arm(&timer, after: longest)
        await clock.waitForSleepers()
        await clock.advance(by: longest)
        #expect(log.generations.count == 1)
        #expect(clock.requestedSleeps == [longest])

        arm(&timer, after: .seconds(Int64.max))
        await clock.waitForSleepers()
        await clock.advance(by: longest * 3)
        #expect(log.generations.count == 1)
        #expect(clock.requestedSleeps == [longest, longest, longest, longest, longest])
        timer.cancel()
    }
}
