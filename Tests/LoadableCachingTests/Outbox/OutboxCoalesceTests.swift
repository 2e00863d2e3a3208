import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// Merges two words with "+", unless the later one starts with "new:".
@MainActor
private func mergeWords(_ earlier: Append, _ later: Append) -> Append? {
    guard !later.word.hasPrefix("new:") else { return nil }
    return Append(word: earlier.word + "+" + later.word)
}

/// `coalesce`: a change enqueued into a scope whose last item was never sent merges into it.
@Suite("Outbox: coalescing")
@MainActor
struct OutboxCoalesceTests {
    @Test("a change merges into its scope's last never-sent item: same id, key and place; sent and restored merged")
    func mergesIntoTheLastNeverSentItem() async {
        let cache = InMemoryLoadableCache()
        let activity = ActivityMonitor(connectivity: .offline)
        var outbox: LoadableOutbox<Append>! = makeOutcomeOutbox(
            cache: cache, server: OutcomeServer(), activity: activity, clock: ManualClock(), coalesce: mergeWords)
        await outbox.restored()
        let list = PersistedLoadable<[String]>(contents: ["x"])
        outbox.show(on: list, appendingWord)
        let a = outbox.enqueue(Append(word: "a"), scope: "s")
        let key = outbox.items.first?.idempotencyKey
        let t = outbox.enqueue(Append(word: "t"), scope: "t")
        #expect(outbox.enqueue(Append(word: "b"), scope: "s") == a, "enqueue returns the id merged into")
        #expect(outbox.enqueue(Append(word: "c"), scope: "s") == a)
        let n = outbox.enqueue(Append(word: "n"))
        #expect(n != a && n != t, "nil is a scope of its own")
        #expect(outbox.items.map(\.id) == [a, t, n])
        #expect(outbox.items.map(\.change.word) == ["a+b+c", "t", "n"])
        #expect(outbox.items.first?.idempotencyKey == key)
        #expect(list.contents == ["x", "a+b+c", "t", "n"])
        await outbox.saved()
        outbox = nil

        let server = OutcomeServer()
        let relaunched = makeOutcomeOutbox(
            cache: cache, server: server, activity: activity, clock: ManualClock(), coalesce: mergeWords)
        await relaunched.restored()
        #expect(relaunched.items.map(\.change.word) == ["a+b+c", "t", "n"])
        activity.connectivity = .online
        await server.answer("a+b+c")
        #expect(server.calls.first?.change.word == "a+b+c")
        #expect(server.calls.first?.idempotencyKey == key)
        await server.answer("t")
        await server.answer("n")
    }

    @Test("the merged change is the one sent, and what the layer shows")
    func mergedChangeIsSent() async {
        let server = OutcomeServer()
        let outbox = makeOutcomeOutbox(
            cache: InMemoryLoadableCache(), server: server, clock: ManualClock(), coalesce: mergeWords)
        await outbox.restored()
        let list = PersistedLoadable<[String]>(contents: ["x"])
        outbox.show(on: list, appendingWord)
        outbox.enqueue(Append(word: "a"), scope: "s")
        await yield(until: { server.running == ["a"] })
        outbox.enqueue(Append(word: "b"), scope: "s")
        outbox.enqueue(Append(word: "c"), scope: "s")
        #expect(outbox.items.map(\.change.word) == ["a", "b+c"])
        await server.answer("a")
        await server.answer("b+c")
        #expect(server.sentWords == ["a", "b+c"])
        #expect(list.baseContents == ["x", "a", "b+c"])
    }

    @Test("no merge into a sending item, an item sent before, another scope's, or when coalesce says nil")
    func noMerge() async {
        let clock = ManualClock()
        let server = OutcomeServer()
        let outbox = makeOutcomeOutbox(
            cache: InMemoryLoadableCache(), server: server, clock: clock, coalesce: mergeWords)
        await outbox.restored()
        let a = outbox.enqueue(Append(word: "a"), scope: "s")
        await yield(until: { server.running == ["a"] })
        let b = outbox.enqueue(Append(word: "b"), scope: "s")
        #expect(b != a, "a is sending")
        #expect(outbox.items.map(\.change.word) == ["a", "b"])
        await server.fail("a", with: Busy(retryAfter: nil))
        #expect(outbox.items.map(\.attempts) == [1, 0])
        // b, never sent, takes c; then a retry sends a, then b, which fails and may be retried.
        #expect(outbox.enqueue(Append(word: "c"), scope: "s") == b)
        let d = outbox.enqueue(Append(word: "new:d"), scope: "s")
        #expect(d != b, "coalesce said nil")
        let e = outbox.enqueue(Append(word: "e"), scope: "t")
        #expect(e != d, "another scope")
        #expect(outbox.items.map(\.change.word) == ["a", "b+c", "new:d", "e"])
        await waitForTimer(on: clock, sleeping: .seconds(1))
        await clock.advance(by: .seconds(1))
        await server.answer("a")
        await server.fail("b+c", with: Busy(retryAfter: nil))
        await server.answer("e")
        #expect(outbox.items.map(\.change.word) == ["b+c", "new:d"])
        outbox.discard(d)
        #expect(outbox.items.map(\.attempts) == [1])
        let f = outbox.enqueue(Append(word: "f"), scope: "s")
        #expect(f != b, "b was sent once: the server may have it")
        #expect(outbox.items.map(\.change.word) == ["b+c", "f"])
        await waitForTimer(on: clock, sleeping: .seconds(1))
        await clock.advance(by: .seconds(1))
        await server.answer("b+c")
        await server.answer("f")
        #expect(server.sentWords == ["a", "e", "a", "b+c", "b+c", "f"])
    }
}
