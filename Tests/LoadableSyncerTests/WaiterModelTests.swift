import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

/// Model-based randomized tests: random operation sequences run against a `LoadableWaiter` (or a
/// `LoadableSyncer`) on a `ManualClock` and against reference models written from
/// `Docs/Syncing.md` and the types' documentation. After every step, every wait's outcome and end
/// time, the target's state and sync counts, the pending waits, the observers and the clock's
/// whole schedule of sleeps must match; rules that need no model (a wait ends once, never times
/// out early, ...) are checked on their own too.
///
/// Time moves through tasks, so the harness waits (without sleeping) after each step until the
/// clock holds as many sleepers as the model expects and every wait the model ended reported back.
/// When a waiter's timeout and its internal syncer's retry fall due at the same instant, the order
/// in which the two timer tasks run is not defined; the model sees such ties coming and the step
/// is skipped on both sides.
@Suite("LoadableWaiter and LoadableSyncer against reference models")
@MainActor
struct WaiterModelTests {
    typealias Target = TestLoadable<Int>
    typealias Waiter = LoadableWaiter<Target>

    // MARK: - The target

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

    /// A test error with a server's `Retry-After` hint (`nil`: the server said nothing).
    struct HintedModelError: RetryAfterProviding, Equatable {
        var code: Int
        var retryAfter: Duration?
    }

    /// A test error that says a retry cannot help (a token endpoint's 401): a waiter's syncer gives
    /// up on it.
    struct RefusedModelError: RetryAfterProviding, Equatable, CustomStringConvertible {
        var code: Int
        var retryAfter: Duration? { nil }
        var isRetryable: Bool { false }
        var description: String { "refused \(code)" }
    }

    // MARK: - The syncer

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

    // MARK: - The waiter

    /// How a wait ended.
    enum Outcome: Equatable, CustomStringConvertible {
        case success, timedOut, cancelled
        /// `LoadableWaiterError.targetFailed` with an error of this description.
        case targetFailed(String)
        case unexpected(String)

        init(_ result: Result<Target, any Error>, target: Target) {
            switch result {
            case .success(let value): self = value === target ? .success : .unexpected("another target")
            case .failure(LoadableWaiterError.timedOut): self = .timedOut
            case .failure(LoadableWaiterError.targetFailed(let error)): self = .targetFailed("\(error)")
            case .failure(is CancellationError): self = .cancelled
            case .failure(let error): self = .unexpected("\(error)")
            }
        }

        var description: String {
            switch self {
            case .success: "success"
            case .timedOut: "timedOut"
            case .cancelled: "cancelled"
            case .targetFailed(let error): "targetFailed(\(error))"
            case .unexpected(let text): "unexpected(\(text))"
            }
        }
    }

    struct WaiterConfiguration: CustomStringConvertible {
        var condition: Waiter.Condition
        var timeout: Duration
        var syncsIfPossible: Bool

        var description: String {
            "condition: \(condition), timeout: \(timeout), syncsIfPossible: \(syncsIfPossible)"
        }
    }

    enum WaiterOperation: Equatable, CustomStringConvertible {
        /// `wait()` in a main-actor task.
        case waitAsync
        /// `waitAfterSync()` (what an authorization renewing a token calls) in a main-actor task.
        case waitAfterSync
        /// `wait(_:)` with a completion.
        case waitWithCallback
        /// Cancels the task or the handle of wait number `index % waits`.
        case cancel(Int)
        case succeed
        /// Fails with no error (`nil`), a `TestError` (code 1; retried), or a ``RefusedModelError``
        /// (code 401; not retried: the waiter's syncer gives up).
        case fail(Int?)
        case setSyncing
        case setIdle
        case sync
        case notify
        /// Sets `isContentsAvailable`, then notifies or not.
        case setContentsAvailable(Bool, notifying: Bool)
        case advance(Duration)
        /// Advances exactly to the next deadline of the waiter's timer or its syncer's timer.
        case advanceToNextDeadline

