import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

/// Counts the changes Observation reports for one tracked read.
@MainActor
private final class OutboxChangeCounter {
    var count = 0
}

/// Tracks `read` once; the counter counts the change reports that follow.
@MainActor
private func track(_ read: @escaping @MainActor () -> Void) -> OutboxChangeCounter {
    let counter = OutboxChangeCounter()
    withObservationTracking {
        read()
    } onChange: {
        MainActor.assumeIsolated { counter.count += 1 }
    }
    return counter
}

/// Observation of `items`, `pendingCount`, `isPaused`, `isSending`; release, re-entrancy, and
/// outboxes that would share an entry.
@Suite("Outbox: Observation, lifetime, re-entrancy")
@MainActor
struct OutboxObservationTests {
    @Test("items, pendingCount, isSending and isPaused report their changes")
    func observableProperties() async {
        let activity = ActivityMonitor()
        let server = ScriptedServer()
        let outbox = makeOutbox(
            cache: InMemoryLoadableCache(), server: server, activity: activity, clock: ManualClock())
        await outbox.restored()
        let items = track { _ = outbox.items }
        let pending = track { _ = outbox.pendingCount }
        let sending = track { _ = outbox.isSending }
        let paused = track { _ = outbox.isPaused }
        outbox.enqueue(Append(word: "a"))
        #expect(items.count == 1)
        #expect(pending.count == 1)
        #expect(sending.count == 0)
        await yield(until: { outbox.isSending })
        #expect(sending.count == 1)
        let ended = track { _ = outbox.isSending }
        let emptied = track { _ = outbox.items }
        await server.finish()
        #expect(ended.count == 1)
        #expect(emptied.count == 1)
        #expect(paused.count == 0)
        activity.connectivity = .offline
        #expect(paused.count == 1)
        let resumed = track { _ = outbox.isPaused }
        activity.isActive = false  // still paused: no change
        #expect(resumed.count == 0)
        activity.isActive = true
        activity.connectivity = .online
        #expect(resumed.count == 1)
    }

    @Test("releasing the outbox while it sends cancels the send; nothing runs afterwards")
    func releaseWhileSending() async {
        let cache = InMemoryLoadableCache()
        var cancelled = false
        weak var released: LoadableOutbox<Append>?
        let sendClock = ManualClock()
        do {
            let outbox = LoadableOutbox<Append>(cache: cache, clock: ManualClock()) { _, _ in
                do {
                    try await sendClock.sleep(for: .seconds(3600))
                } catch {
                    cancelled = true
                    throw error
                }
            }
            released = outbox
            outbox.enqueue(Append(word: "a"))
            await yield(until: { outbox.isSending })
        }
        #expect(released == nil)
        await yield(until: { cancelled })
        let relaunched = LoadableOutbox<Append>(cache: cache, activity: ActivityMonitor(connectivity: .offline)) {
            _, _ in
        }
        await relaunched.restored()
        #expect(relaunched.items.map(\.change.word) == ["a"], "the item stays for the next launch")
    }

    @Test("an outbox released on another thread leaves its queued saves to finish")
    func releasedOnAnotherThread() async {
        let cache = InMemoryLoadableCache()
        let box = Locked<LoadableOutbox<Append>?>(
            LoadableOutbox<Append>(cache: cache, activity: ActivityMonitor(connectivity: .offline)) { _, _ in })
        _ = box.withLock { $0?.enqueue(Append(word: "a")) }
        releaseOnAnotherThread(box)
        await settleOutbox()
        let relaunched = LoadableOutbox<Append>(cache: cache, activity: ActivityMonitor(connectivity: .offline)) {
            _, _ in
        }
        await relaunched.restored()
        #expect(relaunched.items.map(\.change.word) == ["a"])
    }

    @Test("send may enqueue, and onError may discard, without breaking the order")
    func reentrancy() async {
        let cache = ScriptedPersistenceCache()
        var sent: [String] = []
        var outbox: LoadableOutbox<Append>?
        outbox = LoadableOutbox<Append>(cache: cache, clock: ManualClock()) { change, _ in
            sent.append(change.word)
            if change.word == "a" { outbox?.enqueue(Append(word: "from send")) }
        }
        await outbox?.restored()
        outbox?.enqueue(Append(word: "a"))
        outbox?.enqueue(Append(word: "b"))
        await settleOutbox()
        #expect(sent == ["a", "b", "from send"])
        await cache.fail(.save, with: TestError("disk full"))
        outbox?.onError = { _ in
            if let first = outbox?.items.first { outbox?.discard(first.id) }
        }
        outbox?.enqueue(Append(word: "c"))
        await outbox?.saved()
        await settleOutbox()
        #expect(outbox?.items.isEmpty == true, "discarded from onError before it could be sent")
        #expect(sent == ["a", "b", "from send"])
    }
}

