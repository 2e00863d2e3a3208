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
private final class CallLog {
    /// The keys `make` was called with, in order.
    var made: [Int] = []
    /// `doSync()` calls of every loadable of the store.
    var doSyncCount = 0
    /// `doCancelSync()` calls of every loadable of the store.
    var doCancelSyncCount = 0
}

/// A loadable whose syncs the test finishes by hand; counts `doSync()` (one per sync really
/// started) and `doCancelSync()`, its own and in the store's log.
private final class Counted: Loadable<Int> {
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
private final class OwnLoadable: SyncableLoadable {
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
private final class StoreRef<Value: SyncableLoadable> {
    weak var store: LoadableStore<Int, Value>?
}

/// Counts Observation's change reports (its `onChange` closure must be `@Sendable`; here it runs
/// synchronously on the main actor, inside the change).
private final class ChangeCounter: @unchecked Sendable {
    var count = 0
}

private typealias CountedLease = LoadableLease<Counted>

/// A store of `Counted` loadables on `clock`; `make` records its key in `log`.
@MainActor
private func countedStore(
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
private func waitForTimer(_ clock: ManualClock, sourceLocation: SourceLocation = #_sourceLocation) async {
    let isArmed = await settle { clock.pendingSleepCount >= 1 }
    if !isArmed { Issue.record("the store's timer does not sleep on the clock", sourceLocation: sourceLocation) }
}

/// Gives the main actor and the global executor a number of turns, so that a timer task started
/// by mistake would have registered its sleep with the clock by the time the test counts sleeps.
@MainActor
private func letTasksRun(rounds: Int = 20) async {
    for _ in 0..<rounds {
        await Task.yield()
        await Task.detached {}.value
    }
}

// MARK: - 1. One entry per key

@Suite("LoadableStore: one entry per key")
@MainActor
struct StoreEntryIdentityTests {
    @Test("make runs once per entry, every lease of it has the same loadable, and taking a lease does not sync")
    func makeOncePerEntry() {
        let clock = ManualClock()
        var made: [Int] = []
        let store = LoadableStore<Int, TestLoadable<String>>(retention: .seconds(10), clock: clock) { key in
            made.append(key)
            return TestLoadable()
        }
        #expect(store.count == 0)
        let a = store.lease(1)
        let b = store.lease(1)
        let c = store.lease(1)
        #expect(made == [1])
        #expect(a.loadable === b.loadable)
        #expect(b.loadable === c.loadable)
        #expect(store.peek(1) === a.loadable)
        #expect(store.count == 1)
        #expect(a.loadable.syncCount == 0)
        #expect(a.loadable.syncIfNeededCount == 0)
        #expect(a.loadable.loadableState == .idle)

        let other = store.lease(2)
        #expect(made == [1, 2])
        #expect(other.loadable !== a.loadable)
        #expect(store.count == 2)
        #expect(other.loadable.syncCount == 0)
        #expect(store.syncingCount == 0)
    }

    @Test("ten leases and ten syncIfNeeded() calls start one sync")
    func tenLeasesOneSync() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        var leases: [CountedLease] = []
        for _ in 0..<10 {
            let lease = store.lease(1)
            lease.syncIfNeeded()
            leases.append(lease)
        }
        #expect(log.made == [1])
        #expect(log.doSyncCount == 1)
        #expect(leases.allSatisfy { $0.loadable === leases[0].loadable })
        #expect(leases[0].loadable.doSyncCount == 1)
        #expect(leases.allSatisfy { $0.loadableState == .syncing })
        #expect(store.count == 1)
        #expect(store.syncingCount == 1)

        leases[3].loadable.setDidSyncSuccessfully(7)
        for lease in leases { lease.syncIfNeeded() }
        #expect(log.doSyncCount == 1)  // fresh contents: nothing to sync
        #expect(leases.allSatisfy { $0.contents == 7 })
        #expect(store.syncingCount == 0)
    }

    @Test("peek neither makes an entry nor takes a lease")
    func peek() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        #expect(store.peek(1) == nil)
        #expect(log.made.isEmpty)
        #expect(store.count == 0)

        let lease = store.lease(1)
        lease.release()
        let peeked = store.peek(1)
        #expect(peeked === lease.loadable)
        #expect(peeked?.isInUse == false)
        #expect(log.made == [1])
    }
}

// MARK: - 2. The entry keeps its loadable in use

@Suite("LoadableStore: the entry keeps its loadable in use")
@MainActor
struct StoreInUseTests {
    @Test("the loadable is in use while at least one lease lives, and syncs at once when invalidated then")
    func inUseWhileLeased() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let first = store.lease(1)
        let loadable = first.loadable
        #expect(loadable.isInUse)
        let second = store.lease(1)
        first.release()
        #expect(loadable.isInUse)
        loadable.setDidSyncSuccessfully(1)
        loadable.invalidate()
        #expect(loadable.doSyncCount == 1)  // in use: synced at once
        loadable.setDidSyncSuccessfully(2)

        second.release()
        #expect(!loadable.isInUse)
        loadable.invalidate()
        #expect(loadable.doSyncCount == 1)  // retained: only stale
        #expect(loadable.isStale)
    }

    @Test("a lease of a leased entry does not end or begin the loadable's use again")
    func oneUseForAllLeases() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let first = store.lease(1)
        let changes = ChangeCounter()
        withObservationTracking {
            _ = first.loadable.isInUse
        } onChange: {
            changes.count += 1
        }
        let second = store.lease(1)
        second.release()
        let third = store.lease(1)
        #expect(changes.count == 0)
        first.release()
        third.release()
        #expect(changes.count == 1)
        #expect(!first.loadable.isInUse)
    }

    @Test("a loadable's own lease and the store's leases add up: the loadable stays in use until both end")
    func ownLeaseAndStoreLease() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let storeLease = store.lease(1)
        let ownLease = storeLease.loadable.lease()
        storeLease.release()
        #expect(ownLease.loadable.isInUse)
        #expect(store.count == 1)
        ownLease.release()
        #expect(!ownLease.loadable.isInUse)
    }
}

// MARK: - 3. Retention

