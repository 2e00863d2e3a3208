import Loadable
import LoadableTestSupport
import LoadableTesting
import Testing

/// Model-based randomized tests: random sequences of runs, sends, work endings, caller cancels,
/// `isEnabled` changes, resets and finally the release of the action, run against a
/// `LoadableAction` and against a reference model written from its documented rules. After each
/// step (once every task it started had its turn) the state, contents, error, failure record,
/// `isRunning`, `canRun`, every notification, every caller's result, the works started and
/// waiting, and whether the action is still alive must match.
@Suite("LoadableAction against a reference model")
@MainActor
struct LoadableActionModelTests {
    typealias Concurrency = LoadableAction<ModelInput, Int>.Concurrency

    /// A run's input: which caller it is, and whether its work stops when cancelled.
    struct ModelInput {
        var id: Int
        var cooperative: Bool
    }

    /// How the test ends a held work.
    enum Ending: Equatable, CustomStringConvertible {
        case succeed(Int)
        case fail(Int)
        /// Throws `CancellationError` without having been cancelled.
        case throwCancellation

        var description: String {
            switch self {
            case .succeed(let value): "succeed(\(value))"
            case .fail(let code): "fail(\(code))"
            case .throwCancellation: "throwCancellation"
            }
        }
    }

    enum Operation: Equatable, CustomStringConvertible {
        /// A new caller task calls `run(_:)`.
        case run(cooperative: Bool)
        /// `send(_:)`.
        case send(cooperative: Bool)
        /// A task cancelled before it starts calls `run(_:)`.
        case runFromCancelledTask
        /// A task cancelled before it starts calls `send(_:)`.
        case sendFromCancelledTask
        /// Ends the held work at `pick` modulo their number (0: the oldest).
        case finish(pick: Int, Ending)
        /// Cancels the caller at `pick` modulo their number (whatever it is doing).
        case cancelCaller(pick: Int)
        case toggleEnabled
        case reset
        /// The test drops its reference to the action (`run` callers still keep it alive).
        case release

        var description: String {
            switch self {
            case .run(let cooperative): "run(\(cooperative ? "cooperative" : "stubborn"))"
            case .send(let cooperative): "send(\(cooperative ? "cooperative" : "stubborn"))"
            case .runFromCancelledTask: "runFromCancelledTask"
            case .sendFromCancelledTask: "sendFromCancelledTask"
            case .finish(let pick, let ending): "finish(\(pick), \(ending))"
            case .cancelCaller(let pick): "cancelCaller(\(pick))"
            case .toggleEnabled: "toggleEnabled"
            case .reset: "reset"
            case .release: "release"
            }
        }
    }

    /// What a caller got.
    enum Outcome: Equatable, CustomStringConvertible {
        case value(Int), failure(Int), cancelled, busy, disabled

        init(_ result: Result<Int, any Error>) {
            switch result {
            case .success(let value): self = .value(value)
            case .failure(let error as TestError): self = .failure(error.code)
            case .failure(LoadableActionError.busy): self = .busy
            case .failure(LoadableActionError.disabled): self = .disabled
            case .failure(let error):
                precondition(error is CancellationError, "unexpected error \(error)")
                self = .cancelled
            }
        }

        var description: String {
            switch self {
            case .value(let value): "value(\(value))"
            case .failure(let code): "failure(\(code))"
            case .cancelled: "cancelled"
            case .busy: "busy"
            case .disabled: "disabled"
            }
        }
    }

    /// One notification: the state and contents an observer saw.
    struct Seen: Equatable, CustomStringConvertible {
        var state: LoadableState
        var contents: Int?
        var description: String { "\(state)/\(contents.map(String.init) ?? "-")" }
    }

    /// What the action looks like from outside.
    struct Status: Equatable, CustomStringConvertible {
        var state: LoadableState
        var contents: Int?
        var errorCode: Int?
        var lastErrorCode: Int?
        var consecutiveFailures: Int
        var isEnabled: Bool
        var isRunning: Bool
        var canRun: Bool

