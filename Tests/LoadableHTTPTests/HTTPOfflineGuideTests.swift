import Foundation
import LoadableCaching
import LoadableHTTP
import LoadableSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

// The `HTTPService` samples of Docs/Offline.md, verbatim (`GuideSamplesTests` checks it), run
// against a `LoopbackHTTPServer` that honours `Idempotency-Key` as the guide asks of a server.

// MARK: - Guide types

/// A change of a note's title: what the user did.
struct NoteEdit: Codable, Sendable, Equatable {
    var noteID: Int
    var title: String
}

/// The app's outbox of note edits, sent as `PATCH /notes/<id>`.
@MainActor
func makeNoteOutbox(cache: any LoadableCache, api: HTTPService) -> LoadableOutbox<NoteEdit> {
    LoadableOutbox(cache: cache.scoped("outbox/")) { edit, idempotencyKey in
        try await api.send(.patch, "notes/\(edit.noteID)", json: edit, idempotencyKey: idempotencyKey)
    }
}

/// A note, as the server sends it.
struct Note: Codable, Sendable, Equatable {
    var id: Int
    var title: String
}

/// The app's notes, each showing the edits not sent yet.
@MainActor
func makeNotes(
    cache: any LoadableCache, api: HTTPService, outbox: LoadableOutbox<NoteEdit>
) -> LoadableStore<Int, HTTPLoadable<Note>> {
    LoadableStore(cache: cache.scoped("notes/"), cacheKey: { "\($0)" }) { id in
        let note = api.loadable(Note.self, "notes/\(id)")
        outbox.show(on: note) { note, edit in
            guard edit.noteID == id else { return false }  // another note's edit: nothing to show here
            note.title = edit.title
            return true
        }
        return note
    }
}

// MARK: - The server

/// A notes backend on a `LoopbackHTTPServer`: `GET /v1/notes/<id>` and `PATCH /v1/notes/<id>`,
/// which applies an edit once per `Idempotency-Key` and answers a repeat as the first time. The
/// next answers to `PATCH` can be scripted (a 503 with `Retry-After`, a 422).
final class NotesBackend: Sendable {
    private struct State {
        var titles: [Int: String] = [7: "Groceries", 8: "Ideas"]
        var answeredKeys: Set<String> = []
        var appliedCount = 0
        var scripted: [LoopbackHTTPServer.Response] = []
    }

    private let state = Locked(State())
    let server: LoopbackHTTPServer

    init() throws {
        let state = state
        server = try LoopbackHTTPServer { request in
            let parts = request.path.split(separator: "/")
            guard parts.count == 3, parts[0] == "v1", parts[1] == "notes", let id = Int(parts[2]) else {
                return .status(404)
            }
            switch request.method {
            case "GET":
                let title = state.withLock { $0.titles[id] } ?? ""
                return .json(#"{"id":\#(id),"title":"\#(title)"}"#)
            case "PATCH":
                return state.withLock { state in
                    if !state.scripted.isEmpty { return state.scripted.removeFirst() }
                    guard let key = request.header("Idempotency-Key") else { return .status(400) }
                    guard state.answeredKeys.insert(key).inserted else { return .status(204) }
                    guard let edit = try? JSONDecoder().decode(NoteEdit.self, from: request.body) else {
                        return .status(400)
                    }
                    state.titles[edit.noteID] = edit.title
                    state.appliedCount += 1
                    return .status(204)
                }
            default:
                return .status(405)
            }
        }
    }

    /// The service of the app, on this backend.
    var api: HTTPService { HTTPService(baseURL: server.url("/v1")) }

    /// The title the server keeps for note `id`.
    func title(_ id: Int) -> String? { state.withLock { $0.titles[id] } }

    /// How many edits the server applied.
    var appliedCount: Int { state.withLock { $0.appliedCount } }

    /// Answers the next `PATCH`es with `responses`, in order, before applying any.
    func script(_ responses: LoopbackHTTPServer.Response...) {
        state.withLock { $0.scripted.append(contentsOf: responses) }
    }

    /// The `Idempotency-Key` of every `PATCH` received, in order.
    var patchKeys: [String?] {
        server.requests.filter { $0.method == "PATCH" }.map { $0.header("Idempotency-Key") }
    }
}

/// An outbox that sends as ``makeNoteOutbox(cache:api:)`` does, on a `ManualClock` and a monitor
/// of the test's, retrying after 1, 2, 4… s.
@MainActor
private func makeTestOutbox(api: HTTPService, clock: ManualClock) -> LoadableOutbox<NoteEdit> {
    LoadableOutbox(
        cache: InMemoryLoadableCache(), activity: ActivityMonitor(),
        retryPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(64), multiplier: 2), clock: clock
    ) { edit, idempotencyKey in
        try await api.send(.patch, "notes/\(edit.noteID)", json: edit, idempotencyKey: idempotencyKey)
    }
}

