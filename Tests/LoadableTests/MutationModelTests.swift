import Loadable
import LoadableTestSupport
import LoadableTesting
import Testing

/// Optimistic changes against a reference model: random sequences of changes begun, commits that
/// succeed (with or without `reconcile`), fail or are cancelled, syncs that begin, succeed or
/// fail, and writes of contents, in any interleaving.
///
/// The model is a fold: the shown contents are the base with every pending change applied in the
/// order the changes began. It is written from the documentation of
/// `PushLoadable.mutate(optimistic:commit:reconcile:)` and `Loadable.invalidate()`: a commit
/// writes its answer (or its change) into the base, which counts as confirmed; a commit that
/// succeeds while a sync runs asks for exactly one more sync after it, which begins in the
/// notification of the running sync's end; observers are told once per change added or taken
/// back, when there are contents to show it on. After every step the contents, the base, the
/// state, `isStale`, the number of syncs begun, the notifications and every finished call's
/// outcome must match.
@Suite("Optimistic changes against a reference model")
@MainActor
struct MutationModelTests {
    enum Operation: Equatable, CustomStringConvertible {
        /// Begins a change appending `value`; with `reconcile`, the commit's answer is appended
        /// to the base instead.
        case begin(value: Int, reconcile: Bool)
        /// Ends the pending change at `index` (modulo the number pending) in the way given.
        case succeed(index: Int, answer: Int), fail(index: Int), cancel(index: Int)
        case sync, syncSucceeds([Int]), syncFails, setContents([Int])

        var description: String {
            switch self {
            case .begin(let value, let reconcile): "begin(\(value)\(reconcile ? ", reconcile" : ""))"
            case .succeed(let index, let answer): "succeed(#\(index), answer: \(answer))"
            case .fail(let index): "fail(#\(index))"
            case .cancel(let index): "cancel(#\(index))"
            case .sync: "sync"
            case .syncSucceeds(let base): "syncSucceeds(\(base))"
            case .syncFails: "syncFails"
            case .setContents(let base): "setContents(\(base))"
            }
        }
    }

    /// How a change's call ended.
    enum Outcome: Equatable, CustomStringConvertible {
        case returned(Int), failed, cancelled

        var description: String {
            switch self {
            case .returned(let answer): "returned(\(answer))"
            case .failed: "failed"
            case .cancelled: "cancelled"
            }
        }
    }

    /// The loadable, its pending calls, and what they ended with.
    @MainActor
    final class Real {
        let list = ListLoadable()
        let gate = CommitGate()
        let recorder: Recorder
        /// The pending calls, in the order they began: id and task.
        var pending: [(id: Int, task: Task<Int, any Error>)] = []
        var outcomes: [Int: Outcome] = [:]
        var nextID = 0

        init() { recorder = Recorder(list) }

        func apply(_ operation: Operation) async {
            switch operation {
            case .begin(let value, let reconcile):
                let id = nextID
                nextID += 1
                let list = list
                let gate = gate
                var reconcileBody: (@MainActor (inout [Int], Int) -> Void)?
                if reconcile { reconcileBody = { contents, answer in contents.append(answer) } }
                let task = Task { @MainActor in
                    try await list.mutate(
                        optimistic: { $0.append(value) },
                        commit: { try await gate.commit("\(id)") },
                        reconcile: reconcileBody)
                }
                await gate.waitFor("\(id)")
                pending.append((id, task))
            case .succeed(let index, let answer):
                await end(index) { id, _ in gate.finish("\(id)", with: .success(answer)) }
            case .fail(let index):
                await end(index) { id, _ in gate.finish("\(id)", with: .failure(TestError("\(id)"))) }
            case .cancel(let index):
                await end(index) { _, task in task.cancel() }
            case .sync: list.sync()
            case .syncSucceeds(let base): list.setDidSyncSuccessfully(base)
            case .syncFails: list.setDidFailToSync(TestError("sync"))
            case .setContents(let base): list.setContents(base)
            }
        }

        private func end(_ index: Int, _ finish: (Int, Task<Int, any Error>) -> Void) async {
            guard !pending.isEmpty else { return }
            let (id, task) = pending.remove(at: index % pending.count)
            finish(id, task)
            switch await task.result {
            case .success(let answer): outcomes[id] = .returned(answer)
            case .failure(let error as TestError) where error == TestError("\(id)"): outcomes[id] = .failed
            case .failure(is CancellationError): outcomes[id] = .cancelled
            case .failure: outcomes[id] = .returned(-1)  // an error the model never expects
            }
        }

        /// Ends every call still pending, so that nothing outlives the sequence.
        func finishAll() async {
            for (id, task) in pending {
                gate.finish("\(id)", with: .failure(CancellationError()))
                _ = await task.result
            }
            pending = []
        }
    }

    static func mismatch(in operations: [Operation]) async -> String? {
        var model = Model()
        let real = Real()
        defer { withExtendedLifetime(real) {} }
        for (step, operation) in operations.enumerated() {
            model.apply(operation)
            await real.apply(operation)
            let list = real.list
            var problems: [String] = []
            if list.contents != model.shown {
                problems.append("contents \(list.contents ?? []) vs \(model.shown ?? [])")
            }
            if list.baseContents != model.base {
                problems.append("base \(list.baseContents ?? []) vs \(model.base ?? [])")
            }
            if list.loadableState != model.state { problems.append("state \(list.loadableState) vs \(model.state)") }
            if list.isStale != model.isStale { problems.append("isStale \(list.isStale) vs \(model.isStale)") }
            if list.doSyncCount != model.doSyncCount {
                problems.append("syncs \(list.doSyncCount) vs \(model.doSyncCount)")
            }
            if real.recorder.count != model.notifications {
                problems.append("notifications \(real.recorder.count) vs \(model.notifications)")
            }
            if real.outcomes != model.outcomes { problems.append("outcomes \(real.outcomes) vs \(model.outcomes)") }
            if !problems.isEmpty {
                await real.finishAll()
                return "after step \(step) (\(operation)): " + problems.joined(separator: "; ")
            }
        }
        await real.finishAll()
        return nil
    }

    static func randomOperation(_ random: inout SeededRandomNumberGenerator) -> Operation {
        let small = { (random: inout SeededRandomNumberGenerator) in Int(random.next() % 100) }
        switch random.next() % 16 {
        case 0, 1, 2, 3: return .begin(value: small(&random), reconcile: random.next() % 3 == 0)
        case 4, 5: return .succeed(index: small(&random), answer: 100 + small(&random))
        case 6, 7: return .fail(index: small(&random))
        case 8: return .cancel(index: small(&random))
        case 9, 10: return .sync
        case 11, 12: return .syncSucceeds((0..<Int(random.next() % 3)).map { _ in small(&random) })
        case 13: return .syncFails
        default: return .setContents([small(&random)])
        }
    }

    @Test("300 random interleavings of changes, commits and syncs match the fold over the base")
    func randomSequences() async {
        await checkRandomSequences(count: 300, baseSeed: 0x0F7_1A15) { seed in
            var random = SeededRandomNumberGenerator(seed: seed)
            return (0..<(Int(random.next() % 30) + 1)).map { _ in Self.randomOperation(&random) }
        } mismatch: {
            await Self.mismatch(in: $0)
        }
    }
}
