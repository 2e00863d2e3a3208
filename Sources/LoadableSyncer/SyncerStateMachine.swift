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
        deadline = nil
        purpose = nil
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
        return actions
    }

    private var syncAction: Action {
        switch syncPolicy {
        case .sync: .sync
        case .syncIfNeeded: .syncIfNeeded
        }
    }

    private mutating func arm(for state: LoadableState, retryAllowed: Bool, now: Duration) -> [Action] {
        switch state {
        case .idle, .syncing:
            return cancelTimer()
        case .didFailToSync:
            guard retryAllowed, let delay = policy.nextTimeout(afterFailure: true) else { return cancelTimer() }
            return schedule(after: delay, purpose: .retry, now: now)
        case .didSyncSuccessfully:
            guard let period = policy.nextTimeout(afterFailure: false) else { return cancelTimer() }
            return schedule(after: period, purpose: .refresh, now: now)
        }
    }

    private mutating func schedule(after delay: Duration, purpose: Purpose, now: Duration) -> [Action] {
        let delay = Swift.max(delay, .zero)
        deadline = now + delay
        self.purpose = purpose
        return [.schedule(after: delay)]
    }

    private mutating func cancelTimer() -> [Action] {
        guard deadline != nil else { return [] }
        deadline = nil
        purpose = nil
        return [.cancelTimer]
    }
}