        var description: String {
            switch self {
            case .waitAsync: "waitAsync"
            case .waitAfterSync: "waitAfterSync"
            case .waitWithCallback: "waitWithCallback"
            case .cancel(let index): "cancel(\(index))"
            case .succeed: "succeed"
            case .fail(let code): "fail(\(code.map(String.init) ?? "nil"))"
            case .setSyncing: "setSyncing"
            case .setIdle: "setIdle"
            case .sync: "sync"
            case .notify: "notify"
            case .setContentsAvailable(let available, let notifying):
                "setContentsAvailable(\(available)\(notifying ? ", notifying" : ""))"
            case .advance(let duration): "advance(\(duration))"
            case .advanceToNextDeadline: "advanceToNextDeadline"
            }
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

    // MARK: - The real waiter

    @MainActor final class WaiterRun {
        struct End {
            var outcome: Outcome
            var time: Duration
        }

        let configuration: WaiterConfiguration
        let clock = ManualClock()
        let target = Target()
        let waiter: Waiter
        var model: WaiterModel
        var observation: LoadableObservation?
        var isAsync: [Bool] = []
        var startTimes: [Duration] = []
        var tasks: [Int: Task<Void, Never>] = [:]
        var handles: [Int: Waiter.Handle] = [:]
        var ends: [[End]] = []
        var callbackOrder: [Int] = []
        /// A counter of the moments the condition is looked at: each wait's start, each
        /// notification, each step's end.
        var moment = 0
        var startMoments: [Int] = []
        var lastMomentConditionHeld = -1
        var notifiedInStep = false
        var conditionHeldAtLastNotification = false

        init(_ configuration: WaiterConfiguration) {
            self.configuration = configuration
            waiter = LoadableWaiter(
                target,
                condition: configuration.condition,
                timeout: configuration.timeout,
                syncsIfPossible: configuration.syncsIfPossible,
                clock: clock
            )
            model = WaiterModel(configuration)
            // Added before the waiter's: sees every notification before the waiter does.
            observation = target.addObserver { [weak self] _ in self?.targetDidNotify() }
        }

        var liveObserverCount: Int { target.addObserverCount - target.removeObserverCount }

        func targetDidNotify() {
            moment += 1
            notifiedInStep = true
            // While a `waitAfterSync()` is pending, waits end only once the target is not syncing.
            let isHeldBack = target.loadableState == .syncing && model.pending.contains { model.waits[$0].afterSync }
            conditionHeldAtLastNotification = waiter.isConditionMet && !isHeldBack
            if conditionHeldAtLastNotification { lastMomentConditionHeld = moment }
        }

        func beginWait(isAsync: Bool) -> Int {
            let id = ends.count
            ends.append([])
            self.isAsync.append(isAsync)
            startTimes.append(clock.now.offset)
            moment += 1
            startMoments.append(moment)
            if waiter.isConditionMet { lastMomentConditionHeld = moment }
            return id
        }

        func record(_ id: Int, _ result: Result<Target, any Error>) {
            ends[id].append(End(outcome: Outcome(result, target: target), time: clock.now.offset))
            if !isAsync[id] { callbackOrder.append(id) }
        }

        /// Runs `operations`; returns a description of the first mismatch, or `nil`.
        func check(_ operations: [WaiterOperation]) async -> String? {
            for (step, operation) in operations.enumerated() {
                var next = model
                guard next.apply(operation) else { continue }  // a tie: the outcome is not defined
                let previous = model
                model = next
                let pendingBefore = waiter.pendingWaitCount
                let syncIfNeededBefore = target.syncIfNeededCount
                notifiedInStep = false
                await perform(operation, previous: previous)
                await settleStep()
                if let failure = mismatch() ?? ruleViolation() {
                    return "step \(step) \(operation): \(failure)"
                }
                let isWait = [.waitAsync, .waitAfterSync, .waitWithCallback].contains(operation)
                if configuration.syncsIfPossible, isWait, pendingBefore == 0, waiter.pendingWaitCount > 0,
                    target.syncIfNeededCount == syncIfNeededBefore
                {
                    return "step \(step) \(operation): the first wait did not ask the target to sync"
                }
            }
            return await drain()
        }

        func perform(_ operation: WaiterOperation, previous: WaiterModel) async {
            switch operation {
            case .waitAsync, .waitAfterSync:
                let id = beginWait(isAsync: true)
                let afterSync = operation == .waitAfterSync
                tasks[id] = Task { [weak self, waiter] in
                    let result: Result<Target, any Error>
                    do {
                        result = .success(try await afterSync ? waiter.waitAfterSync() : waiter.wait())
                    } catch {
                        result = .failure(error)
                    }
                    self?.record(id, result)
                }
                // The wait begins (or ends at once) before anything else happens.
                await settle {
                    self.waiter.pendingWaitCount == self.model.pending.count
                        && (self.model.waits[id].outcome == nil || !self.ends[id].isEmpty)
                }
            case .waitWithCallback:
                let id = beginWait(isAsync: false)
                handles[id] = waiter.wait { [weak self] result in self?.record(id, result) }
            case .cancel(let index):
                guard let id = previous.waitToCancel(index) else { return }
                if isAsync[id] { tasks[id]?.cancel() } else { handles[id]?.cancel() }
            case .succeed: target.setDidSyncSuccessfully()
            case .fail(let code):
                target.setDidFailToSync(
                    code.map { $0 == 401 ? RefusedModelError(code: $0) as any Error : TestError(code: $0) })
            case .setSyncing: target.setSyncing()
            case .setIdle: target.setIdle()
            case .sync: target.sync()
            case .notify: target.notifyDidChange()
            case .setContentsAvailable(let available, let notifying):
                target.isContentsAvailable = available
                if notifying { target.notifyDidChange() }
            case .advance, .advanceToNextDeadline:
                await clock.advance(to: ManualClock.Instant(offset: previous.advanceEnd(for: operation)!))
            }
        }

        /// Waits until timers are asleep and ended async waits reported, then gives stray work one
        /// more turn so that it shows.
        func settleStep() async {
            await settle {
                self.clock.pendingSleepCount == self.model.pendingSleepCount
                    && self.waiter.pendingWaitCount == self.model.pending.count
                    && self.model.waits.indices.allSatisfy {
                        self.model.waits[$0].outcome == nil || !self.ends[$0].isEmpty
                    }
            }
            await Task.yield()
            await Task.detached {}.value
            moment += 1
            if waiter.isConditionMet { lastMomentConditionHeld = moment }
        }

        /// The real waiter against the model.
        func mismatch() -> String? {
            if waiter.pendingWaitCount != model.pending.count {
                return "pendingWaitCount \(waiter.pendingWaitCount), model \(model.pending.count)"
            }
            for (id, expected) in model.waits.enumerated() {
                let actual = ends[id]
                let kind = isAsync[id] ? "async" : "callback"
                if actual.count > 1 { return "\(kind) wait \(id) ended \(actual.count) times: \(actual)" }
                if actual.first?.outcome != expected.outcome {
                    return "\(kind) wait \(id) ended with \(actual.first.map { "\($0.outcome)" } ?? "nothing"), "
                        + "model: \(expected.outcome.map { "\($0)" } ?? "nothing")"
                }
                if !isAsync[id], let end = actual.first, end.time != expected.end {
                    return "callback wait \(id) ended at \(end.time), model: \(expected.end.map { "\($0)" } ?? "-")"
                }
            }
            let expectedOrder = model.endOrder.filter { !model.waits[$0].isAsync }
            if callbackOrder != expectedOrder {
                return "completions called in the order \(callbackOrder), model: \(expectedOrder)"
            }
            let actualTarget = TargetModel(target)
            if actualTarget != model.target { return "target: \(actualTarget), model: \(model.target)" }
            if clock.now.offset != model.now { return "clock at \(clock.now), model: \(model.now)" }
            if clock.requestedSleeps != model.requestedSleeps {
                return "requested sleeps \(clock.requestedSleeps), model: \(model.requestedSleeps)"
            }
            if clock.pendingSleepCount != model.pendingSleepCount {
                return "pending sleeps \(clock.pendingSleepCount), model: \(model.pendingSleepCount)"
            }
            if liveObserverCount != 1 + model.observerCount {
                return "\(liveObserverCount - 1) observers from the waiter, model: \(model.observerCount)"
            }
            return nil
        }

        /// Rules that need no model.
        func ruleViolation() -> String? {
            let timeout = configuration.timeout
            for (id, actual) in ends.enumerated() {
                if actual.count > 1 { return "wait \(id) ended \(actual.count) times" }
                guard let end = actual.first else { continue }
                let lasted = end.time - startTimes[id]
                switch end.outcome {
                case .timedOut where lasted < timeout:
                    return "wait \(id) timed out after \(lasted), before its timeout \(timeout)"
                case .success where lastMomentConditionHeld < startMoments[id]:
                    return "wait \(id) succeeded but the condition never held after it began"
                case .unexpected(let text):
                    return "wait \(id) ended with \(text)"
                case .success, .timedOut, .cancelled, .targetFailed:
                    break
                }
            }
            if notifiedInStep, conditionHeldAtLastNotification, waiter.pendingWaitCount > 0 {
                return "the condition held at a notification but \(waiter.pendingWaitCount) waits are pending"
            }
            // After a failure given up, the waiter observes the target until it syncs again.
            let idleObservers = model.targetFailure == nil ? 1 : 2
            if waiter.pendingWaitCount == 0, clock.pendingSleepCount > 0 || liveObserverCount > idleObservers {
                return "nobody waits but \(clock.pendingSleepCount) sleeps and \(liveObserverCount - 1) "
                    + "observers remain"
            }
            return nil
        }

        /// Lets every wait end, then checks that nothing is left running.
        func drain() async -> String? {
            await clock.advance(by: configuration.timeout)
            await settle {
                self.waiter.pendingWaitCount == 0 && self.clock.pendingSleepCount == 0
                    && self.ends.allSatisfy { !$0.isEmpty }
            }
            if let failure = ruleViolation() { return "after the last timeout: \(failure)" }
            if let id = ends.firstIndex(where: \.isEmpty) { return "wait \(id) never ended" }
            if liveObserverCount != 1 + (model.targetFailure == nil ? 0 : 1) {
                return "\(liveObserverCount - 1) observers left after the last wait"
            }
            if clock.pendingSleepCount > 0 { return "\(clock.pendingSleepCount) timers left after the last wait" }
            return nil
        }
    }

    // MARK: - Running

    static func randomWaiterConfiguration(_ random: inout SeededRandomNumberGenerator) -> WaiterConfiguration {
        WaiterConfiguration(
            condition: Waiter.Condition.allCases.randomElement(using: &random)!,
            timeout: [.milliseconds(300), .seconds(2), .seconds(10), .seconds(45)].randomElement(using: &random)!,
            syncsIfPossible: Int.random(in: 0..<3, using: &random) > 0
        )
    }

    static func randomWaiterOperation(
        _ random: inout SeededRandomNumberGenerator,
        timeout: Duration
    ) -> WaiterOperation {
        switch Int.random(in: 0..<22, using: &random) {
        case 0..<2: .waitAsync
        case 2: Bool.random(using: &random) ? .waitAsync : .waitAfterSync
        case 3..<6: .waitWithCallback
        case 6..<8: .cancel(Int.random(in: 0..<8, using: &random))
        case 8: .succeed
        case 9, 10: .fail([nil, 1, 1, 401].randomElement(using: &random)!)
        case 11: .setSyncing
        case 12: .setIdle
        case 13: .sync
        case 14: .notify
        case 15, 16:
            .setContentsAvailable(Int.random(in: 0..<3, using: &random) == 0, notifying: Bool.random(using: &random))
        case 17..<20:
            .advance([.zero, .milliseconds(250), .seconds(1), timeout / 2, timeout].randomElement(using: &random)!)
        default: .advanceToNextDeadline
        }
    }

    static func mismatch(_ configuration: WaiterConfiguration, _ operations: [WaiterOperation]) async -> String? {
        let run = WaiterRun(configuration)
        let failure = await run.check(operations)
        if failure != nil {
            // End what is still waiting, so that no task is left suspended.
            await run.clock.advance(by: configuration.timeout)
        }
        return failure
    }

    @Test("2,000 random wait sequences match the waiter model")
    func randomWaitSequences() async {
        // Each seed makes a configuration and a sequence; the sequences shrink with their own.
        await checkRandomSequences(count: 2_000, baseSeed: 0x0057_A17E) { seed in
            var random = SeededRandomNumberGenerator(seed: seed)
            let configuration = Self.randomWaiterConfiguration(&random)
            let operations = (0..<Int.random(in: 5...15, using: &random)).map { _ in
                Self.randomWaiterOperation(&random, timeout: configuration.timeout)
            }
            return (configuration, operations)
        } mismatch: { configuration, operations in
            await Self.mismatch(configuration, operations)
        }
    }

    // MARK: - The syncer's schedule

    struct SyncerConfiguration: CustomStringConvertible {
        var period: Duration?
        var max: Duration
        var syncPolicy: LoadableSyncer.SyncPolicy
        /// The policy's `maxRetries`.
        var maxRetries: Int?
        /// The syncer's `maxRetryAfter` (set only when it is not the default, 1 hour).
        var maxRetryAfter: Duration
        /// The monitor's state when the syncer is made.
        var isActive: Bool
        var connectivity: NetworkConnectivity

        var description: String {
            "period: \(period.map { "\($0)" } ?? "nil"), min: 1 s, max: \(max), syncPolicy: \(syncPolicy), "
                + "maxRetries: \(maxRetries.map(String.init) ?? "nil"), maxRetryAfter: \(maxRetryAfter), "
                + "isActive: \(isActive), connectivity: \(connectivity)"
        }
    }

    enum SyncerOperation: Equatable, CustomStringConvertible {
        case succeed
        /// Fails with no error (`nil`), a `TestError(code: 1)` (not `RetryAfterProviding`), or a
        /// ``HintedModelError`` with the code and the hint (codes 404 and 503); code 404 is not
        /// retried.
        case fail(Int?, hint: Duration?)
        case setSyncing
        case setIdle
        case sync
        case notify
        /// Sets `isContentsAvailable` without notifying (decides what `syncIfNeeded()` does).
        case setContentsAvailable(Bool)
        case advance(Duration)
        /// Advances exactly to the scheduled sync if it lies ahead (or by 1 s otherwise).
        case advanceToNextSync
        case appDidBecomeActive
        /// Sets the monitor's `isActive`.
        case setActive(Bool)
        /// Sets the monitor's `connectivity`.
        case setConnectivity(NetworkConnectivity)

        var description: String {
            switch self {
            case .succeed: "succeed"
            case .fail(let code, let hint):
                "fail(\(code.map(String.init) ?? "nil")\(hint.map { ", hint: \($0)" } ?? ""))"
            case .setSyncing: "setSyncing"
            case .setIdle: "setIdle"
            case .sync: "sync"
            case .notify: "notify"
            case .setContentsAvailable(let available): "setContentsAvailable(\(available))"
            case .advance(let duration): "advance(\(duration))"
            case .advanceToNextSync: "advanceToNextSync"
            case .appDidBecomeActive: "appDidBecomeActive"
            case .setActive(let active): "setActive(\(active))"
            case .setConnectivity(let connectivity): "setConnectivity(\(connectivity))"
            }
        }

        /// The error the target fails with.
        var error: (any Error)? {
            guard case .fail(let code, let hint) = self, let code else { return nil }
            return code == 1 ? TestError(code: code) : HintedModelError(code: code, retryAfter: hint)
        }
    }

    /// A target, its syncer (`shouldRetry` refuses code 404) and the activity monitor it follows,
    /// written from the issue 16 rules (`syncer-rules.md`) on top of `Docs/Syncing.md`:
    /// - Nothing is scheduled while idle or syncing; repeated notifications in one state change
    ///   nothing; a timer that falls due syncs (`sync()` or `syncIfNeeded()`), and is armed again
    ///   for the current state if that synced nothing.
    /// - The syncer *runs* while the monitor is active and not offline (`unknown` counts as
    ///   online). Timers fire only while it runs. Pausing cancels the timer but keeps its deadline
    ///   (`nextSyncIn` counts down to zero); a failure while paused schedules nothing and asks the
    ///   policy nothing; a success while paused records its deadline (and resets the policy).
    /// - Resuming resets the policy (backoff at `min`, new retry budget), then, unless syncing:
    ///   syncs at once a failure that may be retried, or a success whose refresh fell due or whose
    ///   target `needsSync`; otherwise arms the timer for the time left. A failure whose error had
    ///   a hint `h > 0` is never caught up before its time plus `min(h, maxRetryAfter)` (issue 26):
    ///   the retry is scheduled for that moment instead, also when the failure came while paused.
    /// - `appDidBecomeActive()` resets the policy and, while running, does the same catch-up
    ///   (without arming for the time left).
    /// - A hint `h` makes the retry delay `min(max(backoff, h), maxRetryAfter)`. With
    ///   `maxRetries`, the failure after that many retries schedules nothing (out of retries) until
    ///   a reset: resume, `appDidBecomeActive()`, a success, or a sync someone else starts then.
    /// - `isWaitingForNetwork`: offline, failed, and the failure was retryable at its transition.
    struct ScheduleModel {
        let syncPolicy: LoadableSyncer.SyncPolicy
        var target = TargetModel()
        var syncer: SyncerModel
        var isActive: Bool
        var connectivity: NetworkConnectivity
        var now = Duration.zero
        var requestedSleeps: [Duration] = []
        /// Set while the syncer's own sync (timer, catch-up) runs.
        var isSyncerSyncing = false

        init(_ configuration: SyncerConfiguration) {
            syncPolicy = configuration.syncPolicy
            syncer = SyncerModel(period: configuration.period, min: .seconds(1), max: configuration.max)
            syncer.maxRetries = configuration.maxRetries
            syncer.maxRetryAfter = configuration.maxRetryAfter
            isActive = configuration.isActive
            connectivity = configuration.connectivity
            syncer.isRunning = isRunning
            notify()
        }

        var isRunning: Bool { isActive && connectivity != .offline }

        var retryAllowed: Bool { target.state != .didFailToSync || target.errorCode != 404 }

        /// The hint of the target's error, when it failed.
        var hint: Duration? { target.state == .didFailToSync ? target.retryAfter : nil }

        var isWaitingForNetwork: Bool {
            connectivity == .offline && syncer.observed == .didFailToSync && syncer.isFailureRetryable
        }

        /// While paused the deadline stays but no timer sleeps.
        var pendingSleepCount: Int { isRunning && syncer.deadline != nil ? 1 : 0 }

        /// What Observation sees of the syncer: its deadline and `isWaitingForNetwork`.
        var observableValues: [String] { ["\(syncer.deadline.map { "\($0)" } ?? "nil")", "\(isWaitingForNetwork)"] }

        func advanceEnd(for operation: SyncerOperation) -> Duration? {
            switch operation {
            case .advance(let duration): now + duration
            case .advanceToNextSync: syncer.deadline.flatMap { $0 > now ? $0 : nil } ?? now + .seconds(1)
            default: nil
            }
        }

        mutating func apply(_ operation: SyncerOperation) {
            switch operation {
            case .succeed:
                target.isContentsAvailable = true
                target.errorCode = nil
                target.retryAfter = nil
                target.state = .didSyncSuccessfully
                notify()
            case .fail(let code, let hint):
                target.errorCode = code
                target.retryAfter = code == nil || code == 1 ? nil : hint
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
            case .setContentsAvailable(let available): target.isContentsAvailable = available
            case .advance, .advanceToNextSync:
                let end = advanceEnd(for: operation)!
                fireTimers(until: end)
                now = Swift.max(now, end)
            case .appDidBecomeActive:
                syncer.resetPolicy()
                guard isRunning else { return }
                _ = catchUp()
            case .setActive(let active):
                setMonitor(isActive: active, connectivity: connectivity)
            case .setConnectivity(let connectivity):
                setMonitor(isActive: isActive, connectivity: connectivity)
            }
        }

        /// Timers fire only while running, in deadline order.
        mutating func fireTimers(until end: Duration) {
            while isRunning, let deadline = syncer.deadline, deadline <= end {
                now = Swift.max(now, deadline)
                syncer.deadline = nil
                syncer.purpose = nil
                syncAndRearm()
            }
        }

        /// A change of the monitor: pausing stops the timer (the deadline stays); resuming resets
        /// the policy, then catches up or arms the timer for the time left; any other change only
        /// changes `isWaitingForNetwork`.
        mutating func setMonitor(isActive: Bool, connectivity: NetworkConnectivity) {
            let wasRunning = isRunning
            self.isActive = isActive
            self.connectivity = connectivity
            syncer.isRunning = isRunning
            guard !wasRunning, isRunning else { return }
            syncer.resetPolicy()
            guard target.state != .syncing, !catchUp(), let deadline = syncer.deadline else { return }
            requestedSleeps.append(Swift.max(deadline - now, .zero))
            // A deadline that passed while paused: the timer fires at once.
            fireTimers(until: now)
        }

        /// Syncs at once after a failure that may be retried (but schedules the retry for the
        /// failure's `Retry-After` deadline when that is still ahead), or a success whose refresh
        /// fell due or whose target needs a sync; returns whether it did either.
        mutating func catchUp() -> Bool {
            switch target.state {
            case .didFailToSync where retryAllowed:
                if let hintDeadline = syncer.retryAfterDeadline, hintDeadline > now {
                    if let delay = syncer.schedule(after: hintDeadline - now, for: .retry, now: now) {
                        requestedSleeps.append(delay)
                    }
                    return true
                }
            case .didSyncSuccessfully where target.needsSync || syncer.deadline.map { $0 <= now } == true: break
            default: return false
            }
            syncer.deadline = nil
            syncer.purpose = nil
            syncAndRearm()
            return true
        }

        mutating func notify() {
            if let delay = syncer.notified(
                in: target.state,
                retryAllowed: retryAllowed,
                hint: hint,
                startedBySyncer: isSyncerSyncing,
                now: now
            ) {
                requestedSleeps.append(delay)
            }
        }

        mutating func sync() {
            target.syncCount += 1
            guard target.state != .syncing else { return }
            target.errorCode = nil
            target.retryAfter = nil
            target.state = .syncing
            notify()
        }

        /// The syncer's sync; if it moved nothing, the timer is armed again for the current state.
        mutating func syncAndRearm() {
            let before = target.state
            isSyncerSyncing = true
            switch syncPolicy {
            case .sync:
                sync()
            case .syncIfNeeded:
                target.syncIfNeededCount += 1
                if target.needsSync { sync() }
            }
            isSyncerSyncing = false
            guard target.state == before, syncer.deadline == nil else { return }
            if let delay = syncer.arm(for: target.state, retryAllowed: retryAllowed, hint: hint, now: now) {
                requestedSleeps.append(delay)
            }
        }
    }

    /// Whether Observation told of a change, set by a tracked `onChange`.
    @MainActor final class ObservationFlag {
        var fired = false

        func track(_ syncer: LoadableSyncer) {
            withObservationTracking {
                _ = syncer.nextSyncIn
                _ = syncer.isWaitingForNetwork
            } onChange: { [self] in
                MainActor.assumeIsolated { fired = true }
            }
        }
    }

    static func scheduleMismatch(
        _ configuration: SyncerConfiguration,
        _ operations: [SyncerOperation]
    ) async -> String? {
        let clock = ManualClock()
        let target = Target()
        let monitor = ActivityMonitor(isActive: configuration.isActive, connectivity: configuration.connectivity)
        let syncer = LoadableSyncer(
            target,
            syncPolicy: configuration.syncPolicy,
            timeoutPolicy: BackoffTimeoutPolicy(
                period: configuration.period,
                min: .seconds(1),
                max: configuration.max,
                maxRetries: configuration.maxRetries
            ),
            clock: clock,
            activity: monitor
        )
        syncer.shouldRetry = { error in
            (error as? TestError)?.code != 404 && (error as? HintedModelError)?.code != 404
        }
        if configuration.maxRetryAfter != .seconds(3600) { syncer.maxRetryAfter = configuration.maxRetryAfter }
        var model = ScheduleModel(configuration)
        for (step, operation) in operations.enumerated() {
            let end = model.advanceEnd(for: operation)
            let observedBefore = model.observableValues
            let observation = ObservationFlag()
            observation.track(syncer)
            model.apply(operation)
            switch operation {
            case .succeed: target.setDidSyncSuccessfully()
            case .fail: target.setDidFailToSync(operation.error)
            case .setSyncing: target.setSyncing()
            case .setIdle: target.setIdle()
            case .sync: target.sync()
            case .notify: target.notifyDidChange()
            case .setContentsAvailable(let available): target.isContentsAvailable = available
            case .advance, .advanceToNextSync: await clock.advance(to: ManualClock.Instant(offset: end!))
            case .appDidBecomeActive: syncer.appDidBecomeActive()
            case .setActive(let active): monitor.isActive = active
            case .setConnectivity(let connectivity): monitor.connectivity = connectivity
            }
            let expectedSleeps = model.pendingSleepCount
            let modelNextSyncIn = model.syncer.nextSyncIn(now: model.now)
            // A timer armed with no time left (a deadline that passed while paused) fires without
            // the clock moving: wait for it too.
            await settle {
                clock.pendingSleepCount == expectedSleeps && clock.requestedSleeps == model.requestedSleeps
                    && syncer.nextSyncIn == modelNextSyncIn && TargetModel(target) == model.target
            }
            await Task.yield()
            await Task.detached {}.value
            let expectsChange = model.observableValues != observedBefore
            let failure: String? =
                if clock.requestedSleeps != model.requestedSleeps {
                    "requested sleeps \(clock.requestedSleeps), model: \(model.requestedSleeps)"
                } else if syncer.nextSyncIn != modelNextSyncIn {
                    "nextSyncIn \(syncer.nextSyncIn.map { "\($0)" } ?? "nil"), "
                        + "model: \(modelNextSyncIn.map { "\($0)" } ?? "nil")"
                } else if syncer.isWaitingForNetwork != model.isWaitingForNetwork {
                    "isWaitingForNetwork \(syncer.isWaitingForNetwork), model: \(model.isWaitingForNetwork)"
                } else if TargetModel(target) != model.target {
                    "target: \(TargetModel(target)), model: \(model.target)"
                } else if clock.pendingSleepCount != expectedSleeps {
                    "pending sleeps \(clock.pendingSleepCount), model: \(expectedSleeps)"
                } else if clock.now.offset != model.now {
                    "clock at \(clock.now), model: \(model.now)"
                } else if target.loadableState == .idle || target.loadableState == .syncing,
                    syncer.nextSyncIn != nil
                {
                    "a sync is scheduled while \(target.loadableState)"
                } else if observation.fired != expectsChange {
                    "Observation \(observation.fired ? "told of a change" : "was not told"), model: "
                        + "\(observedBefore) -> \(model.observableValues)"
                } else {
                    nil
                }
            if let failure { return "step \(step) \(operation): \(failure)" }
        }
        withExtendedLifetime(syncer) {}
        return nil
    }

    static func randomSyncerConfiguration(_ random: inout SeededRandomNumberGenerator) -> SyncerConfiguration {
        let period: Duration? = [nil, .seconds(5), .seconds(30)].randomElement(using: &random)!
        let max: Duration = [.seconds(4), .seconds(15)].randomElement(using: &random)!
        let syncPolicy = LoadableSyncer.SyncPolicy.allCases.randomElement(using: &random)!
        let maxRetries: Int? = [nil, 0, 2, 3].randomElement(using: &random)!
        let maxRetryAfter: Duration = Bool.random(using: &random) ? .seconds(3600) : .seconds(10)
        // Usually active and online; sometimes paused (or online but not known to be) from the start.
        let (isActive, connectivity): (Bool, NetworkConnectivity) =
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<6: (true, .online)
            case 6: (true, .unknown)
            case 7: (false, .online)
            case 8: (true, .offline)
            default: (false, .offline)
            }
        return SyncerConfiguration(
            period: period,
            max: max,
            syncPolicy: syncPolicy,
            maxRetries: maxRetries,
            maxRetryAfter: maxRetryAfter,
            isActive: isActive,
            connectivity: connectivity
        )
    }