@Suite("LoadableStore: retention after the last lease")
@MainActor
struct StoreRetentionTests {
    @Test("retention − 1 ms: a new lease reuses the entry (same object, contents kept, no sync, no make)")
    func reusedJustBeforeExpiry() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        let lease = store.lease(1)
        lease.syncIfNeeded()
        lease.loadable.setDidSyncSuccessfully(42)
        let loadable = lease.loadable
        lease.release()
        #expect(store.count == 1)
        #expect(!loadable.isInUse)

        await waitForTimer(clock)
        await clock.advance(by: .seconds(10) - .milliseconds(1))
        #expect(store.count == 1)
        let again = store.lease(1)
        again.syncIfNeeded()
        #expect(again.loadable === loadable)
        #expect(again.contents == 42)
        #expect(log.made == [1])
        #expect(log.doSyncCount == 1)
        #expect(log.doCancelSyncCount == 0)
        #expect(loadable.isInUse)

        // Leased again, it no longer expires: past the first deadline it is still there.
        await clock.advance(by: .seconds(5))
        #expect(store.count == 1)
        #expect(store.peek(1) === loadable)
        withExtendedLifetime(again) {}
    }

    @Test("retention + 1 ms: the entry is gone and a new lease makes a new one")
    func newEntryJustAfterExpiry() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        var lease: CountedLease? = store.lease(1)
        lease?.loadable.setDidSyncSuccessfully(42)
        weak let first = lease?.loadable
        lease?.release()
        lease = nil

        await waitForTimer(clock)
        await clock.advance(by: .seconds(10) + .milliseconds(1))
        #expect(store.count == 0)
        #expect(store.peek(1) == nil)
        #expect(first == nil)
        #expect(log.doCancelSyncCount == 0)  // not syncing: nothing to cancel

        let again = store.lease(1)
        #expect(log.made == [1, 1])
        #expect(again.contents == nil)
        #expect(store.count == 1)
    }

    @Test("an entry expires exactly retention after its release")
    func expiresAtRetention() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        store.lease(1).release()
        await waitForTimer(clock)
        #expect(clock.requestedSleeps == [.seconds(10)])
        await clock.advance(by: .seconds(10))
        #expect(store.count == 0)
        #expect(clock.pendingSleepCount == 0)
    }

    @Test("a lease object that goes away without release() retains its entry, like release()")
    func leaseObjectGoesAway() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        var lease: CountedLease? = store.lease(1)
        let loadable = store.peek(1)
        lease = nil
        #expect(lease == nil)
        #expect(loadable?.isInUse == false)
        #expect(store.count == 1)
        await waitForTimer(clock)
        #expect(clock.pendingSleepCount == 1)
        await clock.advance(by: .seconds(10))
        #expect(store.count == 0)
    }

    @Test("an entry leased again and released again expires retention after its latest release")
    func latestReleaseCounts() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        store.lease(1).release()
        await waitForTimer(clock)
        await clock.advance(by: .seconds(6))
        store.lease(1).release()  // released again at 6 s: expires at 16 s
        await clock.advance(by: .seconds(6))  // 12 s: the first deadline passed
        #expect(store.count == 1)
        #expect(log.made == [1])
        await waitForTimer(clock)
        await clock.advance(by: .seconds(4) - .milliseconds(1))
        #expect(store.count == 1)
        await clock.advance(by: .milliseconds(1))
        #expect(store.count == 0)
    }
}

// MARK: - 4, 5. Expiry of a syncing entry, retention zero

@Suite("LoadableStore: syncing entries at expiry, and retention zero")
@MainActor
struct StoreExpiryTests {
    @Test("an entry syncing at expiry is cancelled and released")
    func syncingAtExpiry() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        var lease: CountedLease? = store.lease(1)
        lease?.syncIfNeeded()
        weak let loadable = lease?.loadable
        var states: [LoadableState] = []
        let token = lease?.loadable.addObserver { states.append($0.loadableState) }
        lease = nil
        #expect(store.syncingCount == 1)
        #expect(loadable?.loadableState == .syncing)  // retained while syncing: the sync goes on

        await waitForTimer(clock)
        await clock.advance(by: .seconds(10) - .milliseconds(1))
        #expect(log.doCancelSyncCount == 0)
        await clock.advance(by: .milliseconds(1))
        #expect(log.doCancelSyncCount == 1)
        #expect(states == [.idle])  // cancelled: back to the state before the sync
        #expect(loadable == nil)
        #expect(store.count == 0)
        #expect(store.syncingCount == 0)
        #expect(token?.isActive == false)
    }

    @Test("retention zero drops an entry as soon as its last lease ends, cancelling its sync")
    func retentionZero() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .zero, clock: clock, log: log)
        let first = store.lease(1)
        let second = store.lease(1)
        first.release()
        #expect(store.count == 1)  // still leased
        second.release()
        #expect(store.count == 0)
        #expect(log.doCancelSyncCount == 0)

        var syncing: CountedLease? = store.lease(2)
        syncing?.syncIfNeeded()
        weak let loadable = syncing?.loadable
        #expect(store.syncingCount == 1)
        syncing = nil
        #expect(loadable == nil)
        #expect(log.doCancelSyncCount == 1)
        #expect(store.count == 0)
        #expect(store.syncingCount == 0)

        _ = store.lease(1)
        #expect(log.made == [1, 2, 1])
        await letTasksRun()
        #expect(clock.pendingSleepCount == 0)  // nothing retained: no timer
    }

    @Test("a loadable that shows another one's state (a mapped loadable) syncing at expiry or removal is cancelled")
    func mappedSyncingAtExpiry() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = LoadableStore<Int, MappedLoadable<Counted, String>>(retention: .seconds(10), clock: clock) { key in
            log.made.append(key)
            let source = Counted(key: key, log: log)
            if key == 4 { source.sync() }
            return source.map { "\($0)" }
        }
        var lease: LoadableLease<MappedLoadable<Counted, String>>? = store.lease(1)
        lease?.syncIfNeeded()
        weak let source = lease?.loadable.source
        #expect(log.doSyncCount == 1)
        #expect(lease?.loadableState == .syncing)
        lease = nil
        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(log.doCancelSyncCount == 1)
        #expect(source == nil)
        #expect(store.count == 0)

        let removed = store.lease(2)
        removed.syncIfNeeded()
        store.remove(2)
        #expect(log.doCancelSyncCount == 2)
        #expect(removed.loadableState == .idle)

        let cleared = store.lease(3)
        cleared.syncIfNeeded()
        store.removeAll()
        #expect(log.doCancelSyncCount == 3)
        #expect(cleared.loadableState == .idle)

        // Not counted in syncingCount (its own core never syncs), however it enters and leaves.
        let madeSyncing = store.lease(4)
        #expect(madeSyncing.loadableState == .syncing)
        #expect(store.syncingCount == 0)
        store.remove(4)
        #expect(log.doCancelSyncCount == 4)
        #expect(store.syncingCount == 0)
    }

    @Test("a type of the app's own syncing at expiry, or when removed, is cancelled")
    func ownTypeSyncingAtExpiry() async {
        let clock = ManualClock()
        var made: [OwnLoadable] = []
        let store = LoadableStore<Int, OwnLoadable>(retention: .seconds(10), clock: clock) { _ in
            let loadable = OwnLoadable()
            made.append(loadable)
            return loadable
        }
        store.lease(1).sync()
        store.lease(2).sync()
        made[1].finish()
        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(store.count == 0)
        #expect(made[0].cancelSyncCount == 1)
        #expect(made[0].loadableState == .idle)
        #expect(made[1].cancelSyncCount == 0)  // not syncing: nothing to cancel

        let removed = store.lease(3)
        removed.sync()
        store.remove(3)
        #expect(made[2].cancelSyncCount == 1)
        #expect(store.syncingCount == 0)
    }
}

