import Loadable
import LoadableSupport
import LoadableTestSupport
import Testing

/// Observers that act on the `syncing` notification, and syncs started behind a loadable's back.
@Suite("Sync edge cases")
@MainActor
struct SyncEdgeCaseTests {
    @Test("a sync cancelled by an observer of its syncing notification calls neither doSync nor doCancelSync")
    func cancelBeforeDoSync() {
        let loadable = ManualLoadable()
        observing(
            loadable,
            { (loadable: any PureLoadable) in
                if loadable.loadableState == .syncing { (loadable as? ManualLoadable)?.cancelSync() }
            }
        ) {
            loadable.sync()
            #expect(loadable.doSyncCount == 0)
            #expect(loadable.doCancelSyncCount == 0)
            #expect(loadable.loadableState == .idle)
        }
    }

    @Test("an observer that cancels and restarts the sync during its syncing notification gets one doSync")
    func cancelAndRestartBeforeDoSync() {
        let loadable = ManualLoadable()
        var restarted = false
        observing(
            loadable,
            { (loadable: any PureLoadable) in
                guard !restarted, let loadable = loadable as? ManualLoadable, loadable.loadableState == .syncing else {
                    return
                }
                restarted = true
                loadable.cancelSync()
                loadable.sync()
            }
        ) {
            loadable.sync()
            #expect(loadable.doSyncCount == 1)
            #expect(loadable.doCancelSyncCount == 0)
            #expect(loadable.loadableState == .syncing)
            // The running sync is the one that counts: cancelling it now reaches doCancelSync.
            loadable.cancelSync()
            #expect(loadable.doCancelSyncCount == 1)
        }
    }

    @Test("AsyncLoadable: a sync after a public setter ended the previous one cancels the old load")
    func asyncLoadableRestartAfterSetter() async {
        let events = Locked<[String]>([])
        let loadable = AsyncLoadable<Int> {
            events.withLock { $0.append("started") }
            await withTaskCancellationHandler {
                // A stream nobody finishes: iterating it ends only when the task is cancelled.
                let neverEnding = AsyncStream<Int>(Int.self) { _ in }
                for await _ in neverEnding {}
            } onCancel: {
                events.withLock { $0.append("cancelled") }
            }
            throw CancellationError()
        }
        loadable.sync()
        await yield(until: { events.withLock { $0 } == ["started"] })
        loadable.setIdle()
        loadable.sync()
        await yield(until: { events.withLock { $0 }.count == 3 })
        #expect(Set(events.withLock { $0 }) == ["started", "cancelled"])
        #expect(events.withLock { $0 }.filter { $0 == "cancelled" }.count == 1)
        #expect(loadable.loadableState == .syncing)
        loadable.cancelSync()
        await yield(until: { events.withLock { $0 }.filter { $0 == "cancelled" }.count == 2 })
    }
}
