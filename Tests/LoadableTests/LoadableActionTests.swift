import Loadable
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

/// The rules of `LoadableAction`, one test (or truth table) each, in the order of its
/// documentation. Works are held by a ``HeldWorks`` until the test finishes them.
@Suite("LoadableAction")
@MainActor
struct LoadableActionTests {
    typealias Action = LoadableAction<Int, Int>

    nonisolated static let everyConcurrency: [Action.Concurrency] = [.dropWhileRunning, .cancelPrevious, .enqueue]

    func makeAction(
        _ concurrency: Action.Concurrency = .dropWhileRunning,
        isEnabled: Bool = true,
        cooperative: Bool = true,
        works: HeldWorks
    ) -> Action {
        Action(concurrency: concurrency, isEnabled: isEnabled) { id in
            try await works.work(id, cooperative: cooperative)
        }
    }

    /// Runs `id` to its end with `result`, through `send`.
    func complete(_ action: Action, _ id: Int, with result: Result<Int, any Error>, works: HeldWorks) async {
        let task = action.send(id)
        await yield(until: { works.heldIDs.contains(id) })
        works.finish(id, with: result)
        _ = await ended(task)
    }

    // MARK: - 1. The start

    @Test("a new action is idle, without contents or error, and can run", arguments: everyConcurrency)
    func startsIdle(concurrency: Action.Concurrency) {
        let action = makeAction(concurrency, works: HeldWorks())
        #expect(action.loadableState == .idle)
        #expect(action.contents == nil)
        #expect(!action.isContentsAvailable)
        #expect(action.error == nil)
        #expect(!action.isRunning)
        #expect(action.canRun)
        #expect(action.isEnabled)
        #expect(action.concurrency == concurrency)
    }

    // MARK: - 2. Admission

    @Test(
        "a run from a task already cancelled throws CancellationError, starts nothing, notifies nobody",
        arguments: everyConcurrency)
    func cancelledCallerStartsNothing(concurrency: Action.Concurrency) async {
        let works = HeldWorks()
        let action = makeAction(concurrency, works: works)
        let recorder = Recorder(action)
        let caller = Task { try await action.run(1) }
        caller.cancel()
        let result = await ended(caller)
        #expect(throws: CancellationError.self) { try result.get() }
        await settleAction()
        #expect(action.loadableState == .idle)
        #expect(!action.isRunning)
        #expect(recorder.count == 0)
        #expect(works.startedIDs.isEmpty)
    }

    @Test("a disabled action refuses a run with .disabled and changes nothing", arguments: everyConcurrency)
    func disabledRefuses(concurrency: Action.Concurrency) async {
        let works = HeldWorks()
        let action = makeAction(concurrency, works: works)
        await complete(action, 1, with: .success(10), works: works)
        await complete(action, 2, with: .failure(TestError("offline")), works: works)
        action.isEnabled = false
        let recorder = Recorder(action)
        await #expect(throws: LoadableActionError.disabled) { try await action.run(3) }
        #expect(action.loadableState == .didFailToSync)
        #expect(action.error as? TestError == TestError("offline"))
        #expect(action.contents == 10)
        #expect(recorder.count == 0)
        #expect(!action.isRunning)
        await settleAction()
        #expect(works.startedIDs == [1, 2])
    }

    @Test("with .dropWhileRunning, a run while one runs is refused with .busy and changes nothing")
    func busyRefuses() async throws {
        let works = HeldWorks()
        let action = makeAction(works: works)
        let first = action.send(1)
        let recorder = Recorder(action)
        await #expect(throws: LoadableActionError.busy) { try await action.run(2) }
        #expect(recorder.count == 0)
        #expect(action.loadableState == .syncing)
        await yield(until: { works.count == 1 })
        works.succeed(1, with: 10)
        #expect(try await ended(first).get() == 10)
        #expect(works.startedIDs == [1])
        // Once the run ended, the next one is admitted.
        let second = action.send(3)
        #expect(action.loadableState == .syncing)
        second.cancel()
        _ = await ended(second)
    }

