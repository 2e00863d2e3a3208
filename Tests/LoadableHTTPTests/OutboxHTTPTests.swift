import Foundation
import LoadableCaching
import LoadableHTTP
import LoadableSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A word added to the server's list.
private struct AddWord: Codable, Sendable, Equatable {
    var word: String
}

/// A server of a list of words: `GET /words` answers the list, `POST /words` appends the posted
/// word once per `Idempotency-Key` (a repeat gets the first answer).
private final class WordServer: Sendable {
    private struct State {
        var words = ["x"]
        var keys: Set<String> = []
        var posts = 0
        var gets = 0
    }

    private let state = Locked(State())

    var words: [String] { state.withLock { $0.words } }
    var posts: Int { state.withLock { $0.posts } }
    var gets: Int { state.withLock { $0.gets } }

    func handle(_ request: LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Response {
        state.withLock { state in
            switch request.method {
            case "GET":
                state.gets += 1
                let body = try! JSONEncoder().encode(state.words)
                return .status(200, headers: [.init("Content-Type", "application/json")], body: body)
            case "POST":
                state.posts += 1
                guard let key = request.header("Idempotency-Key"),
                    let added = try? JSONDecoder().decode(AddWord.self, from: request.body)
                else { return .status(400) }
                if state.keys.insert(key).inserted { state.words.append(added.word) }
                return .status(204)
            default:
                return .status(405)
            }
        }
    }
}

/// The outbox end to end with `HTTPService`: offline changes shown at once, kept across a
/// relaunch, sent in order when online, joined into the loadable, nothing lost or doubled.
@MainActor
@Suite(.timeLimit(.minutes(5))) final class OutboxHTTPTests {
    let session: URLSession
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("outbox-http-\(UUID())")

    init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 300
        session = URLSession(configuration: configuration)
    }

    deinit {
        session.invalidateAndCancel()
        try? FileManager.default.removeItem(at: directory)
    }

    /// What one launch of the app makes: the list, persisted, and the outbox showing on it.
    private func launch(
        _ service: HTTPService, cache: any LoadableCache, activity: ActivityMonitor
    ) -> (HTTPLoadable<[String]>, LoadableOutbox<AddWord>, LoadablePersistence) {
        let list = service.loadable([String].self, "words")
        let persistence = list.persist(in: cache.scoped("lists/"), key: "words")
        let outbox = LoadableOutbox<AddWord>(cache: cache.scoped("outbox/"), activity: activity, clock: ManualClock()) {
            change, idempotencyKey in
            try await service.send(.post, "words", json: change, idempotencyKey: idempotencyKey)
        }
        outbox.show(on: list) { words, change in
            words.append(change.word)
            return true
        }
        return (list, outbox, persistence)
    }

    @Test("offline → 3 changes shown at once → relaunch → online → sent in order, joined, nothing lost")
    func offlineRelaunchOnline() async throws {
        let words = WordServer()
        let server = try LoopbackHTTPServer { words.handle($0) }
        let service = HTTPService(baseURL: server.url("/"), transport: session)
        let cache = FileLoadableCache(directory: directory)
        let activity = ActivityMonitor()

        var (list, outbox, persistence): (HTTPLoadable<[String]>?, LoadableOutbox<AddWord>?, LoadablePersistence?) =
            launch(service, cache: cache, activity: activity)
        try await list?.synced(forceSync: true)
        #expect(list?.contents == ["x"])

        activity.connectivity = .offline
        for word in ["a", "b", "c"] { outbox?.enqueue(AddWord(word: word)) }
        #expect(list?.contents == ["x", "a", "b", "c"], "shown at once")
        #expect(outbox?.pendingCount == 3)
        await outbox?.saved()
        await persistence?.saved()
        #expect(words.posts == 0, "nothing is sent offline")

        // Relaunch, still offline: the list and the changes come back from the disk.
        (list, outbox, persistence) = (nil, nil, nil)
        let gets = words.gets
        (list, outbox, persistence) = launch(service, cache: cache, activity: activity)
        await persistence?.restored()
        await outbox?.restored()
        #expect(list?.contents == ["x", "a", "b", "c"], "the pending changes show on the restored list")
        #expect(outbox?.items.map(\.change.word) == ["a", "b", "c"])
        #expect(words.gets == gets, "no request was needed")

        activity.connectivity = .online
        await settle(rounds: 20_000) { outbox?.items.isEmpty == true }
        #expect(outbox?.items.isEmpty == true)
        #expect(words.words == ["x", "a", "b", "c"], "applied once each, in order")
        #expect(words.posts == 3)
        #expect(list?.contents == ["x", "a", "b", "c"])
        try await list?.synced(forceSync: true)
        #expect(list?.contents == ["x", "a", "b", "c"], "the server's list, no change shown twice")
        server.stop()
    }
}
