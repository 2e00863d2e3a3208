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

    /// Sleeps on the clock for `duration`.
    ///
    /// A clock that can resume on the caller's actor (`ManualClock`) does so; any other clock
    /// sleeps on the global executor, as `Clock.sleep` always does.
    ///
    /// - Parameter duration: How long to sleep.
    /// - Throws: `CancellationError` if the task is cancelled.
    package nonisolated(nonsending) func sleep(for duration: Duration) async throws {
        if let clock = base as? any CallerIsolatedClock {
            try await clock.sleepOnCallersActor(for: duration)
        } else {
            try await base.sleep(for: duration)
        }
    }
}