    @Test(
        "an admitted run moves to syncing, clears the error, keeps the contents, and notifies once",
        arguments: everyConcurrency)
    func admissionNotifiesOnce(concurrency: Action.Concurrency) async {
        let works = HeldWorks()
        let action = makeAction(concurrency, works: works)
        await complete(action, 1, with: .success(10), works: works)
        await complete(action, 2, with: .failure(TestError()), works: works)
        let recorder = Recorder(action)
        var seen: [(LoadableState, Bool, Int?)] = []
        await observing(action, { seen.append(($0.loadableState, $0.error == nil, $0.contents)) }) {
            let task = action.send(3)
            #expect(recorder.states == [.syncing])
            #expect(seen.count == 1)
            #expect(seen.first?.0 == .syncing)
            #expect(seen.first?.1 == true)
            #expect(seen.first?.2 == 10)
            #expect(action.isRunning)
            task.cancel()
            _ = await ended(task)
        }
    }

    @Test(
        "admitting a run while another is pending changes nothing visible and notifies nobody",
        arguments: [Action.Concurrency.cancelPrevious, .enqueue])
    func admissionWhileSyncingIsSilent(concurrency: Action.Concurrency) async {
        let works = HeldWorks()
        let action = makeAction(concurrency, works: works)
        let first = action.send(1)
        let recorder = Recorder(action)
        let second = action.send(2)
        #expect(recorder.count == 0)
        #expect(action.loadableState == .syncing)
        second.cancel()
        first.cancel()
        _ = (await ended(first), await ended(second))
        await settleAction()
        #expect(action.loadableState == .idle)
        #expect(recorder.states == [.idle])
    }

    // MARK: - 3. The work's task, cancellation by the caller

    @Test("the work runs on the main actor, in a task of the action's own, after run(_:) admitted it")
    func workRunsInItsOwnTask() async throws {
        @MainActor final class Seen {
            weak var action: Action?
            /// The hash of the work's task (a pointer while it runs: the caller's runs meanwhile).
            var workTask: Int?
            var stateInWork: LoadableState?
        }
        let seen = Seen()
        let action = Action { input in
            MainActor.assertIsolated()
            seen.workTask = withUnsafeCurrentTask { $0?.hashValue }
            seen.stateInWork = seen.action?.loadableState
            return input * 2
        }
        seen.action = action
        let callerTask = try await Task { () -> Int? in
            let task = withUnsafeCurrentTask { $0?.hashValue }
            _ = try await action.run(21)
            return task
        }.value
        #expect(seen.workTask != nil)
        #expect(callerTask != nil)
        #expect(seen.workTask != callerTask)
        #expect(seen.stateInWork == .syncing)
        #expect(action.contents == 42)
    }

    @Test(
        "cancelling a caller cancels its running run: it throws what the work ends with, the state goes back",
        arguments: everyConcurrency)
    func callerCancelsRunningRun(concurrency: Action.Concurrency) async {
        let works = HeldWorks()
        let action = makeAction(concurrency, works: works)
        await complete(action, 1, with: .failure(TestError("before")), works: works)
        let recorder = Recorder(action)
        let caller = Task { try await action.run(2) }
        await yield(until: { works.count == 1 })
        caller.cancel()
        let result = await ended(caller)
        #expect(throws: CancellationError.self) { try result.get() }
        await settleAction()
        #expect(recorder.states == [.syncing, .didFailToSync])
        #expect(action.error as? TestError == TestError("before"))
        #expect(!action.isRunning)
    }

    @Test(
        "a cancelled run whose work ignores the cancel returns its output to its caller only",
        arguments: everyConcurrency)
    func stubbornCancelledRun(concurrency: Action.Concurrency) async throws {
        let works = HeldWorks()
        let action = makeAction(concurrency, cooperative: false, works: works)
        await complete(action, 1, with: .success(10), works: works)
        let recorder = Recorder(action)
        let caller = Task { try await action.run(2) }
        await yield(until: { works.count == 1 })
        caller.cancel()
        await settleAction()
        // The work goes on: the run still counts (no second work may start beside it).
        #expect(action.isRunning)
        #expect(action.loadableState == .syncing)
        works.succeed(2, with: 20)
        #expect(try await ended(caller).get() == 20)
        await settleAction()
        #expect(action.loadableState == .didSyncSuccessfully)
        #expect(action.contents == 10)
        #expect(recorder.states == [.syncing, .didSyncSuccessfully])
    }