// MARK: - 6. maxRetained

@Suite("LoadableStore: maxRetained")
@MainActor
struct StoreMaxRetainedTests {
    @Test("beyond maxRetained, the least recently released entry is dropped first")
    func leastRecentlyReleasedFirst() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), maxRetained: 2, clock: clock, log: log)
        let one = store.lease(1)
        let two = store.lease(2)
        let three = store.lease(3)
        let four = store.lease(4)
        // Released in the order 2, 1, 3: made first is not released first.
        two.release()
        one.release()
        #expect(store.count == 4)
        three.release()
        #expect(store.count == 3)
        #expect(store.peek(2) == nil)
        #expect(store.peek(1) != nil)
        #expect(store.peek(3) != nil)

        // Leased again, 1 leaves the retained entries; released, it is the most recent.
        let oneAgain = store.lease(1)
        #expect(oneAgain.loadable === one.loadable)
        oneAgain.release()
        four.release()  // retained now: 3, 1, 4
        #expect(store.peek(3) == nil)
        #expect(store.peek(1) === one.loadable)
        #expect(store.peek(4) === four.loadable)
        #expect(store.count == 2)
        #expect(log.made == [1, 2, 3, 4])
        #expect(log.doCancelSyncCount == 0)
    }

    @Test("an entry dropped by maxRetained while syncing is cancelled and released")
    func syncingDropped() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), maxRetained: 1, clock: clock, log: log)
        var first: CountedLease? = store.lease(1)
        first?.syncIfNeeded()
        weak let loadable = first?.loadable
        first = nil
        #expect(store.syncingCount == 1)
        store.lease(2).release()
        #expect(loadable == nil)
        #expect(log.doCancelSyncCount == 1)
        #expect(store.syncingCount == 0)
        #expect(store.count == 1)
        #expect(store.peek(2) != nil)
    }

    @Test("maxRetained 0 behaves like retention zero")
    func maxRetainedZero() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), maxRetained: 0, clock: clock, log: log)
        store.lease(1).release()
        #expect(store.count == 0)
        var syncing: CountedLease? = store.lease(2)
        syncing?.syncIfNeeded()
        weak let loadable = syncing?.loadable
        syncing = nil
        #expect(loadable == nil)
        #expect(log.doCancelSyncCount == 1)
        #expect(store.count == 0)
        #expect(store.syncingCount == 0)
        await letTasksRun()
        #expect(clock.pendingSleepCount == 0)
    }
}

// MARK: - 7. One timer

@Suite("LoadableStore: one timer for all retained entries")
@MainActor
struct StoreTimerTests {
    @Test("1,000 leases released at one instant wait on one sleep of the clock")
    func oneTimerForAThousand() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        var leases = (0..<1_000).map { store.lease($0) }
        #expect(store.count == 1_000)
        leases.removeAll()
        #expect(store.count == 1_000)
        await waitForTimer(clock)
        await letTasksRun()
        #expect(clock.pendingSleepCount == 1)
        #expect(clock.requestedSleeps == [.seconds(10)])

        await clock.advance(by: .seconds(10))
        #expect(store.count == 0)
        #expect(clock.pendingSleepCount == 0)
        #expect(clock.requestedSleeps.count == 1)
    }

    @Test("entries released at different instants expire each at its own time, one sleep at a time")
    func staggeredExpiry() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        store.lease(1).release()
        await waitForTimer(clock)
        await clock.advance(by: .seconds(1))
        store.lease(2).release()
        await clock.advance(by: .seconds(1))
        store.lease(3).release()
        await letTasksRun()
        #expect(clock.pendingSleepCount == 1)

        await clock.advance(by: .seconds(8))  // 10 s
        #expect(store.peek(1) == nil)
        #expect(store.count == 2)
        await waitForTimer(clock)
        #expect(clock.pendingSleepCount == 1)
        await clock.advance(by: .seconds(1))  // 11 s
        #expect(store.peek(2) == nil)
        #expect(store.count == 1)
        await waitForTimer(clock)
        await clock.advance(by: .seconds(1) - .milliseconds(1))
        #expect(store.count == 1)
        await clock.advance(by: .milliseconds(1))  // 12 s
        #expect(store.count == 0)
        #expect(clock.pendingSleepCount == 0)
        #expect(clock.requestedSleeps == [.seconds(10), .seconds(1), .seconds(1)])
    }
}

// MARK: - 8. Invalidation

