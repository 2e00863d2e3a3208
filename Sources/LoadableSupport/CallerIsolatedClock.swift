/// A clock whose sleeps resume on the caller's actor rather than on the global executor.
///
/// `Clock.sleep(until:tolerance:)` is a plain `nonisolated async` requirement, so a call through
/// `any Clock` runs on the global executor and hops back to the caller's actor when it returns.
/// With real clocks that hop is harmless. With a test clock it hides when a woken sleeper is back
/// on the main actor, so under load a timer could fire after the test had moved time on. The
/// timers in this package sleep through this protocol when the clock adopts it (`ManualClock`
/// does): the sleep ends on the caller's actor, so the clock sees the woken timer back there.
///
/// Package-internal: only the package's own test clock adopts it.
package protocol CallerIsolatedClock: Sendable {
    /// Sleeps for `duration`, suspending and resuming on the caller's actor.
    ///
    /// - Throws: `CancellationError` if the task is cancelled.
    nonisolated(nonsending) func sleepOnCallersActor(for duration: Duration) async throws
}
