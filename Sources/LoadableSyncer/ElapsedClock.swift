/// An `any Clock<Duration>` seen as "time elapsed since this value was made", so that the state
/// machines can do arithmetic on plain `Duration`s whatever the clock's `Instant` type is.
struct ElapsedClock: Sendable {
    /// The clock this reads; handed on to helpers that need a clock of their own.
    let base: any Clock<Duration>
    private let readElapsed: @Sendable () -> Duration

    init(_ clock: any Clock<Duration>) {
        base = clock
        readElapsed = Self.elapsedReader(clock)
    }

    private static func elapsedReader<C: Clock<Duration>>(_ clock: C) -> @Sendable () -> Duration {
        let origin = clock.now
        return { origin.duration(to: clock.now) }
    }

    /// The time since this value was made.
    var elapsed: Duration { readElapsed() }

    /// Sleeps on the clock for `duration`.
    ///
    /// A clock that can resume on the caller's actor (`ManualClock`) does so; any other clock
    /// sleeps on the global executor, as `Clock.sleep` always does.
    ///
    /// - Throws: `CancellationError` if the task is cancelled.
    nonisolated(nonsending) func sleep(for duration: Duration) async throws {
        if let clock = base as? any CallerIsolatedClock {
            try await clock.sleepOnCallersActor(for: duration)
        } else {
            try await base.sleep(for: duration)
        }
    }
}
