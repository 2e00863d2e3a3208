import Loadable
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

/// Contents that are not `Equatable`: every write of them is a change.
private struct Opaque {
    var value: Int
}

/// What the readers of a loadable saw during one step.
@MainActor
private struct Readers {
    let contents: ObservationChanges
    let state: ObservationChanges
    let snapshot: ObservationChanges
    var notifications = 0

    /// Tracks `loadable`'s contents, its state and its snapshot, each in its own tracking.
    init<Contents>(of loadable: PushLoadable<Contents>) {
        contents = trackObservationChanges { _ = loadable.contents }
        state = trackObservationChanges { _ = loadable.loadableState }
        snapshot = trackObservationChanges { _ = loadable.snapshot }
    }
}

/// "Equal contents notify nothing": a write of contents equal to those shown (`Contents:
/// Equatable`) changes the state and the age as asked, but is not a change of the contents.
@Suite("Equal contents notify nothing")
@MainActor
struct EqualContentsTests {
    /// A loadable that succeeded with `1`, on a manual clock.
    private func synced(clock: ManualClock = ManualClock()) -> ManualLoadable {
        let loadable = ManualLoadable(clock: clock)
        loadable.sync()
        loadable.setDidSyncSuccessfully(1)
        return loadable
    }

    /// Runs `step` on `loadable` observed by Observation (contents, state, snapshot) and by an
    /// observer; returns what each was told.
    private func observe<Contents>(
        _ loadable: PushLoadable<Contents>, _ step: () -> Void
    ) -> (contents: Int, state: Int, snapshot: Int, observer: Int) {
        let readers = Readers(of: loadable)
        var notifications = 0
        observing(loadable, { _ in notifications += 1 }) { step() }
        return (readers.contents.count, readers.state.count, readers.snapshot.count, notifications)
    }

    // MARK: - Nothing changes: nothing is told

    @Test(
        "an equal write that keeps the state tells nobody, and confirms",
        arguments: ["setDidSyncSuccessfully(_:)", "setContents(_:)", "setDidSyncSuccessfully()"])
    func equalWriteKeepingState(setter: String) async {
        let clock = ManualClock()
        let loadable = synced(clock: clock)
        await clock.advance(by: .seconds(10))
        #expect(loadable.age == .seconds(10))
        let told = observe(loadable) {
            switch setter {
            case "setDidSyncSuccessfully(_:)": loadable.setDidSyncSuccessfully(1)
            case "setContents(_:)": loadable.setContents(1)
            default: loadable.setDidSyncSuccessfully()
            }
        }
        #expect(told.contents == 0)
        #expect(told.state == 0)
        #expect(told.snapshot == 0)
        #expect(told.observer == 0)
        // Still a confirmation: the age restarts.
        #expect(loadable.age == .zero)
        #expect(loadable.loadableState == .didSyncSuccessfully)
        #expect(loadable.contents == 1)
    }

    @Test("a repeated setIdle() or setSyncing() tells nobody", arguments: [LoadableState.idle, .syncing])
    func repeatedState(state: LoadableState) {
        let loadable = synced()
        if state == .idle { loadable.setIdle() } else { loadable.setSyncing() }
        let told = observe(loadable) {
            if state == .idle { loadable.setIdle() } else { loadable.setSyncing() }
        }
        #expect(told.contents == 0)
        #expect(told.state == 0)
        #expect(told.observer == 0)
    }

    @Test("a repeated failure still replaces the error and notifies")
    func repeatedFailure() {
        let loadable = synced()
        loadable.setDidFailToSync(TestError("first"))
        let told = observe(loadable) { loadable.setDidFailToSync(TestError("second")) }
        #expect(told.contents == 0)
        #expect(told.state == 1)
        #expect(told.observer == 1)
        #expect(loadable.error as? TestError == TestError("second"))
    }

    // MARK: - The state changes: state readers are told, contents readers are not

