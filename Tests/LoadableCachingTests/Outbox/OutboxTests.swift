import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// `LoadableOutbox`: saved before sent, in order, one at a time; success, retryable and
/// non-retryable failures; retry, discard, removeAll; relaunch.
@Suite("Outbox: sending")
@MainActor
struct OutboxTests {
    @Test("an enqueued change is saved before it is sent, then sent, removed, and the removal saved")
    func savedThenSentThenRemoved() async throws {
        let cache = InMemoryLoadableCache()
        let server = ScriptedServer()
        var outbox: LoadableOutbox<Append>! = makeOutbox(cache: cache, server: server, clock: ManualClock())
        await outbox.restored()
        let id = outbox.enqueue(Append(word: "a"))
        #expect(outbox.items.map(\.id) == [id])
        let key = outbox.items[0].idempotencyKey
        for string in [id, key] {
            #expect(UUID(uuidString: string)?.uuidString == string, "a UUID string, as UUID spells it")
            #expect(Array(string)[14] == "4", "version 4")
            #expect("89AB".contains(Array(string)[19]), "RFC 4122 variant")
        }
        #expect(id != key)
        #expect(outbox.items.first?.state == .pending)
        #expect(server.calls.isEmpty, "nothing is sent before the save")
        await outbox.saved()
        #expect(await cache.load(key: "outbox#0#1") != nil, "the first entry of the outbox's journal")
        _ = id
        await yield(until: { server.runningCount == 1 })
        #expect(outbox.items.first?.state == .sending)
        #expect(outbox.items.first?.attempts == 1)
        #expect(outbox.isSending)
        await server.finish()
        #expect(outbox.items.isEmpty)
        #expect(!outbox.isSending)
        #expect(server.applied == [Append(word: "a")])
        await outbox.saved()
        outbox = nil
        let relaunched = makeOutbox(cache: cache, server: ScriptedServer(), clock: ManualClock())
        await relaunched.restored()
        #expect(relaunched.items.isEmpty, "the removal was saved")
    }
}

/// Sending in order, one at a time; retries and failures.
extension OutboxTests {
    @Test("items are sent one at a time, oldest first, each with its own idempotency key")
    func oneAtATimeInOrder() async {
        let server = ScriptedServer()
        let outbox = makeOutbox(cache: InMemoryLoadableCache(), server: server, clock: ManualClock())
        await outbox.restored()
        let ids = ["a", "b", "c"].map { outbox.enqueue(Append(word: $0)) }
        await settleOutbox()
        #expect(server.calls.map(\.change.word) == ["a"])
        #expect(server.runningCount == 1)
        #expect(outbox.pendingCount == 3)
        await server.finish()
        #expect(server.calls.map(\.change.word) == ["a", "b"])
        #expect(outbox.items.map(\.id) == Array(ids.dropFirst()))
        await server.finish()
        await server.finish()
        #expect(server.applied.map(\.word) == ["a", "b", "c"])
        #expect(Set(server.calls.map(\.idempotencyKey)).count == 3)
        #expect(outbox.items.isEmpty)
        #expect(outbox.pendingCount == 0)
    }

    @Test("a retryable failure keeps the item first and retries after the backoff; the next waits")
    func retryableFailureBacksOff() async {
        let clock = ManualClock()
        let server = ScriptedServer()
        let outbox = makeOutbox(cache: InMemoryLoadableCache(), server: server, clock: clock)
        await outbox.restored()
        outbox.enqueue(Append(word: "a"))
        outbox.enqueue(Append(word: "b"))
        await server.finish(with: Busy(retryAfter: nil))
        #expect(outbox.items.map(\.state) == [.pending, .pending])
        #expect(outbox.items.first?.lastError is Busy)
        #expect(outbox.items.first?.attempts == 1)
        #expect(!outbox.isSending)
        #expect(clock.requestedSleeps.last == .seconds(1))
        await clock.advance(by: .milliseconds(999))
        #expect(server.calls.count == 1, "not before the backoff")
        await clock.advance(by: .milliseconds(1))
        await settleOutbox()
        #expect(server.calls.map(\.change.word) == ["a", "a"])
        #expect(server.calls[0].idempotencyKey == server.calls[1].idempotencyKey)
        await server.finish(with: Busy(retryAfter: nil))
        #expect(clock.requestedSleeps.last == .seconds(2), "the backoff grows")
        await clock.advance(by: .seconds(2))
        await server.finish()
        #expect(server.calls.map(\.change.word) == ["a", "a", "a", "b"])
        await server.finish(with: Busy(retryAfter: nil))
        #expect(clock.requestedSleeps.last == .seconds(1), "a success starts the backoff over")
    }

