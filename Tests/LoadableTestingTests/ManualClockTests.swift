import LoadableTesting
import Testing

@Suite("ManualClock")
@MainActor
struct ManualClockTests {
    /// Records the order in which sleepers woke.
    @MainActor final class WakeLog {
        var entries: [String] = []
    }

    @Test("a sleeper wakes when time reaches its deadline, not before")
    func wakesAtDeadline() async throws {
        let clock = ManualClock()
        let log = WakeLog()
        let task = Task { @MainActor in
            try await clock.sleep(for: .seconds(2))
            log.entries.append("woke at \(clock.now)")
        }
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(1))
        #expect(log.entries.isEmpty)
        #expect(clock.pendingSleepCount == 1)
        await clock.advance(by: .seconds(1))
        #expect(log.entries == ["woke at 2.0 seconds"])
        #expect(clock.pendingSleepCount == 0)
        try await task.value
    }

    @Test("due sleepers wake in deadline order, each at its own deadline")
    func deadlineOrder() async {
        let clock = ManualClock()
        let log = WakeLog()
        for seconds in [3, 1, 2] {
            Task { @MainActor in
                try await clock.sleep(for: .seconds(seconds))
                log.entries.append("\(seconds)s at \(clock.now)")
            }
        }
        await clock.waitForSleepers(count: 3)
        await clock.advance(by: .seconds(5))
        #expect(log.entries == ["1s at 1.0 seconds", "2s at 2.0 seconds", "3s at 3.0 seconds"])
        #expect(clock.now == ManualClock.Instant(offset: .seconds(5)))
    }

    @Test("a sleeper that sleeps again within the advanced span wakes again")
    func chainedSleeps() async {
        let clock = ManualClock()
        let log = WakeLog()
        Task { @MainActor in
            for _ in 0..<3 {
                try await clock.sleep(for: .seconds(1))
                log.entries.append("\(clock.now)")
            }
        }
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(3))
        #expect(log.entries == ["1.0 seconds", "2.0 seconds", "3.0 seconds"])
        #expect(clock.requestedSleeps == [.seconds(1), .seconds(1), .seconds(1)])
    }

    @Test("a sleep whose deadline has passed returns at once and is recorded")
    func pastDeadline() async throws {
        let clock = ManualClock()
        await clock.advance(by: .seconds(10))
        try await clock.sleep(until: ManualClock.Instant(offset: .seconds(5)))
        try await clock.sleep(for: .zero)
        #expect(clock.pendingSleepCount == 0)
        #expect(clock.requestedSleeps == [.seconds(-5), .zero])
    }

    @Test("a cancelled sleeper throws CancellationError and is forgotten")
    func cancellation() async {
        let clock = ManualClock()
        let task = Task { @MainActor in try await clock.sleep(for: .seconds(1)) }
        await clock.waitForSleepers()
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(clock.pendingSleepCount == 0)
        await clock.advance(by: .seconds(2))
    }

    @Test("a task cancelled before it sleeps throws at once")
    func cancelledBeforeSleeping() async {
        let clock = ManualClock()
        let task = Task { @MainActor in
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(for: .seconds(1))
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(clock.pendingSleepCount == 0)
    }

    @Test("run() advances until no sleeper is left")
    func run() async {
        let clock = ManualClock()
        let log = WakeLog()
        Task { @MainActor in
            try await clock.sleep(for: .seconds(4))
            log.entries.append("a")
            try await clock.sleep(for: .seconds(4))
            log.entries.append("b")
        }
        await clock.waitForSleepers()
        await clock.run()
        #expect(log.entries == ["a", "b"])
        #expect(clock.now == ManualClock.Instant(offset: .seconds(8)))
    }

    @Test("instants and durations compute like any clock's")
    func instants() {
        let start = ManualClock.Instant(offset: .seconds(1))
        let later = start.advanced(by: .milliseconds(500))
        #expect(start < later)
        #expect(start.duration(to: later) == .milliseconds(500))
        #expect(ManualClock().minimumResolution == .zero)
    }

    @Test("advancing by a negative duration stops with a message naming the duration")
    func negativeAdvance() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await ManualClock().advance(by: .seconds(-1))
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("advance(by:) needs a duration >= .zero"))
        }
    }

    @Test("waiting for zero or fewer sleepers returns at once", arguments: [0, -1, Int.min])
    func waitForNoSleepers(count: Int) async {
        let clock = ManualClock()
        await clock.waitForSleepers(count: count)
        #expect(clock.pendingSleepCount == 0)
        #expect(clock.requestedSleeps.isEmpty)
    }
}
