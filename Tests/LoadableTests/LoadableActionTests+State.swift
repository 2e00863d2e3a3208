import Loadable
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

extension LoadableActionTests {
    // MARK: - 6. The state shows the latest run

    @Test("a success shows the output; a failure shows the error and keeps the contents; both are recorded")
    func outcomes() async throws {
        let works = HeldWorks()
        let action = makeAction(works: works)
        let recorder = Recorder(action)
        await complete(action, 1, with: .success(10), works: works)
        #expect(action.loadableState == .didSyncSuccessfully)
        #expect(action.contents == 10)
        #expect(action.isContentsAvailable)
        await complete(action, 2, with: .failure(TestError(code: 1)), works: works)
        await complete(action, 3, with: .failure(TestError(code: 2)), works: works)
        #expect(action.loadableState == .didFailToSync)
        #expect(action.error as? TestError == TestError(code: 2))
        #expect(action.contents == 10)
        #expect(action.snapshot.consecutiveFailures == 2)
        #expect(action.snapshot.lastError as? TestError == TestError(code: 2))
        let retry = action.send(4)
        #expect(action.snapshot.lastError as? TestError == TestError(code: 2))
        #expect(action.error == nil)
        await yield(until: { works.count == 1 })
        works.succeed(4, with: 40)
        _ = try await ended(retry).get()
        await settleAction()
        #expect(action.snapshot.consecutiveFailures == 0)
        #expect(action.snapshot.lastError == nil)
        #expect(
            recorder.states == [
                .syncing, .didSyncSuccessfully, .syncing, .didFailToSync, .syncing, .didFailToSync, .syncing,
                .didSyncSuccessfully,
            ])
    }

    /// The state an action is in before a run that gets cancelled.
    enum Before: String, CaseIterable, Sendable {
        case idle, succeeded, failed
    }

    @Test(
        "a cancelled latest run puts back the state (and error) from before the runs began, contents kept",
        arguments: Before.allCases, everyConcurrency)
    func cancelRestoresState(before: Before, concurrency: Action.Concurrency) async {
        let works = HeldWorks()
        let action = makeAction(concurrency, works: works)
        switch before {
        case .idle: break
        case .succeeded: await complete(action, 1, with: .success(10), works: works)
        case .failed:
            await complete(action, 1, with: .success(10), works: works)
            await complete(action, 2, with: .failure(TestError("kept")), works: works)
        }
        let state = action.loadableState
        let contents = action.contents
        let recorder = Recorder(action)
        let task = action.send(3)
        await yield(until: { works.count == 1 })
        task.cancel()
        _ = await ended(task)
        await settleAction()
        #expect(action.loadableState == state)
        #expect(action.contents == contents)
        #expect(action.error as? TestError == (before == .failed ? TestError("kept") : nil))
        #expect(recorder.states == [.syncing, state])
    }

    @Test("a work that throws CancellationError without being cancelled counts as cancelled")
    func workThrowingCancellation() async {
        let works = HeldWorks()
        let action = makeAction(works: works)
        await complete(action, 1, with: .success(10), works: works)
        let recorder = Recorder(action)
        await complete(action, 2, with: .failure(CancellationError()), works: works)
        #expect(action.loadableState == .didSyncSuccessfully)
        #expect(action.error == nil)
        #expect(recorder.states == [.syncing, .didSyncSuccessfully])
        #expect(action.snapshot.consecutiveFailures == 0)
    }

    // MARK: - 7. isRunning and canRun

    @Test(
        "isRunning and canRun follow the runs, the concurrency and isEnabled",
        arguments: everyConcurrency, [true, false])
    func runningAndCanRun(concurrency: Action.Concurrency, isEnabled: Bool) async {
        let works = HeldWorks()
        let action = makeAction(concurrency, isEnabled: true, works: works)
        let task = action.send(1)
        action.isEnabled = isEnabled
        #expect(action.isRunning)
        #expect(action.canRun == (isEnabled && concurrency != .dropWhileRunning))
        await yield(until: { works.count == 1 })
        works.succeed(1, with: 1)
        _ = await ended(task)
        await settleAction()
        #expect(!action.isRunning)
        #expect(action.canRun == isEnabled)
    }

    // MARK: - 8. reset()

    @Test("reset() after a failure goes back to idle, keeps the contents and notifies once")
    func resetAfterFailure() async {
        let works = HeldWorks()
        let action = makeAction(works: works)
        await complete(action, 1, with: .success(10), works: works)
        await complete(action, 2, with: .failure(TestError()), works: works)
        let recorder = Recorder(action)
        action.reset()
        #expect(action.loadableState == .idle)
        #expect(action.error == nil)
        #expect(action.contents == 10)
        #expect(recorder.states == [.idle])
        action.reset()
        #expect(recorder.count == 1)
    }

    @Test("reset() does nothing while a run is running or queued, nor when already idle")
    func resetWhileRunning() async {
        let works = HeldWorks()
        let action = makeAction(.enqueue, works: works)
        let recorder = Recorder(action)
        action.reset()
        #expect(recorder.count == 0)
        let first = action.send(1)
        let second = action.send(2)
        action.reset()
        #expect(action.loadableState == .syncing)
        #expect(recorder.count == 1)
        first.cancel()
        second.cancel()
        _ = (await ended(first), await ended(second))
    }

    // MARK: - 9. isEnabled

    @Test("changing isEnabled notifies once with the state unchanged; the same value does nothing")
    func enabledNotifies() {
        let action = makeAction(works: HeldWorks())
        let recorder = Recorder(action)
        action.isEnabled = true
        #expect(recorder.count == 0)
        action.isEnabled = false
        #expect(recorder.states == [.idle])
        #expect(!action.canRun)
        action.isEnabled = false
        #expect(recorder.count == 1)
        action.isEnabled = true
        #expect(recorder.states == [.idle, .idle])
    }

    @Test("disabling does not stop a running run, and queued runs still run")
    func disablingKeepsRuns() async throws {
        let works = HeldWorks()
        let action = makeAction(.enqueue, works: works)
        let first = action.send(1)
        let second = action.send(2)
        action.isEnabled = false
        await yield(until: { works.count == 1 })
        works.succeed(1, with: 10)
        #expect(try await ended(first).get() == 10)
        await yield(until: { works.count == 1 })
        works.succeed(2, with: 20)
        #expect(try await ended(second).get() == 20)
        await settleAction()
        #expect(action.loadableState == .didSyncSuccessfully)
        #expect(action.contents == 20)
        #expect(!action.canRun)
    }

    // MARK: - 10. send(_:)

    @Test("send admits synchronously and its task gives the output")
    func sendAdmitsAtOnce() async throws {
        let works = HeldWorks()
        let action = makeAction(works: works)
        let task = action.send(1)
        #expect(action.loadableState == .syncing)
        #expect(action.isRunning)
        await yield(until: { works.count == 1 })
        works.succeed(1, with: 10)
        #expect(try await ended(task).get() == 10)
    }

    /// Why a send is refused.
    enum Refusal: String, CaseIterable, Sendable {
        case busy, disabled, cancelled
    }

    @Test(
        "a refused send returns a task that fails with the reason; nothing is thrown, nothing changes",
        arguments: Refusal.allCases)
    func refusedSend(refusal: Refusal) async throws {
        let works = HeldWorks()
        let action = makeAction(isEnabled: refusal != .disabled, works: works)
        let running = refusal == .busy ? action.send(1) : nil
        let recorder = Recorder(action)
        let state = action.loadableState
        let task: Task<Int, any Error>
        if refusal == .cancelled {
            let outer = Task { action.send(2) }
            outer.cancel()
            task = await outer.value
        } else {
            task = action.send(2)
        }
        #expect(action.loadableState == state)
        #expect(recorder.count == 0)
        let result = await ended(task)
        switch refusal {
        case .busy: #expect(throws: LoadableActionError.busy) { try result.get() }
        case .disabled: #expect(throws: LoadableActionError.disabled) { try result.get() }
        case .cancelled: #expect(throws: CancellationError.self) { try result.get() }
        }
        await settleAction()
        #expect(!works.startedIDs.contains(2))
        running?.cancel()
        if let running { _ = await ended(running) }
    }

    @Test("cancelling the task of a send cancels its run", arguments: everyConcurrency)
    func cancelSendTask(concurrency: Action.Concurrency) async {
        let works = HeldWorks()
        let action = makeAction(concurrency, works: works)
        let task = action.send(1)
        // Even before the task began waiting.
        task.cancel()
        await #expect(throws: CancellationError.self) { try await ended(task).get() }
        await settleAction()
        #expect(action.loadableState == .idle)
        #expect(!action.isRunning)
    }
}