@Suite("LoadableStore: invalidate(where:) and invalidateAll()")
@MainActor
struct StoreInvalidationTests {
    @Test("leased matching entries sync at once; retained ones only turn stale, and sync on the next lease")
    func leasedSyncRetainedStale() throws {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let leased = store.lease(1)
        leased.loadable.setDidSyncSuccessfully(1)
        let retainedLease = store.lease(2)
        retainedLease.loadable.setDidSyncSuccessfully(2)
        retainedLease.release()
        let notMatching = store.lease(3)
        notMatching.loadable.setDidSyncSuccessfully(3)
        let retained = try #require(store.peek(2))

        store.invalidate { $0 != 3 }
        #expect(leased.loadable.doSyncCount == 1)
        #expect(leased.loadableState == .syncing)
        #expect(retained.doSyncCount == 0)
        #expect(retained.isStale)
        #expect(retained.loadableState == .didSyncSuccessfully)
        #expect(retained.contents == 2)
        #expect(notMatching.loadable.doSyncCount == 0)
        #expect(!notMatching.loadable.isStale)
        #expect(store.syncingCount == 1)

        let again = store.lease(2)
        #expect(retained.doSyncCount == 0)  // a lease alone does not sync
        again.syncIfNeeded()
        #expect(retained.doSyncCount == 1)
        #expect(log.doSyncCount == 2)
        #expect(log.made == [1, 2, 3])
    }

    @Test("a leased entry invalidated while syncing syncs once more after the running sync")
    func invalidatedWhileSyncing() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let lease = store.lease(1)
        lease.syncIfNeeded()
        store.invalidate { $0 == 1 }
        store.invalidateAll()
        #expect(lease.loadable.doSyncCount == 1)
        lease.loadable.setDidSyncSuccessfully(1)
        #expect(lease.loadable.doSyncCount == 2)
        #expect(lease.loadableState == .syncing)
        #expect(store.syncingCount == 1)
        lease.loadable.setDidSyncSuccessfully(2)
        #expect(lease.loadable.doSyncCount == 2)
        #expect(store.syncingCount == 0)
    }

    @Test("invalidateAll() invalidates every entry, leased and retained")
    func invalidateAll() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let a = store.lease(1)
        let b = store.lease(2)
        let c = store.lease(3)
        for lease in [a, b, c] { lease.loadable.setDidSyncSuccessfully(0) }
        c.release()
        store.invalidateAll()
        #expect(a.loadable.doSyncCount == 1)
        #expect(b.loadable.doSyncCount == 1)
        #expect(c.loadable.doSyncCount == 0)
        #expect(c.loadable.isStale)
        #expect(store.syncingCount == 2)
        #expect(log.doSyncCount == 2)
    }

    @Test("entries are invalidated in the order they were made")
    func order() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        var seen: [Int] = []
        var tokens: [LoadableObservation] = []
        var leases: [CountedLease] = []
        for key in [5, 3, 9, 1] {
            let lease = store.lease(key)
            tokens.append(lease.loadable.addObserver { _ in seen.append(key) })
            leases.append(lease)
        }
        store.invalidateAll()
        #expect(seen == [5, 3, 9, 1])
        for lease in leases { lease.loadable.setDidSyncSuccessfully(0) }
        seen.removeAll()
        store.invalidate { $0 != 3 }
        #expect(seen == [5, 9, 1])
        withExtendedLifetime(tokens) {}
    }

    @Test("an observer that leases, releases and removes during invalidate(where:) is safe")
    func observerChangesTheStore() async throws {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let ref = StoreRef<Counted>()
        ref.store = store
        var one: CountedLease? = store.lease(1)
        let two = store.lease(2)
        var three: CountedLease? = store.lease(3)
        three?.release()  // retained
        three = nil
        for key in 1...3 { store.peek(key)?.setDidSyncSuccessfully(key) }
        let removed = try #require(store.peek(2))

        var leasedInObserver: [CountedLease] = []
        var reactions = 0
        let token = one?.loadable.addObserver { loadable in
            guard loadable.loadableState == .syncing, reactions == 0, let store = ref.store else { return }
            reactions += 1
            store.remove(2)
            leasedInObserver.append(store.lease(3))  // retained: leased again
            leasedInObserver.append(store.lease(4))  // new
            one?.release()  // the entry being invalidated loses its last lease
        }
        store.invalidateAll()
        #expect(reactions == 1)
        #expect(log.made == [1, 2, 3, 4])
        #expect(store.count == 3)
        #expect(store.peek(2) == nil)
        // 2 left the store before its turn: not invalidated. Its lease still reads it.
        #expect(!removed.isStale)
        #expect(two.loadable === removed)
        #expect(two.contents == 2)
        // 1 synced (it was in use when invalidated) and is now retained while syncing.
        let first = try #require(store.peek(1))
        #expect(first.doSyncCount == 1)
        #expect(first.loadableState == .syncing)
        #expect(!first.isInUse)
        // 3 was leased again before its turn: in use when invalidated, so it synced.
        #expect(store.peek(3)?.doSyncCount == 1)
        #expect(store.peek(3)?.isInUse == true)
        // 4 was made during the call: not one of the entries invalidated.
        #expect(store.peek(4)?.doSyncCount == 0)
        #expect(store.syncingCount == 2)

        // 1 expires while syncing: cancelled.
        one = nil
        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(store.peek(1) == nil)
        #expect(log.doCancelSyncCount == 1)
        #expect(store.syncingCount == 1)
        #expect(store.count == 2)
        withExtendedLifetime((token, leasedInObserver)) {}
    }

    @Test("a type of the app's own: leased entries are asked to syncIfNeeded() after invalidate(); retained ones not")
    func ownType() throws {
        let clock = ManualClock()
        var made: [Int] = []
        let store = LoadableStore<Int, OwnLoadable>(retention: .seconds(10), clock: clock) { key in
            made.append(key)
            return OwnLoadable()
        }
        let leased = store.lease(1)
        store.lease(2).release()
        let retained = try #require(store.peek(2))
        store.invalidateAll()
        #expect(leased.loadable.invalidateCount == 1)
        #expect(leased.loadable.syncIfNeededCount == 1)
        #expect(leased.loadable.syncCount == 1)
        #expect(retained.invalidateCount == 1)
        #expect(retained.syncIfNeededCount == 0)
        #expect(retained.syncCount == 0)
        #expect(store.syncingCount == 0)  // a type of the app's own is not counted
        #expect(!leased.loadable.isInUse)  // nor known to be in use
        #expect(made == [1, 2])
    }
}

