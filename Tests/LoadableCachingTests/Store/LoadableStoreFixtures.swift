import Foundation
import Loadable
import LoadableCaching
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

// MARK: - Helpers

/// What the loadables of one store did, kept by the test: it outlives the loadables, so a test can
/// count the calls of a loadable that is gone.
@MainActor
final class CallLog {
    /// The keys `make` was called with, in order.
    var made: [Int] = []
    /// `doSync()` calls of every loadable of the store.
    var doSyncCount = 0
    /// `doCancelSync()` calls of every loadable of the store.
    var doCancelSyncCount = 0
}

/// A loadable whose syncs the test finishes by hand; counts `doSync()` (one per sync really
/// started) and `doCancelSync()`, its own and in the store's log.
final class Counted: Loadable<Int> {
    let key: Int
    let log: CallLog
    private(set) var doSyncCount = 0
    private(set) var doCancelSyncCount = 0

    init(key: Int, log: CallLog) {
        self.key = key
        self.log = log
        super.init()
    }

    override func doSync() {
        doSyncCount += 1
        log.doSyncCount += 1
    }

    override func doCancelSync() {
        doCancelSyncCount += 1
        log.doCancelSyncCount += 1
    }
}

/// A loadable of the app's own type: it conforms to `SyncableLoadable` directly, so the store
/// knows nothing of its use or its syncing. Counts every call.
@MainActor
final class OwnLoadable: SyncableLoadable {
    private let inner = PushLoadable<Int>()
    private(set) var syncCount = 0
    private(set) var syncIfNeededCount = 0
    private(set) var invalidateCount = 0
    private(set) var cancelSyncCount = 0

    var loadableState: LoadableState { inner.loadableState }
    var error: (any Error)? { inner.error }
    var isContentsAvailable: Bool { inner.isContentsAvailable }
    var needsSync: Bool { inner.loadableState != .syncing }

    func sync() {
        syncCount += 1
        if inner.loadableState != .syncing { inner.setSyncing() }
    }

    func syncIfNeeded() {
        syncIfNeededCount += 1
        if needsSync { sync() }
    }

    func invalidate() {
        invalidateCount += 1
    }

    func cancelSync() {
        cancelSyncCount += 1
        if inner.loadableState == .syncing { inner.setIdle() }
    }

    func finish() {
        inner.setDidSyncSuccessfully(1)
    }

    func addObserver(_ handler: @escaping @MainActor (any PureLoadable) -> Void) -> LoadableObservation {
        inner.addObserver(handler)
    }
}

/// A weak reference to a store, for a `make` or an observer that uses the store it belongs to.
@MainActor
final class StoreRef<Value: SyncableLoadable> {
    weak var store: LoadableStore<Int, Value>?
}

/// Counts Observation's change reports (its `onChange` closure must be `@Sendable`; here it runs
/// synchronously on the main actor, inside the change).
final class ChangeCounter: @unchecked Sendable {
    var count = 0
}

typealias CountedLease = LoadableLease<Counted>

/// A store of `Counted` loadables on `clock`; `make` records its key in `log`.
@MainActor
func countedStore(
    retention: Duration = .seconds(10),
    maxRetained: Int? = nil,
    clock: ManualClock,
    log: CallLog
) -> LoadableStore<Int, Counted> {
    LoadableStore(retention: retention, maxRetained: maxRetained, clock: clock) { key in
        log.made.append(key)
        return Counted(key: key, log: log)
    }
}

/// Waits until the store's timer sleeps on `clock` (what `clock.waitForSleepers()` does), but
/// records an issue instead of hanging when it never does: a store that forgot to arm its timer
/// fails the test.
@MainActor
func waitForTimer(_ clock: ManualClock, sourceLocation: SourceLocation = #_sourceLocation) async {
    let isArmed = await settle { clock.pendingSleepCount >= 1 }
    if !isArmed { Issue.record("the store's timer does not sleep on the clock", sourceLocation: sourceLocation) }
}

/// Gives the main actor and the global executor a number of turns, so that a timer task started
/// by mistake would have registered its sleep with the clock by the time the test counts sleeps.
@MainActor
func letTasksRun(rounds: Int = 20) async {
    for _ in 0..<rounds {
        await Task.yield()
        await Task.detached {}.value
    }
}