    @Test("sync() with equal contents tells observers and state readers, not contents readers")
    func syncWithEqualContents() async {
        let clock = ManualClock()
        let loadable = synced(clock: clock)
        loadable.finishInDoSync = .succeed(1)
        await clock.advance(by: .seconds(5))
        var states: [LoadableState] = []
        let readers = Readers(of: loadable)
        observing(loadable, { states.append($0.loadableState) }) {
            loadable.sync()
        }
        #expect(states == [.syncing, .didSyncSuccessfully])
        #expect(readers.contents.count == 0)
        #expect(readers.state.count == 1)
        #expect(readers.snapshot.count == 1)
        #expect(loadable.age == .zero)
    }

    @Test("sync() with new contents tells contents readers")
    func syncWithNewContents() {
        let loadable = synced()
        loadable.finishInDoSync = .succeed(2)
        let readers = Readers(of: loadable)
        loadable.sync()
        #expect(readers.contents.count == 1)
        #expect(readers.state.count == 1)
        #expect(loadable.contents == 2)
    }

    @Test("a sync's start and end do not tell a reader of the contents alone")
    func stateChangesSpareContentsReaders() {
        let loadable = synced()
        let contents = trackObservationChanges { _ = loadable.contents }
        loadable.sync()
        loadable.setDidFailToSync(TestError("first"))
        loadable.sync()
        loadable.setDidSyncSuccessfully()
        #expect(contents.count == 0)
    }

    @Test("setContents(_:) with new contents tells every reader")
    func setContentsNew() {
        let loadable = synced()
        let told = observe(loadable) { loadable.setContents(2) }
        #expect(told.contents == 1)
        #expect(told.state == 1)
        #expect(told.observer == 1)
    }

    @Test("an equal write that forgets an invalidation tells observers, not contents readers")
    func equalWriteAfterInvalidation() {
        let loadable = synced()
        loadable.invalidate()
        #expect(loadable.isStale)
        let told = observe(loadable) { loadable.setContents(1) }
        #expect(told.contents == 0)
        #expect(told.state == 1)
        #expect(told.observer == 1)
        #expect(!loadable.isStale)
    }

    @Test("updateContents(_:) is always a change of the contents, even when equal")
    func updateContentsAlwaysChanges() {
        let loadable = synced()
        let told = observe(loadable) { loadable.updateContents { $0 += 0 } }
        #expect(told.contents == 1)
        #expect(told.observer == 1)
    }

    @Test("notifyDidChange() tells every reader")
    func notifyDidChangeTellsAll() {
        let loadable = synced()
        let told = observe(loadable) { loadable.notifyDidChange() }
        #expect(told.contents == 1)
        #expect(told.state == 1)
        #expect(told.observer == 1)
    }

    // MARK: - Async sequences

    @Test("snapshots() and states() yield nothing for an equal write that keeps the state")
    func sequences() async {
        let loadable = synced()
        let snapshots = loadable.snapshots(bufferingPolicy: .unbounded)
        let states = loadable.states()
        loadable.setDidSyncSuccessfully(1)
        loadable.setContents(1)
        loadable.setContents(2)
        var snapshotIterator = snapshots.makeAsyncIterator()
        var stateIterator = states.makeAsyncIterator()
        // The current value, then one for `setContents(2)` only.
        #expect(await snapshotIterator.next()?.contents == 1)
        #expect(await snapshotIterator.next()?.contents == 2)
        #expect(await stateIterator.next() == .didSyncSuccessfully)
        #expect(await stateIterator.next() == .didSyncSuccessfully)
        loadable.setIdle()
        #expect(await snapshotIterator.next()?.state == .idle)
        #expect(await stateIterator.next() == .idle)
    }

    // MARK: - Contents that are not Equatable

