import Foundation
import Loadable
package import LoadableCaching
package import LoadableSyncer
import LoadableTestSupport
package import LoadableTesting
import Testing

// MARK: - Helpers shared by the outbox tests of the caching and SQLite targets

/// A change of a list of strings, as an app's outbox would carry: append a word.
package struct Append: Codable, Sendable, Hashable {
    package var word: String

    /// A change that appends `word`.
    package init(word: String) {
        self.word = word
    }
}

/// The other end of an outbox's sends: records each send, and ends it when the test says.
@MainActor
package final class ScriptedServer {
    package struct Call {
        package let change: Append
        package let idempotencyKey: String
    }

    /// Every send that began, in order.
    package private(set) var calls: [Call] = []
    /// The changes applied, once per idempotency key, in order.
    package private(set) var applied: [Append] = []
    private var appliedKeys: Set<String> = []
    private var waiting: [CheckedContinuation<(any Error)?, Never>] = []
    /// When set, sends end at once with this outcome (`nil`: success) instead of waiting.
    package var answer: (any Error)??

    package var runningCount: Int { waiting.count }

    /// A server with no send yet.
    package init() {}

    /// What the outbox's `send` calls.
    package func send(_ change: Append, _ idempotencyKey: String) async throws {
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
    package func finish(with error: (any Error)? = nil) async {
        await yield(until: { !self.waiting.isEmpty })
        guard !waiting.isEmpty else { return }
        waiting.removeFirst().resume(returning: error)
        await settleOutbox()
    }
}

/// Gives the outbox's tasks and its cache queue turns until they are quiet.
@MainActor
package func settleOutbox() async {
    for _ in 0..<40 {
        await Task.yield()
        await Task.detached {}.value
    }
}

/// An outbox on `cache` that sends through `server`, with a retry policy of 1, 2, 4… seconds.
@MainActor
package func makeOutbox(
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
    package func finishIfRunning(with error: (any Error)? = nil) async {
        guard runningCount > 0 else { return }
        await finish(with: error)
    }
}
