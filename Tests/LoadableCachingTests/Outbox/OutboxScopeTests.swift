import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// Scopes: in order within one, in parallel across them, up to `maxConcurrentSends`.
@Suite("Outbox: scopes and concurrency")
@MainActor
struct OutboxScopeTests {
    @Test("one scope sends its items in order, one at a time; scopes send in parallel")
    func serialWithinParallelAcross() async {
        let server = OutcomeServer()
        let outbox = makeOutcomeOutbox(cache: InMemoryLoadableCache(), server: server, clock: ManualClock())
        await outbox.restored()
        for word in ["s1", "s2"] { outbox.enqueue(Append(word: word), scope: "s") }
        for word in ["t1", "t2"] { outbox.enqueue(Append(word: word), scope: "t") }
        for word in ["n1", "n2"] { outbox.enqueue(Append(word: word)) }
        await yield(until: { server.running.count == 3 })
        await settleOutbox()
        #expect(server.running == ["s1", "t1", "n1"], "nil is a scope of its own")
        #expect(outbox.pendingCount == 6)
        await server.answer("t1")
        #expect(server.running == ["s1", "n1", "t2"])
        await server.answer("t2")
        await server.answer("n1")
        #expect(server.running == ["s1", "n2"], "s2 waits for s1")
        await server.answer("s1")
        await server.answer("s2")
        await server.answer("n2")
        #expect(server.sentWords == ["s1", "t1", "n1", "t2", "n2", "s2"])
        #expect(outbox.items.isEmpty)
    }

    @Test(
        "at most maxConcurrentSends run at once; the scope with the oldest item goes first",
        arguments: [nil, 1, 2] as [Int?])
    func maxConcurrentSends(_ limit: Int?) async {
        let server = OutcomeServer()
        let outbox = makeOutcomeOutbox(
            cache: InMemoryLoadableCache(), server: server, clock: ManualClock(), maxConcurrentSends: limit)
        let expected = limit ?? 4
        #expect(outbox.maxConcurrentSends == expected, "4 by default")
        await outbox.restored()
        let scopes = (0..<6).map { "scope\($0)" }
        for scope in scopes { outbox.enqueue(Append(word: scope), scope: scope) }
        await yield(until: { server.running.count == expected })
        await settleOutbox()
        #expect(server.running == Array(scopes.prefix(expected)))
        await server.answer(scopes[0])
        #expect(server.running == Array(scopes.dropFirst().prefix(expected)), "the next scope in line goes")
        for scope in scopes.dropFirst() { await server.answer(scope) }
        #expect(server.sentWords == scopes)
        #expect(outbox.items.isEmpty)
    }

    @Test("a retryable failure holds its scope only, which retries after the backoff")
    func retryableFailureHoldsItsScopeOnly() async {
        let clock = ManualClock()
        let server = OutcomeServer()
        let outbox = makeOutcomeOutbox(cache: InMemoryLoadableCache(), server: server, clock: clock)
        await outbox.restored()
        for word in ["s1", "s2"] { outbox.enqueue(Append(word: word), scope: "s") }
        for word in ["t1", "t2"] { outbox.enqueue(Append(word: word), scope: "t") }
        await server.fail("s1", with: Busy(retryAfter: nil))
        #expect(outbox.items.map(\.state) == [.pending, .pending, .sending, .pending])
        await waitForTimer(on: clock, sleeping: .seconds(1))
        await server.answer("t1")
        await yield(until: { server.running == ["t2"] })
        await clock.advance(by: .milliseconds(999))
        #expect(server.running == ["t2"], "s waits for its backoff; t goes on")
        await clock.advance(by: .milliseconds(1))
        await yield(until: { server.running == ["t2", "s1"] })
        let keys = server.calls.filter { $0.change.word == "s1" }.map(\.idempotencyKey)
        #expect(keys.count == 2 && Set(keys).count == 1, "sent again with the same key")
        await server.answer("s1")
        await server.answer("t2")
        await server.answer("s2")
        #expect(server.sentWords == ["s1", "t1", "t2", "s1", "s2"])
    }

    @Test("a failed item does not hold its scope")
    func failedItemDoesNotHoldItsScope() async {
        let server = OutcomeServer()
        let outbox = makeOutcomeOutbox(cache: InMemoryLoadableCache(), server: server, clock: ManualClock())
        await outbox.restored()
        for word in ["s1", "s2"] { outbox.enqueue(Append(word: word), scope: "s") }
        await server.fail("s1", with: Refused())
        #expect(server.running == ["s2"])
        await server.answer("s2")
        #expect(outbox.items.map(\.change.word) == ["s1"])
        #expect(outbox.items.map(\.state) == [.failed])
    }

    @Test("discarding a sending item: its scope's next item waits for the cancelled send, which still counts")
    func discardWhileSendingHoldsTheScopeAndItsShare() async {
        let server = OutcomeServer()
        let outbox = makeOutcomeOutbox(
            cache: InMemoryLoadableCache(), server: server, clock: ManualClock(), maxConcurrentSends: 2)
        await outbox.restored()
        let s1 = outbox.enqueue(Append(word: "s1"), scope: "s")
        outbox.enqueue(Append(word: "s2"), scope: "s")
        outbox.enqueue(Append(word: "t1"), scope: "t")
        outbox.enqueue(Append(word: "u1"), scope: "u")
        await yield(until: { server.running == ["s1", "t1"] })
        outbox.discard(s1)
        await settleOutbox()
        #expect(outbox.isSending)
        #expect(server.running == ["s1", "t1"], "s2 waits for s1's send, and u1 for a free share")
        await server.answer("t1")
        #expect(server.running == ["s1", "u1"])
        await server.answer("u1")
        #expect(outbox.isSending, "the discarded send still runs")
        #expect(server.running == ["s1"])
        #expect(outbox.items.map(\.state) == [.pending])
        await server.answer("s1")  // its late answer: ignored
        #expect(server.running == ["s2"])
        await server.answer("s2")
        #expect(!outbox.isSending)
        #expect(outbox.items.isEmpty)
        #expect(server.sentWords == ["s1", "t1", "u1", "s2"])
    }
}
