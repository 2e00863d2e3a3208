import LoadableSupport

/// A clock whose time moves only when a test says so.
///
/// Code under test sleeps on it like on any `Clock<Duration>`; the test moves time with
/// ``advance(by:isolation:)`` and every sleeper whose deadline falls due wakes, in deadline order.
/// Nothing waits for real time, so tests are fast and deterministic.
///
/// ```swift
/// @Test @MainActor func retriesAfterOneSecond() async {
///     let clock = ManualClock()
///     let token = TestLoadable<String>()
///     let syncer = LoadableSyncer(token, timeoutPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(8)), clock: clock)
///     token.sync()
///     token.setDidFailToSync(nil)
///     await clock.waitForSleepers()           // the retry timer is armed
///     await clock.advance(by: .seconds(1))    // ...and falls due
///     #expect(token.syncCount == 2)
///     _ = syncer
/// }
/// ```
///
/// Rules:
/// - A sleep whose deadline has passed returns at once (it is still recorded in
///   ``requestedSleeps``).
/// - A cancelled sleeper throws `CancellationError` and is forgotten.
/// - ``advance(by:isolation:)`` wakes due sleepers one deadline at a time, setting ``now`` to each
///   deadline in turn, and lets the woken work run (on the caller's actor, typically the main
///   actor) before moving on, so a sleeper that sleeps again within the advanced span wakes too.
/// - ``sleep(until:tolerance:)`` and ``sleep(for:tolerance:)`` called on the clock itself suspend
///   and resume on the caller's actor, and so do the timers of `LoadableSyncer`, `LoadableWaiter`
///   and `AutosyncLoadable` given this clock: `advance` knows when each of those has run again.
///   A sleep through `any Clock` runs on the global executor, as the protocol requires; `advance`
///   then gives the woken work a few turns on both executors.
/// - Sleepers woken at one deadline are resumed in the order they slept, but Swift passes each
///   resumed task through the global executor, so their code may run in either order.
///
/// `ManualClock` is `Sendable`: its state is behind a lock that is never held while other code
/// runs.
public final class ManualClock: Clock, @unchecked Sendable {
    /// A point in a ``ManualClock``'s time: the duration since the clock was created.
    public struct Instant: InstantProtocol, Hashable, Sendable, CustomStringConvertible {
        /// The time since the clock was created.
        public var offset: Swift.Duration

        /// Creates an instant `offset` after the clock's start.
        ///
        /// - Parameter offset: The time since the clock was created.
        public init(offset: Swift.Duration) { self.offset = offset }

        /// The instant `duration` later.
        public func advanced(by duration: Swift.Duration) -> Instant {
            Instant(offset: offset + duration)
        }

        /// The duration from this instant to `other`.
        public func duration(to other: Instant) -> Swift.Duration { other.offset - offset }

        /// Whether `lhs` is earlier than `rhs`.
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }

