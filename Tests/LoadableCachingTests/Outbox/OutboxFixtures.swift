import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// An error a retry may fix, with the server's hint.
struct Busy: RetryAfterProviding, Hashable {
    var retryAfter: Duration?
}

/// An error no retry fixes.
struct Refused: RetryAfterProviding, Hashable {
    var retryAfter: Duration? { nil }
    var isRetryable: Bool { false }
}

/// A change made on a record at a version, for outboxes whose server answers with its own version
/// (`OutboxOutcome.appliedAs`): append `word` to a list the server keeps at `version`.
struct VersionedAppend: Codable, Sendable, Hashable, CustomStringConvertible {
    var word: String
    var version: Int

    /// `word@version`.
    var description: String { "\(word)@\(version)" }
}

/// The other end of an outbox whose `send` says what the server did (`OutboxOutcome`): records
/// each send and keeps it running until the test ends it (any running one, by its place, since
/// several scopes send at once), and applies each idempotency key once.
@MainActor
final class ModelOutcomeServer<Change: Sendable> {
    struct Call {
        let change: Change
        let idempotencyKey: String
    }

    /// Every send that began, in order.
    private(set) var calls: [Call] = []
    /// The changes applied (as sent, or as the server's version for `appliedAs`), once per
    /// idempotency key, in order, with their keys.
    private(set) var applied: [Call] = []
    private var appliedKeys: Set<String> = []
    private typealias Ending = Result<OutboxOutcome<Change>, any Error>
    private var running: [(call: Call, continuation: CheckedContinuation<Ending, Never>)] = []

    /// The sends running, oldest first.
    var runningCalls: [Call] { running.map(\.call) }

    /// What the outbox's `send` calls: waits for the test's ending, whatever the task's
    /// cancellation (a discarded item's send ends when the test says, as on a real server).
    func send(_ change: Change, _ idempotencyKey: String) async throws -> OutboxOutcome<Change> {
        let call = Call(change: change, idempotencyKey: idempotencyKey)
        calls.append(call)
        return try await withCheckedContinuation { running.append((call, $0)) }.get()
    }

    /// Ends the running send at `index` (in the order they began) with `ending`, then lets the
    /// outbox react. The server applies the change as it answers.
    func finish(at index: Int, with ending: Result<OutboxOutcome<Change>, any Error>) async {
        let (call, continuation) = running.remove(at: index)
        answer(call, with: ending)
        continuation.resume(returning: ending)
        await settleOutbox()
    }

    /// Ends every running send, each with what `ending` gives for it, oldest first, then lets
    /// the sends' tasks run.
    func finishAll(with ending: (Call) -> Result<OutboxOutcome<Change>, any Error>) async {
        let ended = running
        running.removeAll()
        for (call, continuation) in ended {
            let result = ending(call)
            answer(call, with: result)
            continuation.resume(returning: result)
        }
        await settleOutbox()
    }

    /// Applies what `call` carries (or the server's version of it) when `ending` says so, once
    /// per idempotency key.
    private func answer(_ call: Call, with ending: Result<OutboxOutcome<Change>, any Error>) {
        let change: Change
        switch ending {
        case .success(.applied): change = call.change
        case .success(.appliedAs(let version)): change = version
        case .success(.dropped), .success(.conflict), .failure: return
        }
        if appliedKeys.insert(call.idempotencyKey).inserted {
            applied.append(Call(change: change, idempotencyKey: call.idempotencyKey))
        }
    }
}