// MARK: - 9. Removal

@Suite("LoadableStore: remove(_:) and removeAll()")
@MainActor
struct StoreRemovalTests {
    @Test("remove drops the entry and cancels its sync; live leases keep their object; a new lease makes a new entry")
    func remove() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let old = store.lease(1)
        let oldSecond = store.lease(1)
        old.syncIfNeeded()
        let oldLoadable = old.loadable
        #expect(store.syncingCount == 1)

        store.remove(1)
        #expect(log.doCancelSyncCount == 1)
        #expect(oldLoadable.loadableState == .idle)
        #expect(store.count == 0)
        #expect(store.peek(1) == nil)
        #expect(store.syncingCount == 0)
        #expect(old.loadable === oldLoadable)
        #expect(oldLoadable.isInUse)  // its leases still live

        // The old object is no longer the store's: its syncs are not counted.
        old.sync()
        #expect(oldLoadable.doSyncCount == 2)
        #expect(store.syncingCount == 0)

        let new = store.lease(1)
        #expect(log.made == [1, 1])
        #expect(new.loadable !== oldLoadable)
        #expect(store.peek(1) === new.loadable)
        #expect(store.count == 1)

        // Releasing the old leases does not touch the new entry.
        old.release()
        oldSecond.release()
        #expect(!oldLoadable.isInUse)
        #expect(new.loadable.isInUse)
        #expect(store.count == 1)
        await letTasksRun()
        #expect(clock.pendingSleepCount == 0)  // nothing was retained
        new.release()
        #expect(store.count == 1)
        await waitForTimer(clock)
        #expect(clock.pendingSleepCount == 1)
    }

    @Test("remove of a retained entry drops it, and its expiry later does nothing")
    func removeRetained() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        store.lease(1).release()
        weak let loadable = store.peek(1)
        await waitForTimer(clock)
        store.remove(1)
        #expect(loadable == nil)
        #expect(store.count == 0)
        let later = store.lease(1)
        later.release()  // retained at 0 s too
        await clock.advance(by: .seconds(5))
        store.remove(2)  // a key without an entry: ignored
        #expect(store.count == 1)
        await clock.advance(by: .seconds(5))
        #expect(store.count == 0)
        #expect(log.made == [1, 1])
    }

    @Test("removeAll drops every entry and cancels every sync; leases keep their objects; new leases make new entries")
    func removeAll() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let syncing = store.lease(1)
        syncing.syncIfNeeded()
        let idle = store.lease(2)
        var retainedSyncing: CountedLease? = store.lease(3)
        retainedSyncing?.syncIfNeeded()
        weak let retained = retainedSyncing?.loadable
        retainedSyncing = nil
        store.lease(4).release()
        weak let retainedIdle = store.peek(4)
        #expect(store.count == 4)
        #expect(store.syncingCount == 2)

        store.removeAll()
        #expect(store.count == 0)
        #expect(store.syncingCount == 0)
        #expect(log.doCancelSyncCount == 2)
        #expect(retained == nil)
        #expect(retainedIdle == nil)
        for key in 1...4 { #expect(store.peek(key) == nil) }
        #expect(syncing.loadableState == .idle)
        #expect(syncing.loadable.isInUse)

        let newOne = store.lease(1)
        #expect(newOne.loadable !== syncing.loadable)
        #expect(log.made == [1, 2, 3, 4, 1])
        syncing.release()
        idle.release()
        #expect(store.count == 1)
        #expect(newOne.loadable.isInUse)

        // The old timer finds nothing to drop.
        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(store.count == 1)
        #expect(store.peek(1) === newOne.loadable)
    }
}

// MARK: - 10. Writing contents

@Suite("LoadableStore: setContents(_:for:) and updateContents(for:_:)")
@MainActor
struct StoreContentsTests {
    @Test("setContents on a missing key makes a retained entry with the contents, without a sync")
    func setContentsMakesRetainedEntry() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        store.setContents(5, for: 1)
        #expect(store.count == 1)
        #expect(log.made == [1])
        let loadable = store.peek(1)
        #expect(loadable?.contents == 5)
        #expect(loadable?.isInUse == false)
        #expect(loadable?.loadableState == .idle)
        #expect(loadable?.isStale == false)
        #expect(log.doSyncCount == 0)