    @Test("a Retry-After longer than the backoff is waited for; a shorter one is not")
    func retryAfterIsHonoured() async {
        let clock = ManualClock()
        let server = ScriptedServer()
        let outbox = makeOutbox(cache: InMemoryLoadableCache(), server: server, clock: clock)
        await outbox.restored()
        outbox.enqueue(Append(word: "a"))
        await server.finish(with: Busy(retryAfter: .seconds(30)))
        #expect(clock.requestedSleeps.last == .seconds(30))
        await clock.advance(by: .seconds(29))
        #expect(server.calls.count == 1)
        await clock.advance(by: .seconds(1))
        await settleOutbox()
        #expect(server.calls.count == 2)
        await server.finish(with: Busy(retryAfter: .milliseconds(100)))
        #expect(clock.requestedSleeps.last == .seconds(2))
    }

    @Test("a URLError is retried; an error that is not retryable fails the item and the next goes on")
    func nonRetryableFailureDoesNotBlock() async {
        let server = ScriptedServer()
        let outbox = makeOutbox(cache: InMemoryLoadableCache(), server: server, clock: ManualClock())
        await outbox.restored()
        let a = outbox.enqueue(Append(word: "a"))
        outbox.enqueue(Append(word: "b"))
        await server.finish(with: URLError(.notConnectedToInternet))
        #expect(outbox.items.first?.state == .pending)
        outbox.discard(a)
        await settleOutbox()
        #expect(server.calls.map(\.change.word) == ["a", "b"], "discarding the item a retry waits for ends the wait")
        await server.finish(with: Refused())
        #expect(outbox.items.map(\.state) == [.failed])
        #expect(outbox.items.first?.lastError is Refused)
        #expect(outbox.pendingCount == 0)
        let c = outbox.enqueue(Append(word: "c"))
        await settleOutbox()
        #expect(server.calls.map(\.change.word) == ["a", "b", "c"], "one failed item never blocks the others")
        await server.finish(with: TestError("refused"))
        #expect(outbox.items.map(\.state) == [.failed, .failed], "an error that does not say it is retryable fails")
        #expect(outbox.items.map(\.id).last == c)
    }

    @Test("retry(_:) sends a failed item again in its place; discard(_:) removes it for good")
    func retryAndDiscard() async {
        let server = ScriptedServer()
        let outbox = makeOutbox(cache: InMemoryLoadableCache(), server: server, clock: ManualClock())
        await outbox.restored()
        let a = outbox.enqueue(Append(word: "a"))
        let b = outbox.enqueue(Append(word: "b"))
        await server.finish(with: Refused())
        await server.finish(with: Refused())
        #expect(outbox.items.map(\.state) == [.failed, .failed])
        outbox.retry(b)
        await settleOutbox()
        #expect(outbox.items.map(\.state) == [.failed, .sending])
        #expect(outbox.items.last?.attempts == 2)
        outbox.retry(b)  // not failed: nothing
        outbox.retry("no such item")
        await server.finish()
        #expect(outbox.items.map(\.id) == [a])
        outbox.discard(a)
        outbox.discard(a)
        #expect(outbox.items.isEmpty)
        await settleOutbox()
        #expect(server.calls.map(\.change.word) == ["a", "b", "b"])
    }

