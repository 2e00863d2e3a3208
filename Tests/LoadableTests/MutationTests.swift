import Loadable
import LoadableSupport
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

/// `PushLoadable.mutate(optimistic:commit:reconcile:)`: optimistic changes as layers over the base
/// contents, each kept or taken back on its own, with commits held on continuations.
@Suite("Optimistic changes")
@MainActor
struct MutationTests {
    /// A list that synced `base` and has one recorder.
    private func list(_ base: [Int] = [1, 2]) -> (ListLoadable, Recorder) {
        let list = ListLoadable()
        list.setDidSyncSuccessfully(base)
        return (list, Recorder(list))
    }

    // MARK: - The cases

    @Test("A and B both fail: the contents are the base exactly")
    func bothFail() async {
        let (list, recorder) = list()
        let gate = CommitGate()
        let a = await StartedMutation.append(10, to: list, gate: gate, name: "A")
        let b = await StartedMutation.append(20, to: list, gate: gate, name: "B")
        #expect(list.contents == [1, 2, 10, 20])
        await a.fail(gate)
        #expect(list.contents == [1, 2, 20])
        await b.fail(gate)
        #expect(list.contents == [1, 2])
        #expect(list.baseContents == [1, 2])
        // One notification per layer added and per layer removed; the state never moved.
        #expect(recorder.states == Array(repeating: .didSyncSuccessfully, count: 4))
        #expect(list.error == nil)
    }

    @Test("A fails, B succeeds: only B's change stays, in either order")
    func oneFailsOneSucceeds() async {
        for failFirst in [true, false] {
            let (list, recorder) = list()
            let gate = CommitGate()
            let a = await StartedMutation.append(10, to: list, gate: gate, name: "A")
            let b = await StartedMutation.append(20, to: list, gate: gate, name: "B")
            if failFirst {
                await a.fail(gate)
                await b.succeed(gate)
            } else {
                await b.succeed(gate)
                await a.fail(gate)
            }
            #expect(list.contents == [1, 2, 20])
            #expect(list.baseContents == [1, 2, 20])
            #expect(recorder.count == 4)
            #expect(await (try? a.task.value) == nil)
            #expect(await (try? b.task.value) == 0)
        }
    }

