/// The decisions of a ``LoadableSyncer``, as a pure value: inputs in, timer and sync actions out.
///
/// Times are `Duration`s elapsed since an origin chosen by the caller (the syncer's clock when it
/// was made), so the machine never reads a clock. Rules:
/// - It reacts to *transitions* of the loadable's state; a notification in the state seen last does
///   nothing (it neither advances the backoff nor postpones a refresh).
/// - To idle or syncing: cancel the timer (the first sync is someone else's job; a running sync will
///   tell how it went).
/// - To failed: if retrying is allowed, schedule a retry after the policy's next failure delay;
///   otherwise cancel the timer.
/// - To succeeded: schedule a refresh after the policy's period (this also resets the backoff);
///   without a period, cancel the timer (a pending retry timer too).
/// - Timer fired: sync (`sync()` or `syncIfNeeded()` by the sync policy). If that sync did not move
///   the loadable (`syncIfNeeded()` found nothing to do), the timer is armed again for the state the
///   loadable is in.
/// - App became active: reset the backoff; sync at once if the last attempt failed (and retrying is
///   allowed) or a refresh is overdue.
/// - A zero delay (retry or refresh) means "at once, once": the timer is armed with no delay. But
///   when the loadable finishes a sync that a zero-delay timer started and the policy asks for a
///   zero delay again (no non-zero delay, outside sync or app activation in between), the delay is
///   not honoured: the timer is cancelled, as for a `nil` delay, until the next transition or
///   app activation. A policy that always answers `.zero` cannot make the syncer sync on every
///   turn of the main actor.
/// - A negative delay from the policy stops the program with a message naming the policy.
struct SyncerStateMachine {
    /// What the syncer must do.
    enum Action: Hashable, CustomStringConvertible {
        /// Cancel the armed timer.
        case cancelTimer
        /// Arm the timer (replacing any armed one) to fire after the delay.
        case schedule(after: Duration)
        /// Call `sync()` on the loadable.
        case sync
        /// Call `syncIfNeeded()` on the loadable.
        case syncIfNeeded

        var description: String {
            switch self {
            case .cancelTimer: "cancelTimer"
            case .schedule(let delay): "schedule(after: \(delay))"
            case .sync: "sync"
            case .syncIfNeeded: "syncIfNeeded"
            }
        }
    }

    /// Why the timer is armed.
    enum Purpose: Hashable {
        /// A retry after a failure.
        case retry
        /// A refresh after a success.
        case refresh
    }

    private var policy: any TimeoutPolicy
    /// Whether a fired timer calls `sync()` or `syncIfNeeded()`.
    let syncPolicy: LoadableSyncer.SyncPolicy
    /// The state seen in the last transition; `nil` before the first input.
    private(set) var observedState: LoadableState?
    /// When the armed timer falls due; `nil` when no timer is armed.
    private(set) var deadline: Duration?
    /// Why the timer is armed; `nil` when no timer is armed.
    private(set) var purpose: Purpose?
    /// Set when the machine asked for a sync and has not yet been told what the loadable did.
    private var isAwaitingSyncOutcome = false
    /// Whether the armed timer was armed with a zero delay.
    private var isArmedWithZeroDelay = false
    /// Set when a zero-delay timer fired, until the next decision for a finished (or idle) state:
    /// a zero delay asked for then is not honoured.
    private var isSyncStartedByZeroDelay = false

    init(policy: any TimeoutPolicy, syncPolicy: LoadableSyncer.SyncPolicy) {
        self.policy = policy
        self.syncPolicy = syncPolicy
    }

    /// The time left until the armed timer falls due (never negative); `nil` when none is armed.
    func nextSyncIn(now: Duration) -> Duration? {
        deadline.map { Swift.max($0 - now, .zero) }
    }

    /// The loadable notified while in `state`.
    ///
    /// - Parameters:
    ///   - state: The loadable's state now.
    ///   - retryAllowed: Whether its error may be retried (asked only when `state` is failed).
    ///   - now: The current time.
    mutating func stateChanged(to state: LoadableState, retryAllowed: Bool, now: Duration) -> [Action] {
        guard state != observedState else { return [] }
        observedState = state
        isAwaitingSyncOutcome = false
        return arm(for: state, retryAllowed: retryAllowed, now: now)
    }

