import Loadable
import LoadableTestSupport
import Testing

@Suite("Async helpers: streams, doneSyncing, syncedContents")
@MainActor
struct AsyncHelpersTests {
    @Test("states() yields the current state first, then one state per notification")
    func statesStream() async {
        let loadable = ManualLoadable()
        let stream = loadable.states()
        loadable.sync()
        loadable.setDidSyncSuccessfully(1)
        loadable.notifyDidChange()
        var iterator = stream.makeAsyncIterator()
        var seen: [LoadableState] = []
        for _ in 0..<4 { if let state = await iterator.next() { seen.append(state) } }
        #expect(seen == [.idle, .syncing, .didSyncSuccessfully, .didSyncSuccessfully])
    }

    @Test("states() ends when the loadable is released")
    func statesEndOnRelease() async {
        var loadable: ManualLoadable? = ManualLoadable()
        let stream = loadable!.states()
        loadable?.setSyncing()
        loadable = nil
        var seen: [LoadableState] = []
        for await state in stream { seen.append(state) }
        #expect(seen == [.idle, .syncing])
    }

    @Test("states() ends when the consuming task is cancelled, and its observer goes away")
    func statesEndOnCancel() async {
        let loadable = ManualLoadable()
        let consumer = Task { @MainActor in
            var count = 0
            for await _ in loadable.states() { count += 1 }
            return count
        }
        await yield(until: { loadable.hasObservers })
        consumer.cancel()
        let count = await consumer.value
        #expect(count >= 1)
        await yield(until: { !loadable.hasObservers })
    }

    @Test("snapshots() yields the current snapshot first and keeps only the newest by default")
    func snapshotsStream() async {
        let loadable = ManualLoadable(contents: 1)
        let stream = loadable.snapshots()
        loadable.setSyncing()
        loadable.setDidSyncSuccessfully(2)
        var iterator = stream.makeAsyncIterator()
        let newest = await iterator.next()
        #expect(newest?.state == .didSyncSuccessfully)
        #expect(newest?.contents == 2)

        let unbounded = loadable.snapshots(bufferingPolicy: .unbounded)
        loadable.setDidFailToSync(TestError())
        var all = unbounded.makeAsyncIterator()
        #expect(await all.next()?.state == .didSyncSuccessfully)
        let failed = await all.next()
        #expect(failed?.state == .didFailToSync)
        #expect(failed?.contents == 2)
        #expect(failed?.error as? TestError == TestError())
    }

    @Test("doneSyncing returns at once when not syncing, and never starts a sync")
    func doneSyncingIdle() async throws {
        let loadable = ManualLoadable()
        try await loadable.doneSyncing()
        #expect(loadable.doSyncCount == 0)
        #expect(loadable.loadableState == .idle)
    }

    @Test("doneSyncing waits until the sync ends, whatever the outcome")
    func doneSyncingWaits() async throws {
        let loadable = ManualLoadable()
        loadable.sync()
        let waiter = Task { @MainActor in
            try await loadable.doneSyncing()
            return loadable.loadableState
        }
        await yield(until: { loadable.hasObservers })
        loadable.setDidFailToSync(TestError())
        #expect(try await waiter.value == .didFailToSync)
        #expect(!loadable.hasObservers)
    }

    @Test("cancelling one task waiting in doneSyncing ends only that wait")
    func doneSyncingCancellation() async throws {
        let loadable = ManualLoadable()
        loadable.sync()
        let cancelled = Task { @MainActor in try await loadable.doneSyncing() }
        let kept = Task { @MainActor in try await loadable.doneSyncing() }
        await yield(until: { loadable.hasObservers })
        await Task.yield()
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(loadable.loadableState == .syncing)
        loadable.setDidSyncSuccessfully(1)
        try await kept.value
    }

    @Test("a task cancelled before it waits throws CancellationError at once")
    func alreadyCancelled() async {
        let loadable = ManualLoadable()
        loadable.sync()
        let task = Task { @MainActor in
            withUnsafeCurrentTask { $0?.cancel() }
            try await loadable.doneSyncing()
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(!loadable.hasObservers)
    }

    @Test("syncedContents syncs when needed and returns the contents")
    func syncedContents() async throws {
        let loadable = ManualLoadable()
        loadable.finishInDoSync = .succeed(42)
        #expect(try await loadable.syncedContents() == 42)
        #expect(loadable.doSyncCount == 1)
        // Not needed any more: no new sync.
        #expect(try await loadable.syncedContents() == 42)
        #expect(loadable.doSyncCount == 1)
        // Forced.
        loadable.finishInDoSync = .succeed(43)
        #expect(try await loadable.syncedContents(forceSync: true) == 43)
        #expect(loadable.doSyncCount == 2)
    }

    @Test("many tasks awaiting syncedContents join one sync")
    func syncedContentsJoins() async throws {
        let loadable = ManualLoadable()
        let tasks = (0..<5).map { _ in Task { @MainActor in try await loadable.syncedContents() } }
        let forced = Task { @MainActor in try await loadable.syncedContents(forceSync: true) }
        await yield(until: { loadable.loadableState == .syncing && loadable.hasObservers })
        for _ in 0..<10 { await Task.yield() }
        loadable.setDidSyncSuccessfully(7)
        for task in tasks { #expect(try await task.value == 7) }
        #expect(try await forced.value == 7)
        #expect(loadable.doSyncCount == 1)
    }

    @Test("syncedContents throws the loadable's error, or LoadableError.unspecified without one")
    func syncedContentsErrors() async {
        let loadable = ManualLoadable(contents: 1)
        loadable.finishInDoSync = .fail(TestError("down"))
        await #expect(throws: TestError("down")) { try await loadable.syncedContents() }

        final class Silent: Loadable<Int> {
            override func doSync() { setDidFailToSync(nil) }
        }
        await #expect(throws: LoadableError.unspecified) { try await Silent().syncedContents() }
    }

    @Test("syncedContents throws CancellationError when the sync is cancelled and leaves no contents")
    func syncedContentsCancelledSync() async {
        let loadable = ManualLoadable()
        let task = Task { @MainActor in try await loadable.syncedContents() }
        await yield(until: { loadable.hasObservers })
        loadable.cancelSync()
        await #expect(throws: CancellationError.self) { try await task.value }
    }

    @Test("cancelling a task awaiting syncedContents does not cancel the sync")
    func syncedContentsTaskCancelled() async {
        let loadable = ManualLoadable()
        let task = Task { @MainActor in try await loadable.syncedContents() }
        await yield(until: { loadable.hasObservers })
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(loadable.loadableState == .syncing)
        #expect(loadable.doCancelSyncCount == 0)
    }
}
