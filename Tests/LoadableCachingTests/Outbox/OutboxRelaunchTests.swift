import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// `Append` as a later version of an app reads it: it refuses the word "bad".
private struct PickyAppend: Codable, Sendable, Hashable {
    var word: String

    init(word: String) { self.word = word }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        word = try container.decode(String.self, forKey: .word)
        guard word != "bad" else {
            throw DecodingError.dataCorruptedError(forKey: .word, in: container, debugDescription: "no longer a word")
        }
    }
}

/// A relaunch: a new outbox on the same cache and key restores what the last one saved.
@Suite("Outbox: relaunch, errors")
@MainActor
struct OutboxRelaunchTests {
    @Test("a relaunch restores every saved item in order, a sending one as pending, and re-sends it with the same key")
    func relaunchRestoresInOrder() async throws {
        let cache = InMemoryLoadableCache()
        let server = ScriptedServer()
        var outbox: LoadableOutbox<Append>! = makeOutbox(cache: cache, server: server, clock: ManualClock())
        await outbox.restored()
        outbox.enqueue(Append(word: "a"))
        outbox.enqueue(Append(word: "b"))
        outbox.enqueue(Append(word: "c"))
        await server.finish(with: Refused())
        await yield(until: { server.runningCount == 1 })
        let before = outbox.items
        #expect(before.map(\.state) == [.failed, .sending, .pending])
        await outbox.saved()
        outbox = nil
        let second = ScriptedServer()
        let relaunched = makeOutbox(cache: cache, server: second, clock: ManualClock())
        #expect(relaunched.items.isEmpty, "the cache is read off the main actor")
        await relaunched.restored()
        let after = relaunched.items
        #expect(after.map(\.id) == before.map(\.id))
        #expect(after.map(\.change) == before.map(\.change))
        #expect(after.map(\.idempotencyKey) == before.map(\.idempotencyKey))
        #expect(after.map(\.enqueuedAt) == before.map(\.enqueuedAt))
        // b's first send began after the last save; the relaunch sent it again at once.
        #expect(after.map(\.attempts) == [1, 1, 0])
        #expect(after.map(\.state) == [.failed, .sending, .pending])
        #expect(after.first?.lastError.map { "\($0)" } == "\(Refused())")
        #expect(after.first?.lastError is OutboxRestoredError)
        await settleOutbox()
        #expect(second.calls.map(\.change.word) == ["b"])
        #expect(second.calls.first?.idempotencyKey == before[1].idempotencyKey)
        await server.finish()  // the first launch's answer arrives after all: ignored
        await second.finish()
        await second.finish()
        #expect(second.applied.map(\.word) == ["b", "c"])
        #expect(relaunched.items.map(\.change.word) == ["a"])
    }

    @Test("items enqueued before the restore finished go after the restored ones")
    func enqueuedDuringRestoreGoLast() async {
        let cache = ScriptedPersistenceCache()
        let server = ScriptedServer()
        var outbox: LoadableOutbox<Append>! = makeOutbox(cache: cache, server: server, clock: ManualClock())
        await outbox.restored()
        server.answer = .some(Refused())
        outbox.enqueue(Append(word: "a"))
        await outbox.saved()
        await settleOutbox()
        outbox = nil
        await cache.hold(.load)
        server.answer = nil
        let relaunched = makeOutbox(cache: cache, server: server, clock: ManualClock())
        #expect(await waitUntilHeld(cache))
        relaunched.enqueue(Append(word: "b"))
        #expect(relaunched.items.map(\.change.word) == ["b"])
        await settleOutbox()
        #expect(server.calls.count == 1, "nothing is sent before the restore")
        await cache.releaseAll()
        await relaunched.saved()  // waits for the restore and the save after it
        #expect(relaunched.items.map(\.change.word) == ["a", "b"])
        #expect(relaunched.items.map(\.state) == [.failed, .sending])
        await server.finish()
        await relaunched.saved()
        #expect(relaunched.items.map(\.change.word) == ["a"])
        #expect(await cache.keys.contains { $0.hasPrefix("outbox#") }, "the journal keeps the queue")
    }

    @Test("an item enqueued and discarded while the restore runs is not kept")
    func discardedDuringRestore() async {
        let cache = ScriptedPersistenceCache()
        let offline = ActivityMonitor(connectivity: .offline)
        var outbox: LoadableOutbox<Append>! = makeOutbox(
            cache: cache, server: ScriptedServer(), activity: offline, clock: ManualClock())
        await outbox.restored()
        outbox.enqueue(Append(word: "a"))
        await outbox.saved()
        outbox = nil
        await cache.hold(.load)
        outbox = makeOutbox(cache: cache, server: ScriptedServer(), activity: offline, clock: ManualClock())
        #expect(await waitUntilHeld(cache))
        let b = outbox.enqueue(Append(word: "b"))
        outbox.enqueue(Append(word: "c"))
        outbox.discard(b)
        await cache.releaseAll()
        await outbox.saved()
        #expect(outbox.items.map(\.change.word) == ["a", "c"])
        outbox = nil
        let relaunched = makeOutbox(cache: cache, server: ScriptedServer(), activity: offline, clock: ManualClock())
        await relaunched.restored()
        #expect(relaunched.items.map(\.change.word) == ["a", "c"])
    }

