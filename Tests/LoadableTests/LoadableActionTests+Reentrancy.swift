import Loadable
import LoadableSupport
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

extension LoadableActionTests {
    // MARK: - 12. Re-entrancy

    @Test("an observer of syncing may run, send, reset and toggle isEnabled", arguments: everyConcurrency)
    func reentrantObserver(concurrency: Action.Concurrency) async {
        let works = HeldWorks()
        let action = makeAction(concurrency, works: works)
        var log: [String] = []
        var sent: [Task<Int, any Error>] = []
        var reacted = false
        await observing(
            action,
            { action in
                log.append("\(action.loadableState) enabled \(action.isEnabled) running \(action.isRunning)")
                guard !reacted else { return }
                reacted = true
                sent.append(action.send(2))
                action.reset()
                action.isEnabled = false
                sent.append(action.send(3))
                action.isEnabled = true
                log.append("after: \(action.loadableState)")
            }
        ) {
            let first = action.send(1)
            #expect(
                log == [
                    "syncing enabled true running true",
                    "after: syncing",
                    "syncing enabled true running true",
                ])
            if concurrency == .dropWhileRunning {
                let second = await ended(sent[0])
                #expect(throws: LoadableActionError.busy) { try second.get() }
            }
            let third = await ended(sent[1])
            #expect(throws: LoadableActionError.disabled) { try third.get() }
            first.cancel()
            sent[0].cancel()
            _ = (await ended(first), await ended(sent[0]))
            await settleAction()
            #expect(action.loadableState == .idle)
            #expect(!action.isRunning)
        }
    }

    @Test("an observer of a run's outcome may start the next run")
    func observerStartsNextRun() async throws {
        let works = HeldWorks()
        let action = makeAction(works: works)
        var next: Task<Int, any Error>?
        let recorder = Recorder(action)
        try await observing(
            action,
            { action in
                if action.loadableState == .didSyncSuccessfully, next == nil { next = action.send(2) }
            }
        ) {
            await complete(action, 1, with: .success(10), works: works)
            #expect(recorder.states == [.syncing, .didSyncSuccessfully, .syncing])
            #expect(action.loadableState == .syncing)
            await yield(until: { works.count == 1 })
            works.succeed(2, with: 20)
            let nextTask = try #require(next)
            #expect(try await ended(nextTask).get() == 20)
        }
    }

    // MARK: - 13. Observation

    /// A property a view may read.
    enum Property: String, CaseIterable, Sendable {
        case loadableState, error, isContentsAvailable, contents, isEnabled, isRunning, canRun
    }

    final class ChangeCounter: @unchecked Sendable {
        var count = 0
    }

    @Test("reading a property inside withObservationTracking reports each later change", arguments: Property.allCases)
    func observation(property: Property) async {
        let works = HeldWorks()
        let action = makeAction(works: works)
        func track() -> ChangeCounter {
            let counter = ChangeCounter()
            withObservationTracking {
                switch property {
                case .loadableState: _ = action.loadableState
                case .error: _ = action.error
                case .isContentsAvailable: _ = action.isContentsAvailable
                case .contents: _ = action.contents
                case .isEnabled: _ = action.isEnabled
                case .isRunning: _ = action.isRunning
                case .canRun: _ = action.canRun
                }
            } onChange: {
                counter.count += 1
            }
            return counter
        }
        var counter = track()
        let first = action.send(1)
        #expect(counter.count == 1, "admission")
        counter = track()
        await yield(until: { works.count == 1 })
        works.succeed(1, with: 10)
        _ = await ended(first)
        #expect(counter.count == 1, "success")
        let second = action.send(2)
        await yield(until: { works.count == 1 })
        counter = track()
        works.fail(2, with: TestError())
        _ = await ended(second)
        #expect(counter.count == 1, "failure")
        counter = track()
        action.reset()
        #expect(counter.count == 1, "reset")
        counter = track()
        action.isEnabled = false
        #expect(counter.count == 1, "isEnabled")
    }

    // MARK: - 14. Snapshots

    @Test("snapshot and snapshots() show the state, the output and the failure record")
    func snapshots() async throws {
        let works = HeldWorks()
        let action = makeAction(works: works)
        var iterator = action.snapshots(bufferingPolicy: .unbounded).makeAsyncIterator()
        #expect(await iterator.next()?.state == .idle)
        await complete(action, 1, with: .success(10), works: works)
        await complete(action, 2, with: .failure(TestError("down")), works: works)
        var snapshots: [LoadableSnapshot<Int>] = []
        for _ in 0..<4 { if let snapshot = await iterator.next() { snapshots.append(snapshot) } }
        #expect(snapshots.map(\.state) == [.syncing, .didSyncSuccessfully, .syncing, .didFailToSync])
        #expect(snapshots.last?.contents == 10)
        #expect(snapshots.last?.lastError as? TestError == TestError("down"))
        #expect(snapshots.last?.consecutiveFailures == 1)
        let snapshot = action.snapshot
        #expect(snapshot.state == .didFailToSync)
        #expect(snapshot.contents == 10)
        #expect(snapshot.error as? TestError == TestError("down"))
    }

    // MARK: - Observer rules, types, description

    @Test("observers are called once per change in the order they were added; one added in a round waits for the next")
    func observerOrder() async {
        let works = HeldWorks()
        let action = makeAction(works: works)
        var calls: [String] = []
        var late: LoadableObservation?
        let tokens = (0..<3).map { index in
            action.addObserver { action in
                calls.append("\(index)")
                if index == 0, late == nil { late = action.addObserver { _ in calls.append("late") } }
            }
        }
        await complete(action, 1, with: .success(1), works: works)
        #expect(calls == ["0", "1", "2", "0", "1", "2", "late"])
        withExtendedLifetime((tokens, late)) {}
    }

    @Test("an observer whose token was released on another thread is never called again")
    func tokenReleasedOnAnotherThread() async {
        let works = HeldWorks()
        let action = makeAction(works: works)
        var calls = 0
        let box = Locked<LoadableObservation?>(action.addObserver { _ in calls += 1 })
        releaseOnAnotherThread(box)
        await complete(action, 1, with: .success(1), works: works)
        #expect(calls == 0)
    }

    @Test("inputs and outputs need not be Sendable for run(_:)")
    func nonSendableOutput() async throws {
        let login = LoadableAction<NonSendableSession, NonSendableSession> { draft in
            NonSendableSession(user: draft.user.uppercased())
        }
        let session = try await login.run(NonSendableSession(user: "ada"))
        #expect(session.user == "ADA")
        #expect(login.contents === session)
    }

    @Test("the description names the state, the concurrency, isEnabled and the runs")
    func description() {
        let action = makeAction(.enqueue, isEnabled: false, works: HeldWorks())
        #expect(
            action.description
                == "<LoadableAction<Int, Int>: idle, contents available: no, concurrency: enqueue, enabled: no, runs: 0>"
        )
        #expect(LoadableActionError.busy.description == "busy: a run is already running")
        #expect(LoadableActionError.disabled.description == "disabled")
    }
}
