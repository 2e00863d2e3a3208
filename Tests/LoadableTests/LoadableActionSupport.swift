import Loadable
import LoadableSupport
import LoadableTestSupport
import Testing

/// Works that a test holds until it finishes them, for `LoadableAction` tests.
///
/// Each call of ``work(_:cooperative:)`` suspends until the test finishes it by its identifier.
/// A cooperative work ends with `CancellationError` as soon as its task is cancelled; a stubborn
/// one ignores cancellation and waits for the test. Thread-safe: a task's cancellation handler
/// runs on the thread that cancels it.
final class HeldWorks: Sendable {
    private struct Held {
        var id: Int
        var isCooperative: Bool
        var continuation: CheckedContinuation<Int, any Error>
    }

    private struct State {
        /// The works waiting for the test, in the order they started.
        var held: [Held] = []
        /// Every work that ever started, in order.
        var started: [Int] = []
        /// Cooperative works whose task was cancelled before they held.
        var cancelledEarly: Set<Int> = []
    }

    private let state = Locked(State())

    /// The work: waits for the test (or, cooperative, for a cancel) and returns what it is given.
    @MainActor
    func work(_ id: Int, cooperative: Bool = true) async throws -> Int {
        guard cooperative else {
            return try await withCheckedThrowingContinuation { hold(id, isCooperative: false, $0) }
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { hold(id, isCooperative: true, $0) }
        } onCancel: {
            self.cancel(id)
        }
    }

    private func hold(_ id: Int, isCooperative: Bool, _ continuation: CheckedContinuation<Int, any Error>) {
        let cancelledEarly = state.withLock { state in
            state.started.append(id)
            if isCooperative, state.cancelledEarly.remove(id) != nil { return true }
            state.held.append(Held(id: id, isCooperative: isCooperative, continuation: continuation))
            return false
        }
        if cancelledEarly { continuation.resume(throwing: CancellationError()) }
    }

    private func cancel(_ id: Int) {
        let continuation = state.withLock { state -> CheckedContinuation<Int, any Error>? in
            guard let index = state.held.firstIndex(where: { $0.id == id }) else {
                state.cancelledEarly.insert(id)
                return nil
            }
            guard state.held[index].isCooperative else { return nil }
            return state.held.remove(at: index).continuation
        }
        continuation?.resume(throwing: CancellationError())
    }

    /// The identifiers of the works waiting for the test, in the order they started.
    var heldIDs: [Int] { state.withLock { $0.held.map(\.id) } }

    /// The identifiers of every work that ever started, in order.
    var startedIDs: [Int] { state.withLock { $0.started } }

    /// The number of works waiting for the test.
    var count: Int { state.withLock { $0.held.count } }

    /// Ends the held work `id` with `result`; records an issue if it is not held.
    func finish(_ id: Int, with result: Result<Int, any Error>, sourceLocation: SourceLocation = #_sourceLocation) {
        let continuation = state.withLock { state -> CheckedContinuation<Int, any Error>? in
            guard let index = state.held.firstIndex(where: { $0.id == id }) else { return nil }
            return state.held.remove(at: index).continuation
        }
        guard let continuation else {
            Issue.record("work \(id) is not held", sourceLocation: sourceLocation)
            return
        }
        continuation.resume(with: result)
    }

    /// Ends the held work `id` with `value`.
    func succeed(_ id: Int, with value: Int, sourceLocation: SourceLocation = #_sourceLocation) {
        finish(id, with: .success(value), sourceLocation: sourceLocation)
    }

    /// Ends the held work `id` by throwing `error`.
    func fail(_ id: Int, with error: any Error, sourceLocation: SourceLocation = #_sourceLocation) {
        finish(id, with: .failure(error), sourceLocation: sourceLocation)
    }
}

/// Gives the main actor a fixed number of turns: enough for every hop a step of an action test
/// starts (a work's task, a caller resuming, a collector reading a task's result) to run.
@MainActor
func settleAction(turns: Int = 20) async {
    for _ in 0..<turns { await Task.yield() }
}

/// A class that is not `Sendable`, for checking that an action's output need not be.
final class NonSendableSession {
    let user: String
    init(user: String) { self.user = user }
}

/// Where ``ended(_:limit:sourceLocation:)`` collects a task's result.
@MainActor
private final class ResultBox<Success: Sendable> {
    var result: Result<Success, any Error>?
}

/// The error ``ended(_:limit:sourceLocation:)`` gives for a task that did not end.
struct StillRunning: Error {}

/// What `task` ended with, waiting at most `limit` turns of the main actor: a broken rule that
/// leaves a caller waiting fails the test (with ``StillRunning``) instead of hanging it.
@MainActor
func ended<Success: Sendable>(
    _ task: Task<Success, any Error>,
    limit: Int = 10_000,
    sourceLocation: SourceLocation = #_sourceLocation
) async -> Result<Success, any Error> {
    let box = ResultBox<Success>()
    Task { box.result = await task.result }
    await yield(until: { box.result != nil }, limit: limit, sourceLocation: sourceLocation)
    return box.result ?? .failure(StillRunning())
}