extension OutboxObservationTests {
    @Test("an Observation handler that enqueues or discards as an item changes keeps one send at a time, in order")
    func handlersThatChangeTheOutbox() async {
        let server = ScriptedServer()
        let outbox = makeOutbox(cache: InMemoryLoadableCache(), server: server, clock: ManualClock())
        await outbox.restored()
        var words = 0
        // A handler runs until it returns: one that changes what it tracks acts once.
        func enqueueOnChange() {
            var fired = false
            withObservationTracking {
                _ = outbox.items
            } onChange: {
                MainActor.assumeIsolated {
                    guard !fired else { return }
                    fired = true
                    words += 1
                    outbox.enqueue(Append(word: "h\(words)"))
                }
            }
        }
        outbox.enqueue(Append(word: "a"))
        await settleOutbox()
        for _ in 0..<6 {
            enqueueOnChange()
            await server.finishIfRunning(with: [nil, Busy(retryAfter: nil), Refused()][words % 3])
            await outbox.saved()
            await settleOutbox()
            #expect(server.runningCount <= 1)
        }
        await ManualClockRunner.run(outbox: outbox, server: server)
        let sentOnce = server.applied.map(\.word)
        #expect(Set(sentOnce).count == sentOnce.count)
        let order = sentOnce.compactMap { $0.hasPrefix("h") ? Int($0.dropFirst()) : nil }
        #expect(order == order.sorted(), "sent in the order enqueued: \(sentOnce)")

        // A handler that discards the item whose send just ended.
        let discarding = makeOutbox(cache: InMemoryLoadableCache(), server: server, clock: ManualClock(), key: "other")
        await discarding.restored()
        discarding.enqueue(Append(word: "d1"))
        discarding.enqueue(Append(word: "d2"))
        await settleOutbox()
        var discarded = false
        withObservationTracking {
            _ = discarding.items
        } onChange: {
            MainActor.assumeIsolated {
                guard !discarded else { return }
                discarded = true
                if let first = discarding.items.first { discarding.discard(first.id) }
            }
        }
        let running = server.runningCount
        await server.finish(with: Busy(retryAfter: nil))
        #expect(discarding.items.map(\.change.word).allSatisfy { $0 == "d2" })
        #expect(server.runningCount <= running)
    }
}

extension OutboxObservationTests {
    @Test("a handler that enqueues as a failed send's item changes does not start the next item ahead of it")
    func handlerEnqueuesAsASendFails() async {
        let server = ScriptedServer()
        let outbox = makeOutbox(cache: InMemoryLoadableCache(), server: server, clock: ManualClock())
        await outbox.restored()
        outbox.enqueue(Append(word: "a"))
        outbox.enqueue(Append(word: "b"))
        await yield(until: { server.runningCount == 1 })
        var fired = false
        withObservationTracking {
            _ = outbox.items
        } onChange: {
            MainActor.assumeIsolated {
                guard !fired else { return }
                fired = true
                outbox.enqueue(Append(word: "c"))
            }
        }
        await server.finish(with: Busy(retryAfter: nil))
        #expect(fired)
        #expect(server.calls.map(\.change.word) == ["a"], "b waits behind a's retry")
        #expect(outbox.items.map(\.change.word) == ["a", "b", "c"])
        #expect(outbox.items.map(\.state) == [.pending, .pending, .pending])
    }
}

/// Finishes the sends an outbox makes until it has none left.
@MainActor
enum ManualClockRunner {
    static func run(outbox: LoadableOutbox<Append>, server: ScriptedServer) async {
        for _ in 0..<50 {
            for item in outbox.items where item.state == .failed { outbox.retry(item.id) }
            await settleOutbox()
            guard server.runningCount > 0 else { return }
            await server.finish()
        }
    }
}

/// Two outboxes on one entry, or an outbox inside a store's cache, stop with a clear message.
@Suite("Outbox: entries shared by mistake stop with a clear message")
struct OutboxClaimExitTests {
    @Test("two live outboxes on one key of one cache")
    func twoOutboxesOnOneKey() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cache = InMemoryLoadableCache()
                let first = LoadableOutbox<Append>(cache: cache.scoped("a/")) { _, _ in }
                let second = LoadableOutbox<Append>(cache: cache.scoped("a/")) { _, _ in }
                withExtendedLifetime((first, second)) {}
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("LoadableOutbox: the key \"a/outbox\" of InMemoryLoadableCache overlaps"))
            #expect(text.contains("give each outbox its own key"))
        }
    }

    @Test("an outbox on a cache a live store owns whole")
    func outboxInsideAStore() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cache = InMemoryLoadableCache()
                let store = LoadableStore<Int, PersistedLoadable<Int>>(cache: cache, cacheKey: { "\($0)" }) { _ in
                    PersistedLoadable<Int>()
                }
                let outbox = LoadableOutbox<Append>(cache: cache) { _, _ in }
                withExtendedLifetime((store, outbox)) {}
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(
                text.contains("LoadableOutbox: the key \"outbox\" of InMemoryLoadableCache overlaps the whole cache"))
            #expect(text.contains("scoped("))
        }
    }

    @Test("outboxes and stores on separate scopes or keys of one cache live side by side")
    @MainActor
    func separateScopesAreFine() {
        let cache = InMemoryLoadableCache()
        let store = LoadableStore<Int, PersistedLoadable<Int>>(cache: cache.scoped("posts/"), cacheKey: { "\($0)" }) {
            _ in PersistedLoadable<Int>()
        }
        let first = LoadableOutbox<Append>(cache: cache, key: "outbox/edits") { _, _ in }
        let second = LoadableOutbox<Append>(cache: cache.scoped("outbox/"), key: "likes") { _, _ in }
        #expect(first.key != second.key)
        withExtendedLifetime((store, first, second)) {}
    }
}
