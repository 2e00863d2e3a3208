import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

// The reference models that the waiter sequences of `WaiterModelTests` run against: the target,
// the waiter's internal syncer and the waiter, written from `Docs/Syncing.md` and the types'
// documentation alone.
extension WaiterModelTests {
    /// What a `TestLoadable` is expected to hold (its documented behaviour).
    struct TargetModel: Equatable, CustomStringConvertible {
        var state = LoadableState.idle
        var isContentsAvailable = false
        var errorCode: Int?
        /// The error's `Retry-After` hint (a ``HintedModelError``), if it has one.
        var retryAfter: Duration?
        var syncCount = 0
        var syncIfNeededCount = 0

        init() {}

        @MainActor init(_ target: Target) {
            state = target.loadableState
            isContentsAvailable = target.isContentsAvailable
            errorCode =
                (target.error as? TestError)?.code ?? (target.error as? HintedModelError)?.code
                ?? (target.error as? RefusedModelError)?.code
            retryAfter = (target.error as? any RetryAfterProviding)?.retryAfter
            syncCount = target.syncCount
            syncIfNeededCount = target.syncIfNeededCount
        }

        /// `TestLoadable`'s default formula.
        var needsSync: Bool {
            switch state {
            case .idle, .didFailToSync: true
            case .syncing, .didSyncSuccessfully: !isContentsAvailable
            }
        }

        var description: String {
            "\(state), available: \(isContentsAvailable), error: \(errorCode.map(String.init) ?? "-")"
                + "\(retryAfter.map { " (retry after \($0))" } ?? ""), "
                + "sync: \(syncCount), syncIfNeeded: \(syncIfNeededCount)"
        }
    }

    /// A `LoadableSyncer` with a `BackoffTimeoutPolicy` without jitter, as `Docs/Syncing.md` and
    /// the issue 16 rules describe it: it acts on transitions only; to failed it schedules a retry
    /// after the next backoff delay (`min, min·√2, …` capped at `max`; stretched to a `Retry-After`
    /// hint, capped at `maxRetryAfter`) if the error may be retried, unless `maxRetries` retries
    /// were handed out since the last reset (then it is out of retries); to succeeded it schedules
    /// a refresh after `period` (none without one) and the backoff and the retry budget start
    /// over; to idle or syncing it cancels its timer. While paused (`isRunning` false) a failure
    /// schedules nothing and asks the policy nothing, a success records its deadline, and no timer
    /// runs. The waiter's internal syncer uses it with the defaults (running, no retry limit).
    struct SyncerModel {
        enum Purpose { case retry, refresh }

        let period: Duration?
        let min: Duration
        let max: Duration
        /// How many retries in a row the policy hands out; `nil` for no limit.
        var maxRetries: Int?
        /// The longest delay a hint may ask for.
        var maxRetryAfter = Duration.seconds(3600)
        var nextRetryDelay: Duration
        /// The retries handed out since the last reset.
        var retryCount = 0
        /// The policy answered `nil` to a failure that may be retried; cleared by a reset.
        var isOutOfRetries = false
        /// Whether the monitor lets the syncer sync (active and not offline).
        var isRunning = true
        /// Whether `shouldRetry` accepted the error at the last transition (to failed).
        var isFailureRetryable = false
        var observed: LoadableState?
        var deadline: Duration?
        var purpose: Purpose?
        /// The failure's time plus its hint (capped by `maxRetryAfter`), from the last transition
        /// to failed with a hint above zero: a catch-up never retries before it.
        var retryAfterDeadline: Duration?

        init(period: Duration?, min: Duration, max: Duration) {
            self.period = period
            self.min = min
            self.max = max
            nextRetryDelay = min
        }

        /// The backoff starts over, with a new retry budget.
        mutating func resetPolicy() {
            nextRetryDelay = min
            retryCount = 0
            isOutOfRetries = false
        }