    @Test("a stored change that no longer decodes is reported once, set aside, and never blocks the rest")
    func undecodableChangeIsSetAside() async {
        let cache = InMemoryLoadableCache()
        let offline = ActivityMonitor(connectivity: .offline)
        var writer: LoadableOutbox<Append>! = makeOutbox(
            cache: cache, server: ScriptedServer(), activity: offline, clock: ManualClock())
        await writer.restored()
        writer.enqueue(Append(word: "bad"))
        writer.enqueue(Append(word: "good"))
        await writer.saved()
        writer = nil

        var sent: [String] = []
        var errors: [String] = []
        func picky() -> LoadableOutbox<PickyAppend> {
            let outbox = LoadableOutbox<PickyAppend>(cache: cache, activity: offline, clock: ManualClock()) {
                change, _ in
                sent.append(change.word)
            }
            outbox.onError = { errors.append("\($0)") }
            return outbox
        }
        var reader: LoadableOutbox<PickyAppend>! = picky()
        await reader.restored()
        #expect(reader.items.map(\.change.word) == ["good"])
        #expect(errors.count == 1)
        #expect(errors.first?.contains("was set aside") == true)
        #expect(errors.first?.contains("outbox") == true)
        offline.connectivity = .online
        await reader.saved()
        await settleOutbox()
        #expect(sent == ["good"])
        offline.connectivity = .offline
        await reader.saved()
        reader = nil

        reader = picky()
        await reader.restored()
        #expect(errors.count == 1, "reported once")
        #expect(reader.items.isEmpty)
        reader = nil

        // A version that reads it again brings it back, failed, for the app to retry or discard.
        let fixed = makeOutbox(cache: cache, server: ScriptedServer(), activity: offline, clock: ManualClock())
        await fixed.restored()
        #expect(fixed.items.map(\.change.word) == ["bad"])
        #expect(fixed.items.map(\.state) == [.failed])
    }

    @Test("an entry that is not an outbox is reported, and the outbox starts empty")
    func corruptEntryIsReported() async throws {
        let cache = InMemoryLoadableCache()
        try await (cache as any LoadableCache).save(
            CachedEntry(data: Data("not an outbox".utf8), savedAt: .now, version: 1), key: "outbox")
        var errors: [any Error] = []
        let outbox = makeOutbox(cache: cache, server: ScriptedServer(), clock: ManualClock())
        outbox.onError = { errors.append($0) }
        await outbox.restored()
        #expect(outbox.items.isEmpty)
        #expect(errors.count == 1)
        guard case .corrupt(let key, let reason)? = errors.first as? LoadableCacheError else {
            Issue.record("expected .corrupt, got \(errors)")
            return
        }
        #expect(key == "outbox")
        #expect(reason.contains("LOX1"))
    }

    @Test("a failed save is reported, and the item is sent all the same")
    func failedSaveIsReported() async {
        let cache = ScriptedPersistenceCache()
        await cache.fail(.save, with: TestError("disk full"))
        let server = ScriptedServer()
        var errors: [any Error] = []
        let outbox = makeOutbox(cache: cache, server: server, clock: ManualClock())
        outbox.onError = { errors.append($0) }
        await outbox.restored()
        outbox.enqueue(Append(word: "a"))
        await outbox.saved()
        #expect(errors.count == 1)
        #expect("\(errors.first.map { "\($0)" } ?? "")".contains("disk full"))
        await server.finish()
        #expect(server.applied.map(\.word) == ["a"])
    }
}

/// A change JSON cannot encode: not a number.
private struct Measure: Codable, Sendable {
    var value: Double
}

extension OutboxRelaunchTests {
    @Test("a change that cannot be encoded is reported and sent, but not kept for the next launch")
    func unencodableChangeIsSentNotKept() async {
        let cache = InMemoryLoadableCache()
        var sent: [Double] = []
        var errors: [String] = []
        var outbox: LoadableOutbox<Measure>! = LoadableOutbox(cache: cache, clock: ManualClock()) { change, _ in
            sent.append(change.value)
        }
        outbox.onError = { errors.append("\($0)") }
        await outbox.restored()
        outbox.enqueue(Measure(value: .nan))
        outbox.enqueue(Measure(value: 1))
        #expect(errors.count == 1)
        #expect(errors.first?.contains("outbox") == true)
        await outbox.saved()
        await settleOutbox()
        #expect(sent.count == 2)
        #expect(sent.first?.isNaN == true)
        outbox = nil
        let relaunched = LoadableOutbox<Measure>(cache: cache, activity: ActivityMonitor(connectivity: .offline)) {
            _, _ in
        }
        await relaunched.restored()
        #expect(relaunched.items.isEmpty)
    }

    @Test("an observer that discards an item as its layer shows leaves no layer of it behind")
    func discardFromALayerObserver() async {
        let offline = ActivityMonitor(connectivity: .offline)
        let outbox = makeOutbox(
            cache: InMemoryLoadableCache(), server: ScriptedServer(), activity: offline, clock: ManualClock())
        await outbox.restored()
        let first = PersistedLoadable<[String]>(contents: [])
        let second = PersistedLoadable<[String]>(contents: [])
        let append: @MainActor (inout [String], Append) -> Bool = { words, change in
            words.append(change.word)
            return true
        }
        outbox.show(on: first, append)
        outbox.show(on: second, append)
        let observation = first.observe { _ in
            if let item = outbox.items.last { outbox.discard(item.id) }
        }
        let secondObservation = second.observe { _ in
            if let item = outbox.items.last { outbox.discard(item.id) }
        }
        outbox.enqueue(Append(word: "a"))
        #expect(outbox.items.isEmpty)
        #expect(first.contents == [])
        #expect(second.contents == [])
        observation.cancel()
        secondObservation.cancel()
    }
}