    /// The armed timer fired.
    mutating func timerFired(now: Duration) -> [Action] {
        guard deadline != nil else { return [] }
        isSyncStartedByZeroDelay = isArmedWithZeroDelay
        deadline = nil
        purpose = nil
        isArmedWithZeroDelay = false
        isAwaitingSyncOutcome = true
        return [syncAction]
    }

    /// The syncer carried out a sync action and the loadable is now in `state`.
    ///
    /// If the loadable moved, this is the transition; if it did not (nothing to sync), the timer is
    /// armed again for the current state so that the syncer does not stall.
    mutating func syncRequestHandled(state: LoadableState, retryAllowed: Bool, now: Duration) -> [Action] {
        guard isAwaitingSyncOutcome else { return [] }
        isAwaitingSyncOutcome = false
        if state != observedState {
            return stateChanged(to: state, retryAllowed: retryAllowed, now: now)
        }
        guard deadline == nil else { return [] }
        return arm(for: state, retryAllowed: retryAllowed, now: now)
    }

    /// The app became active: reset the backoff, and sync at once after a failure or when a refresh
    /// is overdue.
    mutating func appDidBecomeActive(retryAllowed: Bool, now: Duration) -> [Action] {
        policy.reset()
        switch observedState {
        case .didFailToSync where retryAllowed:
            break
        case .didSyncSuccessfully where purpose == .refresh && deadline.map { $0 <= now } == true:
            break
        case .idle, .syncing, .didFailToSync, .didSyncSuccessfully, nil:
            return []
        }
        var actions = cancelTimer()
        actions.append(syncAction)
        isAwaitingSyncOutcome = true
        // This sync was not started by a zero delay: its outcome may have one.
        isSyncStartedByZeroDelay = false
        return actions
    }

    private var syncAction: Action {
        switch syncPolicy {
        case .sync: .sync
        case .syncIfNeeded: .syncIfNeeded
        }
    }

    private mutating func arm(for state: LoadableState, retryAllowed: Bool, now: Duration) -> [Action] {
        // A sync is running: the decision waits for its outcome (which keeps a zero-delay mark).
        if state == .syncing { return cancelTimer() }
        // The decision after a sync that a zero delay started may not start another one at once.
        let followsZeroDelaySync = isSyncStartedByZeroDelay
        isSyncStartedByZeroDelay = false
        let delay: Duration?
        let purpose: Purpose
        switch state {
        case .idle, .syncing:
            return cancelTimer()
        case .didFailToSync:
            delay = retryAllowed ? nextTimeout(afterFailure: true) : nil
            purpose = .retry
        case .didSyncSuccessfully:
            delay = nextTimeout(afterFailure: false)
            purpose = .refresh
        }
        guard let delay, delay > .zero || !followsZeroDelaySync else { return cancelTimer() }
        return schedule(after: delay, purpose: purpose, now: now)
    }

    /// Asks the policy for the next delay; stops the program if it is negative.
    private mutating func nextTimeout(afterFailure: Bool) -> Duration? {
        let delay = policy.nextTimeout(afterFailure: afterFailure)
        if let delay {
            requireValid(
                delay >= .zero,
                "LoadableSyncer: timeoutPolicy \(type(of: policy)) returned a negative delay \(delay); "
                    + "delays must be >= .zero"
            )
        }
        return delay
    }

    private mutating func schedule(after delay: Duration, purpose: Purpose, now: Duration) -> [Action] {
        deadline = now + delay
        self.purpose = purpose
        isArmedWithZeroDelay = delay == .zero
        return [.schedule(after: delay)]
    }

    private mutating func cancelTimer() -> [Action] {
        isArmedWithZeroDelay = false
        guard deadline != nil else { return [] }
        deadline = nil
        purpose = nil
        return [.cancelTimer]
    }
}