    static func randomSyncerFailure(_ random: inout SeededRandomNumberGenerator) -> SyncerOperation {
        switch [nil, 1, 404, 503].randomElement(using: &random)! {
        case let code? where code != 1:
            .fail(
                code,
                hint: [nil, .milliseconds(500), .seconds(3), .seconds(20), .seconds(100_000)]
                    .randomElement(using: &random)!
            )
        case let code: .fail(code, hint: nil)
        }
    }

    /// One operation; or a failure and an advance to its retry (so that retry budgets get used
    /// up); or a pause (inactive or offline), a few operations, and the change back.
    static func randomSyncerOperation(
        _ random: inout SeededRandomNumberGenerator,
        pausing: Bool = true
    ) -> [SyncerOperation] {
        switch Int.random(in: 0..<(pausing ? 24 : 21), using: &random) {
        case 0, 1: [.succeed]
        case 2..<6: [randomSyncerFailure(&random)]
        case 6: [.setSyncing]
        case 7: [.setIdle]
        case 8: [.sync]
        case 9: [.notify]
        case 10: [.setContentsAvailable(Bool.random(using: &random))]
        case 11, 12:
            [
                .advance(
                    [.milliseconds(500), .seconds(1), .seconds(2), .seconds(5), .seconds(30)]
                        .randomElement(using: &random)!
                )
            ]
        case 13..<16: [.advanceToNextSync]
        case 16: [.appDidBecomeActive]
        case 17, 18: [randomSyncerFailure(&random), .advanceToNextSync]
        case 19: [.setActive(Int.random(in: 0..<3, using: &random) > 0)]
        case 20: [.setConnectivity(NetworkConnectivity.allCases.randomElement(using: &random)!)]
        case 21, 22:
            randomPause(&random)
        default:
            // A server's `Retry-After`, then a trip to the background or a network flap before
            // (or after) its deadline.
            [
                .fail(503, hint: [.seconds(3), .seconds(20)].randomElement(using: &random)!),
                .advance([.seconds(1), .seconds(5)].randomElement(using: &random)!),
            ] + randomPause(&random)
        }
    }

