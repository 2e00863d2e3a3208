import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

// The inspector is process-global and suites run in parallel: every test of this file is in one
// serialized suite, gives its objects labels no other test uses, and reads only the events of
// those labels (another suite's objects may report to the inspector attached here).

/// The events `inspector` recorded about the objects labelled `labels`, in order.
@MainActor
private func events(_ inspector: LoadableInspector, about labels: String...) -> [LoadableEvent] {
    inspector.recordedEvents.filter { labels.contains($0.label) }
}

/// The events of `kinds` that `inspector` recorded about `label`, in order.
@MainActor
private func events(
    _ inspector: LoadableInspector, about label: String, kinds: Set<LoadableEvent.Kind>
) -> [LoadableEvent] {
    inspector.recordedEvents.filter { $0.label == label && kinds.contains($0.kind) }
}

/// The cache events: restore, save, touch, evict.
private let cacheKinds: Set<LoadableEvent.Kind> = [.cacheRestored, .cacheSaved, .cacheTouched, .cacheEvicted]

/// An `AsyncLoadable` whose sync sleeps `delay` on `clock`, then gives `load()`'s answer.
@MainActor
private func clockedLoadable(
    clock: ManualClock, delay: Duration = .seconds(1), label: String,
    load: @escaping @MainActor () throws -> Int
) -> AsyncLoadable<Int> {
    let loadable = AsyncLoadable<Int>(clock: clock) {
        try await clock.sleep(for: delay)
        return try load()
    }
    loadable.inspectorLabel = label
    return loadable
}

@Suite("Inspector: leases, stores, persistence and outboxes", .serialized)
@MainActor
struct CachingInspectionTests {
    // MARK: - Leases

    @Test(
        "a store's leases and a plain lease report taken and released with their live count; a lease let go on another thread reports on the main actor"
    )
    func leases() async throws {
        let clock = ManualClock()
        let inspector = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
        let turn = await takeInspectorTurn(attaching: inspector)
        defer { turn.end() }

        let store = LoadableStore<Int, AsyncLoadable<Int>>(retention: .seconds(60), clock: clock) { key in
            clockedLoadable(clock: clock, label: "InspectorLease.store[\(key)]") { key }
        }
        let first = store.lease(1)
        var second: LoadableLease<AsyncLoadable<Int>>? = store.lease(1)
        await clock.advance(by: .seconds(2))
        first.release()
        second = nil  // let go without release(), on the main actor
        #expect(second == nil)
        #expect(
            events(inspector, about: "InspectorLease.store[1]") == [
                .leaseTaken(label: "InspectorLease.store[1]", time: .zero, leases: 1),
                .leaseTaken(label: "InspectorLease.store[1]", time: .zero, leases: 2),
                .leaseReleased(label: "InspectorLease.store[1]", time: .seconds(2), leases: 1),
                .leaseReleased(label: "InspectorLease.store[1]", time: .seconds(2), leases: 0),
            ])

