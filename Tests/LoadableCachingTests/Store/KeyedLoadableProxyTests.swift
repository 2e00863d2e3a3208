import Foundation
import LoadableCaching
import LoadableSupport
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

/// `KeyedLoadableProxy`: a loadable that stands for the entry of its `key` in a `LoadableStore`,
/// holding a lease on it, and follows the key as it changes.
@Suite("KeyedLoadableProxy")
@MainActor
struct KeyedLoadableProxyTests {
    /// A loadable whose syncs the test finishes; counts `doSync()` (one per sync really started).
    final class Counted: Loadable<String> {
        var doSyncCount = 0

        override func doSync() {
            doSyncCount += 1
        }
    }

    /// Counts Observation's change reports (its `onChange` closure must be `@Sendable`; here it
    /// runs synchronously on the main actor, inside the change).
    final class ChangeCounter: @unchecked Sendable {
        var count = 0
    }

    /// A store of `Counted` loadables on a manual clock, counting the calls of `make`.
    @MainActor
    final class CountedStore {
        let clock = ManualClock()
        var made: [Int] = []
        private(set) var store: LoadableStore<Int, Counted>!

        init(retention: Duration = .seconds(10)) {
            store = LoadableStore(retention: retention, clock: clock) { [unowned self] key in
                made.append(key)
                return Counted()
            }
        }
    }

    /// A store of `TestLoadable`s on a manual clock, counting the calls of `make`.
    @MainActor
    final class TestStore {
        let clock = ManualClock()
        var made: [Int] = []
        private(set) var store: LoadableStore<Int, TestLoadable<String>>!

        init(retention: Duration = .seconds(10)) {
            store = LoadableStore(retention: retention, clock: clock) { [unowned self] key in
                made.append(key)
                return TestLoadable()
            }
        }
    }

    /// A property of the proxy a view may read.
    enum Property: String, CaseIterable, Sendable {
        case contents, isPlaceholder, loadableState, error, isContentsAvailable
    }

    /// Reads `property` of `proxy` once inside `withObservationTracking`; the counter counts the
    /// change reports that follow (at most one).
    static func track(
        _ property: Property, of proxy: KeyedLoadableProxy<Int, Counted>
    ) -> ChangeCounter {
        let counter = ChangeCounter()
        withObservationTracking {
            switch property {
            case .contents: _ = proxy.contents
            case .isPlaceholder: _ = proxy.isPlaceholder
            case .loadableState: _ = proxy.loadableState
            case .error: _ = proxy.error
            case .isContentsAvailable: _ = proxy.isContentsAvailable
            }
        } onChange: {
            counter.count += 1
        }
        return counter
    }

    // MARK: - Without a key

    @Test("without a key: idle, no contents, no error, no sync needed, and the commands do nothing")
    func withoutKey() {
        let test = TestStore()
        let proxy = KeyedLoadableProxy(store: test.store)
        let recorder = Recorder(proxy)
        #expect(proxy.key == nil)
        #expect(proxy.loadable == nil)
        #expect(proxy.loadableState == .idle)
        #expect(proxy.contents == nil)
        #expect(!proxy.isContentsAvailable)
        #expect(proxy.error == nil)
        #expect(!proxy.isPlaceholder)
        #expect(!proxy.needsSync)

        proxy.sync()
        proxy.syncIfNeeded()
        proxy.invalidate()
        proxy.cancelSync()
        #expect(proxy.loadableState == .idle)
        #expect(test.made.isEmpty)
        #expect(test.store.count == 0)
        #expect(recorder.count == 0)
        #expect(proxy.description.contains("key: none"))
    }

    @Test("a key set back to nil: the old entry gets none of the commands, and the proxy shows nothing")
    func keySetBackToNil() throws {
        let test = TestStore()
        let proxy = KeyedLoadableProxy(store: test.store, key: 1, placeholder: .contents { "summary \($0)" })
        let entry = try #require(proxy.loadable)
        entry.setDidFailToSync(TestError("offline"))
        proxy.key = nil
        #expect(proxy.loadable == nil)
        #expect(proxy.loadableState == .idle)
        #expect(proxy.contents == nil)
        #expect(!proxy.isContentsAvailable)
        #expect(proxy.error == nil)
        #expect(!proxy.isPlaceholder)
        #expect(!proxy.needsSync)
        #expect(entry.needsSync)

        proxy.sync()
        proxy.syncIfNeeded()
        proxy.invalidate()
        proxy.cancelSync()
        #expect(entry.syncCount == 0)
        #expect(entry.syncIfNeededCount == 0)
        #expect(entry.invalidateCount == 0)
        #expect(entry.cancelSyncCount == 0)
        #expect(!entry.isInUse)
    }