        var description: String {
            "\(state) contents \(contents.map(String.init) ?? "-") error \(errorCode.map(String.init) ?? "-") "
                + "last \(lastErrorCode.map(String.init) ?? "-")×\(consecutiveFailures) "
                + "enabled \(isEnabled) running \(isRunning) canRun \(canRun)"
        }
    }

    // MARK: - The real thing

    @MainActor final class Real {
        let works = HeldWorks()
        private(set) var action: LoadableAction<ModelInput, Int>?
        weak var weakAction: LoadableAction<ModelInput, Int>?
        var callers: [Task<Int, any Error>] = []
        var results: [Int: Outcome] = [:]
        var log: [Seen] = []
        private var token: LoadableObservation?

        init(concurrency: Concurrency) {
            let works = works
            let action = LoadableAction<ModelInput, Int>(concurrency: concurrency) { input in
                try await works.work(input.id, cooperative: input.cooperative)
            }
            self.action = action
            weakAction = action
            token = action.observe { [weak self] action in
                self?.log.append(Seen(state: action.loadableState, contents: action.contents))
            }
        }

        var status: Status? {
            guard let action = weakAction else { return nil }
            let snapshot = action.snapshot
            return Status(
                state: action.loadableState, contents: action.contents,
                errorCode: (action.error as? TestError)?.code,
                lastErrorCode: (snapshot.lastError as? TestError)?.code,
                consecutiveFailures: snapshot.consecutiveFailures, isEnabled: action.isEnabled,
                isRunning: action.isRunning, canRun: action.canRun)
        }

        func apply(_ operation: Operation) {
            let id = callers.count
            switch operation {
            case .run(let cooperative):
                guard let action = weakAction else { return appendCaller(Task { throw CancellationError() }) }
                appendCaller(Task { try await action.run(ModelInput(id: id, cooperative: cooperative)) })
            case .send(let cooperative):
                guard let action = weakAction else { return appendCaller(Task { throw CancellationError() }) }
                appendCaller(action.send(ModelInput(id: id, cooperative: cooperative)))
            case .runFromCancelledTask:
                let action = weakAction
                let task = Task { try await action!.run(ModelInput(id: id, cooperative: true)) }
                task.cancel()
                appendCaller(task)
            case .sendFromCancelledTask:
                let action = weakAction
                let task = Task { try await action!.send(ModelInput(id: id, cooperative: true)).value }
                task.cancel()
                appendCaller(task)
            case .finish(let pick, let ending):
                let held = works.heldIDs
                guard !held.isEmpty else { return }
                let workID = held[pick % held.count]
                switch ending {
                case .succeed(let value): works.succeed(workID, with: value)
                case .fail(let code): works.fail(workID, with: TestError(code: code))
                case .throwCancellation: works.fail(workID, with: CancellationError())
                }
            case .cancelCaller(let pick):
                guard !callers.isEmpty else { return }
                callers[pick % callers.count].cancel()
            case .toggleEnabled:
                weakAction?.isEnabled.toggle()
            case .reset:
                weakAction?.reset()
            case .release:
                action = nil
            }
        }

        private func appendCaller(_ task: Task<Int, any Error>) {
            let id = callers.count
            callers.append(task)
            Task { [weak self] in
                let result = await task.result
                self?.results[id] = Outcome(result)
            }
        }
    }

    // MARK: - Running

    static func randomOperation(_ random: inout SeededRandomNumberGenerator, callerCount: Int) -> Operation {
        func pick() -> Int { random.next() % 3 == 0 ? 0 : Int(random.next() % 16) }
        switch random.next() % 20 {
        case 0, 1, 2: return .run(cooperative: random.next() % 2 == 0)
        case 3, 4, 5: return .send(cooperative: random.next() % 2 == 0)
        case 6: return random.next() % 2 == 0 ? .runFromCancelledTask : .sendFromCancelledTask
        case 7, 8, 9, 10, 11:
            let ending: Ending =
                switch random.next() % 7 {
                case 0, 1, 2, 3: .succeed(Int(random.next() % 100))
                case 4, 5: .fail(Int(random.next() % 100))
                default: .throwCancellation
                }
            return .finish(pick: pick(), ending)
        case 12, 13, 14: return .cancelCaller(pick: callerCount == 0 ? 0 : Int(random.next() % UInt64(callerCount)))
        case 15, 16: return .toggleEnabled
        default: return .reset
        }
    }