        /// The loadable notified in `state`; returns the delay of the timer armed, if one was.
        ///
        /// `startedBySyncer` tells a sync the syncer started (a timer, a catch-up) from one someone
        /// else started: only the latter resets the policy when the retries are used up.
        mutating func notified(
            in state: LoadableState,
            retryAllowed: Bool,
            hint: Duration? = nil,
            startedBySyncer: Bool = false,
            now: Duration
        ) -> Duration? {
            guard state != observed else { return nil }
            observed = state
            isFailureRetryable = state == .didFailToSync && retryAllowed
            if state == .syncing, isOutOfRetries, !startedBySyncer { resetPolicy() }
            retryAfterDeadline = nil
            if state == .didFailToSync, let hint, hint > .zero {
                retryAfterDeadline = now + Swift.min(hint, maxRetryAfter)
            }
            return arm(for: state, retryAllowed: retryAllowed, hint: hint, now: now)
        }

        /// Arms the timer for `state` (or cancels it); returns the delay of the timer armed (`nil`
        /// while paused: the deadline is recorded but no timer runs).
        mutating func arm(
            for state: LoadableState,
            retryAllowed: Bool,
            hint: Duration? = nil,
            now: Duration
        ) -> Duration? {
            deadline = nil
            purpose = nil
            switch state {
            case .idle, .syncing:
                return nil
            case .didFailToSync:
                guard retryAllowed, isRunning else { return nil }
                if let maxRetries, retryCount >= maxRetries {
                    isOutOfRetries = true
                    return nil
                }
                retryCount += 1
                let backoff = nextRetryDelay
                nextRetryDelay = Swift.min(backoff * 2.0.squareRoot(), max)
                let delay = hint.map { Swift.min(Swift.max(backoff, $0), maxRetryAfter) } ?? backoff
                return schedule(after: delay, for: .retry, now: now)
            case .didSyncSuccessfully:
                resetPolicy()
                guard let period, period > .zero else { return nil }
                return schedule(after: period, for: .refresh, now: now)
            }
        }

        /// Records the deadline; returns the delay of the timer armed, `nil` while paused.
        mutating func schedule(after delay: Duration, for purpose: Purpose, now: Duration) -> Duration? {
            deadline = now + delay
            self.purpose = purpose
            return isRunning ? delay : nil
        }

        /// The time left until the timer falls due.
        func nextSyncIn(now: Duration) -> Duration? {
            deadline.map { Swift.max($0 - now, .zero) }
        }

        /// Whether the last transition was to a failure no retry will follow: one that may not be
        /// retried, or one after the retries were used up.
        var hasGivenUp: Bool {
            observed == .didFailToSync && (!isFailureRetryable || isOutOfRetries)
        }
    }

    /// The waiter as its documentation describes it: a wait whose condition holds ends at once;
    /// otherwise it ends when the condition holds at a notification (every pending wait, in the
    /// order they began), at its deadline (`timeout` after it began) with `timedOut` unless the
    /// condition holds then, or when cancelled. One timer serves all waits: armed for the first
    /// wait, left armed when an earlier wait is removed (it then fires early and is armed for the
    /// next deadline), cancelled when the last wait ends. While anyone waits, the target is
    /// observed and, with `syncsIfPossible`, asked to `syncIfNeeded()` when the first wait begins
    /// and kept syncing by a syncer (`syncIfNeeded`, backoff from `min(1 s, timeout)` to
    /// `min(timeout, 30 s)`, no refresh) that goes away with the last wait. When that syncer gives
    /// up (a transition to failed with an error it does not retry), every pending wait ends with
    /// `targetFailed` and the error, the timer and the syncer go, and every later wait whose
    /// condition does not hold ends so at once (no timer, no sync) until the target notifies in
    /// another state; meanwhile the waiter keeps observing the target. Without a syncer a failure
    /// changes nothing.
    struct WaiterModel {
        struct Wait {
            var isAsync: Bool
            var start: Duration
            var deadline: Duration
            var outcome: Outcome?
            var end: Duration?
            /// A `waitAfterSync()`: while it is pending, every wait also waits for the target to
            /// stop syncing.
            var afterSync = false
        }

