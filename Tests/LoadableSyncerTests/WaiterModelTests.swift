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