    /// The random operations, then the release, then enough `finish` steps to end every held
    /// work (the model says how many).
    static func completed(_ operations: [Operation], concurrency: Concurrency) -> [Operation] {
        var all = operations.filter { $0 != .release } + [.release]
        let model = Model(concurrency: concurrency)
        for operation in all { model.apply(operation) }
        var value = 1000
        while !model.held.isEmpty {
            let operation = Operation.finish(pick: 0, .succeed(value))
            value += 1
            model.apply(operation)
            all.append(operation)
        }
        return all
    }

    /// The first difference between `real` and `model`, or `nil`.
    static func difference(_ real: Real, _ model: Model) -> String? {
        if model.isAlive != (real.weakAction != nil) {
            return "the action is \(real.weakAction == nil ? "gone" : "alive"), model says otherwise"
        }
        if model.isAlive, let status = real.status, status != model.status {
            return "status \(status), model \(model.status)"
        }
        if real.log != model.log {
            return "observers saw \(real.log), model says \(model.log)"
        }
        if real.results != model.results {
            return "callers got \(real.results.sorted { $0.key < $1.key }), "
                + "model says \(model.results.sorted { $0.key < $1.key })"
        }
        if real.works.heldIDs != model.held || real.works.startedIDs != model.started {
            return "works held \(real.works.heldIDs) started \(real.works.startedIDs), "
                + "model held \(model.held) started \(model.started)"
        }
        return nil
    }

    /// Runs `operations` (completed); returns a description of the first mismatch, or `nil`.
    ///
    /// After each step the main actor gets turns until the action matches the model again (the
    /// hops a step starts: a work's task, a caller resuming, the collector of its result); only a
    /// difference that lasts 200 turns counts. Every effect of a step shows in the model (a state,
    /// a notification, a result, a held work), so the next step starts only once the previous one
    /// played out; an extra effect that comes later shows at a later step, or at the end.
    static func mismatch(in operations: [Operation], concurrency: Concurrency) async -> String? {
        let operations = completed(operations, concurrency: concurrency)
        let model = Model(concurrency: concurrency)
        let real = Real(concurrency: concurrency)
        for (step, operation) in operations.enumerated() {
            model.apply(operation)
            real.apply(operation)
            await Task.yield()
            var turns = 0
            while let difference = difference(real, model) {
                guard turns < 200 else { return "step \(step) \(operation): \(difference)" }
                turns += 1
                await Task.yield()
            }
        }
        // Nothing more happens later.
        await settleAction(turns: 20)
        if let difference = difference(real, model) { return "after the last step: \(difference)" }
        if real.weakAction != nil { return "the action outlived its callers and its owner" }
        if real.results.count != real.callers.count { return "a caller never got a result" }
        return nil
    }

    @Test("random sequences of runs, sends, endings, cancels, toggles, resets and a release match the model")
    func randomSequences() async {
        let baseSeed: UInt64 = 0xAC71_0000
        let policies: [Concurrency] = [.dropWhileRunning, .cancelPrevious, .enqueue]
        await checkRandomSequences(count: 300, baseSeed: baseSeed) { seed in
            // The policies take turns, sequence by sequence.
            let concurrency = policies[Int(seed - baseSeed) % policies.count]
            var random = SeededRandomNumberGenerator(seed: seed)
            let length = Int(random.next() % 30) + 1
            var operations: [Operation] = []
            var callerCount = 0
            for _ in 0..<length {
                let operation = Self.randomOperation(&random, callerCount: callerCount)
                switch operation {
                case .run, .send, .runFromCancelledTask, .sendFromCancelledTask: callerCount += 1
                default: break
                }
                operations.append(operation)
            }
            return (concurrency, operations)
        } mismatch: { concurrency, operations in
            await Self.mismatch(in: operations, concurrency: concurrency)
        } describe: { concurrency, operations in
            "\(Self.completed(operations, concurrency: concurrency))"
        }
    }
}