    @Test("contents that are not Equatable: every write is a change, as before")
    func notEquatable() {
        let loadable = PushLoadable<Opaque>()
        loadable.setDidSyncSuccessfully(Opaque(value: 1))
        let told = observe(loadable) { loadable.setDidSyncSuccessfully(Opaque(value: 1)) }
        #expect(told.contents == 1)
        #expect(told.state == 1)
        #expect(told.observer == 1)
        let setContents = observe(loadable) { loadable.setContents(Opaque(value: 1)) }
        #expect(setContents.contents == 1)
        #expect(setContents.observer == 1)
    }

    // MARK: - Paths that store contents

    @Test("an optimistic change pending: an equal sync keeps what is shown and tells its readers nothing")
    func equalSyncUnderPendingChange() async throws {
        let loadable = PushLoadable<Int>()
        loadable.setDidSyncSuccessfully(1)
        let gate = CommitGate()
        let mutation = Task { @MainActor in
            try await loadable.mutate {
                $0 += 10
            } commit: {
                try await gate.commit("a")
            }
        }
        await gate.waitFor("a")
        #expect(loadable.contents == 11)
        let told = observe(loadable) { loadable.setDidSyncSuccessfully(1) }
        #expect(told.contents == 0)
        #expect(told.observer == 0)
        #expect(loadable.contents == 11)
        // A new base shows under the change.
        let newBase = observe(loadable) { loadable.setDidSyncSuccessfully(2) }
        #expect(newBase.contents == 1)
        #expect(loadable.contents == 12)
        gate.finish("a", with: .success(0))
        _ = try await mutation.value
        #expect(loadable.contents == 12)
    }

    @Test("a page of no items tells readers of the paging state, not of the contents")
    func emptyPage() async throws {
        typealias Page = PagedLoadable<Int, Int>.Page
        let pages = PagedLoadable<Int, Int> { cursor in
            cursor == nil ? Page(items: [1, 2], nextCursor: 1) : Page(items: [], nextCursor: nil)
        }
        try await pages.synced()
        let readers = Readers(of: pages)
        let paging = trackObservationChanges { _ = pages.nextPageState }
        pages.loadNextPage()
        try await pages.doneLoadingNextPage()
        #expect(readers.contents.count == 0)
        #expect(paging.count == 1)
        #expect(pages.contents == [1, 2])
        #expect(!pages.hasMorePages)
    }

    // MARK: - What follows a loadable

    @Test("a map of equal contents tells its contents readers nothing; of new ones, once")
    func mapped() {
        let loadable = synced()
        let parity = loadable.map { $0 % 2 }
        let contents = trackObservationChanges { _ = parity.contents }
        let state = trackObservationChanges { _ = parity.loadableState }
        var notifications = 0
        observing(parity, { _ in notifications += 1 }) {
            // The source's contents change, the mapped value does not.
            loadable.setContents(3)
        }
        #expect(contents.count == 0)
        #expect(state.count == 1)
        #expect(notifications == 1)
        #expect(parity.contents == 1)
        let changed = trackObservationChanges { _ = parity.contents }
        loadable.setContents(4)
        #expect(changed.count == 1)
        #expect(parity.contents == 0)
    }

    @Test("a map of non-Equatable values is not recomputed for a change of the state alone")
    func mappedStateOnly() {
        let loadable = synced()
        var transforms = 0
        let mapped = loadable.map { value -> Opaque in
            transforms += 1
            return Opaque(value: value)
        }
        #expect(transforms == 1)
        let contents = trackObservationChanges { _ = mapped.contents }
        loadable.sync()
        loadable.setDidFailToSync(nil)
        #expect(transforms == 1)
        #expect(contents.count == 0)
        loadable.setContents(2)
        #expect(transforms == 2)
        #expect(contents.count == 1)
    }

    @Test("a proxy's contents readers are told of a new target, not of its state")
    func proxy() {
        let first = synced()
        let proxy = LoadableProxy<ManualLoadable>(target: first)
        let contents = trackObservationChanges { _ = proxy.contents }
        first.sync()
        #expect(contents.count == 0)
        let second = ManualLoadable(contents: 5)
        proxy.target = second
        #expect(contents.count == 1)
        #expect(proxy.contents == 5)
    }
}
