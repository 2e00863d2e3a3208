/// A one-shot timer on an ``ElapsedClock``: a main-actor task sleeps for a delay, then calls its
/// owner back.
///
/// The owner keeps the timer in a stored property, arms it with a `fire` closure and, when that
/// closure runs, asks ``fired(_:)`` whether the call is for the current arming: a timer cancelled
/// or armed again after its sleep ended may still call back with an old generation, and those calls
/// must be ignored.
///
/// ```swift
/// private var timer = ClockTimer()
///
/// func schedule(after delay: Duration) {
///     timer.arm(after: delay, on: clock) { [weak self] generation in
///         self?.timerDidFire(generation)
///     }
/// }
///
/// func timerDidFire(_ generation: Int) {
///     guard timer.fired(generation) else { return }
///     // ... the timer's work
/// }
///
/// deinit { timer.cancelTask() }
/// ```
///
/// The sleeping task holds `fire`, and so what `fire` captures, until it ends. Capture the owner
/// weakly to let it go while the timer is armed (and cancel the task in its `deinit`); capture it
/// strongly to keep it alive until the timer fires or is cancelled.
///
/// The task runs on the main actor and sleeps through ``ElapsedClock/sleep(for:)``: on a clock
/// that resumes on the caller's actor (`ManualClock`) the sleep never leaves the main actor, so a
/// test clock sees the woken timer back there.
///
/// A `Sendable` value with no isolation of its own, so that a `deinit` can call ``cancelTask()``.
package struct ClockTimer: Sendable {
    /// The sleeping task of the current arming.
    private var latest = LatestTask()

    /// Creates a timer that is not armed.
    package init() {}

    /// Whether the timer is armed: it was armed, and neither fired (see ``fired(_:)``) nor was
    /// cancelled since.
    package var isArmed: Bool { latest.isRunning }

    /// Arms the timer to call `fire` on the main actor after `delay`, replacing (and cancelling)
    /// an armed one.
    ///
    /// - Parameters:
    ///   - delay: How long to sleep, any length (a delay beyond ``ElapsedClock/longestSleep`` is
    ///     slept in chunks, see ``ElapsedClock/sleep(for:)``); `.zero` or less fires on a coming
    ///     turn of the main actor.
    ///   - clock: The clock to sleep on.
    ///   - fire: Called on the main actor once the sleep ended, with the generation of this arming;
    ///     pass it to ``fired(_:)`` before doing anything. Not called when the task was cancelled
    ///     before its sleep ended.
    package mutating func arm(
        after delay: Duration,
        on clock: ElapsedClock,
        fire: @escaping @MainActor (_ generation: Int) -> Void
    ) {
        latest.start { armed in
            Task { @MainActor in
                do {
                    try await clock.sleep(for: delay)
                } catch {
                    return
                }
                guard !Task.isCancelled else { return }
                fire(armed)
            }
        }
    }

    /// Cancels the armed timer, if any: its `fire` will not be honoured.
    package mutating func cancel() {
        latest.cancel()
    }

    /// Whether a call of `fire` with `generation` is for the current arming; if it is, the timer
    /// is no longer armed.
    ///
    /// - Parameter generation: The generation `fire` was called with.
    /// - Returns: `true` only for the current arming, and only once; `false` for an arming that was
    ///   replaced or cancelled.
    package mutating func fired(_ generation: Int) -> Bool {
        latest.finish(generation)
    }

    /// Cancels the sleeping task without changing the timer: for the owner's `deinit`, which
    /// cannot mutate its stored properties from outside its actor.
    package func cancelTask() {
        latest.cancelTask()
    }
}