    @Test("a queued run whose caller is cancelled leaves the queue at once and its work never starts")
    func queuedRunCancelled() async throws {
        let works = HeldWorks()
        let action = makeAction(.enqueue, works: works)
        let first = action.send(1)
        let second = action.send(2)
        await yield(until: { works.count == 1 })
        await settleAction()
        #expect(action.description.hasSuffix("runs: 2>"))
        second.cancel()
        // At once: the cancel came from the main thread.
        #expect(action.description.hasSuffix("runs: 1>"))
        await #expect(throws: CancellationError.self) { try await ended(second).get() }
        works.succeed(1, with: 10)
        #expect(try await ended(first).get() == 10)
        await settleAction()
        #expect(works.startedIDs == [1])
        #expect(action.loadableState == .didSyncSuccessfully)
        #expect(action.contents == 10)
    }

    @Test("a queued run cancelled from another thread leaves the queue too")
    func queuedRunCancelledOffMain() async {
        let works = HeldWorks()
        let action = makeAction(.enqueue, works: works)
        let first = action.send(1)
        let second = action.send(2)
        await yield(until: { works.count == 1 })
        await settleAction()
        await Task.detached { second.cancel() }.value
        await #expect(throws: CancellationError.self) { try await ended(second).get() }
        #expect(action.description.hasSuffix("runs: 1>"))
        works.succeed(1, with: 10)
        _ = await ended(first)
        await settleAction()
        #expect(works.startedIDs == [1])
    }

    // MARK: - 4. .cancelPrevious

    @Test("with .cancelPrevious, a new run cancels the running one, whose output never reaches the state")
    func cancelPreviousSupersedes() async throws {
        @MainActor final class Log {
            var cancelled: [Int] = []
        }
        let works = HeldWorks()
        let log = Log()
        let action = Action(concurrency: .cancelPrevious) { id in
            let value = try await works.work(id, cooperative: false)
            if Task.isCancelled { log.cancelled.append(id) }
            return value
        }
        let recorder = Recorder(action)
        let first = action.send(1)
        await yield(until: { works.count == 1 })
        let second = action.send(2)
        await yield(until: { works.count == 2 })
        #expect(recorder.states == [.syncing])
        // The superseded run ends first: only its caller hears of it.
        works.succeed(1, with: 10)
        #expect(try await ended(first).get() == 10)
        await settleAction()
        #expect(log.cancelled == [1])
        #expect(action.loadableState == .syncing)
        #expect(action.contents == nil)
        #expect(recorder.count == 1)
        works.succeed(2, with: 20)
        #expect(try await ended(second).get() == 20)
        await settleAction()
        #expect(action.contents == 20)
        #expect(recorder.states == [.syncing, .didSyncSuccessfully])
    }

    @Test("with .cancelPrevious, a superseded run that ends after the new one changes nothing")
    func cancelPreviousLateResult() async throws {
        let works = HeldWorks()
        let action = makeAction(.cancelPrevious, cooperative: false, works: works)
        let first = action.send(1)
        await yield(until: { works.count == 1 })
        let second = action.send(2)
        await yield(until: { works.count == 2 })
        works.fail(2, with: TestError("second"))
        await #expect(throws: TestError("second")) { try await ended(second).get() }
        await settleAction()
        let recorder = Recorder(action)
        #expect(action.loadableState == .didFailToSync)
        #expect(!action.isRunning)
        works.succeed(1, with: 10)
        #expect(try await ended(first).get() == 10)
        await settleAction()
        #expect(action.loadableState == .didFailToSync)
        #expect(action.contents == nil)
        #expect(recorder.count == 0)
    }