        /// The offset, as in `1.5 seconds`.
        public var description: String { offset.description }
    }

    private struct Sleeper {
        var id: Int
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct SleeperCountWait {
        var count: Int
        var continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var nextID = 0
        var sleepers: [Sleeper] = []
        var cancelledIDs: Set<Int> = []
        var countWaits: [SleeperCountWait] = []
        var requestedSleeps: [Swift.Duration] = []
        /// Sleepers resumed by `advance` that have not yet run again.
        var wakingIDs: Set<Int> = []
        /// Grows whenever a sleep starts, ends or is cancelled; `settle` waits until it is still.
        var activity = 0

        /// Removes and returns the count waits that the current number of sleepers satisfies.
        mutating func takeSatisfiedCountWaits() -> [CheckedContinuation<Void, Never>] {
            var satisfied: [CheckedContinuation<Void, Never>] = []
            countWaits.removeAll { wait in
                guard sleepers.count >= wait.count else { return false }
                satisfied.append(wait.continuation)
                return true
            }
            return satisfied
        }
    }

    private let state = Locked(State())

    /// Creates a clock at offset zero with no sleepers.
    public init() {}

    /// The current instant.
    public var now: Instant { state.withLock { $0.now } }

    /// Zero: a manual clock is exact.
    public var minimumResolution: Swift.Duration { .zero }

    /// How many sleeps are pending.
    public var pendingSleepCount: Int { state.withLock { $0.sleepers.count } }

    /// Every sleep requested so far, as its delay from ``now`` at the time of the request, in the
    /// order requested. Assert the whole schedule of a syncer at once with it.
    public var requestedSleeps: [Swift.Duration] { state.withLock { $0.requestedSleeps } }

    /// Suspends until ``now`` reaches `deadline`; returns at once if it already has.
    ///
    /// Called on the clock itself, the sleep runs on the caller's actor (it is
    /// `nonisolated(nonsending)`): once woken, the sleeper is back on that actor before the sleep
    /// counts as over, so ``advance(by:isolation:)`` knows when the woken code has run. A call
    /// through `any Clock` runs on the global executor instead, as the `Clock` requirement demands.
    ///
    /// - Parameters:
    ///   - deadline: When to wake.
    ///   - tolerance: Ignored: a manual clock is exact.
    /// - Throws: `CancellationError` if the sleeping task is cancelled.
    public nonisolated(nonsending) func sleep(until deadline: Instant, tolerance: Swift.Duration? = nil) async throws {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Outcome { case cancelled, due, waiting([CheckedContinuation<Void, Never>]) }
                let outcome = state.withLock { state -> Outcome in
                    state.activity += 1
                    if state.cancelledIDs.remove(id) != nil { return .cancelled }
                    state.requestedSleeps.append(state.now.duration(to: deadline))
                    if deadline <= state.now { return .due }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return .waiting(state.takeSatisfiedCountWaits())
                }
                switch outcome {
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .due: continuation.resume()
                case .waiting(let satisfied): satisfied.forEach { $0.resume() }
                }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                state.activity += 1
                if let index = state.sleepers.firstIndex(where: { $0.id == id }) {
                    return state.sleepers.remove(at: index).continuation
                }
                state.cancelledIDs.insert(id)
                return nil
            }
            continuation?.resume(throwing: CancellationError())
        }
        state.withLock { state in
            state.activity += 1
            state.wakingIDs.remove(id)
        }
    }

    /// Suspends for `duration` from ``now``, on the caller's actor like ``sleep(until:tolerance:)``.
    ///
    /// - Parameters:
    ///   - duration: How long to sleep.
    ///   - tolerance: Ignored: a manual clock is exact.
    /// - Throws: `CancellationError` if the sleeping task is cancelled.
    public nonisolated(nonsending) func sleep(
        for duration: Swift.Duration, tolerance: Swift.Duration? = nil
    ) async throws {
        try await sleep(until: now.advanced(by: duration), tolerance: tolerance)
    }

    /// Moves time forward by `duration`, waking every sleeper that falls due, in deadline order.
    ///
    /// Returns after the woken sleepers ran again and the work they hand to the caller's actor
    /// (typically the main actor) ran.
    ///
    /// - Parameters:
    ///   - duration: How far to move; must not be negative.
    ///   - isolation: The caller's actor, on which the woken work is given time to run.
    public func advance(by duration: Swift.Duration, isolation: isolated (any Actor)? = #isolation) async {
        guard duration >= .zero else {
            fatalError("ManualClock.advance(by:) needs a duration >= .zero, got \(duration)")
        }
        let target = now.advanced(by: duration)
        await advance(to: target)
    }

    /// Moves time forward to `deadline` (no-op if it has passed), waking due sleepers in order.
    ///
    /// - Parameters:
    ///   - deadline: The instant to move to.
    ///   - isolation: The caller's actor, on which the woken work is given time to run.
    public func advance(to deadline: Instant, isolation: isolated (any Actor)? = #isolation) async {
        while let due = takeSleepers(dueBy: deadline) {
            for sleeper in due { sleeper.continuation.resume() }
            await settle()
        }
        state.withLock { state in
            if state.now < deadline { state.now = deadline }
        }
        await settle()
    }

    /// Advances to each pending deadline in turn until no sleeper is left.
    ///
    /// Stops after 10,000 steps, so a sleeper that always sleeps again (a periodic timer) cannot
    /// keep it running forever.
    ///
    /// - Parameter isolation: The caller's actor, on which the woken work is given time to run.
    public func run(isolation: isolated (any Actor)? = #isolation) async {
        for _ in 0..<10_000 {
            let next = state.withLock { $0.sleepers.map(\.deadline).min() }
            guard let next else { return }
            await advance(to: next)
        }
    }

    /// Returns once at least `count` sleeps are pending: the code under test is asleep.
    ///
    /// A `count` of zero or less is met by any clock: the call returns at once, without
    /// suspending.
    ///
    /// - Parameter count: How many pending sleeps to wait for; `0` or less returns at once.
    public func waitForSleepers(count: Int = 1) async {
        guard count >= 1 else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isSatisfied = state.withLock { state -> Bool in
                if state.sleepers.count >= count { return true }
                state.countWaits.append(SleeperCountWait(count: count, continuation: continuation))
                return false
            }
            if isSatisfied { continuation.resume() }
        }
    }

    /// Removes the sleepers with the earliest deadline if it is not after `deadline`, and moves
    /// ``now`` to it. Returns `nil` when no sleeper is due.
    private func takeSleepers(dueBy deadline: Instant) -> [Sleeper]? {
        state.withLock { state in
            guard let earliest = state.sleepers.map(\.deadline).min(), earliest <= deadline else {
                return nil
            }
            if state.now < earliest { state.now = earliest }
            var due: [Sleeper] = []
            state.sleepers.removeAll { sleeper in
                guard sleeper.deadline == earliest else { return false }
                due.append(sleeper)
                return true
            }
            due.sort { $0.id < $1.id }
            state.wakingIDs.formUnion(due.map(\.id))
            return due
        }
    }

    /// Lets woken sleepers run again and hand their work to the caller's actor.
    ///
    /// Work that a woken sleeper starts may hop between the caller's actor and the global
    /// executor (a syncer's timer fires on the main actor, then sleeps again from a new task). So
    /// after the woken sleepers returned from `sleep`, this keeps giving both executors turns
    /// until several rounds in a row pass without any sleep starting, ending or being cancelled.
    private func settle(isolation: isolated (any Actor)? = #isolation) async {
        while state.withLock({ !$0.wakingIDs.isEmpty }) {
            await Task.yield()
        }
        var quietRounds = 0
        var lastActivity = state.withLock { $0.activity }
        while quietRounds < 8 {
            await Task.yield()  // a turn for the caller's actor...
            await Task.detached {}.value  // ...and one for the global executor
            let activity = state.withLock { $0.activity }
            if activity == lastActivity {
                quietRounds += 1
            } else {
                quietRounds = 0
                lastActivity = activity
            }
        }
    }

    /// Sleeps for `duration` on the caller's actor, for the package's timers.
    package nonisolated(nonsending) func sleepOnCallersActor(for duration: Swift.Duration) async throws {
        try await sleep(for: duration)
    }
}

/// The package's timers sleep on a `ManualClock` on their caller's actor (see
/// ``ManualClock/sleepOnCallersActor(for:)``).
extension ManualClock: CallerIsolatedClock {}
