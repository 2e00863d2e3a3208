import LoadableSupport

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
/// - App became active (``appDidBecomeActive(retryAllowed:needsSync:now:)``, a call of the syncer's
///   public method): reset the backoff and the retry budget; unless paused, catch up (below).
/// - Paused (the activity monitor is inactive or offline): the armed timer stops but keeps its
///   deadline (``nextSyncIn(now:)`` counts down to zero and stays there); a failure arms no retry
///   and asks the policy nothing (the backoff does not advance); a success records its refresh
///   deadline without arming a timer. A running sync is never touched.
/// - Resumed (active and not offline again): reset the backoff and the retry budget, then catch
///   up: sync at once after a failure that may be retried, or after a success whose refresh fell
///   due or whose loadable says it needs a sync (stale); otherwise arm the timer again for the time
///   left. Nothing while a sync runs.
/// - Retry delays: with a hint `h` from the error (`Retry-After`), the policy's delay `d` becomes
///   `min(max(d, h), maxRetryAfter)`; without one it is `d`. When the policy answers `nil` after a
///   failure that may be retried, the retries are used up until the next reset: a reset also comes
///   from a sync someone else starts while they are used up.
/// - The hint is a deadline: a failure at `t` with a hint `h > 0` is not retried by a catch-up
///   (resuming, app activation) before `t + min(h, maxRetryAfter)`. A catch-up before that moment
///   schedules the retry for it instead of syncing at once (the backoff still starts over). The
///   deadline is kept from every transition to failed, paused or not, until the next transition.
/// - Given up: the last transition was to failed and no retry will come from this machine (the
///   error may not be retried, or the retries are used up); see ``hasGivenUp``.
/// - A zero delay (retry or refresh) means "at once, once": the timer is armed with no delay. But
///   when the loadable finishes a sync that a zero-delay timer started and the policy asks for a
///   zero delay again (no non-zero delay, outside sync or app activation in between), the delay is
///   not honoured: the timer is cancelled, as for a `nil` delay, until the next transition or
///   app activation. A policy that always answers `.zero` cannot make the syncer sync on every
///   turn of the main actor.
/// - A negative delay from the policy stops the program with a message naming the policy.
package struct SyncerStateMachine {
    /// What the syncer must do.
    package enum Action: Hashable, CustomStringConvertible {
        /// Cancel the armed timer.
        case cancelTimer
        /// Arm the timer (replacing any armed one) to fire after the delay.
        case schedule(after: Duration)
        /// Call `sync()` on the loadable.
        case sync
        /// Call `syncIfNeeded()` on the loadable.
        case syncIfNeeded

        package var description: String {
            switch self {
            case .cancelTimer: "cancelTimer"
            case .schedule(let delay): "schedule(after: \(delay))"
            case .sync: "sync"
            case .syncIfNeeded: "syncIfNeeded"
            }
        }
    }

    /// Why the timer is armed.
    package enum Purpose: Hashable {
        /// A retry after a failure.
        case retry
        /// A refresh after a success.
        case refresh
    }

    private var policy: any TimeoutPolicy
    /// Whether a fired timer calls `sync()` or `syncIfNeeded()`.
    let syncPolicy: LoadableSyncer.SyncPolicy
    /// The state seen in the last transition; `nil` before the first input.
    package private(set) var observedState: LoadableState?
    /// When the next sync falls due; `nil` when none is scheduled. The timer runs for it unless
    /// paused.
    package private(set) var deadline: Duration?
    /// Why the next sync is scheduled; `nil` when none is.
    package private(set) var purpose: Purpose?
    /// Set when the machine asked for a sync and has not yet been told what the loadable did.
    private var isAwaitingSyncOutcome = false
    /// Whether the armed timer was armed with a zero delay.
    private var isArmedWithZeroDelay = false
    /// Set when a zero-delay timer fired, until the next decision for a finished (or idle) state:
    /// a zero delay asked for then is not honoured.
    private var isSyncStartedByZeroDelay = false
    /// Whether syncing is paused (inactive or offline): no timer runs, a failure arms nothing.
    package private(set) var isPaused: Bool
    /// Whether the network is known to be unreachable.
    package private(set) var isOffline: Bool
    /// Whether the loadable's last transition was to a failure that may be retried
    /// (``shouldRetry``); `false` after a transition to any other state.
    private var isFailureRetryable = false
    /// Set when the policy answered `nil` for a failure that may be retried; cleared by a reset.
    private(set) var isOutOfRetries = false
    /// The moment before which a catch-up may not retry the failure seen last: its time plus its
    /// hint (capped by ``maxRetryAfter``); `nil` when it had no hint, or after any other transition.
    package private(set) var retryAfterDeadline: Duration?
    /// The longest retry delay a hint may ask for.
    package var maxRetryAfter: Duration = .seconds(3600)
    /// What set the delay of the retry the last ``Action/schedule(after:)`` arms: the backoff, or
    /// the error's hint when it was longer; `nil` when that action arms a refresh, or arms the
    /// timer again for the time left after a pause (no new decision). For the inspector's
    /// `retryScheduled` event, read as the action is carried out.
    package private(set) var scheduledRetryCause: LoadableEvent.RetryCause?

    package init(
        policy: any TimeoutPolicy,
        syncPolicy: LoadableSyncer.SyncPolicy,
        isPaused: Bool = false,
        isOffline: Bool = false
    ) {
        self.policy = policy
        self.syncPolicy = syncPolicy
        self.isPaused = isPaused
        self.isOffline = isOffline
    }

    /// Whether the loadable failed with an error that may be retried, and the network is known to
    /// be unreachable: the retry waits for the network.
    var isWaitingForNetwork: Bool {
        isOffline && isFailureRetryable
    }

    /// Whether the loadable's last transition was to a failure that no retry will follow: its
    /// error may not be retried (``shouldRetry``), or the retries are used up until the next reset.
    ///
    /// A failure that may be retried while paused is not given up: the catch-up retries it.
    package var hasGivenUp: Bool {
        observedState == .didFailToSync && (!isFailureRetryable || isOutOfRetries)
    }

    /// The time left until the next sync falls due (never negative); `nil` when none is scheduled.
    package func nextSyncIn(now: Duration) -> Duration? {
        deadline.map { Swift.max($0 - now, .zero) }
    }

    /// The loadable notified while in `state`.
    ///
    /// - Parameters:
    ///   - state: The loadable's state now.
    ///   - retryAllowed: Whether its error may be retried (asked only when `state` is failed).
    ///   - retryAfter: The error's hint, if it has one (asked only when `state` is failed).
    ///   - now: The current time.
    package mutating func stateChanged(
        to state: LoadableState,
        retryAllowed: Bool,
        retryAfter: Duration? = nil,
        now: Duration
    ) -> [Action] {
        guard state != observedState else { return [] }
        observedState = state
        // A sync someone else started after the retries were used up gets a new budget.
        if state == .syncing, isOutOfRetries, !isAwaitingSyncOutcome { resetPolicy() }
        isAwaitingSyncOutcome = false
        // The failure's time plus its hint, kept whatever `arm` decides (paused, out of retries):
        // a later catch-up honours it.
        retryAfterDeadline = nil
        if state == .didFailToSync, let retryAfter, retryAfter > .zero {
            retryAfterDeadline = now + Swift.min(retryAfter, maxRetryAfter)
        }
        return arm(for: state, retryAllowed: retryAllowed, retryAfter: retryAfter, now: now)
    }

    /// The armed timer fired.
    package mutating func timerFired(now: Duration) -> [Action] {
        guard deadline != nil, !isPaused else { return [] }
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
    package mutating func syncRequestHandled(
        state: LoadableState,
        retryAllowed: Bool,
        retryAfter: Duration? = nil,
        now: Duration
    ) -> [Action] {
        guard isAwaitingSyncOutcome else { return [] }
        if state != observedState {
            return stateChanged(to: state, retryAllowed: retryAllowed, retryAfter: retryAfter, now: now)
        }
        isAwaitingSyncOutcome = false
        guard deadline == nil else { return [] }
        return arm(for: state, retryAllowed: retryAllowed, retryAfter: retryAfter, now: now)
    }

    /// The app became active (a call of ``LoadableSyncer/appDidBecomeActive()``): reset the backoff
    /// and the retry budget and, unless paused, catch up.
    ///
    /// - Parameters:
    ///   - retryAllowed: Whether the loadable's error may be retried (when it failed).
    ///   - needsSync: Whether the loadable says it needs a sync (stale contents).
    ///   - now: The current time.
    package mutating func appDidBecomeActive(retryAllowed: Bool, needsSync: Bool, now: Duration) -> [Action] {
        resetPolicy()
        guard !isPaused else { return [] }
        return catchUp(retryAllowed: retryAllowed, needsSync: needsSync, now: now) ?? []
    }

    /// The activity monitor changed.
    ///
    /// Pausing stops the timer (keeping its deadline); resuming resets the backoff and the retry
    /// budget, then catches up, or arms the timer again for the time left. A change that neither
    /// pauses nor resumes (offline while inactive, say) changes only ``isWaitingForNetwork``.
    ///
    /// - Parameters:
    ///   - paused: Whether syncing must pause now (inactive or offline).
    ///   - offline: Whether the network is known to be unreachable.
    ///   - retryAllowed: Whether the loadable's error may be retried (when it failed).
    ///   - needsSync: Whether the loadable says it needs a sync (stale contents).
    ///   - now: The current time.
    package mutating func activityChanged(
        paused: Bool,
        offline: Bool,
        retryAllowed: Bool,
        needsSync: Bool,
        now: Duration
    ) -> [Action] {
        isOffline = offline
        guard paused != isPaused else { return [] }
        isPaused = paused
        if paused {
            // The timer stops; its deadline stays (a retry that falls due meanwhile runs on return).
            return deadline == nil ? [] : [.cancelTimer]
        }
        resetPolicy()
        // A sync is not started by a zero delay here: its outcome may have one.
        isSyncStartedByZeroDelay = false
        if let actions = catchUp(retryAllowed: retryAllowed, needsSync: needsSync, now: now) {
            return actions
        }
        guard let deadline else { return [] }
        // The timer goes on for the time it had left: the retry was decided before the pause.
        scheduledRetryCause = nil
        return [.schedule(after: Swift.max(deadline - now, .zero))]
    }

    /// Syncs at once after a failure that may be retried, or a success whose refresh fell due or
    /// whose loadable needs a sync; `nil` when there is no reason to (or a sync runs).
    private mutating func catchUp(retryAllowed: Bool, needsSync: Bool, now: Duration) -> [Action]? {
        switch observedState {
        case .didFailToSync where retryAllowed:
            // Never before the server's deadline: the retry is scheduled for it.
            if let retryAfterDeadline, retryAfterDeadline > now {
                return schedule(after: retryAfterDeadline - now, purpose: .retry, cause: .retryAfter, now: now)
            }
        case .didSyncSuccessfully where needsSync || (purpose == .refresh && deadline.map { $0 <= now } == true):
            break
        case .idle, .syncing, .didFailToSync, .didSyncSuccessfully, nil:
            return nil
        }
        var actions = cancelTimer()
        actions.append(syncAction)
        isAwaitingSyncOutcome = true
        // This sync was not started by a zero delay: its outcome may have one.
        isSyncStartedByZeroDelay = false
        return actions
    }

    /// Starts the backoff over, with a new retry budget.
    private mutating func resetPolicy() {
        policy.reset()
        isOutOfRetries = false
    }

    private var syncAction: Action {
        switch syncPolicy {
        case .sync: .sync
        case .syncIfNeeded: .syncIfNeeded
        }
    }

    private mutating func arm(
        for state: LoadableState,
        retryAllowed: Bool,
        retryAfter: Duration?,
        now: Duration
    ) -> [Action] {
        isFailureRetryable = state == .didFailToSync && retryAllowed
        // A sync is running: the decision waits for its outcome (which keeps a zero-delay mark).
        if state == .syncing { return cancelTimer() }
        // The decision after a sync that a zero delay started may not start another one at once.
        let followsZeroDelaySync = isSyncStartedByZeroDelay
        isSyncStartedByZeroDelay = false
        let delay: Duration?
        let purpose: Purpose
        var cause: LoadableEvent.RetryCause?
        switch state {
        case .idle, .syncing:
            return cancelTimer()
        case .didFailToSync:
            // Paused: nothing is armed and the backoff does not advance; the catch-up retries.
            guard retryAllowed, !isPaused else { return cancelTimer() }
            guard let backoff = nextTimeout(afterFailure: true) else {
                isOutOfRetries = true
                return cancelTimer()
            }
            delay = retryAfter.map { Swift.min(Swift.max(backoff, $0), maxRetryAfter) } ?? backoff
            purpose = .retry
            // The hint set the delay only when it asked for longer than the backoff.
            cause = retryAfter.map { $0 > backoff } == true ? .retryAfter : .backoff
        case .didSyncSuccessfully:
            // A success starts the backoff over (the policy resets itself), with a new budget.
            isOutOfRetries = false
            delay = nextTimeout(afterFailure: false)
            purpose = .refresh
        }
        guard let delay, delay > .zero || !followsZeroDelaySync else { return cancelTimer() }
        return schedule(after: delay, purpose: purpose, cause: cause, now: now)
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

    /// Sets the deadline; arms the timer unless paused (then resuming arms it). `cause` is what
    /// set a retry's delay (`nil` for a refresh).
    private mutating func schedule(
        after delay: Duration, purpose: Purpose, cause: LoadableEvent.RetryCause? = nil, now: Duration
    ) -> [Action] {
        deadline = now + delay
        self.purpose = purpose
        scheduledRetryCause = cause
        isArmedWithZeroDelay = delay == .zero
        // While paused no timer runs (pausing cancelled it).
        return isPaused ? [] : [.schedule(after: delay)]
    }

    /// Clears the deadline; cancels the timer if one runs.
    private mutating func cancelTimer() -> [Action] {
        isArmedWithZeroDelay = false
        guard deadline != nil else { return [] }
        deadline = nil
        purpose = nil
        return isPaused ? [] : [.cancelTimer]
    }
}
