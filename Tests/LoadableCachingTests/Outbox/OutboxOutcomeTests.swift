import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// A relaunch: an outbox on `cache` (offline unless told otherwise), once its restore finished.
@MainActor
private func relaunch(
    _ cache: any LoadableCache, server: OutcomeServer = OutcomeServer(),
    activity: ActivityMonitor = ActivityMonitor(connectivity: .offline)
) async -> LoadableOutbox<Append> {
    let outbox = makeOutcomeOutbox(cache: cache, server: server, activity: activity, clock: ManualClock())
    await outbox.restored()
    return outbox
}

/// What a `send` says the server did: applied, applied as another change, dropped, conflict; and
/// `resolve(_:with:)`.
@Suite("Outbox: outcomes of a send")
@MainActor
struct OutboxOutcomeTests {
    @Test(".applied: the item leaves, its layer joins the base, and the removal is saved")
    func appliedJoins() async {
        let cache = InMemoryLoadableCache()
        let server = OutcomeServer()
        var outbox: LoadableOutbox<Append>! = makeOutcomeOutbox(cache: cache, server: server, clock: ManualClock())
        await outbox.restored()
        let list = PersistedLoadable<[String]>(contents: ["x"])
        outbox.show(on: list, appendingWord)
        outbox.enqueue(Append(word: "a"))
        await server.answer("a", .applied)
        #expect(outbox.items.isEmpty)
        #expect(list.baseContents == ["x", "a"])
        #expect(list.contents == ["x", "a"])
        await outbox.saved()
        outbox = nil
        #expect(await relaunch(cache).items.isEmpty)
    }

    @Test(".appliedAs(x): x joins; later items of its scope only are rebased, keep their keys, and are saved")
    func appliedAsRebasesLaterItemsOfItsScope() async {
        let cache = InMemoryLoadableCache()
        let server = OutcomeServer()
        let activity = ActivityMonitor()
        var rebased: [String] = []
        var outbox: LoadableOutbox<Append>! = makeOutcomeOutbox(
            cache: cache, server: server, activity: activity, clock: ManualClock(),
            rebase: { later, applied in
                rebased.append(later.word)
                later.word += "@" + applied.word
            })
        await outbox.restored()
        let list = PersistedLoadable<[String]>(contents: ["x"])
        outbox.show(on: list, appendingWord)
        outbox.enqueue(Append(word: "e"), scope: "s")
        await server.fail("e", with: Refused())  // an earlier item of the scope: failed, it stays
        for word in ["a", "b", "c"] { outbox.enqueue(Append(word: word), scope: "s") }
        for word in ["d", "f"] { outbox.enqueue(Append(word: word), scope: "t") }
        await yield(until: { Set(server.running) == ["a", "d"] })
        let keys = Dictionary(uniqueKeysWithValues: outbox.items.map { ($0.change.word, $0.idempotencyKey) })
        activity.connectivity = .offline  // b goes no further: the relaunch shows what was saved
        await server.answer("a", .appliedAs(Append(word: "A")))
        #expect(rebased == ["b", "c"], "the later items of the scope, in order")
        #expect(outbox.items.map(\.change.word) == ["e", "b@A", "c@A", "d", "f"])
        #expect(outbox.items.map(\.idempotencyKey) == ["e", "b", "c", "d", "f"].map { keys[$0] })
        #expect(list.baseContents == ["x", "A"], "the server's version joins, not the change sent")
        #expect(list.contents == ["x", "A", "e", "b@A", "c@A", "d", "f"])
        await outbox.saved()
        outbox = nil

        let second = OutcomeServer()
        let relaunched = await relaunch(cache, server: second, activity: activity)
        #expect(relaunched.items.map(\.change.word) == ["e", "b@A", "c@A", "d", "f"])
        activity.connectivity = .online
        await yield(until: { second.calls.count == 2 })
        #expect(Set(second.sentWords) == ["b@A", "d"])
        #expect(second.calls.first { $0.change.word == "b@A" }?.idempotencyKey == keys["b"])
        await server.answer("d")  // the first launch's send: ignored
        for word in ["b@A", "c@A", "d", "f"] { await second.answer(word) }
        #expect(relaunched.items.map(\.change.word) == ["e"])
        #expect(rebased == ["b", "c"], "a plain .applied rebases nothing")
    }

