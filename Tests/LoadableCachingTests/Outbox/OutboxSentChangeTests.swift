import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// A list kept in `cache` under "words": the contents an earlier launch saved.
@MainActor
private func saveList(_ words: [String], in cache: any LoadableCache) async {
    let list = PersistedLoadable<[String]>()
    let persistence = list.persist(in: cache, key: "words")
    await persistence.restored()
    list.setContents(words)
    await persistence.saved()
}

/// Changes that reached the server while no loadable showed them: shown on the loadables given
/// later, above their (restored) contents, until each one's next successful sync.
@Suite("Outbox: changes sent while not shown")
@MainActor
struct OutboxSentChangeTests {
    @Test("sent while no loadable showed it: a later loadable shows it above its restored contents until it syncs")
    func shownOnALaterLoadableUntilItsSync() async {
        let lists = InMemoryLoadableCache()
        await saveList(["x"], in: lists)
        let server = OutcomeServer()
        let outbox = makeOutcomeOutbox(cache: InMemoryLoadableCache(), server: server, clock: ManualClock())
        await outbox.restored()
        outbox.enqueue(Append(word: "a"))
        await server.answer("a")
        #expect(outbox.items.isEmpty)

        let list = PersistedLoadable<[String]>()
        let persistence = list.persist(in: lists, key: "words")
        outbox.show(on: list, appendingWord)
        await persistence.restored()
        #expect(list.contents == ["x", "a"], "the restored contents lack it: an edit never goes backwards")
        #expect(list.baseContents == ["x"], "shown, not written")
        list.sync()
        list.setDidSyncSuccessfully(["x", "a", "y"])
        #expect(list.contents == ["x", "a", "y"], "the server's contents have it: it leaves")
        await outbox.saved()

        let later = PersistedLoadable<[String]>(contents: ["x"])
        outbox.show(on: later, appendingWord)
        #expect(later.contents == ["x"], "forgotten once a loadable it concerned synced")
    }

    @Test("shown on a loadable with contents; a successful sync that keeps them (a 304) ends it too")
    func aConfirmingSyncEndsIt() async {
        let server = OutcomeServer()
        let outbox = makeOutcomeOutbox(cache: InMemoryLoadableCache(), server: server, clock: ManualClock())
        await outbox.restored()
        outbox.enqueue(Append(word: "a"))
        await server.answer("a")
        let list = PersistedLoadable<[String]>(contents: ["x"])
        outbox.show(on: list, appendingWord)
        #expect(list.contents == ["x", "a"])
        list.sync()
        list.setDidSyncSuccessfully()  // a 304: the same contents, confirmed
        #expect(list.contents == ["x"], "a successful sync, even a 304, ends it")
        #expect(list.baseContents == ["x"])
    }

    @Test("a loadable the change does not concern keeps it remembered for the next one")
    func unconcernedLoadableForgetsNothing() async {
        let server = OutcomeServer()
        let outbox = makeOutcomeOutbox(cache: InMemoryLoadableCache(), server: server, clock: ManualClock())
        await outbox.restored()
        outbox.enqueue(Append(word: "a"))
        await server.answer("a")
        let other = PersistedLoadable<[String]>(contents: ["o"])
        outbox.show(on: other) { _, _ in false }
        other.sync()
        other.setDidSyncSuccessfully(["o", "p"])
        #expect(other.contents == ["o", "p"])
        await outbox.saved()
        let list = PersistedLoadable<[String]>(contents: ["x"])
        outbox.show(on: list, appendingWord)
        #expect(list.contents == ["x", "a"])
    }

    @Test("a shown change sent while a loadable showed it is not kept for later ones")
    func shownChangeIsNotKept() async {
        let server = OutcomeServer()
        let outbox = makeOutcomeOutbox(cache: InMemoryLoadableCache(), server: server, clock: ManualClock())
        await outbox.restored()
        let shown = PersistedLoadable<[String]>(contents: ["x"])
        outbox.show(on: shown, appendingWord)
        outbox.enqueue(Append(word: "a"))
        await server.answer("a")
        #expect(shown.baseContents == ["x", "a"])
        let later = PersistedLoadable<[String]>(contents: ["x"])
        outbox.show(on: later, appendingWord)
        #expect(later.contents == ["x"])
    }

