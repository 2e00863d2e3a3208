import Loadable
import LoadableTestSupport
import Testing

/// Commits that the test finishes: each waits on a continuation until the test resolves it by
/// name, and ends with `CancellationError` when its task is cancelled.
@MainActor
final class CommitGate {
    private var waiting: [String: CheckedContinuation<Int, any Error>] = [:]
    /// The commits that began, in order.
    private(set) var started: [String] = []

    /// A commit named `name`: returns the answer the test gives.
    func commit(_ name: String) async throws -> Int {
        started.append(name)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { waiting[name] = $0 }
        } onCancel: {
            Task { @MainActor in self.finish(name, with: .failure(CancellationError())) }
        }
    }

    /// Whether the commit `name` waits for the test.
    func isWaiting(_ name: String) -> Bool { waiting[name] != nil }

    /// Waits until the commit `name` waits for the test.
    func waitFor(_ name: String) async {
        await yield(until: { self.isWaiting(name) })
    }

    /// Ends the commit `name` with `result`; does nothing when it does not wait.
    func finish(_ name: String, with result: Result<Int, any Error>) {
        waiting.removeValue(forKey: name)?.resume(with: result)
    }
}

/// A list loadable whose syncs the test finishes; it counts them.
@MainActor
final class ListLoadable: Loadable<[Int]> {
    private(set) var doSyncCount = 0

    override func doSync() { doSyncCount += 1 }
}

/// A mutation started in its own task: the task and the gate's commit name.
@MainActor
struct StartedMutation {
    let name: String
    let task: Task<Int, any Error>

    /// Starts `loadable.mutate` appending `value` to the list, with the gate's commit `name`,
    /// and waits until the commit runs.
    static func append(
        _ value: Int, to loadable: PushLoadable<[Int]>, gate: CommitGate, name: String,
        reconcile: (@MainActor (inout [Int], Int) -> Void)? = nil
    ) async -> StartedMutation {
        let task = Task { @MainActor in
            try await loadable.mutate(
                optimistic: { $0.append(value) }, commit: { try await gate.commit(name) }, reconcile: reconcile)
        }
        await gate.waitFor(name)
        return StartedMutation(name: name, task: task)
    }

    /// Succeeds the commit with `answer` and waits for `mutate` to return.
    func succeed(_ gate: CommitGate, answer: Int = 0) async {
        gate.finish(name, with: .success(answer))
        _ = await task.result
    }

    /// Fails the commit with `TestError(name)` and waits for `mutate` to throw.
    func fail(_ gate: CommitGate) async {
        gate.finish(name, with: .failure(TestError(name)))
        _ = await task.result
    }
}