    // MARK: - Leases

    @Test("a key leases its entry (in use, one entry in the store) without a sync, at init or when set")
    func keyLeases() throws {
        let test = TestStore()
        let proxy = KeyedLoadableProxy(store: test.store)
        proxy.key = 1
        let entry = try #require(test.store.peek(1))
        #expect(proxy.loadable === entry)
        #expect(entry.isInUse)
        #expect(test.store.count == 1)
        #expect(test.made == [1])
        #expect(entry.syncCount == 0)
        #expect(entry.syncIfNeededCount == 0)
        #expect(proxy.description.contains("key: 1"))

        let other = KeyedLoadableProxy(store: test.store, key: 2)
        let second = try #require(test.store.peek(2))
        #expect(other.loadable === second)
        #expect(second.isInUse)
        #expect(test.store.count == 2)
        #expect(test.made == [1, 2])
        #expect(second.syncCount == 0)
        #expect(second.syncIfNeededCount == 0)
    }

    @Test("another key releases the old lease: the old entry is retained, then dropped after the retention")
    func anotherKeyReleasesTheOld() async throws {
        let test = TestStore(retention: .seconds(10))
        let proxy = KeyedLoadableProxy(store: test.store, key: 1)
        weak let first = test.store.peek(1)
        proxy.key = 2
        let second = try #require(test.store.peek(2))
        #expect(proxy.loadable === second)
        #expect(second.isInUse)
        #expect(test.store.count == 2)
        #expect(test.made == [1, 2])
        // Required: without a retained entry, no timer would ever sleep.
        try #require(first?.isInUse == false)

        await test.clock.waitForSleepers()
        await test.clock.advance(by: .seconds(10) - .milliseconds(1))
        #expect(test.store.count == 2)
        #expect(first != nil)
        await test.clock.advance(by: .milliseconds(2))
        #expect(test.store.count == 1)
        #expect(first == nil)
        #expect(test.store.peek(2) === second)
        #expect(second.isInUse)
    }

    @Test("a key set back to nil releases the lease: the entry is retained")
    func nilReleases() throws {
        let test = TestStore()
        let proxy = KeyedLoadableProxy(store: test.store, key: 1)
        let entry = try #require(test.store.peek(1))
        proxy.key = nil
        #expect(!entry.isInUse)
        #expect(test.store.count == 1)
        // Back to the key before it expired: the same entry, leased again.
        proxy.key = 1
        #expect(proxy.loadable === entry)
        #expect(entry.isInUse)
        #expect(test.made == [1])
    }

    @Test("setting the same key does nothing: no notification, no Observation change, the same lease")
    func sameKey() throws {
        let test = TestStore()
        let proxy = KeyedLoadableProxy(store: test.store, key: 1)
        let entry = try #require(proxy.loadable)
        let recorder = Recorder(proxy)
        let counter = ChangeCounter()
        withObservationTracking {
            _ = proxy.loadableState
            _ = proxy.contents
        } onChange: {
            counter.count += 1
        }
        proxy.key = 1
        #expect(recorder.count == 0)
        #expect(counter.count == 0)
        #expect(proxy.loadable === entry)
        #expect(entry.isInUse)
        #expect(test.made == [1])

        proxy.key = nil
        #expect(recorder.count == 1)
        proxy.key = nil
        #expect(recorder.count == 1)
    }

    @Test("each key change notifies once")
    func oneNotificationPerKeyChange() {
        let test = TestStore()
        let proxy = KeyedLoadableProxy(store: test.store)
        var keys: [Int?] = []
        observing(proxy, { _ in keys.append(proxy.key) }) {
            proxy.key = 1
            #expect(keys == [1])
            proxy.key = 2
            #expect(keys == [1, 2])
            proxy.key = nil
            #expect(keys == [1, 2, nil])
            proxy.key = 1
            #expect(keys == [1, 2, nil, 1])
        }
    }

