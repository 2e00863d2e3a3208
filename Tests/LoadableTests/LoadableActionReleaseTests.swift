import Loadable
import LoadableSupport
import LoadableTestSupport
import LoadableTesting
import Testing

/// What keeps a `LoadableAction` alive, what its release does to pending runs, and that nothing
/// outlives it.
@Suite("LoadableAction release")
@MainActor
struct LoadableActionReleaseTests {
    typealias Action = LoadableAction<Int, Int>

    /// Something the work captures, to tell that the work (and every task that holds it) is gone.
    final class Sentinel: Sendable {}

    /// An action whose work captures `sentinel`.
    func makeAction(
        _ concurrency: Action.Concurrency,
        cooperative: Bool = true,
        works: HeldWorks,
        sentinel: Sentinel
    ) -> Action {
        Action(concurrency: concurrency) { id in
            withExtendedLifetime(sentinel) {}
            return try await works.work(id, cooperative: cooperative)
        }
    }

    @Test("a run(_:) caller keeps the action alive until its run ends")
    func runCallerKeepsAlive() async throws {
        let works = HeldWorks()
        var sentinel: Sentinel? = Sentinel()
        weak let weakSentinel = sentinel
        var action: Action? = makeAction(.dropWhileRunning, works: works, sentinel: sentinel!)
        sentinel = nil
        weak let weakAction = action
        let caller = Task { [action] in try await action!.run(1) }
        await yield(until: { works.count == 1 })
        action = nil
        await settleAction()
        #expect(weakAction != nil)
        #expect(weakAction?.loadableState == .syncing)
        works.succeed(1, with: 10)
        #expect(try await ended(caller).get() == 10)
        await settleAction()
        #expect(weakAction == nil)
        #expect(weakSentinel == nil)
    }

    @Test("releasing an action that only send tasks wait for cancels its running run and ends its queued runs")
    func releaseCancelsRuns() async {
        let works = HeldWorks()
        var sentinel: Sentinel? = Sentinel()
        weak let weakSentinel = sentinel
        var action: Action? = makeAction(.enqueue, works: works, sentinel: sentinel!)
        sentinel = nil
        weak let weakAction = action
        let tasks = [action!.send(1), action!.send(2), action!.send(3)]
        await yield(until: { works.count == 1 })
        action = nil
        #expect(weakAction == nil)
        for task in tasks {
            await #expect(throws: CancellationError.self) { try await ended(task).get() }
        }
        await settleAction()
        #expect(works.startedIDs == [1])
        #expect(works.count == 0)
        #expect(weakSentinel == nil)
    }

    @Test("a running work that ignores the release's cancel still gives its send task its output")
    func releaseStubbornRun() async throws {
        let works = HeldWorks()
        var sentinel: Sentinel? = Sentinel()
        weak let weakSentinel = sentinel
        var action: Action? = makeAction(.enqueue, cooperative: false, works: works, sentinel: sentinel!)
        sentinel = nil
        weak let weakAction = action
        let first = action!.send(1)
        let second = action!.send(2)
        await yield(until: { works.count == 1 })
        action = nil
        #expect(weakAction == nil)
        await #expect(throws: CancellationError.self) { try await ended(second).get() }
        works.succeed(1, with: 10)
        #expect(try await ended(first).get() == 10)
        await settleAction()
        #expect(works.startedIDs == [1])
        #expect(weakSentinel == nil)
    }

    @Test("a superseded run still working does not keep the action alive", arguments: [true, false])
    func supersededRunReleased(cooperative: Bool) async throws {
        let works = HeldWorks()
        var action: Action? = makeAction(.cancelPrevious, cooperative: cooperative, works: works, sentinel: Sentinel())
        weak let weakAction = action
        let first = action!.send(1)
        await yield(until: { works.count == 1 })
        let second = action!.send(2)
        await yield(until: { works.heldIDs.contains(2) })
        action = nil
        #expect(weakAction == nil)
        guard !cooperative else {
            await #expect(throws: CancellationError.self) { try await ended(first).get() }
            await #expect(throws: CancellationError.self) { try await ended(second).get() }
            return
        }
        works.succeed(2, with: 20)
        works.succeed(1, with: 10)
        // Both were cancelled (superseded, released); their works ignored it.
        #expect(try await ended(first).get() == 10)
        #expect(try await ended(second).get() == 20)
    }

    @Test("an action released on another thread hands the cancels to the main actor")
    func releaseOnAnotherThreadCancelsRuns() async {
        let works = HeldWorks()
        var sentinel: Sentinel? = Sentinel()
        weak let weakSentinel = sentinel
        let box = Locked<Action?>(makeAction(.enqueue, works: works, sentinel: sentinel!))
        sentinel = nil
        let tasks = box.withLock { action in [action!.send(1), action!.send(2)] }
        weak let weakAction = box.withLock { $0 }
        await yield(until: { works.count == 1 })
        releaseOnAnotherThread(box)
        #expect(weakAction == nil)
        for task in tasks {
            await #expect(throws: CancellationError.self) { try await ended(task).get() }
        }
        await settleAction()
        #expect(works.startedIDs == [1])
        #expect(weakSentinel == nil)
    }

    @Test("an action released by its own observer while it notifies syncing cancels the run it just admitted")
    func releasedInsideSyncingCallback() async {
        final class Holder {
            var action: Action?
        }
        let works = HeldWorks()
        let holder = Holder()
        holder.action = makeAction(.dropWhileRunning, works: works, sentinel: Sentinel())
        weak let weakAction = holder.action
        var calls = 0
        let token = holder.action?.addObserver { action in
            calls += 1
            holder.action = nil
            // The action stays valid until the round ends.
            #expect(action.loadableState == .syncing)
        }
        let task = holder.action?.send(1)
        #expect(calls == 1)
        #expect(weakAction == nil)
        #expect(token?.isActive == false)
        await #expect(throws: CancellationError.self) { try await ended(task!).get() }
    }

    @Test("an action released by its own observer of a run's outcome cancels the next queued run")
    func releasedInsideOutcomeCallback() async throws {
        final class Holder {
            var action: Action?
        }
        let works = HeldWorks()
        let holder = Holder()
        holder.action = makeAction(.enqueue, works: works, sentinel: Sentinel())
        weak let weakAction = holder.action
        let token = holder.action?.observe { action in
            if action.contents != nil { holder.action = nil }
        }
        let first = holder.action!.send(1)
        let second = holder.action!.send(2)
        await yield(until: { works.count == 1 })
        works.succeed(1, with: 10)
        #expect(try await ended(first).get() == 10)
        await #expect(throws: CancellationError.self) { try await ended(second).get() }
        #expect(weakAction == nil)
        await settleAction()
        #expect(works.count == 0)
        withExtendedLifetime(token) {}
    }
}
