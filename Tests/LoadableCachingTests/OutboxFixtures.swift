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