/// Waits until the outbox's send is over and `condition` holds, giving the main actor and the
/// global executor turns (never sleeping); records an issue when it does not.
@MainActor
private func settleOutbox(
    _ outbox: LoadableOutbox<NoteEdit>, until condition: @MainActor () -> Bool,
    sourceLocation: SourceLocation = #_sourceLocation
) async {
    let held = await settle(rounds: 20_000) { !outbox.isSending && condition() }
    #expect(held, "the outbox did not settle", sourceLocation: sourceLocation)
}

/// The `HTTPService` samples against a server that honours `Idempotency-Key`.
@Suite("Docs/Offline.md samples over HTTP", .timeLimit(.minutes(5)))
@MainActor
struct OfflineGuideHTTPTests {
    @Test("a first outbox: the edit shows on its note at once, goes out as a PATCH with its key, joins the note")
    func firstOutbox() async throws {
        let backend = try NotesBackend()
        let cache = InMemoryLoadableCache()
        let outbox = makeNoteOutbox(cache: cache, api: backend.api)
        let notes = makeNotes(cache: cache, api: backend.api, outbox: outbox)
        let seven = notes.lease(7)
        let eight = notes.lease(8)
        defer {
            seven.release()
            eight.release()
        }
        try await seven.synced()
        try await eight.synced()
        #expect(seven.contents?.title == "Groceries")

        outbox.enqueue(NoteEdit(noteID: 7, title: "On the train"))
        let key = try #require(outbox.items.first?.idempotencyKey)
        #expect(seven.contents?.title == "On the train", "shown at once")
        #expect(eight.contents?.title == "Ideas", "another note's edit shows nothing there")
        await backend.server.waitForRequests(3)
        await settleOutbox(outbox) { outbox.items.isEmpty }
        #expect(backend.patchKeys == [key])
        #expect(backend.title(7) == "On the train")
        #expect(seven.contents?.title == "On the train", "joined the note's contents")
        try await seven.synced()
        #expect(seven.contents?.title == "On the train", "the server's note has it")
        await outbox.saved()
        #expect(await cache.keys.contains("outbox/outbox#0#1"))
    }

    @Test("a 503 with Retry-After: the same edit, the same key, after the server's delay; applied once")
    func retryAfter() async throws {
        let backend = try NotesBackend()
        let retry503 = LoopbackHTTPServer.Response.status(503, headers: [.init("Retry-After", "30")])
        backend.script(retry503)
        let clock = ManualClock()
        let outbox = makeTestOutbox(api: backend.api, clock: clock)
        outbox.enqueue(NoteEdit(noteID: 7, title: "On the train"))
        await backend.server.waitForRequests(1)
        await settleOutbox(outbox) { outbox.items.first?.lastError != nil }
        #expect(outbox.items.first?.state == .pending)
        #expect((outbox.items.first?.lastError as? HTTPLoadableError)?.retryAfter == .seconds(30))
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(29))
        #expect(backend.server.requestCount == 1)
        await clock.advance(by: .seconds(1))
        await backend.server.waitForRequests(2)
        await settleOutbox(outbox) { outbox.items.isEmpty }
        let keys = backend.patchKeys
        #expect(keys.count == 2)
        #expect(keys[0] == keys[1])
        #expect(backend.appliedCount == 1)
    }

    @Test("a 422 fails its item for good; the next edit goes on; a retry sends it again")
    func refused() async throws {
        let backend = try NotesBackend()
        backend.script(.status(422, body: Data("title too long".utf8)))
        let outbox = makeTestOutbox(api: backend.api, clock: ManualClock())
        let refused = outbox.enqueue(NoteEdit(noteID: 7, title: "A very long title"))
        outbox.enqueue(NoteEdit(noteID: 8, title: "Ideas, sorted"))
        await backend.server.waitForRequests(2)
        await settleOutbox(outbox) { outbox.items.count == 1 }
        #expect(outbox.items.map(\.state) == [.failed])
        #expect(outbox.items[0].lastError.map { "\($0)" } == "HTTP 422: title too long")
        #expect(backend.title(8) == "Ideas, sorted")
        outbox.retry(refused)
        await backend.server.waitForRequests(3)
        await settleOutbox(outbox) { outbox.items.isEmpty }
        #expect(backend.title(7) == "A very long title")
    }
}