    @Test("observers of a key change see the new entry leased and the old one not yet released")
    func orderOfAKeyChange() throws {
        let test = TestStore(retention: .zero)
        let proxy = KeyedLoadableProxy(store: test.store, key: 1)
        let first = try #require(proxy.loadable)
        var seen: [String] = []
        observing(
            proxy,
            { _ in
                seen.append("old in use: \(first.isInUse), new in use: \(proxy.loadable?.isInUse == true)")
            }
        ) {
            proxy.key = 2
            #expect(seen == ["old in use: true, new in use: true"])
            #expect(!first.isInUse)
            #expect(test.store.peek(1) == nil)  // retention zero: dropped once released
        }
    }

    @Test("sync, syncIfNeeded, invalidate, cancelSync and needsSync go to the current key's entry")
    func forwarding() throws {
        let test = TestStore()
        let proxy = KeyedLoadableProxy(store: test.store, key: 1)
        let first = try #require(proxy.loadable)
        proxy.sync()
        #expect(first.syncCount == 1)
        proxy.cancelSync()
        #expect(first.cancelSyncCount == 1)
        proxy.syncIfNeeded()
        #expect(first.syncIfNeededCount == 1)
        proxy.invalidate()
        #expect(first.invalidateCount == 1)
        first.needsSync = false
        #expect(!proxy.needsSync)
        first.needsSync = true
        #expect(proxy.needsSync)

        proxy.key = 2
        let second = try #require(proxy.loadable)
        second.needsSync = false
        #expect(!proxy.needsSync)
        proxy.sync()
        proxy.cancelSync()
        proxy.syncIfNeeded()
        proxy.invalidate()
        #expect(second.syncCount == 1)
        #expect(second.cancelSyncCount == 1)
        #expect(second.syncIfNeededCount == 1)
        #expect(second.invalidateCount == 1)
        #expect(first.syncCount == 2)  // the sync after the first cancel, from syncIfNeeded()
        #expect(first.syncIfNeededCount == 1)
        #expect(first.invalidateCount == 1)
        #expect(first.cancelSyncCount == 1)
    }

    @Test("two proxies and a lease of one key share one entry and one sync")
    func shared() throws {
        let test = CountedStore()
        let a = KeyedLoadableProxy(store: test.store, key: 1)
        let b = KeyedLoadableProxy(store: test.store)
        b.key = 1
        let lease = test.store.lease(1)
        let entry = try #require(a.loadable)
        #expect(b.loadable === entry)
        #expect(lease.loadable === entry)
        #expect(test.made == [1])
        #expect(test.store.count == 1)

        a.syncIfNeeded()
        b.syncIfNeeded()
        lease.syncIfNeeded()
        a.sync()
        b.sync()
        #expect(entry.doSyncCount == 1)
        #expect(test.store.syncingCount == 1)
        #expect(a.loadableState == .syncing)
        #expect(b.loadableState == .syncing)

        entry.setDidSyncSuccessfully("one")
        #expect(a.contents == "one")
        #expect(b.contents == "one")
        #expect(lease.contents == "one")
        #expect(test.store.syncingCount == 0)

        // One proxy leaving leaves the entry in use for the others.
        a.key = nil
        #expect(entry.isInUse)
        lease.release()
        #expect(entry.isInUse)
        b.key = nil
        #expect(!entry.isInUse)
    }

    // MARK: - Observation

    @Test(
        "a property read inside withObservationTracking reports entry changes and key changes",
        arguments: Property.allCases, [false, true])
    func observation(property: Property, observed: Bool) throws {
        let test = CountedStore()
        let proxy = KeyedLoadableProxy(store: test.store, key: 1, placeholder: .previousContents)
        let observation = observed ? proxy.addObserver { _ in } : nil
        try #require(proxy.loadable).setDidSyncSuccessfully("one")
        proxy.key = 2
        let second = try #require(proxy.loadable)

        var counter = Self.track(property, of: proxy)
        second.sync()  // the entry changes: the placeholder stays, the state changes
        #expect(counter.count == 1, "the entry's sync was not reported")

        counter = Self.track(property, of: proxy)
        second.setDidSyncSuccessfully("two")  // the placeholder goes
        #expect(counter.count == 1, "the entry's success was not reported")

        counter = Self.track(property, of: proxy)
        proxy.key = 3  // a placeholder again
        #expect(counter.count == 1, "the key change was not reported")

        counter = Self.track(property, of: proxy)
        try #require(proxy.loadable).setDidFailToSync(TestError("three"))
        #expect(counter.count == 1, "the entry's failure was not reported")

        counter = Self.track(property, of: proxy)
        proxy.key = nil
        #expect(counter.count == 1, "the key change to nil was not reported")

        counter = Self.track(property, of: proxy)
        proxy.key = 2
        #expect(counter.count == 1, "the key change from nil was not reported")
        #expect(proxy.contents == "two")
        withExtendedLifetime(observation) {}
    }