        let configuration: WaiterConfiguration
        var target = TargetModel()
        var now = Duration.zero
        var waits: [Wait] = []
        /// Pending waits, in the order they began.
        var pending: [Int] = []
        var armedDeadline: Duration?
        var isWatching = false
        var syncer: SyncerModel?
        var requestedSleeps: [Duration] = []
        /// Waits in the order they ended.
        var endOrder: [Int] = []
        /// The description of the error the waiter's syncer gave up on, until the target notifies
        /// in another state.
        var targetFailure: String?

        init(_ configuration: WaiterConfiguration) {
            self.configuration = configuration
        }

        /// Whether a wait may end with the target: the condition holds and, while a
        /// `waitAfterSync()` is pending, the target is not syncing.
        var conditionHolds: Bool {
            if target.state == .syncing, pending.contains(where: { waits[$0].afterSync }) { return false }
            return conditionHoldsAlone
        }

        /// The waiter's condition, as `isConditionMet` says.
        var conditionHoldsAlone: Bool {
            switch configuration.condition {
            case .contentsAvailable: target.isContentsAvailable
            case .didSyncSuccessfully: target.state == .didSyncSuccessfully
            }
        }

        var pendingSleepCount: Int { (armedDeadline == nil ? 0 : 1) + (syncer?.deadline == nil ? 0 : 1) }

        /// The observers the waiter and its syncer have on the target.
        var observerCount: Int { (isWatching || targetFailure != nil ? 1 : 0) + (syncer == nil ? 0 : 1) }

        /// Whether the waiter's syncer retries the target's error (only a ``RefusedModelError`` is
        /// not retried).
        var retryAllowed: Bool { target.errorCode != 401 }

        /// The target's error as the waiter reports it.
        var errorDescription: String {
            switch target.errorCode {
            case nil: "\(LoadableError.unspecified)"
            case 401?: "\(RefusedModelError(code: 401))"
            case let code?: "\(TestError(code: code))"
            }
        }

        var nextDeadline: Duration? { [armedDeadline, syncer?.deadline].compactMap(\.self).min() }

        /// Where an advancing operation moves the clock to.
        func advanceEnd(for operation: WaiterOperation) -> Duration? {
            switch operation {
            case .advance(let duration): now + duration
            case .advanceToNextDeadline: nextDeadline ?? now + configuration.timeout
            default: nil
            }
        }

        /// Which wait `cancel(index)` cancels.
        func waitToCancel(_ index: Int) -> Int? {
            waits.isEmpty ? nil : index % waits.count
        }

        /// Applies `operation`; returns `false` if the outcome is not defined (a tie between the
        /// waiter's timer and its syncer's timer), in which case the model must be discarded.
        mutating func apply(_ operation: WaiterOperation) -> Bool {
            switch operation {
            case .waitAsync: startWait(isAsync: true)
            case .waitAfterSync: startWait(isAsync: true, afterSync: true)
            case .waitWithCallback: startWait(isAsync: false)
            case .cancel(let index):
                if let id = waitToCancel(index) { cancelWait(id) }
            case .succeed:
                target.isContentsAvailable = true
                target.errorCode = nil
                target.state = .didSyncSuccessfully
                notify()
            case .fail(let code):
                target.errorCode = code
                target.state = .didFailToSync
                notify()
            case .setSyncing:
                target.state = .syncing
                notify()
            case .setIdle:
                target.state = .idle
                notify()
            case .sync: sync()
            case .notify: notify()
            case .setContentsAvailable(let available, let notifying):
                target.isContentsAvailable = available
                if notifying { notify() }
            case .advance, .advanceToNextDeadline:
                return advance(to: advanceEnd(for: operation)!)
            }
            return true
        }

