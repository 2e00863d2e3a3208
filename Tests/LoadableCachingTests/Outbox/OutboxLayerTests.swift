import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// Appends the change's word to a list; a change whose word starts with "other:" does not
/// concern the list.
@MainActor
private func appendWord(_ words: inout [String], _ change: Append) -> Bool {
    guard !change.word.hasPrefix("other:") else { return false }
    words.append(change.word)
    return true
}

/// `show(on:_:)`: items not sent yet shown as optimistic layers, joining the base when sent.
@Suite("Outbox: layers on loadables")
@MainActor
struct OutboxLayerTests {
    @Test("an item shows at once, stays above a refresh, and joins the base when sent")
    func layerShownThenJoined() async {
        let server = ScriptedServer()
        let outbox = makeOutbox(cache: InMemoryLoadableCache(), server: server, clock: ManualClock())
        await outbox.restored()
        let list = PersistedLoadable<[String]>()
        list.setContents(["x"])
        outbox.show(on: list, appendWord)
        outbox.enqueue(Append(word: "a"))
        #expect(list.contents == ["x", "a"])
        #expect(list.baseContents == ["x"])
        list.sync()
        list.setDidSyncSuccessfully(["x", "y"])
        #expect(list.contents == ["x", "y", "a"], "a refresh never hides a pending change")
        var notifications = 0
        await observing(list, { _ in notifications += 1 }) {
            await server.finish()
        }
        #expect(notifications == 1)
        #expect(list.contents == ["x", "y", "a"])
        #expect(list.baseContents == ["x", "y", "a"], "a sent change joins the base")
    }

    @Test("a discarded item's layer goes; a failed item's stays")
    func discardedLayerGoes() async {
        let server = ScriptedServer()
        let outbox = makeOutbox(cache: InMemoryLoadableCache(), server: server, clock: ManualClock())
        await outbox.restored()
        let list = PersistedLoadable<[String]>(contents: [])
        outbox.show(on: list, appendWord)
        let a = outbox.enqueue(Append(word: "a"))
        outbox.enqueue(Append(word: "b"))
        await server.finish(with: Refused())
        #expect(list.contents == ["a", "b"])
        outbox.discard(a)
        #expect(list.contents == ["b"])
        await server.finish()
        #expect(list.baseContents == ["b"])
        outbox.enqueue(Append(word: "c"))
        outbox.removeAll()
        #expect(list.contents == ["b"])
    }

    @Test("a change that does not concern a loadable notifies nothing and writes nothing")
    func unconcernedChangeIsSilent() async {
        let server = ScriptedServer()
        let outbox = makeOutbox(cache: InMemoryLoadableCache(), server: server, clock: ManualClock())
        await outbox.restored()
        let list = PersistedLoadable<[String]>(contents: ["x"])
        let age = list.age
        outbox.show(on: list, appendWord)
        var notifications = 0
        await observing(list, { _ in notifications += 1 }) {
            outbox.enqueue(Append(word: "other:1"))
            let discarded = outbox.enqueue(Append(word: "other:2"))
            await server.finish()
            outbox.discard(discarded)
        }
        #expect(notifications == 0)
        #expect(list.contents == ["x"])
        #expect(list.age == age, "not written: the contents were not confirmed")
    }

    @Test("layers wait for the first contents, and show in the order of the items")
    func layersWaitForContents() async {
        let server = ScriptedServer()
        let offline = ActivityMonitor(connectivity: .offline)
        let outbox = makeOutbox(cache: InMemoryLoadableCache(), server: server, activity: offline, clock: ManualClock())
        await outbox.restored()
        outbox.enqueue(Append(word: "a"))
        let list = PersistedLoadable<[String]>()
        outbox.show(on: list, appendWord)
        outbox.enqueue(Append(word: "b"))
        #expect(list.contents == nil)
        list.sync()
        list.setDidSyncSuccessfully(["x"])
        #expect(list.contents == ["x", "a", "b"])
    }

    @Test("show(on:) again for the same loadable replaces its apply")
    func showAgainReplaces() async {
        let offline = ActivityMonitor(connectivity: .offline)
        let outbox = makeOutbox(
            cache: InMemoryLoadableCache(), server: ScriptedServer(), activity: offline, clock: ManualClock())
        await outbox.restored()
        let list = PersistedLoadable<[String]>(contents: [])
        outbox.enqueue(Append(word: "a"))
        outbox.show(on: list, appendWord)
        outbox.show(on: list) { words, change in
            words.append(change.word.uppercased())
            return true
        }
        #expect(list.contents == ["A"])
    }

    @Test("the loadable is held weakly: releasing it ends its display")
    func loadableHeldWeakly() async {
        let server = ScriptedServer()
        let outbox = makeOutbox(cache: InMemoryLoadableCache(), server: server, clock: ManualClock())
        await outbox.restored()
        weak var released: PersistedLoadable<[String]>?
        do {
            let list = PersistedLoadable<[String]>(contents: [])
            released = list
            outbox.show(on: list, appendWord)
            outbox.enqueue(Append(word: "a"))
        }
        #expect(released == nil)
        await server.finish()
        outbox.enqueue(Append(word: "b"))
        for index in 0..<40 {
            outbox.show(on: PersistedLoadable<[String]>(contents: []), appendWord)
            _ = index
        }
        await server.finish()
        #expect(server.applied.map(\.word) == ["a", "b"])
    }

    @Test("after a relaunch, a persisted store entry shows its pending changes as soon as both are restored")
    func storeEntryAfterRelaunch() async throws {
        let cache = InMemoryLoadableCache()
        let offline = ActivityMonitor(connectivity: .offline)
        let server = ScriptedServer()
        var outbox: LoadableOutbox<Append>! = makeOutbox(
            cache: cache.scoped("outbox/"), server: server, activity: offline, clock: ManualClock())
        var store: LoadableStore<Int, PersistedLoadable<[String]>>! = LoadableStore(
            cache: cache.scoped("lists/"), cacheKey: { "\($0)" }
        ) { [outbox] _ in
            let list = PersistedLoadable<[String]>()
            outbox?.show(on: list, appendWord)
            return list
        }
        await outbox.restored()
        store.setContents(["x"], for: 1)
        var lease: LoadableLease<PersistedLoadable<[String]>>? = store.lease(1)
        outbox.enqueue(Append(word: "a"))
        outbox.enqueue(Append(word: "b"))
        #expect(lease?.loadable.contents == ["x", "a", "b"])
        await outbox.saved()
        await store.saved()
        lease = nil
        store = nil
        outbox = nil

        outbox = makeOutbox(cache: cache.scoped("outbox/"), server: server, activity: offline, clock: ManualClock())
        store = LoadableStore(cache: cache.scoped("lists/"), cacheKey: { "\($0)" }) { [outbox] _ in
            let list = PersistedLoadable<[String]>()
            outbox?.show(on: list, appendWord)
            return list
        }
        lease = store.lease(1)
        await store.restored(1)
        await outbox.restored()
        #expect(lease?.loadable.contents == ["x", "a", "b"])
        #expect(lease?.loadable.baseContents == ["x"])
        offline.connectivity = .online
        await server.finish()
        await server.finish()
        #expect(lease?.loadable.baseContents == ["x", "a", "b"])
        #expect(server.applied.map(\.word) == ["a", "b"])
    }
}