    @Test(".dropped: the item and its layer leave, nothing joins, the next item goes, the removal is saved")
    func droppedLeaves() async {
        let cache = InMemoryLoadableCache()
        let server = OutcomeServer()
        let activity = ActivityMonitor()
        var outbox: LoadableOutbox<Append>! = makeOutcomeOutbox(
            cache: cache, server: server, activity: activity, clock: ManualClock())
        await outbox.restored()
        let list = PersistedLoadable<[String]>(contents: ["x"])
        outbox.show(on: list, appendingWord)
        outbox.enqueue(Append(word: "a"))
        outbox.enqueue(Append(word: "b"))
        await server.answer("a", .dropped)
        #expect(outbox.items.map(\.change.word) == ["b"])
        #expect(list.contents == ["x", "b"])
        #expect(list.baseContents == ["x"], "nothing joins")
        activity.connectivity = .offline
        await server.answer("b", .dropped)
        #expect(list.contents == ["x"])
        #expect(server.sentWords == ["a", "b"])
        outbox.enqueue(Append(word: "c"))
        await outbox.saved()
        outbox = nil
        #expect(await relaunch(cache).items.map(\.change.word) == ["c"], "the removals were saved")
    }

    @Test(".dropped while no loadable shows the change: no later loadable shows it either")
    func droppedIsNotKeptAsSent() async {
        let server = OutcomeServer()
        let outbox = makeOutcomeOutbox(cache: InMemoryLoadableCache(), server: server, clock: ManualClock())
        await outbox.restored()
        outbox.enqueue(Append(word: "a"))
        await server.answer("a", .dropped)
        outbox.enqueue(Append(word: "b"))
        await server.answer("b", .applied)
        let list = PersistedLoadable<[String]>(contents: ["x"])
        outbox.show(on: list, appendingWord)
        #expect(list.contents == ["x", "b"], "the applied change shows until the next sync; the dropped one never")
    }

    @Test(
        ".conflict(remote:): kept with its layer and remote, not pending, holds back nothing, survives a relaunch",
        arguments: [Append(word: "theirs"), nil] as [Append?])
    func conflictIsKept(remote: Append?) async {
        let cache = InMemoryLoadableCache()
        let clock = ManualClock()
        let server = OutcomeServer()
        var outbox: LoadableOutbox<Append>! = makeOutcomeOutbox(cache: cache, server: server, clock: clock)
        await outbox.restored()
        let list = PersistedLoadable<[String]>(contents: ["x"])
        outbox.show(on: list, appendingWord)
        let a = outbox.enqueue(Append(word: "a"), scope: "s")
        outbox.enqueue(Append(word: "b"), scope: "s")
        await server.answer("a", .conflict(remote: remote))
        #expect(outbox.items.first?.id == a)
        #expect(outbox.items.first?.state == .conflict)
        #expect(outbox.items.first?.remote == remote)
        #expect(outbox.pendingCount == 1, "b only")
        #expect(list.contents == ["x", "a", "b"], "the conflict keeps its layer")
        await yield(until: { server.running == ["b"] })
        outbox.enqueue(Append(word: "c"), scope: "t")
        await yield(until: { server.running == ["b", "c"] })
        await server.answer("b")
        await server.answer("c")
        #expect(outbox.items.map(\.id) == [a])
        #expect(outbox.pendingCount == 0)
        #expect(list.contents == ["x", "b", "c", "a"])
        await clock.advance(by: .seconds(3_600))
        await settleOutbox()
        #expect(server.sentWords == ["a", "b", "c"], "a conflict is not sent again by itself")
        await outbox.saved()
        outbox = nil

        let second = OutcomeServer()
        let relaunched = await relaunch(cache, server: second, activity: ActivityMonitor())
        #expect(relaunched.items.map(\.id) == [a])
        #expect(relaunched.items.first?.state == .conflict)
        #expect(relaunched.items.first?.remote == remote)
        #expect(relaunched.items.first?.attempts == 1)
        #expect(relaunched.pendingCount == 0)
        await settleOutbox()
        #expect(second.calls.isEmpty, "nor after a relaunch")
    }

