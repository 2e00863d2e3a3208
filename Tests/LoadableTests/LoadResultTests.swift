import Loadable
import LoadableTestSupport
import LoadableTesting
import Testing

/// A loadable whose load the test answers: each sync waits for ``answer(_:)``.
@MainActor
private final class AnsweredLoadable: AsyncLoadable<Int> {
    private var pending: [CheckedContinuation<LoadResult<Int>, any Error>] = []

    override func loadResult() async throws -> LoadResult<Int> {
        try await withCheckedThrowingContinuation { pending.append($0) }
    }

    /// Answers the oldest waiting load; waits for one to arrive first.
    func answer(_ result: LoadResult<Int>) async {
        _ = await settle { !self.pending.isEmpty }
        pending.removeFirst().resume(returning: result)
        _ = await settle { self.storedStateIsNotSyncing }
    }

    func fail(_ error: any Error) async {
        _ = await settle { !self.pending.isEmpty }
        pending.removeFirst().resume(throwing: error)
        _ = await settle { self.storedStateIsNotSyncing }
    }

    var storedStateIsNotSyncing: Bool { loadableState != .syncing }
}

private struct Refused: Error {}

/// `LoadResult` (issue 45: a load is a value): `.confirmed` with and without contents, the
/// metadata kept, replaced, merged and dropped, and the three ways to state a load.
@Suite("LoadResult: a load is a value")
@MainActor
struct LoadResultTests {
    @Test(".confirmed keeps the contents as they are: a success, one notification, readers of the contents not told")
    func confirmedWithContents() async throws {
        let loadable = AsyncLoadable<[Int]>(contents: [1], clock: ManualClock(), loadResult: { .confirmed() })
        var notifications = 0
        try await observing(loadable, { _ in notifications += 1 }) {
            try await loadable.synced(forceSync: true)
        }
        #expect(loadable.loadableState == .didSyncSuccessfully)
        #expect(loadable.contents == [1])
        #expect(loadable.age == .zero)
        #expect(notifications == 2)  // syncing, then the success
    }

    @Test(".confirmed without contents fails with LoadableError.nothingToConfirm")
    func confirmedWithoutContents() async {
        let loadable = AsyncLoadable<Int>(clock: ManualClock(), loadResult: { .confirmed(metadata: ["ETag": "x"]) })
        await #expect(throws: LoadableError.nothingToConfirm) { try await loadable.synced() }
        #expect(loadable.loadableState == .didFailToSync)
        #expect(loadable.error as? LoadableError == .nothingToConfirm)
        #expect(loadable.baseMetadata.isEmpty)
        #expect("\(LoadableError.nothingToConfirm)".contains("none to confirm"))
    }

    @Test(".loaded replaces the metadata, .confirmed merges into it, a failure keeps it")
    func metadataFromResults() async {
        let loadable = AnsweredLoadable(clock: ManualClock())
        loadable.sync()
        await loadable.answer(.loaded(1, metadata: ["ETag": "a", "Last-Modified": "mon"]))
        #expect(loadable.contents == 1)
        #expect(loadable.baseMetadata == ["ETag": "a", "Last-Modified": "mon"])
        loadable.sync()
        await loadable.answer(.confirmed(metadata: ["ETag": "b"]))
        #expect(loadable.baseMetadata == ["ETag": "b", "Last-Modified": "mon"])
        loadable.sync()
        await loadable.fail(Refused())
        #expect(loadable.loadableState == .didFailToSync)
        #expect(loadable.baseMetadata == ["ETag": "b", "Last-Modified": "mon"])
        loadable.sync()
        await loadable.answer(.loaded(2))
        #expect(loadable.baseMetadata.isEmpty)
    }

    @Test("the app's own writes drop the metadata; setContents(_:metadata:) sets its own")
    func localWritesDropMetadata() async throws {
        let loadable = AnsweredLoadable(clock: ManualClock())
        func reload() async {
            loadable.sync()
            await loadable.answer(.loaded(1, metadata: ["ETag": "a"]))
            #expect(loadable.baseMetadata == ["ETag": "a"])
        }
        await reload()
        loadable.setContents(5)
        #expect(loadable.baseMetadata.isEmpty)
        await reload()
        loadable.setContents(1)  // equal contents: still a write of the app's own
        #expect(loadable.baseMetadata.isEmpty)
        await reload()
        loadable.updateContents { $0 += 1 }
        #expect(loadable.baseMetadata.isEmpty)
        await reload()
        try await loadable.mutate {
            $0 += 1
        } commit: {
            ()
        }
        #expect(loadable.baseMetadata.isEmpty)
        await reload()
        try await loadable.mutate {
            $0 += 1
        } commit: {
            7
        } reconcile: {
            $0 = $1
        }
        #expect(loadable.contents == 7)
        #expect(loadable.baseMetadata == ["ETag": "a"])  // reconciled with the server's answer
        await #expect(throws: Refused.self) {
            try await loadable.mutate {
                $0 += 1
            } commit: {
                throw Refused()
            }
        }
        #expect(loadable.baseMetadata == ["ETag": "a"])  // a failed commit keeps them
        loadable.setContents(9, metadata: ["ETag": "answer"])
        #expect(loadable.contents == 9)
        #expect(loadable.baseMetadata == ["ETag": "answer"])
    }

    @Test("a confirmation after a write of the app's own during the load succeeds but keeps no metadata")
    func confirmedAfterLocalWrite() async {
        let loadable = AnsweredLoadable(clock: ManualClock())
        loadable.sync()
        await loadable.answer(.loaded(1, metadata: ["ETag": "a"]))
        loadable.sync()
        loadable.setContents(2)
        await loadable.answer(.confirmed(metadata: ["ETag": "b"]))
        #expect(loadable.loadableState == .didSyncSuccessfully)
        #expect(loadable.contents == 2)
        #expect(loadable.baseMetadata.isEmpty)
        // The next load's confirmation is of the contents it asked about: kept.
        loadable.sync()
        await loadable.answer(.confirmed(metadata: ["ETag": "c"]))
        #expect(loadable.baseMetadata == ["ETag": "c"])
    }

    @Test("a late result (after a cancel) is dropped with its metadata")
    func lateResultDropped() async {
        let loadable = AnsweredLoadable(contents: 1, clock: ManualClock())
        loadable.sync()
        _ = await settle { loadable.loadableState == .syncing }
        loadable.cancelSync()
        await loadable.answer(.loaded(2, metadata: ["ETag": "late"]))
        #expect(loadable.contents == 1)
        #expect(loadable.baseMetadata.isEmpty)
        #expect(loadable.loadableState == .idle)
    }

    @Test("init(load:), an override of load(), and init(loadResult:) read as load() all still work")
    func threeWaysToStateALoad() async throws {
        final class Feed: AsyncLoadable<Int> {
            override func load() async throws -> Int { 3 }
        }
        let closure = AsyncLoadable<Int>(clock: ManualClock(), load: { 1 })
        #expect(try await closure.syncedContents() == 1)
        #expect(try await closure.loadResult() == .loaded(1))
        let subclass = Feed(clock: ManualClock())
        #expect(try await subclass.syncedContents() == 3)
        #expect(try await subclass.loadResult() == .loaded(3))
        let confirming = AsyncLoadable<Int>(contents: 4, clock: ManualClock(), loadResult: { .confirmed() })
        #expect(try await confirming.load() == 4)  // what is confirmed: the contents it has
        let empty = AsyncLoadable<Int>(clock: ManualClock(), loadResult: { .confirmed() })
        await #expect(throws: LoadableError.nothingToConfirm) { try await empty.load() }
    }
}
