import Foundation
import Loadable
import LoadableCaching
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// A change of a list of strings, as an app's outbox would carry: append a word.
struct Append: Codable, Sendable, Hashable {
    var word: String
}

/// An error a retry may fix, with the server's hint.
struct Busy: RetryAfterProviding, Hashable {
    var retryAfter: Duration?
}

/// An error no retry fixes.
struct Refused: RetryAfterProviding, Hashable {
    var retryAfter: Duration? { nil }
    var isRetryable: Bool { false }
}

/// The other end of an outbox's sends: records each send, and ends it when the test says.
@MainActor
final class ScriptedServer {
    struct Call {
        let change: Append
        let idempotencyKey: String
    }

    /// Every send that began, in order.
    private(set) var calls: [Call] = []
    /// The changes applied, once per idempotency key, in order.
    private(set) var applied: [Append] = []
    private var appliedKeys: Set<String> = []
    private var waiting: [CheckedContinuation<(any Error)?, Never>] = []
    /// When set, sends end at once with this outcome (`nil`: success) instead of waiting.
    var answer: (any Error)??

    var runningCount: Int { waiting.count }

    /// What the outbox's `send` calls.
    func send(_ change: Append, _ idempotencyKey: String) async throws {
        calls.append(Call(change: change, idempotencyKey: idempotencyKey))
        let outcome: (any Error)?
        if let answer {
            outcome = answer
        } else {
            outcome = await withCheckedContinuation { waiting.append($0) }
        }
        if let outcome { throw outcome }
        if appliedKeys.insert(idempotencyKey).inserted { applied.append(change) }
        try Task.checkCancellation()
    }

    /// Ends the oldest running send with `error` (`nil`: success), then lets the outbox react.
    func finish(with error: (any Error)? = nil) async {
        await yield(until: { !self.waiting.isEmpty })
        guard !waiting.isEmpty else { return }
        waiting.removeFirst().resume(returning: error)
        await settleOutbox()
    }
}

/// Gives the outbox's tasks and its cache queue turns until they are quiet.
@MainActor
func settleOutbox() async {
    for _ in 0..<40 {
        await Task.yield()
        await Task.detached {}.value
    }
}

/// An outbox on `cache` that sends through `server`, with a retry policy of 1, 2, 4… seconds.
@MainActor
func makeOutbox(
    cache: any LoadableCache,
    server: ScriptedServer,
    activity: ActivityMonitor = ActivityMonitor(),
    clock: ManualClock,
    key: String = "outbox",
    maxRetries: Int? = nil
) -> LoadableOutbox<Append> {
    LoadableOutbox<Append>(
        cache: cache, key: key, activity: activity,
        retryPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(64), multiplier: 2, maxRetries: maxRetries),
        clock: clock
    ) { [server] change, key in
        try await server.send(change, key)
    }
}

extension ScriptedServer {
    /// Ends the oldest running send with `error` (`nil`: success) if one runs, then lets the
    /// outbox react; does nothing otherwise.
    func finishIfRunning(with error: (any Error)? = nil) async {
        guard runningCount > 0 else { return }
        await finish(with: error)
    }
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
