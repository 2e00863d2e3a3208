import Foundation
import Loadable
import LoadableCaching
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
        #expect(outbox.items.first?.state == .pending)
        #expect(server.calls.isEmpty, "nothing is sent before the save")
        await outbox.saved()
        #expect(await cache.load(key: "outbox") != nil)
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

