import Loadable
import LoadableTestSupport
import Testing

/// A load the test finishes by hand.
@MainActor
final class PendingLoad {
    private var continuations: [CheckedContinuation<Int, any Error>] = []
    private(set) var started = 0
    var pending: Int { continuations.count }

    func load() async throws -> Int {
        started += 1
        return try await withCheckedThrowingContinuation { continuations.append($0) }
    }

    func finish(_ result: Result<Int, any Error>, at index: Int = 0) {
        continuations.remove(at: index).resume(with: result)
    }
}

@Suite("AsyncLoadable")
@MainActor
struct AsyncLoadableTests {
    @Test("a closure-based loadable syncs with the closure's result")
    func closureSuccess() async throws {
        let loadable = AsyncLoadable { 5 }
        #expect(try await loadable.syncedContents() == 5)
        #expect(loadable.loadableState == .didSyncSuccessfully)
    }

    @Test("a thrown error fails the sync and keeps the contents")
    func closureFailure() async {
        let loadable = AsyncLoadable<Int>(contents: 1) { throw TestError("nope") }
        await #expect(throws: TestError("nope")) { try await loadable.syncedContents(forceSync: true) }
        #expect(loadable.loadableState == .didFailToSync)
        #expect(loadable.contents == 1)
    }

    @Test("a subclass overrides load()")
    func subclass() async throws {
        final class Answer: AsyncLoadable<Int> {
            override func load() async throws -> Int { 42 }
        }
        #expect(try await Answer().syncedContents() == 42)
    }

    @Test("cancelSync cancels the load task, restores the state and drops the late result")
    func cancelDropsLateResult() async {
        let pending = PendingLoad()
        let loadable = AsyncLoadable(contents: 1) { try await pending.load() }
        loadable.setDidSyncSuccessfully(1)
        loadable.sync()
        await yield(until: { pending.pending == 1 })
        loadable.cancelSync()
        #expect(loadable.loadableState == .didSyncSuccessfully)
        pending.finish(.success(99))
        for _ in 0..<20 { await Task.yield() }
        #expect(loadable.contents == 1)
        #expect(loadable.loadableState == .didSyncSuccessfully)
    }

    @Test("a result from an older sync never replaces a newer one")
    func newerSyncWins() async {
        let pending = PendingLoad()
        let loadable = AsyncLoadable { try await pending.load() }
        loadable.sync()
        await yield(until: { pending.pending == 1 })
        loadable.cancelSync()
        loadable.sync()
        await yield(until: { pending.pending == 2 })
        pending.finish(.success(1), at: 0)  // the old one
        for _ in 0..<20 { await Task.yield() }
        #expect(loadable.loadableState == .syncing)
        pending.finish(.success(2), at: 0)  // the current one
        await yield(until: { loadable.loadableState == .didSyncSuccessfully })
        #expect(loadable.contents == 2)
    }

    @Test("cancelSync cancels the task running load()")
    func loadSeesCancellation() async {
        var sawCancellation = false
        let polling = AsyncLoadable<Int> {
            while !Task.isCancelled { await Task.yield() }
            sawCancellation = true
            throw CancellationError()
        }
        polling.sync()
        for _ in 0..<5 { await Task.yield() }
        polling.cancelSync()
        await yield(until: { sawCancellation })
        #expect(polling.loadableState == .idle)
    }

    @Test("releasing a closure-based loadable cancels its load")
    func releaseCancels() async {
        var sawCancellation = false
        var loadable: AsyncLoadable<Int>? = AsyncLoadable<Int> {
            while !Task.isCancelled { await Task.yield() }
            sawCancellation = true
            return 0
        }
        weak let weakLoadable = loadable
        loadable?.sync()
        for _ in 0..<5 { await Task.yield() }
        loadable = nil
        #expect(weakLoadable == nil)
        await yield(until: { sawCancellation })
    }
}