        await waitForTimer(clock)
        await clock.advance(by: .seconds(10) - .milliseconds(1))
        #expect(store.count == 1)
        await clock.advance(by: .milliseconds(1))
        #expect(store.count == 0)
    }

    @Test("setContents on an existing entry sets its contents")
    func setContentsOnExistingEntry() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let lease = store.lease(1)
        lease.syncIfNeeded()
        store.setContents(7, for: 1)
        #expect(lease.contents == 7)
        #expect(lease.loadableState == .syncing)  // the running sync is left alone
        #expect(log.made == [1])
        #expect(store.count == 1)
        #expect(lease.loadable.isInUse)
    }

    @Test("with retention zero or maxRetained 0, setContents on a missing key makes no entry")
    func setContentsKeepsNothing() {
        let clock = ManualClock()
        let log = CallLog()
        let zero = countedStore(retention: .zero, clock: clock, log: log)
        zero.setContents(5, for: 1)
        #expect(zero.count == 0)
        let none = countedStore(retention: .seconds(10), maxRetained: 0, clock: clock, log: log)
        none.setContents(5, for: 1)
        #expect(none.count == 0)
        #expect(log.made.isEmpty)
    }

    @Test("an entry made by setContents counts towards maxRetained")
    func setContentsAndMaxRetained() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), maxRetained: 1, clock: clock, log: log)
        store.setContents(1, for: 1)
        store.setContents(2, for: 2)
        #expect(store.count == 1)
        #expect(store.peek(1) == nil)
        #expect(store.peek(2)?.contents == 2)
    }

    @Test("an observer that leases the entry setContents makes keeps it leased, not retained")
    func setContentsLeasedByObserver() async throws {
        let clock = ManualClock()
        let log = CallLog()
        let ref = StoreRef<Counted>()
        var tokens: [LoadableObservation] = []
        var leased: [CountedLease] = []
        let store = LoadableStore<Int, Counted>(retention: .seconds(10), clock: clock) { key in
            log.made.append(key)
            let loadable = Counted(key: key, log: log)
            tokens.append(
                loadable.addObserver { _ in
                    if leased.isEmpty, let lease = ref.store?.lease(key) { leased.append(lease) }
                })
            return loadable
        }
        ref.store = store
        store.setContents(5, for: 1)
        #expect(leased.count == 1)
        #expect(store.count == 1)
        #expect(store.peek(1)?.isInUse == true)
        await letTasksRun()
        // Leased: not retained. (Required: a store that retained a leased entry would retain it
        // twice on its release.)
        try #require(clock.pendingSleepCount == 0)

        leased.first?.release()
        #expect(store.count == 1)
        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(store.count == 0)
        #expect(log.made == [1])
        withExtendedLifetime(tokens) {}
    }

    @Test("updateContents does nothing for a missing key or an entry without contents, and changes them otherwise")
    func updateContents() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        var calls = 0
        store.updateContents(for: 1) { (value: inout Int) in
            calls += 1
            value += 1
        }
        #expect(calls == 0)
        #expect(store.count == 0)
        #expect(log.made.isEmpty)

        let lease = store.lease(1)
        store.updateContents(for: 1) { (value: inout Int) in
            calls += 1
            value += 1
        }
        #expect(calls == 0)
        #expect(lease.contents == nil)

        lease.loadable.setDidSyncSuccessfully(10)
        store.updateContents(for: 1) { (value: inout Int) in
            calls += 1
            value += 1
        }
        #expect(calls == 1)
        #expect(lease.contents == 11)
        #expect(log.doSyncCount == 0)
        #expect(log.made == [1])
    }
}

// MARK: - 11. Prefetch

@Suite("LoadableStore: prefetch(_:)")
@MainActor
struct StorePrefetchTests {
    @Test("prefetch syncs, waits for the sync, and leaves the entry retained with its contents")
    func prefetch() async throws {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        let task = Task { @MainActor in try await store.prefetch(1) }
        await yield { store.peek(1)?.hasObservers == true }
        let loadable = try #require(store.peek(1))
        #expect(loadable.doSyncCount == 1)
        #expect(loadable.isInUse)  // leased while it waits
        #expect(store.syncingCount == 1)

        loadable.setDidSyncSuccessfully(3)
        try await task.value
        #expect(store.count == 1)
        #expect(store.peek(1) === loadable)
        #expect(loadable.contents == 3)
        #expect(!loadable.isInUse)
        #expect(!loadable.hasObservers)
        #expect(log.doSyncCount == 1)

        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(store.count == 0)
    }

    @Test("prefetch joins a running sync")
    func joinsRunningSync() async throws {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let lease = store.lease(1)
        lease.syncIfNeeded()
        let task = Task { @MainActor in try await store.prefetch(1) }
        await yield { lease.loadable.hasObservers }
        #expect(log.doSyncCount == 1)
        lease.loadable.setDidSyncSuccessfully(4)
        try await task.value
        #expect(log.doSyncCount == 1)
        #expect(log.made == [1])
        #expect(lease.loadable.isInUse)  // the other lease still lives
    }

    @Test("prefetch throws the sync's error, and the entry stays retained")
    func throwsSyncError() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let task = Task { @MainActor in try await store.prefetch(1) }
        await yield { store.peek(1)?.hasObservers == true }
        store.peek(1)?.setDidFailToSync(TestError("offline"))
        await #expect(throws: TestError("offline")) { try await task.value }
        #expect(store.count == 1)
        #expect(store.peek(1)?.isInUse == false)
        #expect(store.peek(1)?.loadableState == .didFailToSync)
        #expect(store.syncingCount == 0)
    }

    @Test("a cancelled prefetch throws CancellationError; the sync goes on and the entry is retained")
    func cancelledPrefetch() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let task = Task { @MainActor in try await store.prefetch(1) }
        await yield { store.peek(1)?.hasObservers == true }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(log.doSyncCount == 1)
        #expect(log.doCancelSyncCount == 0)
        #expect(store.peek(1)?.loadableState == .syncing)
        #expect(store.peek(1)?.isInUse == false)
        #expect(store.syncingCount == 1)
        #expect(store.count == 1)
    }

    @Test("prefetch of fresh contents does not sync")
    func freshContents() async throws {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        store.setContents(1, for: 1)
        store.peek(1)?.setDidSyncSuccessfully(2)
        try await store.prefetch(1)
        #expect(log.doSyncCount == 0)
        #expect(store.peek(1)?.contents == 2)
    }
}

// MARK: - 12. syncingCount and Observation

@Suite("LoadableStore: syncingCount and Observation")
@MainActor
struct StoreSyncingCountTests {
    @Test("syncingCount follows starts, ends, failures, cancels, removals and expiries")
    func syncingCount() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        let a = store.lease(1)
        let b = store.lease(2)
        #expect(store.syncingCount == 0)
        a.syncIfNeeded()
        #expect(store.syncingCount == 1)
        b.syncIfNeeded()
        #expect(store.syncingCount == 2)
        a.loadable.setDidSyncSuccessfully(1)  // ends
        #expect(store.syncingCount == 1)
        a.invalidate()  // in use: syncs again
        #expect(store.syncingCount == 2)
        a.cancelSync()  // cancelled
        #expect(store.syncingCount == 1)
        #expect(log.doCancelSyncCount == 1)
        b.loadable.setDidFailToSync(TestError())  // fails
        #expect(store.syncingCount == 0)
        b.sync()
        #expect(store.syncingCount == 1)
        store.remove(2)  // leaves the store while syncing
        #expect(store.syncingCount == 0)
        b.sync()  // no longer the store's
        #expect(b.loadableState == .syncing)
        #expect(store.syncingCount == 0)

