import Foundation
import Loadable
import LoadableCaching
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// Random sequences of enqueues, send outcomes, activity and connectivity flips, clock advances,
/// retries, discards, logouts and relaunches, against `OutboxReferenceModel`.
@Suite("Outbox: model")
@MainActor
struct OutboxModelTests {
    typealias Outcome = OutboxReferenceModel.Outcome

    /// One step of a sequence.
    enum Operation: CustomStringConvertible {
        case enqueue
        case finish(Outcome)
        case advance(seconds: Int)
        case offline(Bool)
        case inactive(Bool)
        /// Retries the failed item at this index among the failed ones (modulo their count).
        case retry(Int)
        /// Discards the item at this index (modulo the count); a send of it ends with the outcome.
        case discard(Int, late: Outcome)
        case removeAll(late: Outcome)
        /// The app dies and starts again; a running send ends with the outcome at the server.
        case relaunch(late: Outcome)

        var description: String {
            switch self {
            case .enqueue: "enqueue"
            case .finish(let outcome): "finish(\(outcome))"
            case .advance(let seconds): "advance(\(seconds)s)"
            case .offline(let value): "offline(\(value))"
            case .inactive(let value): "inactive(\(value))"
            case .retry(let index): "retry(#\(index))"
            case .discard(let index, let late): "discard(#\(index), late: \(late))"
            case .removeAll(let late): "removeAll(late: \(late))"
            case .relaunch(let late): "relaunch(late: \(late))"
            }
        }
    }

    /// The outbox under test and what it runs on.
    @MainActor
    final class Subject {
        let cache = InMemoryLoadableCache()
        let server = ScriptedServer()
        let clock = ManualClock()
        let activity = ActivityMonitor()
        var outbox: LoadableOutbox<Append>!
        var words = 0

        func start() async {
            outbox = makeOutbox(cache: cache, server: server, activity: activity, clock: clock)
            await outbox.restored()
            await settleOutbox()
        }
    }

    static func error(for outcome: Outcome) -> (any Error)? {
        switch outcome {
        case .success: nil
        case .busy(let seconds): Busy(retryAfter: seconds == 0 ? nil : .seconds(seconds))
        case .refused: Refused()
        }
    }

    static func randomOutcome(_ random: inout SeededRandomNumberGenerator) -> Outcome {
        switch random.next() % 10 {
        case 0..<5: .success
        case 5..<7: .busy(retryAfter: 0)
        case 7..<8: .busy(retryAfter: [3, 30, 90][Int(random.next() % 3)])
        default: .refused
        }
    }

    static func randomOperation(_ random: inout SeededRandomNumberGenerator) -> Operation {
        switch random.next() % 100 {
        case 0..<22: .enqueue
        case 22..<50: .finish(randomOutcome(&random))
        case 50..<64: .advance(seconds: [1, 2, 5, 20, 70][Int(random.next() % 5)])
        case 64..<71: .offline(random.next() % 2 == 0)
        case 71..<76: .inactive(random.next() % 2 == 0)
        case 76..<81: .retry(Int(random.next() % 4))
        case 81..<89: .discard(Int(random.next() % 4), late: randomOutcome(&random))
        case 89..<91: .removeAll(late: randomOutcome(&random))
        default: .relaunch(late: randomOutcome(&random))
        }
    }

    /// Runs `operations` on a new outbox and the model; describes the first difference.
    static func mismatch(in operations: [Operation]) async -> String? {
        var model = OutboxReferenceModel()
        let subject = Subject()
        await subject.start()
        for (step, operation) in operations.enumerated() {
            await perform(operation, on: subject, model: &model)
            if let difference = difference(model, subject) {
                return "after step \(step), \(operation): \(difference)"
            }
        }
        return nil
    }

    static func perform(_ operation: Operation, on subject: Subject, model: inout OutboxReferenceModel) async {
        switch operation {
        case .enqueue:
            subject.words += 1
            let word = "w\(subject.words)"
            let id = subject.outbox.enqueue(Append(word: word))
            model.enqueue(id: id, word: word)
            await settleOutbox()
        case .finish(let outcome):
            model.finish(outcome)
            await subject.server.finishIfRunning(with: error(for: outcome))
        case .advance(let seconds):
            model.advance(by: seconds)
            await subject.clock.advance(by: .seconds(seconds))
            await settleOutbox()
        case .offline(let offline):
            model.setOffline(offline)
            subject.activity.connectivity = offline ? .offline : .online
            await settleOutbox()
        case .inactive(let inactive):
            model.setInactive(inactive)
            subject.activity.isActive = !inactive
            await settleOutbox()
        case .retry(let index):
            let failed = subject.outbox.items.filter { $0.state == .failed }
            guard !failed.isEmpty else { return }
            let id = failed[index % failed.count].id
            model.retry(id)
            subject.outbox.retry(id)
            await settleOutbox()
        case .discard(let index, let late):
            let items = subject.outbox.items
            guard !items.isEmpty else { return }
            let item = items[index % items.count]
            let running = subject.server.runningCount
            model.discard(item.id, lateOutcome: late)
            subject.outbox.discard(item.id)
            if item.state == .sending, running > 0 { await subject.server.finish(with: error(for: late)) }
            await settleOutbox()
        case .removeAll(let late):
            let running = subject.server.runningCount
            model.removeAll(lateOutcome: late)
            subject.outbox.removeAll()
            if running > 0 { await subject.server.finish(with: error(for: late)) }
            await settleOutbox()
        case .relaunch(let late):
            model.relaunch(lateOutcome: late)
            subject.outbox = nil
            await subject.server.finishIfRunning(with: error(for: late))
            await subject.start()
        }
    }

    static func difference(_ model: OutboxReferenceModel, _ subject: Subject) -> String? {
        let outbox = subject.outbox!
        let items = outbox.items.map { "\($0.change.word):\($0.state):\($0.attempts)" }
        let expected = model.items.map(\.description)
        if items != expected { return "items \(items), the model's \(expected)" }
        if outbox.items.map(\.id) != model.items.map(\.id) { return "the item ids differ from the model's" }
        if outbox.isPaused != model.isPaused { return "isPaused \(outbox.isPaused), the model's \(model.isPaused)" }
        if outbox.isSending != (model.sending != nil) {
            return "isSending \(outbox.isSending), the model sends \(model.sending?.word ?? "nothing")"
        }
        let running = subject.server.runningCount
        if running != (model.sending == nil ? 0 : 1) {
            return "\(running) sends run at the server, the model sends \(model.sending?.word ?? "nothing")"
        }
        if let sending = model.sending, subject.server.calls.last?.change.word != sending.word {
            return
                "the server's last call is \(subject.server.calls.last?.change.word ?? "none"), the model sends \(sending.word)"
        }
        let applied = subject.server.applied.map(\.word)
        if applied != model.applied { return "the server applied \(applied), the model \(model.applied)" }
        return nil
    }

    @Test("random sequences of sends, outcomes, pauses, clock advances and relaunches match the model")
    func randomSequences() async {
        await checkRandomSequences(count: StressScale.rounds(120), baseSeed: 0x0B0C_5E17) { seed in
            var random = SeededRandomNumberGenerator(seed: seed)
            return (0..<40).map { _ in Self.randomOperation(&random) }
        } mismatch: { operations in
            await Self.mismatch(in: operations)
        }
    }
}