    @Test("resolve(_:with:) of a conflict: the new change, with a new key, in its place, shown, saved and sent")
    func resolveSendsTheNewChange() async {
        let cache = InMemoryLoadableCache()
        let server = OutcomeServer()
        let activity = ActivityMonitor()
        var outbox: LoadableOutbox<Append>! = makeOutcomeOutbox(
            cache: cache, server: server, activity: activity, clock: ManualClock())
        await outbox.restored()
        let list = PersistedLoadable<[String]>(contents: ["x"])
        outbox.show(on: list, appendingWord)
        let a = outbox.enqueue(Append(word: "a"), scope: "s")
        let b = outbox.enqueue(Append(word: "b"), scope: "s")
        await server.answer("a", .conflict(remote: Append(word: "theirs")))
        await server.fail("b", with: Refused())
        let oldKey = outbox.items.first?.idempotencyKey
        activity.connectivity = .offline
        outbox.resolve(a, with: Append(word: "mine+theirs"))
        #expect(outbox.items.map(\.id) == [a, b], "in its place")
        #expect(outbox.items.map(\.change.word) == ["mine+theirs", "b"])
        #expect(outbox.items.map(\.state) == [.pending, .failed])
        #expect(outbox.items.first?.remote == nil)
        let newKey = outbox.items.first?.idempotencyKey
        #expect(newKey != nil && newKey != oldKey, "its content changed: a new key")
        #expect(outbox.pendingCount == 1)
        #expect(list.contents == ["x", "mine+theirs", "b"])
        await outbox.saved()
        outbox = nil

        let second = OutcomeServer()
        let relaunched = await relaunch(cache, server: second, activity: activity)
        #expect(relaunched.items.map(\.change.word) == ["mine+theirs", "b"])
        #expect(relaunched.items.first?.idempotencyKey == newKey)
        #expect(relaunched.items.first?.remote == nil)
        let shown = PersistedLoadable<[String]>(contents: ["x"])
        relaunched.show(on: shown, appendingWord)
        activity.connectivity = .online
        await yield(until: { second.running == ["mine+theirs"] })
        #expect(second.calls.first?.idempotencyKey == newKey)
        await second.answer("mine+theirs")
        #expect(shown.baseContents == ["x", "mine+theirs"])
        #expect(relaunched.items.map(\.id) == [b])
    }

    @Test("resolve(_:with:) of a failed item sends the new change with a new key")
    func resolveAFailedItem() async {
        let server = OutcomeServer()
        let outbox = makeOutcomeOutbox(cache: InMemoryLoadableCache(), server: server, clock: ManualClock())
        await outbox.restored()
        let a = outbox.enqueue(Append(word: "a"))
        await server.fail("a", with: Refused())
        let oldKey = outbox.items.first?.idempotencyKey
        outbox.resolve(a, with: Append(word: "a2"))
        await yield(until: { server.running == ["a2"] })
        #expect(server.calls.last?.idempotencyKey != oldKey)
        #expect(server.calls.last?.idempotencyKey == outbox.items.first?.idempotencyKey)
        await server.answer("a2")
        #expect(outbox.items.isEmpty)
    }

    @Test("resolve and retry leave a pending or sending item alone; retry leaves a conflict alone")
    func resolveAndRetryOfAnItemThatWaitsForNothing() async {
        let server = OutcomeServer()
        let outbox = makeOutcomeOutbox(cache: InMemoryLoadableCache(), server: server, clock: ManualClock())
        await outbox.restored()
        let list = PersistedLoadable<[String]>(contents: ["x"])
        outbox.show(on: list, appendingWord)
        let a = outbox.enqueue(Append(word: "a"))
        let b = outbox.enqueue(Append(word: "b"))
        await yield(until: { server.running == ["a"] })
        let before = outbox.items
        for id in [a, b] {
            outbox.resolve(id, with: Append(word: "z"))
            outbox.retry(id)
        }
        await settleOutbox()
        #expect(outbox.items.map(\.change.word) == before.map(\.change.word))
        #expect(outbox.items.map(\.idempotencyKey) == before.map(\.idempotencyKey))
        #expect(outbox.items.map(\.state) == [.sending, .pending])
        #expect(list.contents == ["x", "a", "b"])
        #expect(server.sentWords == ["a"])
        await server.answer("a", .conflict(remote: nil))
        outbox.retry(a)
        await settleOutbox()
        #expect(outbox.items.first?.state == .conflict, "retry is for failed items")
        #expect(server.sentWords == ["a", "b"])
        await server.answer("b")
        #expect(outbox.items.map(\.id) == [a])
    }

    @Test("the init whose send returns nothing means .applied")
    func voidSendMeansApplied() async {
        var sent: [String] = []
        let outbox = LoadableOutbox<Append>(cache: InMemoryLoadableCache(), activity: ActivityMonitor()) {
            change, _ in
            sent.append(change.word)
        }
        await outbox.restored()
        let list = PersistedLoadable<[String]>(contents: ["x"])
        outbox.show(on: list, appendingWord)
        outbox.enqueue(Append(word: "a"))
        #expect(await settle { outbox.items.isEmpty })
        #expect(sent == ["a"])
        #expect(list.baseContents == ["x", "a"], "it joins, as .applied does")
    }
}