    @Test("discarding the item being sent cancels its send; the next item goes once that send ended")
    func discardWhileSending() async {
        let server = ScriptedServer()
        let outbox = makeOutbox(cache: InMemoryLoadableCache(), server: server, clock: ManualClock())
        await outbox.restored()
        let a = outbox.enqueue(Append(word: "a"))
        outbox.enqueue(Append(word: "b"))
        await yield(until: { server.runningCount == 1 })
        outbox.discard(a)
        #expect(outbox.items.map(\.change.word) == ["b"])
        await settleOutbox()
        #expect(outbox.isSending, "a's send still runs: it may be on its way")
        #expect(server.calls.map(\.change.word) == ["a"], "two sends of one scope never overlap")
        await server.finish()  // a's late answer: ignored
        #expect(server.calls.map(\.change.word) == ["a", "b"])
        await server.finish()
        #expect(outbox.items.isEmpty)
        // The server had a already: a discarded send may still arrive.
        #expect(server.applied.map(\.word) == ["a", "b"])
        #expect(server.calls.count == 2, "a is not sent again")
    }

    @Test("removeAll() cancels the send, removes every item and saves the empty queue")
    func removeAllForLogout() async {
        let cache = InMemoryLoadableCache()
        let server = ScriptedServer()
        var outbox: LoadableOutbox<Append>! = makeOutbox(cache: cache, server: server, clock: ManualClock())
        await outbox.restored()
        outbox.enqueue(Append(word: "a"))
        outbox.enqueue(Append(word: "b"))
        await yield(until: { server.runningCount == 1 })
        outbox.removeAll()
        #expect(outbox.items.isEmpty)
        #expect(outbox.isSending, "the cancelled send may still be on its way")
        await outbox.saved()
        await server.finish()
        #expect(!outbox.isSending)
        #expect(server.calls.count == 1)
        #expect(await cache.keys.isEmpty)
        outbox.enqueue(Append(word: "c"))
        await server.finish()
        #expect(server.applied.map(\.word) == ["a", "c"], "the cancelled send had reached the server")
        #expect(server.calls.map(\.change.word) == ["a", "c"])
        outbox = nil
        let relaunched = makeOutbox(cache: cache, server: ScriptedServer(), clock: ManualClock())
        await relaunched.restored()
        #expect(relaunched.items.isEmpty)
    }
}

/// Pausing while inactive or offline.
extension OutboxTests {
    @Test("nothing is sent while offline or inactive; coming back sends at once")
    func pausedWhileOfflineOrInactive() async {
        let activity = ActivityMonitor(connectivity: .offline)
        let server = ScriptedServer()
        let outbox = makeOutbox(
            cache: InMemoryLoadableCache(), server: server, activity: activity, clock: ManualClock())
        await outbox.restored()
        #expect(outbox.isPaused)
        outbox.enqueue(Append(word: "a"))
        await outbox.saved()
        await settleOutbox()
        #expect(server.calls.isEmpty)
        activity.connectivity = .online
        #expect(!outbox.isPaused)
        await server.finish()
        #expect(server.applied.map(\.word) == ["a"])
        activity.isActive = false
        #expect(outbox.isPaused)
        outbox.enqueue(Append(word: "b"))
        await settleOutbox()
        #expect(server.calls.count == 1)
        activity.isActive = true
        await server.finish()
        #expect(server.applied.map(\.word) == ["a", "b"])
    }