    @Test("with .cancelPrevious, a cooperative superseded run throws CancellationError to its caller")
    func cancelPreviousCooperative() async throws {
        let works = HeldWorks()
        let action = makeAction(.cancelPrevious, works: works)
        let first = action.send(1)
        await yield(until: { works.count == 1 })
        let second = action.send(2)
        await #expect(throws: CancellationError.self) { try await ended(first).get() }
        await yield(until: { works.heldIDs == [2] })
        works.succeed(2, with: 20)
        #expect(try await ended(second).get() == 20)
        await settleAction()
        #expect(action.loadableState == .didSyncSuccessfully)
    }

    // MARK: - 5. .enqueue

    @Test("with .enqueue, runs run one at a time in order; each success shows its output, an earlier failure does not")
    func enqueueInOrder() async throws {
        let works = HeldWorks()
        let action = makeAction(.enqueue, works: works)
        let recorder = Recorder(action)
        var contentsSeen: [Int?] = []
        try await observing(action, { contentsSeen.append($0.contents) }) { () async throws in
            let tasks = [action.send(1), action.send(2), action.send(3)]
            await settleAction()
            #expect(works.startedIDs == [1])
            works.succeed(1, with: 10)
            #expect(try await ended(tasks[0]).get() == 10)
            await settleAction()
            #expect(action.loadableState == .syncing)
            #expect(action.contents == 10)
            #expect(works.startedIDs == [1, 2])
            works.fail(2, with: TestError("second"))
            await #expect(throws: TestError("second")) { try await ended(tasks[1]).get() }
            await settleAction()
            #expect(action.loadableState == .syncing)
            #expect(action.error == nil)
            #expect(works.startedIDs == [1, 2, 3])
            works.succeed(3, with: 30)
            #expect(try await ended(tasks[2]).get() == 30)
            await settleAction()
            #expect(recorder.states == [.syncing, .syncing, .didSyncSuccessfully])
            #expect(contentsSeen == [nil, 10, 30])
        }
    }

    @Test("with .enqueue, an earlier run cancelled by its caller keeps its output from the contents")
    func enqueueCancelledEarlierRun() async throws {
        let works = HeldWorks()
        let action = makeAction(.enqueue, cooperative: false, works: works)
        let first = action.send(1)
        let second = action.send(2)
        await yield(until: { works.count == 1 })
        await settleAction()
        let recorder = Recorder(action)
        first.cancel()
        works.succeed(1, with: 10)
        #expect(try await ended(first).get() == 10)
        await yield(until: { works.heldIDs == [2] })
        #expect(action.contents == nil)
        #expect(recorder.count == 0)
        works.succeed(2, with: 20)
        #expect(try await ended(second).get() == 20)
        #expect(action.contents == 20)
    }

    @Test("with .enqueue, the last run's failure shows, with the contents of the runs before it")
    func enqueueLastFails() async throws {
        let works = HeldWorks()
        let action = makeAction(.enqueue, works: works)
        let first = action.send(1)
        let second = action.send(2)
        await yield(until: { works.count == 1 })
        works.succeed(1, with: 10)
        _ = try await ended(first).get()
        await yield(until: { works.count == 1 })
        works.fail(2, with: TestError("last"))
        _ = await ended(second)
        await settleAction()
        #expect(action.loadableState == .didFailToSync)
        #expect(action.error as? TestError == TestError("last"))
        #expect(action.contents == 10)
    }

    @Test("with .enqueue, when the latest run leaves the queue, the running one's outcome shows")
    func enqueueLatestLeaves() async throws {
        let works = HeldWorks()
        let action = makeAction(.enqueue, works: works)
        let first = action.send(1)
        let second = action.send(2)
        await yield(until: { works.count == 1 })
        await settleAction()
        second.cancel()
        works.fail(1, with: TestError("first"))
        _ = await ended(first)
        await settleAction()
        #expect(action.loadableState == .didFailToSync)
        #expect(action.error as? TestError == TestError("first"))
    }

}