        mutating func startWait(isAsync: Bool, afterSync: Bool = false) {
            let id = waits.count
            waits.append(
                Wait(isAsync: isAsync, start: now, deadline: now + configuration.timeout, afterSync: afterSync))
            // A `waitAfterSync()` counts itself: it does not end while the target syncs.
            if conditionHolds, !(afterSync && target.state == .syncing) {
                end(id, .success)
                return
            }
            if let targetFailure {
                end(id, .targetFailed(targetFailure))
                return
            }
            pending.append(id)
            if armedDeadline.map({ waits[id].deadline < $0 }) ?? true {
                armedDeadline = waits[id].deadline
                requestedSleeps.append(configuration.timeout)
            }
            if pending.count == 1 { startWatching() }
        }

        mutating func cancelWait(_ id: Int) {
            guard let index = pending.firstIndex(of: id) else { return }
            pending.remove(at: index)
            end(id, .cancelled)
            if pending.isEmpty { stop() }
        }

        mutating func end(_ id: Int, _ outcome: Outcome) {
            waits[id].outcome = outcome
            waits[id].end = now
            endOrder.append(id)
        }

        mutating func startWatching() {
            isWatching = true
            guard configuration.syncsIfPossible else { return }
            syncIfNeeded()
            guard isWatching else { return }
            let min = Swift.min(.seconds(1), configuration.timeout)
            var syncer = SyncerModel(
                period: nil, min: min, max: Swift.max(min, Swift.min(configuration.timeout, .seconds(30))))
            if let delay = syncer.notified(in: target.state, retryAllowed: retryAllowed, now: now) {
                requestedSleeps.append(delay)
            }
            // A target that failed already may be given up at once.
            if syncer.hasGivenUp {
                giveUp()
                return
            }
            self.syncer = syncer
        }

        /// The waiter's syncer gave up: every pending wait fails with the target's error.
        mutating func giveUp() {
            targetFailure = errorDescription
            let ids = pending
            pending = []
            stop()
            for id in ids { end(id, .targetFailed(errorDescription)) }
        }

        mutating func stop() {
            armedDeadline = nil
            isWatching = false
            syncer = nil
        }

        mutating func succeedAll() {
            let ids = pending
            pending = []
            stop()
            for id in ids { end(id, .success) }
        }

        /// Observers in the order they were added: the waiter's, then its syncer's.
        mutating func notify() {
            if targetFailure != nil, target.state != .didFailToSync { targetFailure = nil }
            if isWatching, conditionHolds { succeedAll() }
            if var syncer {
                let hadGivenUp = syncer.hasGivenUp
                if let delay = syncer.notified(in: target.state, retryAllowed: retryAllowed, now: now) {
                    requestedSleeps.append(delay)
                }
                self.syncer = syncer
                if !hadGivenUp, syncer.hasGivenUp { giveUp() }
            }
        }

        mutating func sync() {
            target.syncCount += 1
            guard target.state != .syncing else { return }
            target.errorCode = nil
            target.state = .syncing
            notify()
        }

        mutating func syncIfNeeded() {
            target.syncIfNeededCount += 1
            if target.needsSync { sync() }
        }

        mutating func advance(to end: Duration) -> Bool {
            while let next = nextDeadline, next <= end {
                if armedDeadline == next, syncer?.deadline == next { return false }
                now = next
                if armedDeadline == next { fireWaiterTimer() } else { fireSyncerTimer() }
            }
            now = Swift.max(now, end)
            return true
        }

        mutating func fireWaiterTimer() {
            armedDeadline = nil
            if conditionHolds {
                succeedAll()
                return
            }
            let expired = pending.filter { waits[$0].deadline <= now }
            pending.removeAll { waits[$0].deadline <= now }
            if let next = pending.map({ waits[$0].deadline }).min() {
                armedDeadline = next
                requestedSleeps.append(next - now)
            } else if !expired.isEmpty {
                stop()
            }
            for id in expired { end(id, .timedOut) }
        }

        mutating func fireSyncerTimer() {
            syncer?.deadline = nil
            syncer?.purpose = nil
            let before = target.state
            syncIfNeeded()
            guard var syncer, target.state == before, syncer.deadline == nil else { return }
            if let delay = syncer.arm(for: target.state, retryAllowed: retryAllowed, now: now) {
                requestedSleeps.append(delay)
            }
            self.syncer = syncer
        }
    }
}