    @Test("a send running when the app pauses goes on; its retry waits for the return, which retries at once")
    func retryWaitsForTheReturn() async {
        let activity = ActivityMonitor()
        let clock = ManualClock()
        let server = ScriptedServer()
        let outbox = makeOutbox(cache: InMemoryLoadableCache(), server: server, activity: activity, clock: clock)
        await outbox.restored()
        outbox.enqueue(Append(word: "a"))
        await yield(until: { server.runningCount == 1 })
        activity.connectivity = .offline
        #expect(outbox.isSending)
        await server.finish(with: URLError(.networkConnectionLost))
        await clock.advance(by: .seconds(100))
        #expect(server.calls.count == 1, "no retry while offline")
        activity.connectivity = .online
        await settleOutbox()
        #expect(server.calls.count == 2, "caught up at once")
        await server.finish()
        #expect(server.applied.map(\.word) == ["a"])
    }

    @Test("coming back online never retries before the server's Retry-After")
    func retryAfterSurvivesAPause() async {
        let activity = ActivityMonitor()
        let clock = ManualClock()
        let server = ScriptedServer()
        let outbox = makeOutbox(cache: InMemoryLoadableCache(), server: server, activity: activity, clock: clock)
        await outbox.restored()
        outbox.enqueue(Append(word: "a"))
        await server.finish(with: Busy(retryAfter: .seconds(60)))
        activity.connectivity = .offline
        await clock.advance(by: .seconds(10))
        activity.connectivity = .online
        await settleOutbox()
        #expect(server.calls.count == 1)
        await clock.advance(by: .seconds(49))
        #expect(server.calls.count == 1)
        await clock.advance(by: .seconds(1))
        await settleOutbox()
        #expect(server.calls.count == 2)
    }

    @Test("with its retries used up, the item waits for the next enqueue or return")
    func retriesUsedUp() async {
        let activity = ActivityMonitor()
        let clock = ManualClock()
        let server = ScriptedServer()
        let outbox = makeOutbox(
            cache: InMemoryLoadableCache(), server: server, activity: activity, clock: clock, maxRetries: 1)
        await outbox.restored()
        outbox.enqueue(Append(word: "a"))
        await server.finish(with: Busy(retryAfter: nil))
        await clock.advance(by: .seconds(1))
        await server.finish(with: Busy(retryAfter: nil))
        await clock.run()
        #expect(server.calls.count == 2, "no retries left")
        #expect(outbox.items.first?.state == .pending)
        outbox.enqueue(Append(word: "b"))
        await settleOutbox()
        #expect(server.calls.map(\.change.word) == ["a", "a", "a"], "an enqueue tries again, oldest first")
        await server.finish(with: Busy(retryAfter: nil))
        await clock.advance(by: .seconds(1))
        await server.finish(with: Busy(retryAfter: nil))
        await clock.run()
        #expect(server.calls.count == 4)
        activity.isActive = false
        activity.isActive = true
        await server.finish()
        await server.finish()
        #expect(server.applied.map(\.word) == ["a", "b"])
    }
}

extension OutboxTests {
    @Test("enqueuedAt and the entry's savedAt come from now, and enqueuedAt survives a relaunch")
    func wallClockFromNow() async {
        let cache = InMemoryLoadableCache()
        let date = Locked(Date(timeIntervalSinceReferenceDate: 700_000_000.25))
        let offline = ActivityMonitor(connectivity: .offline)
        func launch() -> LoadableOutbox<Append> {
            LoadableOutbox(cache: cache, activity: offline, clock: ManualClock(), now: { date.withLock { $0 } }) {
                _, _ in
            }
        }
        var outbox: LoadableOutbox<Append>! = launch()
        await outbox.restored()
        outbox.enqueue(Append(word: "a"))
        #expect(outbox.items.first?.enqueuedAt == Date(timeIntervalSinceReferenceDate: 700_000_000.25))
        date.withLock { $0 = Date(timeIntervalSinceReferenceDate: 700_000_100) }
        await outbox.saved()
        #expect(await cache.load(key: "outbox#0#1")?.savedAt == Date(timeIntervalSinceReferenceDate: 700_000_000.25))
        outbox = nil
        let relaunched = launch()
        await relaunched.restored()
        #expect(relaunched.items.first?.enqueuedAt == Date(timeIntervalSinceReferenceDate: 700_000_000.25))
    }
}