        let plain = clockedLoadable(clock: clock, label: "InspectorLease.plain") { 1 }
        var kept: LoadableLease<AsyncLoadable<Int>>? = plain.lease()
        let box = Locked<LoadableLease<AsyncLoadable<Int>>?>(plain.lease())
        kept = nil
        #expect(kept == nil)
        releaseOnAnotherThread(box)
        // The main actor has not run since: the end of the use, and its event, are on their way.
        #expect(plain.isInUse)
        #expect(events(inspector, about: "InspectorLease.plain").count == 3)
        await yield { !plain.isInUse }
        #expect(
            events(inspector, about: "InspectorLease.plain") == [
                .leaseTaken(label: "InspectorLease.plain", time: .seconds(2), leases: 1),
                .leaseTaken(label: "InspectorLease.plain", time: .seconds(2), leases: 2),
                .leaseReleased(label: "InspectorLease.plain", time: .seconds(2), leases: 1),
                .leaseReleased(label: "InspectorLease.plain", time: .seconds(2), leases: 0),
            ])
    }

    // MARK: - Stores

    @Test(
        "a store's loadable is labelled by its type and key, a persisted one by its cache key, a persisted entry by the store's key"
    )
    func defaultLabels() async {
        let clock = ManualClock()
        let store = LoadableStore<Int, AsyncLoadable<Int>>(clock: clock) { key in AsyncLoadable(clock: clock) { key } }
        let lease = store.lease(7)
        #expect(lease.loadable.inspectorLabel == "AsyncLoadable<Int>[7]")

        let cache = InMemoryLoadableCache()
        let persisted = AsyncLoadable<Int>(clock: clock) { 1 }
        persisted.persist(in: cache, key: "feed")
        #expect(persisted.inspectorLabel == "AsyncLoadable<Int>[feed]")

        let cachedStore = LoadableStore<Int, AsyncLoadable<Int>>(
            clock: clock, cache: InMemoryLoadableCache(), cacheKey: { "post-\($0)" }
        ) { key in AsyncLoadable(clock: clock) { key } }
        let cachedLease = cachedStore.lease(8)
        #expect(cachedLease.loadable.inspectorLabel == "AsyncLoadable<Int>[8]")
        await cachedStore.restored(8)
        cachedLease.loadable.inspectorLabel = "InspectorLabels.post"
        #expect(cachedLease.loadable.inspectorLabel == "InspectorLabels.post")
        withExtendedLifetime(lease) {}
    }

    @Test(
        "a snapshot shows every entry of a store, sorted, with state, age, staleness, leases, pending changes and error; sync(label:) reaches an entry"
    )
    func storeSnapshot() async throws {
        let clock = ManualClock()
        let inspector = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
        let turn = await takeInspectorTurn(attaching: inspector)
        defer { turn.end() }

        let gate = AsyncGate()
        // Retention on a clock of its own: `clock` counts only the syncs' sleeps.
        let store = LoadableStore<Int, AsyncLoadable<Int>>(retention: .seconds(60), clock: ManualClock()) { key in
            clockedLoadable(clock: clock, label: "InspectorSnapshot[\(key)]") {
                if key == 2 { throw TestError("boom") }
                return key * 10
            }
        }
        // Made out of order: the snapshot sorts them.
        let three = store.lease(3)
        let one = store.lease(1)
        store.lease(4).release()  // retained, never synced
        let two = store.lease(2)
        one.sync()
        two.sync()
        #expect(await settle { clock.pendingSleepCount == 2 })
        await clock.advance(by: .seconds(1))
        #expect(await settle { one.loadableState == .didSyncSuccessfully && two.loadableState == .didFailToSync })
        await clock.advance(by: .seconds(5))
        three.sync()
        let mutation = Task {
            try await one.loadable.mutate(optimistic: { $0 += 1 }, commit: { await gate.wait() })
        }
        #expect(await settle { one.loadable.contents == 11 })

        let snapshot = inspector.snapshot()
        #expect(snapshot.time == 6)
        let entries = snapshot.entries.filter { $0.label.hasPrefix("InspectorSnapshot[") }
        #expect(
            entries == [
                .init(
                    label: "InspectorSnapshot[1]", key: "1", state: "didSyncSuccessfully", age: 5, isStale: false,
                    leases: 1, hasPendingChanges: true, error: nil),
                .init(
                    label: "InspectorSnapshot[2]", key: "2", state: "didFailToSync", age: nil, isStale: true,
                    leases: 1, hasPendingChanges: false, error: "boom"),
                .init(
                    label: "InspectorSnapshot[3]", key: "3", state: "syncing", age: nil, isStale: true, leases: 1,
                    hasPendingChanges: false, error: nil),
                .init(
                    label: "InspectorSnapshot[4]", key: "4", state: "idle", age: nil, isStale: true, leases: 0,
                    hasPendingChanges: false, error: nil),
            ])

        // An action reaches the retained entry by its label, and it syncs on the clock.
        #expect(inspector.actionLabels.contains("InspectorSnapshot[4]"))
        #expect(inspector.perform(.sync(label: "InspectorSnapshot[4]")))
        let four = try #require(store.peek(4))
        #expect(four.loadableState == .syncing)
        #expect(await settle { clock.pendingSleepCount == 2 })  // the syncs of 3 and 4
        await clock.advance(by: .seconds(1))
        #expect(await settle { four.loadableState == .didSyncSuccessfully })
        #expect(four.contents == 40)
        #expect(!inspector.perform(.sync(label: "InspectorSnapshot[99]")))

        #expect(await settle { three.loadableState == .didSyncSuccessfully })
        await gate.open()
        try await mutation.value
        withExtendedLifetime((one, two, three)) {}
    }

    // MARK: - Persistence

    @Test("a persistence reports its restore (found or not), a save, a touch, and a touch that finds its entry evicted")
    func cacheEvents() async throws {
        let clock = ManualClock()
        let wall = PersistenceWallClock()
        let inspector = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
        let turn = await takeInspectorTurn(attaching: inspector)
        defer { turn.end() }

        let cache = InMemoryLoadableCache()
        let entry = try persistedEntry(5, savedAt: wall.now)
        await cache.save(entry, key: "found")
        // Confirms what it has, as a `304` does.
        let found = AsyncLoadable<Int>(clock: clock, loadResult: { .confirmed() })
        found.inspectorLabel = "InspectorCache.found"
        let foundPersistence = found.persist(in: cache, key: "found", now: wall.function)
        let missing = AsyncLoadable<Int>(clock: clock) { 9 }
        missing.inspectorLabel = "InspectorCache.missing"
        let missingPersistence = missing.persist(in: cache, key: "missing", now: wall.function)
        await foundPersistence.restored()
        await missingPersistence.restored()
        #expect(found.contents == 5)
        #expect(
            events(inspector, about: "InspectorCache.found", kinds: cacheKinds) == [
                .cacheRestored(label: "InspectorCache.found", time: .zero, found: true)
            ])
        #expect(
            events(inspector, about: "InspectorCache.missing", kinds: cacheKinds) == [
                .cacheRestored(label: "InspectorCache.missing", time: .zero, found: false)
            ])

        // A new value is saved; a confirmation touches the entry.
        try await missing.synced(forceSync: true)
        await missingPersistence.saved()
        await clock.advance(by: .seconds(1))
        try await found.synced(forceSync: true)
        await foundPersistence.saved()
        #expect(
            events(inspector, about: "InspectorCache.missing", kinds: cacheKinds) == [
                .cacheRestored(label: "InspectorCache.missing", time: .zero, found: false),
                .cacheSaved(label: "InspectorCache.missing", time: .zero),
            ])
        #expect(
            events(inspector, about: "InspectorCache.found", kinds: cacheKinds) == [
                .cacheRestored(label: "InspectorCache.found", time: .zero, found: true),
                .cacheTouched(label: "InspectorCache.found", time: .seconds(1)),
            ])

        // Removed behind the persistence's back: the next confirmation finds it gone, and saves.
        await cache.remove(key: "found")
        await clock.advance(by: .seconds(1))
        try await found.synced(forceSync: true)
        await foundPersistence.saved()
        #expect(
            events(inspector, about: "InspectorCache.found", kinds: cacheKinds) == [
                .cacheRestored(label: "InspectorCache.found", time: .zero, found: true),
                .cacheTouched(label: "InspectorCache.found", time: .seconds(1)),
                .cacheEvicted(label: "InspectorCache.found", time: .seconds(2)),
                .cacheSaved(label: "InspectorCache.found", time: .seconds(2)),
            ])
        #expect(persistedInt(await cache.load(key: "found")) == 5)
    }

    // MARK: - Outboxes

    @Test(
        "an outbox reports enqueue, send and outcome (delivered, retrying, failed, conflict, discarded) and shows its items"
    )
    func outboxEvents() async throws {
        let clock = ManualClock()
        let inspector = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
        let turn = await takeInspectorTurn(attaching: inspector)
        defer { turn.end() }

        let server = OutcomeServer()
        let outbox = makeOutcomeOutbox(cache: InMemoryLoadableCache().scoped("outbox/"), server: server, clock: clock)
        #expect(outbox.inspectorLabel == "LoadableOutbox[outbox/outbox]")
        outbox.inspectorLabel = "InspectorOutbox.main"
        let label = outbox.inspectorLabel
        let a = outbox.enqueue(Append(word: "a"), scope: "a")
        let b = outbox.enqueue(Append(word: "b"), scope: "b")
        let c = outbox.enqueue(Append(word: "c"), scope: "c")
        let d = outbox.enqueue(Append(word: "d"), scope: "d")
        let e = outbox.enqueue(Append(word: "e"), scope: "e")
        #expect(await settle { server.running.count == 4 })
        #expect(Set(server.running) == ["a", "b", "c", "d"])

        await server.answer("a", .applied)
        await server.fail("b", with: URLError(.notConnectedToInternet))
        await server.answer("c", .conflict(remote: nil))
        await server.fail("d", with: TestError("refused"))
        await server.answer("e", .dropped)

        func itemEvents(_ id: String) -> [String] {
            events(inspector, about: label).compactMap { event in
                switch event {
                case .outboxEnqueued(_, _, id): "enqueued"
                case .outboxSent(_, _, id): "sent"
                case .outboxOutcome(_, _, id, let outcome): outcome
                default: nil
                }
            }
        }
        #expect(itemEvents(a) == ["enqueued", "sent", "delivered"])
        #expect(itemEvents(b) == ["enqueued", "sent", "retrying"])
        #expect(itemEvents(c) == ["enqueued", "sent", "conflict"])
        #expect(itemEvents(d) == ["enqueued", "sent", "failed"])
        #expect(itemEvents(e) == ["enqueued", "sent", "discarded"])

        let items = inspector.snapshot().outboxItems.filter { $0.outbox == label }
        #expect(items.map(\.id) == [b, c, d])
        #expect(items.map(\.status) == ["waiting", "conflict", "failed"])
        #expect(items.map(\.scope) == ["b", "c", "d"])
        #expect(items.map(\.attempts) == [1, 1, 1])
        #expect(items[0].error == "\(URLError(.notConnectedToInternet))")
        #expect(items[1].error == nil)
        #expect(items[2].error == "refused")
        // An outbox offers nothing to an action.
        #expect(!inspector.perform(.sync(label: label)))

        // The retry is sent after the backoff, and delivered.
        await clock.advance(by: .seconds(1))
        await server.answer("b", .applied)
        #expect(itemEvents(b) == ["enqueued", "sent", "retrying", "sent", "delivered"])
        #expect(inspector.snapshot().outboxItems.filter { $0.outbox == label }.map(\.id) == [c, d])

        // A send cut short by discard(_:) ends as discarded at once; its late answer adds nothing.
        let f = outbox.enqueue(Append(word: "f"), scope: "f")
        #expect(await settle { server.running == ["f"] })
        #expect(inspector.snapshot().outboxItems.first { $0.id == f }?.status == "sending")
        outbox.discard(f)
        #expect(itemEvents(f) == ["enqueued", "sent", "discarded"])
        await server.answer("f", .applied)
        #expect(itemEvents(f) == ["enqueued", "sent", "discarded"])
        await outbox.saved()
    }

    @Test("a coalesced enqueue reports the id of the item that absorbed the change")
    func coalescedEnqueue() async {
        let clock = ManualClock()
        let inspector = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
        let turn = await takeInspectorTurn(attaching: inspector)
        defer { turn.end() }

        let outbox = makeOutcomeOutbox(
            cache: InMemoryLoadableCache(), server: OutcomeServer(),
            activity: ActivityMonitor(connectivity: .offline), clock: clock,
            coalesce: { earlier, later in Append(word: earlier.word + later.word) })
        outbox.inspectorLabel = "InspectorOutbox.coalesced"
        let first = outbox.enqueue(Append(word: "a"), scope: "s")
        let second = outbox.enqueue(Append(word: "b"), scope: "s")
        #expect(first == second)
        #expect(
            events(inspector, about: "InspectorOutbox.coalesced") == [
                .outboxEnqueued(label: "InspectorOutbox.coalesced", time: .zero, item: first),
                .outboxEnqueued(label: "InspectorOutbox.coalesced", time: .zero, item: first),
            ])
        let items = inspector.snapshot().outboxItems.filter { $0.outbox == "InspectorOutbox.coalesced" }
        #expect(
            items == [
                .init(
                    outbox: "InspectorOutbox.coalesced", id: first, scope: "s", status: "pending", attempts: 0,
                    error: nil)
            ])
        await outbox.saved()
    }

    // MARK: - Zero cost

    @Test("nothing is recorded by an inspector that is not attached, nor after detach()")
    func nothingWhenDetached() async throws {
        let clock = ManualClock()
        let idle = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)  // made, never attached
        let inspector = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
        let turn = await takeInspectorTurn(attaching: inspector)
        defer { turn.end() }
        let store = LoadableStore<Int, AsyncLoadable<Int>>(
            retention: .seconds(60), clock: clock, cache: InMemoryLoadableCache(), cacheKey: { "k\($0)" }
        ) { key in
            let loadable = AsyncLoadable<Int>(clock: clock) { key }
            loadable.inspectorLabel = "InspectorDetached.store[\(key)]"
            return loadable
        }
        let attachedLease = store.lease(1)
        await store.restored(1)
        let recordedWhileAttached = events(inspector, about: "InspectorDetached.store[1]")
        #expect(recordedWhileAttached.map(\.kind) == [.leaseTaken, .cacheRestored])
        inspector.detach()

        // The same kinds of work, detached: leases, a sync and its save, an outbox's send.
        let lease = store.lease(2)
        try await lease.synced()
        lease.release()
        attachedLease.release()
        try await store.lease(1).synced()
        await store.saved()
        let server = OutcomeServer()
        let outbox = makeOutcomeOutbox(cache: InMemoryLoadableCache(), server: server, clock: clock)
        outbox.inspectorLabel = "InspectorDetached.outbox"
        outbox.enqueue(Append(word: "a"))
        await server.answer("a", .applied)
        await outbox.saved()

        #expect(events(inspector, about: "InspectorDetached.store[1]") == recordedWhileAttached)
        let labels = ["InspectorDetached.store[1]", "InspectorDetached.store[2]", "InspectorDetached.outbox"]
        #expect(events(inspector, about: labels[1], labels[2]).isEmpty)
        #expect(idle.recordedEvents.filter { labels.contains($0.label) }.isEmpty)
        #expect(idle.recordedEvents.isEmpty)
    }
}

/// A gate a task waits at until the test opens it.
@MainActor
private final class AsyncGate {
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    /// Waits until ``open()``; returns at once when it was.
    func wait() async {
        guard !isOpen else { return }
        await withCheckedContinuation { waiters.append($0) }
    }

    /// Lets every waiter go, and those that come later.
    func open() async {
        isOpen = true
        for waiter in waiters { waiter.resume() }
        waiters.removeAll()
        await Task.yield()
    }
}