    @Test("an observed proxy is notified once per change of its entry")
    func observedEntryChanges() throws {
        let test = CountedStore()
        let proxy = KeyedLoadableProxy(store: test.store, key: 1)
        let recorder = Recorder(proxy)
        proxy.sync()
        try #require(proxy.loadable).setDidSyncSuccessfully("one")
        #expect(recorder.states == [.syncing, .didSyncSuccessfully])
        proxy.key = 2
        try #require(proxy.loadable).setDidFailToSync(TestError("two"))
        #expect(recorder.states == [.syncing, .didSyncSuccessfully, .idle, .didFailToSync])
        // The old entry is no longer followed.
        try #require(test.store.peek(1)).setIdle()
        #expect(recorder.count == 4)
    }

    @Test("the proxy observes its entry only while it has observers of its own")
    func observesEntryOnlyWhenObserved() throws {
        let test = TestStore()
        let proxy = KeyedLoadableProxy(store: test.store, key: 1)
        let first = try #require(proxy.loadable)
        #expect(!first.hasObservers)
        // Observation needs no observer of the entry.
        withObservationTracking {
            _ = proxy.contents
        } onChange: {
        }
        #expect(!first.hasObservers)

        var token: LoadableObservation? = proxy.addObserver { _ in }
        #expect(first.hasObservers)
        proxy.key = 2
        let second = try #require(proxy.loadable)
        #expect(!first.hasObservers)
        #expect(second.hasObservers)
        proxy.key = nil
        #expect(!second.hasObservers)
        proxy.key = 2
        #expect(second.hasObservers)

        token?.cancel()
        #expect(!second.hasObservers)
        token = proxy.addObserver { _ in }
        #expect(second.hasObservers)
        token = nil
        #expect(!second.hasObservers)
        proxy.key = 1
        #expect(!first.hasObservers)
    }

    // MARK: - Re-entrancy

    @Test("an observer of the proxy that changes its key: applied at once, notified in one more round")
    func keyChangedByObserver() throws {
        let test = TestStore()
        let proxy = KeyedLoadableProxy(store: test.store, key: 1)
        var keys: [Int?] = []
        try observing(
            proxy,
            { _ in
                keys.append(proxy.key)
                if proxy.key == 2 { proxy.key = 3 }
            }
        ) {
            proxy.key = 2
            #expect(keys == [2, 3])
            #expect(proxy.key == 3)
            let third = try #require(test.store.peek(3))
            #expect(proxy.loadable === third)
            #expect(third.isInUse)
            #expect(third.hasObservers)
            #expect(test.store.peek(2)?.isInUse == false)
            #expect(test.store.peek(2)?.hasObservers == false)
            #expect(test.store.peek(1)?.isInUse == false)
            #expect(test.store.count == 3)

            // The new entry is followed.
            third.setSyncing()
            #expect(keys == [2, 3, 3])
        }
    }

    @Test("an observer that changes the key when the entry fails, with retention zero (the old entry dropped)")
    func keyChangedByObserverOfEntryChange() throws {
        let test = CountedStore(retention: .zero)
        let proxy = KeyedLoadableProxy(store: test.store, key: 1)
        var seen: [String] = []
        observing(
            proxy,
            { _ in
                seen.append("\(proxy.key.map(String.init) ?? "nil") \(proxy.loadableState)")
                if proxy.key == 1, proxy.loadableState == .didFailToSync { proxy.key = 2 }
            }
        ) {
            proxy.syncIfNeeded()
            weak let first = proxy.loadable
            first?.setDidFailToSync(TestError("one"))
            #expect(seen == ["1 syncing", "1 did-fail-to-sync", "2 idle"])
            #expect(first == nil)
            #expect(test.store.count == 1)
            proxy.syncIfNeeded()
            #expect(seen.last == "2 syncing")
        }
    }