        a.sync()
        a.release()  // retained while syncing
        #expect(store.syncingCount == 1)
        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))  // expires while syncing
        #expect(store.syncingCount == 0)
        #expect(store.count == 0)
    }

    @Test("an entry whose loadable is already syncing when made counts as syncing")
    func madeSyncing() {
        let clock = ManualClock()
        let log = CallLog()
        let store = LoadableStore<Int, Counted>(retention: .seconds(10), clock: clock) { key in
            let loadable = Counted(key: key, log: log)
            loadable.sync()
            return loadable
        }
        let lease = store.lease(1)
        #expect(store.syncingCount == 1)
        lease.loadable.setDidSyncSuccessfully(1)
        #expect(store.syncingCount == 0)
    }

    @Test("TestLoadable entries are counted too")
    func testLoadable() {
        let clock = ManualClock()
        let store = LoadableStore<Int, TestLoadable<Int>>(retention: .seconds(10), clock: clock) { _ in
            TestLoadable()
        }
        let lease = store.lease(1)
        lease.loadable.setSyncing()
        #expect(store.syncingCount == 1)
        lease.loadable.setSyncing()  // no change of syncing
        #expect(store.syncingCount == 1)
        lease.cancelSync()
        #expect(lease.loadable.cancelSyncCount == 1)
        #expect(store.syncingCount == 0)
    }

    @Test("count is tracked by Observation: made and dropped entries report a change, leases of live ones do not")
    func countObservation() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        func track() -> ChangeCounter {
            let counter = ChangeCounter()
            withObservationTracking {
                _ = store.count
            } onChange: {
                counter.count += 1
            }
            return counter
        }
        let made = track()
        let lease = store.lease(1)
        #expect(made.count == 1)

        let unchanged = track()
        let second = store.lease(1)
        second.release()
        lease.release()  // retained: still counted
        lease.loadable.sync()
        #expect(unchanged.count == 0)

        let expired = track()
        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(expired.count == 1)
        #expect(store.count == 0)

        _ = store.lease(2)
        let removed = track()
        store.remove(2)
        #expect(removed.count == 1)
    }

    @Test("syncingCount is tracked by Observation")
    func syncingCountObservation() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let lease = store.lease(1)
        let started = ChangeCounter()
        withObservationTracking {
            _ = store.syncingCount
        } onChange: {
            started.count += 1
        }
        lease.syncIfNeeded()
        #expect(started.count == 1)

        let ended = ChangeCounter()
        withObservationTracking {
            _ = store.syncingCount
        } onChange: {
            ended.count += 1
        }
        _ = store.lease(2)  // a new entry changes count, not syncingCount
        #expect(ended.count == 0)
        lease.loadable.setDidSyncSuccessfully(1)
        #expect(ended.count == 1)
    }
}

// MARK: - 13. Leases

@Suite("LoadableStore: leases")
@MainActor
struct StoreLeaseTests {
    @Test("a lease released twice: the second release is a no-op")
    func releasedTwice() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        let first = store.lease(1)
        let second = store.lease(1)
        first.release()
        first.release()
        #expect(first.isReleased)
        #expect(second.loadable.isInUse)  // the second lease's use was not ended
        await letTasksRun()
        #expect(clock.pendingSleepCount == 0)  // not retained

        second.release()
        #expect(!second.loadable.isInUse)
        await waitForTimer(clock)
        let third = store.lease(1)
        first.release()
        second.release()
        #expect(third.loadable.isInUse)  // old releases do not end the new lease's use
        #expect(third.loadable === first.loadable)
        await clock.advance(by: .seconds(10))
        #expect(store.count == 1)  // leased: not expired
    }

    @Test("a released lease that goes away ends nothing more")
    func releasedThenGone() {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(clock: clock, log: log)
        var first: CountedLease? = store.lease(1)
        let second = store.lease(1)
        first?.release()
        first = nil
        #expect(first == nil)
        #expect(second.loadable.isInUse)
    }

    @Test("a lease released on another thread hands its end to the main actor; the entry is then retained")
    func releasedOnAnotherThread() async throws {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        let box = Locked<CountedLease?>(store.lease(1))
        let loadable = try #require(store.peek(1))
        loadable.setDidSyncSuccessfully(1)
        releaseOnAnotherThread(box)
        // The main actor has not run since: the end is still on its way.
        #expect(loadable.isInUse)
        #expect(clock.pendingSleepCount == 0)
        await yield { !loadable.isInUse }
        #expect(store.count == 1)
        #expect(store.peek(1) === loadable)
        loadable.invalidate()
        #expect(loadable.doSyncCount == 0)  // retained: only stale
        await waitForTimer(clock)
        #expect(clock.pendingSleepCount == 1)
        await clock.advance(by: .seconds(10))
        #expect(store.count == 0)
        #expect(log.made == [1])
    }

    @Test("a lease released on another thread while another lease lives does not end the entry's use")
    func releasedOnAnotherThreadWithOtherLease() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        let kept = store.lease(1)
        let box = Locked<CountedLease?>(store.lease(1))
        releaseOnAnotherThread(box)
        await letTasksRun()
        #expect(kept.loadable.isInUse)
        #expect(clock.pendingSleepCount == 0)
        kept.release()
        #expect(!kept.loadable.isInUse)
    }

    @Test("after release(), a lease still reads its loadable; sync, syncIfNeeded, invalidate, cancelSync do nothing")
    func releasedLeaseIsInert() {
        let clock = ManualClock()
        let store = LoadableStore<Int, TestLoadable<Int>>(retention: .seconds(10), clock: clock) { _ in
            TestLoadable()
        }
        let lease = store.lease(1)
        let other = store.lease(1)
        lease.release()
        lease.sync()
        lease.syncIfNeeded()
        lease.invalidate()
        other.sync()
        lease.cancelSync()
        let loadable = lease.loadable
        #expect(loadable.syncCount == 1)
        #expect(loadable.syncIfNeededCount == 0)
        #expect(loadable.invalidateCount == 0)
        #expect(loadable.cancelSyncCount == 0)
        #expect(store.syncingCount == 1)
        loadable.setDidSyncSuccessfully(3)
        #expect(lease.contents == 3)
        #expect(lease.loadableState == .didSyncSuccessfully)
        #expect(store.peek(1) === loadable)
    }
}

// MARK: - 14. Re-entrancy