    /// A pause, one to four operations (no pauses among them), and the change back.
    static func randomPause(_ random: inout SeededRandomNumberGenerator) -> [SyncerOperation] {
        let (pause, resume): (SyncerOperation, SyncerOperation) =
            if Bool.random(using: &random) {
                (.setActive(false), .setActive(true))
            } else {
                (.setConnectivity(.offline), .setConnectivity(Bool.random(using: &random) ? .online : .unknown))
            }
        var operations = [pause]
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            operations += randomSyncerOperation(&random, pausing: false)
        }
        return operations + [resume]
    }

    @Test("1,000 random transition sequences follow the syncer's schedule model")
    func randomSyncerSequences() async {
        // Each seed makes a configuration and a sequence; the sequences shrink with their own.
        await checkRandomSequences(count: 1_000, baseSeed: 0x5C4E_D01E) { seed in
            var random = SeededRandomNumberGenerator(seed: seed)
            let configuration = Self.randomSyncerConfiguration(&random)
            let count = Int.random(in: 5...25, using: &random)
            var operations: [SyncerOperation] = []
            while operations.count < count { operations += Self.randomSyncerOperation(&random) }
            return (configuration, operations)
        } mismatch: { configuration, operations in
            await Self.scheduleMismatch(configuration, operations)
        }
    }
}
