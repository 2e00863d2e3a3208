import Foundation
import Loadable
import LoadableCaching
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

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