    @Test("a sent change survives a relaunch of the outbox before any loadable shows it")
    func sentChangeSurvivesARelaunch() async {
        let cache = InMemoryLoadableCache()
        let server = OutcomeServer()
        var outbox: LoadableOutbox<Append>! = makeOutcomeOutbox(cache: cache, server: server, clock: ManualClock())
        await outbox.restored()
        outbox.enqueue(Append(word: "a"), scope: "s")
        await server.answer("a", .appliedAs(Append(word: "A")))
        await outbox.saved()
        outbox = nil

        let relaunched = makeOutcomeOutbox(
            cache: cache, server: OutcomeServer(), activity: ActivityMonitor(connectivity: .offline),
            clock: ManualClock())
        await relaunched.restored()
        #expect(relaunched.items.isEmpty)
        let list = PersistedLoadable<[String]>(contents: ["x"])
        relaunched.show(on: list, appendingWord)
        #expect(list.contents == ["x", "A"], "the server's version")
    }

    @Test("a sent change is kept for a day of the now clock")
    func sentChangeExpiresAfterADay() async {
        let wall = PersistenceWallClock()
        let server = OutcomeServer()
        let outbox = makeOutcomeOutbox(
            cache: InMemoryLoadableCache(), server: server, clock: ManualClock(), now: wall.function)
        await outbox.restored()
        outbox.enqueue(Append(word: "a"))
        await server.answer("a")
        wall.advance(by: 86_400)
        let dayOld = PersistedLoadable<[String]>(contents: ["x"])
        outbox.show(on: dayOld, appendingWord)
        #expect(dayOld.contents == ["x", "a"], "a day: still kept")
        wall.advance(by: 1)
        let older = PersistedLoadable<[String]>(contents: ["x"])
        outbox.show(on: older, appendingWord)
        #expect(older.contents == ["x"], "more than a day: forgotten")
    }

    @Test("a change sent while its loadable waited for its restore shows above the restored contents until a sync")
    func sentBeforeTheRestoreLands() async {
        let lists = ScriptedPersistenceCache()
        await saveList(["x"], in: lists)
        await lists.hold(.load)
        let server = OutcomeServer()
        let outbox = makeOutcomeOutbox(cache: InMemoryLoadableCache(), server: server, clock: ManualClock())
        await outbox.restored()
        let list = PersistedLoadable<[String]>()
        let persistence = list.persist(in: lists, key: "words")
        outbox.show(on: list, appendingWord)
        #expect(await waitUntilHeld(lists))
        outbox.enqueue(Append(word: "a"))
        await server.answer("a")
        #expect(list.contents == nil)
        await lists.releaseAll()
        await persistence.restored()
        #expect(list.contents == ["x", "a"], "the restored contents lack it: it stays above them")
        #expect(list.baseContents == ["x"])
        list.sync()
        list.setDidSyncSuccessfully(["x", "a"])
        #expect(list.contents == ["x", "a"], "the server's contents have it: not shown twice")
        #expect(list.baseContents == ["x", "a"])
    }

    @Test("mutate on a loadable with no contents still lets its change go: a later restore does not show it")
    func mutateWithoutContentsIsUnchanged() async throws {
        let lists = ScriptedPersistenceCache()
        await saveList(["x"], in: lists)
        await lists.hold(.load)
        let list = PersistedLoadable<[String]>()
        let persistence = list.persist(in: lists, key: "words")
        #expect(await waitUntilHeld(lists))
        let answer = try await list.mutate(optimistic: { $0.append("m") }, commit: { "ok" })
        #expect(answer == "ok")
        #expect(list.contents == nil)
        await lists.releaseAll()
        await persistence.restored()
        #expect(list.contents == ["x"])
        list.sync()
        list.setDidSyncSuccessfully(["x", "y"])
        #expect(list.contents == ["x", "y"])
    }
}