    @Test("an observer that changes the key while the old entry's sync is cancelled by the store")
    func keyChangedDuringExpiry() async throws {
        let test = CountedStore(retention: .seconds(10))
        let watcher = KeyedLoadableProxy(store: test.store, key: 1)
        let proxy = KeyedLoadableProxy(store: test.store, key: 2)
        watcher.syncIfNeeded()
        var seen: [String] = []
        try await observing(
            watcher,
            { _ in
                seen.append("\(watcher.key.map(String.init) ?? "nil") \(watcher.loadableState)")
            }
        ) {
            // The watcher lets go of key 1 (still syncing); another proxy takes it back during expiry.
            watcher.key = 3
            let first = try #require(test.store.peek(1))
            try #require(!first.isInUse)
            try await observing(
                first,
                { _ in
                    if first.loadableState == .idle { proxy.key = 1 }
                }
            ) {
                await test.clock.waitForSleepers()
                await test.clock.advance(by: .seconds(10))
                // Dropped and cancelled at expiry; the lease taken in its notification got a new entry.
                #expect(first.loadableState == .idle)
                #expect(test.made == [1, 2, 3, 1])
                let again = try #require(test.store.peek(1))
                #expect(again !== first)
                #expect(proxy.loadable === again)
                #expect(again.isInUse)
                #expect(seen == ["3 idle"])
            }
        }
    }

    // MARK: - Leaks

    @Test("a released proxy releases its lease: the entry is retained, then dropped; its token ends")
    func releasedProxy() async throws {
        let test = CountedStore(retention: .seconds(10))
        var proxy: KeyedLoadableProxy<Int, Counted>? = KeyedLoadableProxy(store: test.store, key: 1)
        weak let weakProxy = proxy
        weak let entry = proxy?.loadable
        let token = proxy?.addObserver { _ in }
        #expect(entry?.hasObservers == true)
        proxy = nil
        #expect(weakProxy == nil)
        #expect(token?.isActive == false)
        #expect(entry?.hasObservers == false)
        #expect(test.store.count == 1)
        // Required: without a retained entry, no timer would ever sleep.
        try #require(entry?.isInUse == false)

        await test.clock.waitForSleepers()
        await test.clock.advance(by: .seconds(10))
        #expect(test.store.count == 0)
        #expect(entry == nil)
    }

    @Test("with retention zero, a released proxy's entry is dropped at once, its sync cancelled")
    func releasedProxyRetentionZero() {
        let test = CountedStore(retention: .zero)
        var proxy: KeyedLoadableProxy<Int, Counted>? = KeyedLoadableProxy(store: test.store, key: 1)
        weak let weakProxy = proxy
        weak let entry = proxy?.loadable
        proxy?.syncIfNeeded()
        #expect(test.store.syncingCount == 1)
        proxy = nil
        #expect(weakProxy == nil)
        #expect(entry == nil)
        #expect(test.store.count == 0)
        #expect(test.store.syncingCount == 0)
    }

    @Test("a proxy released on another thread: its lease ends on the main actor, and its entry can notify")
    func releasedOnAnotherThread() async throws {
        let test = CountedStore(retention: .seconds(10))
        let box = Locked<KeyedLoadableProxy<Int, Counted>?>(KeyedLoadableProxy(store: test.store, key: 1))
        weak let weakProxy = box.withLock { $0 }
        let entry = try #require(test.store.peek(1))
        var calls = 0
        let token = box.withLock { $0?.addObserver { _ in calls += 1 } }
        #expect(entry.hasObservers)

        releaseOnAnotherThread(box)
        #expect(weakProxy == nil)
        // The end of the lease is handed to the main actor, which has not run yet.
        #expect(entry.isInUse)
        entry.setSyncing()
        entry.setDidSyncSuccessfully("one")
        #expect(calls == 0)

        await yield(until: { !entry.isInUse && !entry.hasObservers })
        #expect(test.store.count == 1)
        #expect(token?.isActive == false)
        // Required: without a retained entry, no timer would ever sleep.
        try #require(!entry.isInUse)
        await test.clock.waitForSleepers()
        await test.clock.advance(by: .seconds(10))
        #expect(test.store.count == 0)
    }
}
