import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
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
        var syncCount = 0
        var syncIfNeededCount = 0

        init() {}

        @MainActor init(_ target: Target) {
            state = target.loadableState
            isContentsAvailable = target.isContentsAvailable
            errorCode = (target.error as? TestError)?.code
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
            "\(state), available: \(isContentsAvailable), error: \(errorCode.map(String.init) ?? "-"), "
                + "sync: \(syncCount), syncIfNeeded: \(syncIfNeededCount)"
        }
    }

    // MARK: - The syncer

    /// A `LoadableSyncer` with a `BackoffTimeoutPolicy` without jitter, as `Docs/Syncing.md`
    /// describes it: it acts on transitions only; to failed it schedules a retry after the next
    /// backoff delay (`min, min·√2, …` capped at `max`) if the error may be retried; to succeeded
    /// it schedules a refresh after `period` (none without one) and the backoff starts over; to
    /// idle or syncing it cancels its timer.
    struct SyncerModel {
        enum Purpose { case retry, refresh }

        let period: Duration?
        let min: Duration
        let max: Duration
        var nextRetryDelay: Duration
        var observed: LoadableState?
        var deadline: Duration?
        var purpose: Purpose?

        init(period: Duration?, min: Duration, max: Duration) {
            self.period = period
            self.min = min
            self.max = max
            nextRetryDelay = min
        }

        /// The loadable notified in `state`; returns the delay of the timer armed, if one was.
        mutating func notified(in state: LoadableState, retryAllowed: Bool, now: Duration) -> Duration? {
            guard state != observed else { return nil }
            observed = state
            return arm(for: state, retryAllowed: retryAllowed, now: now)
        }

        /// Arms the timer for `state` (or cancels it); returns the delay of the timer armed.
        mutating func arm(for state: LoadableState, retryAllowed: Bool, now: Duration) -> Duration? {
            deadline = nil
            purpose = nil
            switch state {
            case .idle, .syncing:
                return nil
            case .didFailToSync:
                guard retryAllowed else { return nil }
                let delay = nextRetryDelay
                nextRetryDelay = Swift.min(delay * 2.0.squareRoot(), max)
                deadline = now + delay
                purpose = .retry
                return delay
            case .didSyncSuccessfully:
                nextRetryDelay = min
                guard let period, period > .zero else { return nil }
                deadline = now + period
                purpose = .refresh
                return period
            }
        }

        /// The time left until the timer falls due.
        func nextSyncIn(now: Duration) -> Duration? {
            deadline.map { Swift.max($0 - now, .zero) }
        }
    }

    // MARK: - The waiter

    /// How a wait ended.
    enum Outcome: Equatable, CustomStringConvertible {
        case success, timedOut, cancelled
        case unexpected(String)

        init(_ result: Result<Target, any Error>, target: Target) {
            switch result {
            case .success(let value): self = value === target ? .success : .unexpected("another target")
            case .failure(LoadableWaiterError.timedOut): self = .timedOut
            case .failure(is CancellationError): self = .cancelled
            case .failure(let error): self = .unexpected("\(error)")
            }
        }

        var description: String {
            switch self {
            case .success: "success"
            case .timedOut: "timedOut"
            case .cancelled: "cancelled"
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
        /// `wait(_:)` with a completion.
        case waitWithCallback
        /// Cancels the task or the handle of wait number `index % waits`.
        case cancel(Int)
        case succeed
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
    /// `min(timeout, 30 s)`, no refresh) that goes away with the last wait.
    struct WaiterModel {
        struct Wait {
            var isAsync: Bool
            var start: Duration
            var deadline: Duration
            var outcome: Outcome?
            var end: Duration?
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

        init(_ configuration: WaiterConfiguration) {
            self.configuration = configuration
        }

        var conditionHolds: Bool {
            switch configuration.condition {
            case .contentsAvailable: target.isContentsAvailable
            case .didSyncSuccessfully: target.state == .didSyncSuccessfully
            }
        }

        var pendingSleepCount: Int { (armedDeadline == nil ? 0 : 1) + (syncer?.deadline == nil ? 0 : 1) }

        /// The observers the waiter and its syncer have on the target.
        var observerCount: Int { (isWatching ? 1 : 0) + (syncer == nil ? 0 : 1) }

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

        mutating func startWait(isAsync: Bool) {
            let id = waits.count
            waits.append(Wait(isAsync: isAsync, start: now, deadline: now + configuration.timeout))
            if conditionHolds {
                end(id, .success)
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
            if let delay = syncer.notified(in: target.state, retryAllowed: true, now: now) {
                requestedSleeps.append(delay)
            }
            self.syncer = syncer
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
            if isWatching, conditionHolds { succeedAll() }
            if var syncer {
                if let delay = syncer.notified(in: target.state, retryAllowed: true, now: now) {
                    requestedSleeps.append(delay)
                }
                self.syncer = syncer
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
            if let delay = syncer.arm(for: target.state, retryAllowed: true, now: now) {
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
            conditionHeldAtLastNotification = waiter.isConditionMet
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
                let isWait = operation == .waitAsync || operation == .waitWithCallback
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
            case .waitAsync:
                let id = beginWait(isAsync: true)
                tasks[id] = Task { [weak self, waiter] in
                    let result: Result<Target, any Error>
                    do {
                        result = .success(try await waiter.wait())
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
            case .fail(let code): target.setDidFailToSync(code.map { TestError(code: $0) })
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
                case .success, .timedOut, .cancelled:
                    break
                }
            }
            if notifiedInStep, conditionHeldAtLastNotification, waiter.pendingWaitCount > 0 {
                return "the condition held at a notification but \(waiter.pendingWaitCount) waits are pending"
            }
            if waiter.pendingWaitCount == 0, clock.pendingSleepCount > 0 || liveObserverCount > 1 {
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
            if liveObserverCount != 1 { return "\(liveObserverCount - 1) observers left after the last wait" }
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
        case 0..<3: .waitAsync
        case 3..<6: .waitWithCallback
        case 6..<8: .cancel(Int.random(in: 0..<8, using: &random))
        case 8: .succeed
        case 9, 10: .fail(Bool.random(using: &random) ? nil : 1)
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
        let baseSeed: UInt64 = 0x0057_A17E
        for sequence in 0..<2_000 {
            let seed = baseSeed &+ UInt64(sequence)
            var random = SeededRandomNumberGenerator(seed: seed)
            let configuration = Self.randomWaiterConfiguration(&random)
            let operations = (0..<Int.random(in: 5...15, using: &random)).map { _ in
                Self.randomWaiterOperation(&random, timeout: configuration.timeout)
            }
            if let failure = await Self.mismatch(configuration, operations) {
                let shortest = await shrink(operations) { await Self.mismatch(configuration, $0) != nil }
                Issue.record(
                    """
                    seed \(seed), \(configuration): \(failure)
                    sequence: \(operations)
                    shortest failing sequence: \(shortest)
                    its failure: \(await Self.mismatch(configuration, shortest) ?? "?")
                    """)
                return
            }
        }
    }

    // MARK: - The syncer's schedule

    struct SyncerConfiguration: CustomStringConvertible {
        var period: Duration?
        var max: Duration
        var syncPolicy: LoadableSyncer.SyncPolicy

        var description: String {
            "period: \(period.map { "\($0)" } ?? "nil"), min: 1 s, max: \(max), syncPolicy: \(syncPolicy)"
        }
    }

    enum SyncerOperation: Equatable, CustomStringConvertible {
        case succeed
        /// Fails with `TestError(code:)`, or no error; code 404 is not retried.
        case fail(Int?)
        case setSyncing
        case setIdle
        case sync
        case notify
        /// Sets `isContentsAvailable` without notifying (decides what `syncIfNeeded()` does).
        case setContentsAvailable(Bool)
        case advance(Duration)
        /// Advances exactly to the scheduled sync (or by 1 s when none is scheduled).
        case advanceToNextSync
        case appDidBecomeActive

        var description: String {
            switch self {
            case .succeed: "succeed"
            case .fail(let code): "fail(\(code.map(String.init) ?? "nil"))"
            case .setSyncing: "setSyncing"
            case .setIdle: "setIdle"
            case .sync: "sync"
            case .notify: "notify"
            case .setContentsAvailable(let available): "setContentsAvailable(\(available))"
            case .advance(let duration): "advance(\(duration))"
            case .advanceToNextSync: "advanceToNextSync"
            case .appDidBecomeActive: "appDidBecomeActive"
            }
        }
    }

    /// A target and its syncer (`shouldRetry` refuses code 404). Nothing is scheduled while idle or
    /// syncing; repeated notifications in one state change nothing; a timer that falls due syncs
    /// (`sync()` or `syncIfNeeded()`), and is armed again for the current state if that synced
    /// nothing; `appDidBecomeActive()` resets the backoff and syncs at once after a retryable
    /// failure.
    struct ScheduleModel {
        let syncPolicy: LoadableSyncer.SyncPolicy
        var target = TargetModel()
        var syncer: SyncerModel
        var now = Duration.zero
        var requestedSleeps: [Duration] = []

        init(_ configuration: SyncerConfiguration) {
            syncPolicy = configuration.syncPolicy
            syncer = SyncerModel(period: configuration.period, min: .seconds(1), max: configuration.max)
            notify()
        }

        var retryAllowed: Bool { target.state != .didFailToSync || target.errorCode != 404 }

        func advanceEnd(for operation: SyncerOperation) -> Duration? {
            switch operation {
            case .advance(let duration): now + duration
            case .advanceToNextSync: syncer.deadline ?? now + .seconds(1)
            default: nil
            }
        }

        mutating func apply(_ operation: SyncerOperation) {
            switch operation {
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
            case .setContentsAvailable(let available): target.isContentsAvailable = available
            case .advance, .advanceToNextSync:
                let end = advanceEnd(for: operation)!
                while let deadline = syncer.deadline, deadline <= end {
                    now = deadline
                    syncer.deadline = nil
                    syncer.purpose = nil
                    syncAndRearm()
                }
                now = Swift.max(now, end)
            case .appDidBecomeActive:
                syncer.nextRetryDelay = syncer.min
                switch syncer.observed {
                case .didFailToSync where retryAllowed: break
                case .didSyncSuccessfully where syncer.purpose == .refresh && syncer.deadline! <= now: break
                default: return
                }
                syncer.deadline = nil
                syncer.purpose = nil
                syncAndRearm()
            }
        }

        mutating func notify() {
            if let delay = syncer.notified(in: target.state, retryAllowed: retryAllowed, now: now) {
                requestedSleeps.append(delay)
            }
        }

        mutating func sync() {
            target.syncCount += 1
            guard target.state != .syncing else { return }
            target.errorCode = nil
            target.state = .syncing
            notify()
        }

        /// The syncer's sync; if it moved nothing, the timer is armed again for the current state.
        mutating func syncAndRearm() {
            let before = target.state
            switch syncPolicy {
            case .sync:
                sync()
            case .syncIfNeeded:
                target.syncIfNeededCount += 1
                if target.needsSync { sync() }
            }
            guard target.state == before, syncer.deadline == nil else { return }
            if let delay = syncer.arm(for: target.state, retryAllowed: retryAllowed, now: now) {
                requestedSleeps.append(delay)
            }
        }
    }

    static func scheduleMismatch(
        _ configuration: SyncerConfiguration,
        _ operations: [SyncerOperation]
    ) async -> String? {
        let clock = ManualClock()
        let target = Target()
        let syncer = LoadableSyncer(
            target,
            syncPolicy: configuration.syncPolicy,
            timeoutPolicy: BackoffTimeoutPolicy(period: configuration.period, min: .seconds(1), max: configuration.max),
            clock: clock
        )
        syncer.shouldRetry = { ($0 as? TestError)?.code != 404 }
        var model = ScheduleModel(configuration)
        for (step, operation) in operations.enumerated() {
            let end = model.advanceEnd(for: operation)
            model.apply(operation)
            switch operation {
            case .succeed: target.setDidSyncSuccessfully()
            case .fail(let code): target.setDidFailToSync(code.map { TestError(code: $0) })
            case .setSyncing: target.setSyncing()
            case .setIdle: target.setIdle()
            case .sync: target.sync()
            case .notify: target.notifyDidChange()
            case .setContentsAvailable(let available): target.isContentsAvailable = available
            case .advance, .advanceToNextSync: await clock.advance(to: ManualClock.Instant(offset: end!))
            case .appDidBecomeActive: syncer.appDidBecomeActive()
            }
            let expectedSleeps = model.syncer.deadline == nil ? 0 : 1
            await settle { clock.pendingSleepCount == expectedSleeps }
            await Task.yield()
            await Task.detached {}.value
            let failure: String? =
                if clock.requestedSleeps != model.requestedSleeps {
                    "requested sleeps \(clock.requestedSleeps), model: \(model.requestedSleeps)"
                } else if syncer.nextSyncIn != model.syncer.nextSyncIn(now: model.now) {
                    "nextSyncIn \(syncer.nextSyncIn.map { "\($0)" } ?? "nil"), "
                        + "model: \(model.syncer.nextSyncIn(now: model.now).map { "\($0)" } ?? "nil")"
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
                } else {
                    nil
                }
            if let failure { return "step \(step) \(operation): \(failure)" }
        }
        withExtendedLifetime(syncer) {}
        return nil
    }

    static func randomSyncerConfiguration(_ random: inout SeededRandomNumberGenerator) -> SyncerConfiguration {
        SyncerConfiguration(
            period: [nil, .seconds(5), .seconds(30)].randomElement(using: &random)!,
            max: [.seconds(4), .seconds(15)].randomElement(using: &random)!,
            syncPolicy: LoadableSyncer.SyncPolicy.allCases.randomElement(using: &random)!
        )
    }

    static func randomSyncerOperation(_ random: inout SeededRandomNumberGenerator) -> SyncerOperation {
        switch Int.random(in: 0..<16, using: &random) {
        case 0, 1: .succeed
        case 2..<5: .fail([nil, 1, 404].randomElement(using: &random)!)
        case 5: .setSyncing
        case 6: .setIdle
        case 7: .sync
        case 8: .notify
        case 9: .setContentsAvailable(Bool.random(using: &random))
        case 10, 11:
            .advance(
                [.milliseconds(500), .seconds(1), .seconds(2), .seconds(5), .seconds(30)].randomElement(using: &random)!
            )
        case 12, 13: .advanceToNextSync
        default: .appDidBecomeActive
        }
    }

    @Test("1,000 random transition sequences follow the syncer's schedule model")
    func randomSyncerSequences() async {
        let baseSeed: UInt64 = 0x5C4E_D01E
        for sequence in 0..<1_000 {
            let seed = baseSeed &+ UInt64(sequence)
            var random = SeededRandomNumberGenerator(seed: seed)
            let configuration = Self.randomSyncerConfiguration(&random)
            let operations = (0..<Int.random(in: 5...15, using: &random)).map { _ in
                Self.randomSyncerOperation(&random)
            }
            if let failure = await Self.scheduleMismatch(configuration, operations) {
                let shortest = await shrink(operations) { await Self.scheduleMismatch(configuration, $0) != nil }
                Issue.record(
                    """
                    seed \(seed), \(configuration): \(failure)
                    sequence: \(operations)
                    shortest failing sequence: \(shortest)
                    its failure: \(await Self.scheduleMismatch(configuration, shortest) ?? "?")
                    """)
                return
            }
        }
    }
}
