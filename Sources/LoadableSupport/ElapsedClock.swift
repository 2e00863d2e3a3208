/// An `any Clock<Duration>` seen as "time elapsed since this value was made", so that the state
/// machines can do arithmetic on plain `Duration`s whatever the clock's `Instant` type is.
///
/// Package-internal: the timers of the package (``ClockTimer`` and its owners) read and sleep on
/// their injected clock through it.
package struct ElapsedClock: Sendable {
    /// The clock this reads; handed on to helpers that need a clock of their own.
    package let base: any Clock<Duration>
    private let readElapsed: @Sendable () -> Duration

    /// Wraps `clock`; ``elapsed`` counts from now.
    ///
    /// - Parameter clock: The clock to read and sleep on.
    package init(_ clock: any Clock<Duration>) {
        base = clock
        readElapsed = Self.elapsedReader(clock)
    }

    private static func elapsedReader<C: Clock<Duration>>(_ clock: C) -> @Sendable () -> Duration {
        let origin = clock.now
        return { origin.duration(to: clock.now) }
    }

    /// The time since this value was made.
    package var elapsed: Duration { readElapsed() }

    /// The longest single sleep asked of the clock: 2^31 seconds, about 68 years.
    ///
    /// Every public duration of the package accepts any value up to `.seconds(Int64.max)`
    /// ("practically never"), but a clock cannot sleep that long: `ContinuousClock` stops the
    /// program when `now + duration` passes `Int64.max` seconds, and a clock that counts
    /// nanoseconds in 64 bits (as the dispatch deadlines under the real clocks do) overflows after
    /// 292 years. 68 years is far beyond any real wait, and from any origin within two centuries
    /// the deadline still fits such a clock. It is the same bound as `RetryAfter.largestDelay`.
    package static let longestSleep: Duration = .seconds(1 << 31)

    /// Sleeps on the clock for `duration`, whatever its length.
    ///
    /// A duration longer than ``longestSleep`` is slept in chunks of at most ``longestSleep``,
    /// until the whole duration has passed on the clock: a timer set for "practically never"
    /// sleeps, it never stops the program, and it still never fires early. A clock that can
    /// resume on the caller's actor (`ManualClock`) does so; any other clock sleeps on the global
    /// executor, as `Clock.sleep` always does.
    ///
    /// - Parameter duration: How long to sleep; `.zero` or less returns at once.
    /// - Throws: `CancellationError` if the task is cancelled.
    package nonisolated(nonsending) func sleep(for duration: Duration) async throws {
        var remaining = duration
        while remaining > Self.longestSleep {
            let start = elapsed
            try await sleepOnce(for: Self.longestSleep)
            // A chunk counts at least its length, so that a clock whose time does not move on
            // while it sleeps still ends the sleep.
            remaining -= Swift.max(elapsed - start, Self.longestSleep)
        }
        try await sleepOnce(for: remaining)
    }

    /// One sleep of at most ``longestSleep``.
    private nonisolated(nonsending) func sleepOnce(for duration: Duration) async throws {
        if let clock = base as? any CallerIsolatedClock {
            try await clock.sleepOnCallersActor(for: duration)
        } else {
            try await base.sleep(for: duration)
        }
    }
}