@Suite("LoadableStore: re-entrancy")
@MainActor
struct StoreReentrancyTests {
    @Test("a lease taken inside make for another key works, nested")
    func leaseInsideMake() {
        let clock = ManualClock()
        let log = CallLog()
        let ref = StoreRef<Counted>()
        var inner: [Int: CountedLease] = [:]
        let store = LoadableStore<Int, Counted>(retention: .seconds(10), clock: clock) { key in
            log.made.append(key)
            if key < 3, let store = ref.store {
                let lease = store.lease(key + 1)
                inner[key] = lease
            }
            return Counted(key: key, log: log)
        }
        ref.store = store
        let outer = store.lease(1)
        #expect(log.made == [1, 2, 3])
        #expect(store.count == 3)
        #expect(inner[1]?.loadable === store.peek(2))
        #expect(inner[2]?.loadable === store.peek(3))
        #expect(outer.loadable === store.peek(1))
        for key in 1...3 { #expect(store.peek(key)?.isInUse == true) }
        #expect(log.doSyncCount == 0)

        let again = store.lease(2)
        #expect(again.loadable === inner[1]?.loadable)
        #expect(log.made == [1, 2, 3])
    }

    @Test("a lease taken inside an expiry (an observer of the cancelled sync) gets a new entry")
    func leaseInsideExpiry() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        let ref = StoreRef<Counted>()
        ref.store = store
        var lease: CountedLease? = store.lease(1)
        lease?.syncIfNeeded()
        weak let old = lease?.loadable
        var leasedInExpiry: [CountedLease] = []
        let token = lease?.loadable.addObserver { loadable in
            guard loadable.loadableState != .syncing, leasedInExpiry.isEmpty, let store = ref.store else { return }
            leasedInExpiry.append(store.lease(1))
        }
        lease = nil

        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(log.doCancelSyncCount == 1)
        #expect(log.made == [1, 1])
        #expect(leasedInExpiry.count == 1)
        #expect(old == nil)
        #expect(store.count == 1)
        #expect(store.peek(1) === leasedInExpiry.first?.loadable)
        #expect(store.peek(1)?.isInUse == true)
        #expect(store.peek(1)?.loadableState == .idle)
        #expect(store.syncingCount == 0)

        // The new entry is leased: it does not expire.
        await clock.advance(by: .seconds(20))
        #expect(store.count == 1)
        withExtendedLifetime(token) {}
    }

    @Test("an observer that, during an expiry batch, leases another key expiring at the same instant keeps it")
    func leaseOfAnotherKeyInsideExpiry() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        let ref = StoreRef<Counted>()
        ref.store = store
        var first: CountedLease? = store.lease(1)
        first?.syncIfNeeded()
        var second: CountedLease? = store.lease(2)
        second?.loadable.setDidSyncSuccessfully(2)
        weak let secondLoadable = second?.loadable
        var kept: [CountedLease] = []
        let token = first?.loadable.addObserver { loadable in
            guard loadable.loadableState != .syncing, kept.isEmpty, let store = ref.store else { return }
            kept.append(store.lease(2))
        }
        // Released with release(), in this order: an optimized build may end a local's lifetime
        // after its last use, so setting the variables to nil would not fix the order.
        first?.release()  // released first: expires first
        second?.release()

        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(log.doCancelSyncCount == 1)
        #expect(kept.count == 1)
        #expect(store.count == 1)
        #expect(store.peek(1) == nil)
        #expect(store.peek(2) === secondLoadable)
        #expect(kept.first?.loadable === secondLoadable)
        #expect(kept.first?.contents == 2)
        #expect(secondLoadable?.isInUse == true)
        #expect(log.made == [1, 2])

        await clock.advance(by: .seconds(20))
        #expect(store.count == 1)
        first = nil  // released leases still hold their loadables
        second = nil
        kept.removeAll()
        #expect(secondLoadable?.isInUse == false)
        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(store.count == 0)
        #expect(secondLoadable == nil)
        withExtendedLifetime(token) {}
    }

    @Test("an observer that releases a lease during an expiry retains that entry for a full retention")
    func releaseInsideExpiry() async {
        let clock = ManualClock()
        let log = CallLog()
        let store = countedStore(retention: .seconds(10), clock: clock, log: log)
        var first: CountedLease? = store.lease(1)
        first?.syncIfNeeded()
        var other: CountedLease? = store.lease(2)
        let token = first?.loadable.addObserver { loadable in
            guard loadable.loadableState != .syncing else { return }
            other = nil
        }
        first = nil
        await waitForTimer(clock)
        await clock.advance(by: .seconds(10))
        #expect(other == nil)
        #expect(store.peek(1) == nil)
        #expect(store.count == 1)  // 2 released at 10 s: expires at 20 s
        await waitForTimer(clock)
        await clock.advance(by: .seconds(10) - .milliseconds(1))
        #expect(store.count == 1)
        await clock.advance(by: .milliseconds(1))
        #expect(store.count == 0)
        withExtendedLifetime(token) {}
    }
}

// MARK: - 16. The store released while leases live

@Suite("LoadableStore: released while leases live")
@MainActor
struct StoreReleasedTests {
    @Test("leases outlive their store: they keep working and releasing them does not crash")
    func leasesOutliveStore() async throws {
        let clock = ManualClock()
        let log = CallLog()
        var store: LoadableStore<Int, Counted>? = countedStore(retention: .seconds(10), clock: clock, log: log)
        let lease = try #require(store).lease(1)
        let second = try #require(store).lease(1)
        try #require(store).lease(2).release()  // retained: the store's timer is armed
        await waitForTimer(clock)
        weak let weakStore = store
        store = nil
        #expect(weakStore == nil)

        lease.syncIfNeeded()
        #expect(log.doSyncCount == 1)
        lease.loadable.setDidSyncSuccessfully(5)
        #expect(second.contents == 5)
        lease.invalidate()  // still in use: syncs at once
        #expect(log.doSyncCount == 2)
        second.release()
        #expect(lease.loadable.isInUse)
        lease.release()
        #expect(!lease.loadable.isInUse)
        await clock.advance(by: .seconds(20))
        #expect(log.doCancelSyncCount == 0)
        #expect(lease.loadableState == .syncing)
    }
}