    @Test("a refresh between two changes: the new base with B's layer on top, A's gone")
    func refreshBetween() async {
        let (list, recorder) = list()
        let gate = CommitGate()
        let a = await StartedMutation.append(10, to: list, gate: gate, name: "A")
        await a.fail(gate)
        let b = await StartedMutation.append(20, to: list, gate: gate, name: "B")
        list.sync()
        list.setDidSyncSuccessfully([7, 8, 9])
        #expect(list.contents == [7, 8, 9, 20])
        #expect(list.baseContents == [7, 8, 9])
        await b.succeed(gate)
        #expect(list.contents == [7, 8, 9, 20])
        // A added, A removed, B added, syncing, success, B committed.
        #expect(
            recorder.states == [
                .didSyncSuccessfully, .didSyncSuccessfully, .didSyncSuccessfully, .syncing, .didSyncSuccessfully,
                .didSyncSuccessfully,
            ])
    }

    @Test("a sync that succeeds while two changes are pending applies both again, in start order")
    func syncReappliesLayersInOrder() async {
        let (list, _) = list()
        let gate = CommitGate()
        let a = await StartedMutation.append(10, to: list, gate: gate, name: "A")
        let b = await StartedMutation.append(20, to: list, gate: gate, name: "B")
        list.sync()
        #expect(list.contents == [1, 2, 10, 20])
        list.setDidSyncSuccessfully([5])
        #expect(list.contents == [5, 10, 20])
        // A failing now leaves the new base and B.
        await a.fail(gate)
        #expect(list.contents == [5, 20])
        await b.succeed(gate)
        #expect(list.contents == [5, 20])
        #expect(list.baseContents == [5, 20])
    }

    @Test("a failed sync keeps the base and the pending layers")
    func failedSyncKeepsLayers() async {
        let (list, _) = list()
        let gate = CommitGate()
        let a = await StartedMutation.append(10, to: list, gate: gate, name: "A")
        list.sync()
        list.setDidFailToSync(TestError("offline"))
        #expect(list.contents == [1, 2, 10])
        await a.succeed(gate)
        #expect(list.contents == [1, 2, 10])
        // The state and error of the failed sync are the commit's to leave alone.
        #expect(list.loadableState == .didFailToSync)
        #expect(list.error as? TestError == TestError("offline"))
    }

    // MARK: - Commit

    @Test("reconcile writes the commit's answer into the base instead of the optimistic change")
    func reconcileWritesAnswer() async {
        let (list, _) = list()
        let gate = CommitGate()
        let a = await StartedMutation.append(10, to: list, gate: gate, name: "A") { contents, answer in
            contents.append(answer)
        }
        let b = await StartedMutation.append(20, to: list, gate: gate, name: "B")
        await a.succeed(gate, answer: 11)
        #expect(list.baseContents == [1, 2, 11])
        #expect(list.contents == [1, 2, 11, 20])
        await b.fail(gate)
        #expect(list.contents == [1, 2, 11])
    }

    @Test("without reconcile, a middle change that commits joins the base; later ones stay on top")
    func middleCommitJoinsBase() async {
        let (list, _) = list()
        let gate = CommitGate()
        let a = await StartedMutation.append(10, to: list, gate: gate, name: "A")
        let b = await StartedMutation.append(20, to: list, gate: gate, name: "B")
        let c = await StartedMutation.append(30, to: list, gate: gate, name: "C")
        await b.succeed(gate)
        #expect(list.baseContents == [1, 2, 20])
        #expect(list.contents == [1, 2, 20, 10, 30])
        await a.fail(gate)
        await c.fail(gate)
        #expect(list.contents == [1, 2, 20])
    }

    @Test("mutate returns what the commit returned, and throws what it threw")
    func returnsAndThrows() async throws {
        let (list, _) = list()
        let answer = try await list.mutate {
            $0.append(3)
        } commit: {
            "saved"
        }
        #expect(answer == "saved")
        #expect(list.contents == [1, 2, 3])
        await #expect(throws: TestError("nope")) {
            try await list.mutate {
                $0.append(4)
            } commit: { () async throws -> Int in
                throw TestError("nope")
            }
        }
        #expect(list.contents == [1, 2, 3])
    }

    @Test("a commit is a write of the base: the age restarts and an invalidation is forgotten")
    func commitConfirms() async throws {
        let clock = ManualClock()
        let list = ListLoadable(contents: nil, clock: clock)
        list.setDidSyncSuccessfully([1])
        await clock.advance(by: .seconds(30))
        list.invalidate()
        #expect(list.isStale)
        try await list.mutate {
            $0.append(2)
        } commit: {
            0
        }
        #expect(list.age == .zero)
        #expect(!list.isStale)
    }

    @Test("a commit that succeeds while a sync runs queues exactly one more sync after it")
    func commitDuringSyncQueuesOneSync() async {
        let (list, recorder) = list()
        let gate = CommitGate()
        let a = await StartedMutation.append(10, to: list, gate: gate, name: "A")
        let b = await StartedMutation.append(20, to: list, gate: gate, name: "B")
        list.sync()
        #expect(list.doSyncCount == 1)
        await a.succeed(gate)
        await b.succeed(gate)
        // Stale at once: the running sync may have started before the server saw the changes.
        #expect(list.isStale)
        #expect(list.loadableState == .syncing)
        // The sync that started before the commits answers without them ...
        list.setDidSyncSuccessfully([1, 2])
        // ... and the next sync starts in that same notification.
        #expect(list.doSyncCount == 2)
        #expect(list.loadableState == .syncing)
        list.setDidSyncSuccessfully([1, 2, 10, 20])
        #expect(list.doSyncCount == 2)
        #expect(list.loadableState == .didSyncSuccessfully)
        #expect(list.contents == [1, 2, 10, 20])
        #expect(!list.isStale)
        // Two layers added, the sync, two commits, the first result (with the next sync begun in
        // that notification), the second result.
        #expect(
            recorder.states == [.didSyncSuccessfully, .didSyncSuccessfully] + Array(repeating: .syncing, count: 4) + [
                .didSyncSuccessfully
            ])
    }

    @Test("a commit that succeeds while not syncing starts no sync")
    func commitWhileIdleStartsNoSync() async throws {
        let (list, _) = list()
        try await list.mutate {
            $0.append(3)
        } commit: {
            0
        }
        #expect(list.doSyncCount == 0)
        #expect(list.loadableState == .didSyncSuccessfully)
    }

    @Test("a commit that fails while a sync runs queues nothing")
    func failureDuringSyncQueuesNothing() async {
        let (list, _) = list()
        let gate = CommitGate()
        let a = await StartedMutation.append(10, to: list, gate: gate, name: "A")
        list.sync()
        await a.fail(gate)
        list.setDidSyncSuccessfully([1, 2])
        #expect(list.doSyncCount == 1)
        #expect(list.loadableState == .didSyncSuccessfully)
    }

    @Test("a PushLoadable (no sync of its own) commits during setSyncing() without queuing anything")
    func pushLoadableCommitDuringSyncing() async throws {
        let feed = PushLoadable<[Int]>(contents: [1])
        feed.setSyncing()
        try await feed.mutate {
            $0.append(2)
        } commit: {
            0
        }
        #expect(feed.contents == [1, 2])
        feed.setDidSyncSuccessfully([1, 2])
        #expect(feed.loadableState == .didSyncSuccessfully)
    }

    // MARK: - No contents yet

    @Test("a change made before any contents waits for them, and applies to the first contents")
    func layerWaitsForContents() async {
        let list = ListLoadable()
        let recorder = Recorder(list)
        let gate = CommitGate()
        let a = await StartedMutation.append(10, to: list, gate: gate, name: "A")
        #expect(list.contents == nil)
        #expect(!list.isContentsAvailable)
        #expect(recorder.count == 0)  // nothing shown changed
        list.sync()
        list.setDidSyncSuccessfully([1])
        #expect(list.contents == [1, 10])
        #expect(list.baseContents == [1])
        await a.fail(gate)
        #expect(list.contents == [1])
        #expect(recorder.states == [.syncing, .didSyncSuccessfully, .didSyncSuccessfully])
    }

    @Test("a change that fails before any contents came notifies nothing")
    func failureWithoutContents() async {
        let list = ListLoadable()
        let recorder = Recorder(list)
        let gate = CommitGate()
        let a = await StartedMutation.append(10, to: list, gate: gate, name: "A")
        await a.fail(gate)
        #expect(recorder.count == 0)
        #expect(list.contents == nil)
        list.setDidSyncSuccessfully([1])
        #expect(list.contents == [1])
    }

    @Test("a change committed before any contents goes; during a sync, one more sync follows")
    func commitWithoutContents() async {
        let list = ListLoadable()
        let recorder = Recorder(list)
        let gate = CommitGate()
        let a = await StartedMutation.append(10, to: list, gate: gate, name: "A")
        list.sync()
        await a.succeed(gate)
        #expect(recorder.states == [.syncing])
        list.setDidSyncSuccessfully([1])
        #expect(list.contents == [1])
        #expect(list.doSyncCount == 2)
    }

    // MARK: - Writes while changes are pending

    @Test("setContents and updateContents change the base; the pending changes stay on top")
    func writesChangeTheBase() async {
        let (list, recorder) = list()
        let gate = CommitGate()
        let a = await StartedMutation.append(10, to: list, gate: gate, name: "A")
        list.setContents([5])
        #expect(list.contents == [5, 10])
        list.updateContents { $0.insert(4, at: 0) }
        #expect(list.baseContents == [4, 5])
        #expect(list.contents == [4, 5, 10])
        await a.fail(gate)
        #expect(list.contents == [4, 5])
        #expect(recorder.count == 4)
    }

    @Test("a next page while a change is pending lands in the base, under the change")
    func nextPageUnderPendingChange() async throws {
        var pages = [PagedLoadable<Int, Int>.Page(items: [1, 2], nextCursor: 1), .init(items: [3], nextCursor: nil)]
        let paged = PagedLoadable<Int, Int> { _ in pages.removeFirst() }
        try await paged.synced()
        let gate = CommitGate()
        let task = Task {
            try await paged.mutate {
                $0.append(99)
            } commit: {
                try await gate.commit("A")
            }
        }
        await gate.waitFor("A")
        paged.loadNextPage()
        await yield(until: { paged.nextPageState == .idle && paged.baseContents?.count == 3 })
        #expect(paged.baseContents == [1, 2, 3])
        #expect(paged.contents == [1, 2, 3, 99])
        gate.finish("A", with: .failure(TestError("A")))
        _ = await task.result
        #expect(paged.contents == [1, 2, 3])
    }

    // MARK: - Cancellation

    @Test("cancelling the calling task ends the commit with CancellationError; only that layer goes")
    func cancelTakesBackOneLayer() async {
        let (list, _) = list()
        let gate = CommitGate()
        let a = await StartedMutation.append(10, to: list, gate: gate, name: "A")
        let b = await StartedMutation.append(20, to: list, gate: gate, name: "B")
        a.task.cancel()
        let result = await a.task.result
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(list.contents == [1, 2, 20])
        await b.succeed(gate)
        #expect(list.contents == [1, 2, 20])
    }

    @Test("an already-cancelled task changes nothing and commits nothing")
    func alreadyCancelled() async {
        let (list, recorder) = list()
        var commits = 0
        let task = Task { @MainActor in
            withUnsafeCurrentTask { $0?.cancel() }
            return try await list.mutate {
                $0.append(3)
            } commit: {
                commits += 1
            }
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(commits == 0)
        #expect(recorder.count == 0)
        #expect(list.contents == [1, 2])
    }

    @Test("a commit that ignores cancellation keeps its layer until it returns")
    func commitIgnoringCancellation() async {
        let (list, _) = list()
        var release: CheckedContinuation<Void, Never>?
        let task = Task { @MainActor in
            try await list.mutate {
                $0.append(3)
            } commit: {
                await withCheckedContinuation { release = $0 }
                return 0
            }
        }
        await yield(until: { release != nil })
        task.cancel()
        await Task.yield()
        #expect(list.contents == [1, 2, 3])
        release?.resume()
        _ = await task.result
        #expect(list.contents == [1, 2, 3])
        #expect(list.baseContents == [1, 2, 3])
    }

    // MARK: - Lifetime

    @Test("pending commits keep the loadable; dropping every other reference frees it after they end")
    func releaseWithPendingCommits() async {
        weak var weakList: ListLoadable?
        let gate = CommitGate()
        var a: StartedMutation?
        var b: StartedMutation?
        do {
            let list = ListLoadable()
            list.setDidSyncSuccessfully([1])
            weakList = list
            a = await StartedMutation.append(10, to: list, gate: gate, name: "A")
            b = await StartedMutation.append(20, to: list, gate: gate, name: "B")
        }
        #expect(weakList != nil)  // the calls hold it, as any method call does
        a?.task.cancel()
        b?.task.cancel()
        #expect(await (try? a?.task.value) == nil)
        #expect(await (try? b?.task.value) == nil)
        a = nil
        b = nil
        await yield(until: { weakList == nil })
        #expect(weakList == nil)
    }

    @Test("a loadable with pending changes released on another thread, after its commits, leaks nothing")
    func releaseOnAnotherThreadAfterCommits() async throws {
        weak var weakList: ListLoadable?
        let box = Locked<ListLoadable?>(ListLoadable())
        let list = try #require(box.withLock { $0 })
        weakList = list
        list.setDidSyncSuccessfully([1])
        try await list.mutate {
            $0.append(2)
        } commit: {
            0
        }
        await #expect(throws: TestError.self) {
            try await list.mutate {
                $0.append(3)
            } commit: { () async throws -> Int in
                throw TestError()
            }
        }
        _ = consume list
        releaseOnAnotherThread(box)
        #expect(weakList == nil)
    }

    // MARK: - Re-entrancy and misuse

    @Test("an observer that writes contents while a change is added: consistent, no crash")
    func observerWritesDuringAdd() async {
        let (list, _) = list()
        var didWrite = false
        await observing(
            list,
            { (loadable: any PureLoadable) in
                guard !didWrite, let list = loadable as? ListLoadable else { return }
                didWrite = true
                list.setDidSyncSuccessfully([100])
            }
        ) {
            let gate = CommitGate()
            let a = await StartedMutation.append(10, to: list, gate: gate, name: "A")
            #expect(list.contents == [100, 10])
            await a.fail(gate)
            #expect(list.contents == [100])
        }
    }

    @Test("a change that writes the loadable from inside optimistic: the nested write stands, no crash")
    func optimisticWritesTheLoadable() async throws {
        let (list, _) = list()
        var nested = 0
        try await list.mutate { [weak list] contents in
            contents.append(3)
            if nested == 0 {
                nested += 1
                list?.setContents([9])
            }
        } commit: {
            0
        }
        // The layer was applied to the nested write's base; the commit then joined the base.
        #expect(list.contents == list.baseContents)
        #expect(list.contents?.first == 9)
    }

    @Test("an observer that starts another change from inside a notification")
    func reentrantMutateFromObserver() async {
        let (list, _) = list()
        let gate = CommitGate()
        var inner: Task<Int, any Error>?
        let token = list.addObserver { loadable in
            guard inner == nil, let list = loadable as? ListLoadable else { return }
            inner = Task {
                try await list.mutate {
                    $0.append(20)
                } commit: {
                    try await gate.commit("B")
                }
            }
        }
        let a = await StartedMutation.append(10, to: list, gate: gate, name: "A")
        await gate.waitFor("B")
        token.cancel()
        #expect(list.contents == [1, 2, 10, 20])
        await a.fail(gate)
        gate.finish("B", with: .success(0))
        _ = await inner?.result
        #expect(list.contents == [1, 2, 20])
    }

    // MARK: - Observation

    @Test("Observation reports the change added and the change taken back")
    func observationSeesLayers() async {
        let (list, _) = list()
        let gate = CommitGate()
        let counter = ChangeCounter()
        withObservationTracking {
            _ = list.contents
        } onChange: {
            counter.count += 1
        }
        let a = await StartedMutation.append(10, to: list, gate: gate, name: "A")
        #expect(counter.count == 1)
        withObservationTracking {
            _ = list.contents
        } onChange: {
            counter.count += 1
        }
        await a.fail(gate)
        #expect(counter.count == 2)
    }

    final class ChangeCounter: @unchecked Sendable {
        var count = 0
    }
}
