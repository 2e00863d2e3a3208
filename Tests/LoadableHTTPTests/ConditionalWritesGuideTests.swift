import Foundation
import Loadable
import LoadableHTTP
import LoadableSupport
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The samples of `Docs/HTTP.md`, "Basic authentication and other schemes", "Conditional writes
// and conflicts" and "Idempotency when the server ignores `Idempotency-Key`", verbatim
// (`GuideSamplesTests` checks it), run against a `LoopbackHTTPServer` of notes with versions.

/// Where the guide's samples keep credentials: a keychain the test changes.
final class GuideKeychain: Sendable {
    private let stored: Locked<(credentials: HTTPBasicCredentials, apiKey: String)>

    init(_ credentials: HTTPBasicCredentials, apiKey: String = "k1") {
        stored = Locked((credentials, apiKey))
    }

    func credentials() async throws -> HTTPBasicCredentials { stored.withLock { $0.credentials } }
    func apiKey() async throws -> String { stored.withLock { $0.apiKey } }
    func save(_ credentials: HTTPBasicCredentials) { stored.withLock { $0.credentials = credentials } }
}

@MainActor
struct NotesGuide {
    struct Note: Codable, Sendable, Equatable {
        var id: String
        var text: String
    }

    /// Saves `text` into the note shown, unless someone changed the note since it was read.
    func save(_ text: String, into note: HTTPLoadable<Note>, api: HTTPService) async throws -> Bool {
        guard var edited = note.contents, let etag = note.etag else { return false }
        edited.text = text
        do {
            let saved = try await api.response(
                to: .put, "notes/\(edited.id)", json: edited, as: Note.self, precondition: .ifMatch(etag))
            note.setContents(saved)  // the server's version and its ETag: the next save's If-Match
            return true
        } catch let error as HTTPLoadableError where error.isPreconditionFailed {
            note.sync()  // someone else's version: show it, and let the user decide
            return false
        }
    }

    /// Creates `note` under an id the app made (a UUID); a repeat finds it there.
    func create(_ note: Note, api: HTTPService) async throws {
        do {
            try await api.send(.put, "notes/\(note.id)", json: note, precondition: .ifNoneMatchAny)
        } catch let error as HTTPLoadableError where error.isPreconditionFailed {
            // Already there: an earlier attempt, whose answer was lost, created it.
        }
    }

    /// Deletes the note; a repeat finds it gone.
    func delete(noteID: String, api: HTTPService) async throws {
        do {
            try await api.send(.delete, "notes/\(noteID)")
        } catch HTTPLoadableError.status(code: 404, _, _) {
            // Gone already: an earlier attempt deleted it.
        }
    }

    /// Saves an edit of version `etag`. A repeat's 412 may be the first attempt's success:
    /// the server's record tells.
    func saveEdit(_ edited: Note, of etag: String, api: HTTPService) async throws -> HTTPResponse<Note> {
        do {
            return try await api.response(
                to: .put, "notes/\(edited.id)", json: edited, as: Note.self, precondition: .ifMatch(etag))
        } catch let error as HTTPLoadableError where error.isPreconditionFailed {
            let current = try await api.response(to: .get, "notes/\(edited.id)", as: Note.self)
            guard current.value == edited else { throw error }  // someone else's change: a conflict
            return current  // the first attempt applied it
        }
    }

    /// The Basic sample, with the keychain and the server's URL of the test.
    func basicService(
        keychain: GuideKeychain, serverURL: URL
    ) -> (AsyncLoadable<HTTPBasicCredentials>, HTTPService) {
        let credentials = AsyncLoadable<HTTPBasicCredentials> { try await keychain.credentials() }
        let api = HTTPService(
            baseURL: serverURL,
            authorization: .basic(LoadableWaiter(credentials, timeout: .seconds(30)))
        )
        return (credentials, api)
    }

    /// The sample of another scheme.
    func tokenService(keychain: GuideKeychain, serverURL: URL) -> HTTPService {
        let apiKey = AsyncLoadable<String> { try await keychain.apiKey() }
        let service = HTTPService(
            baseURL: serverURL,
            authorization: .scheme("Token", LoadableWaiter(apiKey, timeout: .seconds(30))) { $0 }
        )  // Authorization: Token <key>
        return service
    }
}

/// A server of notes, each with a version (`ETag: "<n>"`, one counter for all) and a
/// `Last-Modified`, that checks `If-Match`, `If-None-Match: *` and `If-None-Match` on reads; it
/// can lose the answer to the next write after applying it (the connection closes with no
/// answer), and lets the test edit a note as another device would.
final class NotesServer: Sendable {
    typealias Note = NotesGuide.Note

    private struct State {
        var notes: [String: (note: Note, version: Int)] = [:]
        var version = 0
        var losesNextAnswer = false
    }

    private let state: Locked<State>
    let server: LoopbackHTTPServer

    static let lastModified = "Tue, 24 Nov 2026 10:00:00 GMT"

    init() throws {
        let state = Locked(State())
        self.state = state
        server = try LoopbackHTTPServer { request in Self.handle(request, state) }
    }

    /// Another device's edit, or a note that was there already.
    func put(_ note: Note) {
        state.withLock { state in
            state.version += 1
            state.notes[note.id] = (note, state.version)
        }
    }

    var notes: [String: Note] { state.withLock { $0.notes.mapValues(\.note) } }

    /// The next write is applied, and its answer lost.
    func loseNextAnswer() { state.withLock { $0.losesNextAnswer = true } }

    /// A service on the server's `/api`, through an ephemeral session of its own whose requests
    /// may wait 300 s (a busy machine); invalidate the session when done.
    func makeService() -> (session: URLSession, api: HTTPService) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 300
        let session = URLSession(configuration: configuration)
        return (session, HTTPService(baseURL: server.url("/api"), transport: session))
    }

    private static func handle(
        _ request: LoopbackHTTPServer.Request, _ state: Locked<State>
    )
        -> LoopbackHTTPServer
        .Response
    {
        if request.path == "/api/busy" {
            return .status(409, headers: [.init("Retry-After", "3")], body: Data("please retry".utf8))
        }
        guard request.path.hasPrefix("/api/notes/") else { return .status(404) }
        let id = String(request.path.dropFirst("/api/notes/".count))
        return state.withLock { state -> LoopbackHTTPServer.Response in
            let current = state.notes[id]
            let currentTag = current.map { "\"\($0.version)\"" }
            if request.method == "GET" {
                guard let current, let currentTag else { return .status(404) }
                if request.header("If-None-Match") == currentTag {
                    return .status(304, headers: validators(currentTag))
                }
                return answer(current.note, tag: currentTag, status: 200)
            }
            if let ifMatch = request.header("If-Match"), ifMatch != currentTag { return .status(412) }
            if request.header("If-None-Match") == "*", current != nil { return .status(412) }
            let loses = state.losesNextAnswer
            state.losesNextAnswer = false
            let response: LoopbackHTTPServer.Response
            switch request.method {
            case "PUT":
                guard let note = try? JSONDecoder().decode(Note.self, from: request.body), note.id == id else {
                    return .status(400)
                }
                state.version += 1
                state.notes[id] = (note, state.version)
                response = answer(note, tag: "\"\(state.version)\"", status: current == nil ? 201 : 200)
            case "DELETE":
                guard current != nil else { return .status(404) }
                state.notes[id] = nil
                response = .status(204)
            default:
                return .status(405)
            }
            return loses ? .raw(Data()) : response
        }
    }

    private static func validators(_ tag: String) -> [LoopbackHTTPServer.Header] {
        [.init("ETag", tag), .init("Last-Modified", lastModified)]
    }

    private static func answer(_ note: Note, tag: String, status: Int) -> LoopbackHTTPServer.Response {
        .status(
            status, headers: validators(tag) + [.init("Content-Type", "application/json")],
            body: try! JSONEncoder().encode(note))
    }
}

@MainActor
@Suite(.timeLimit(.minutes(5))) final class ConditionalWritesGuideTests {
    typealias Note = NotesGuide.Note

    let notes: NotesServer
    let session: URLSession
    let api: HTTPService
    let guide = NotesGuide()

    init() throws {
        notes = try NotesServer()
        (session, api) = notes.makeService()
    }

    deinit {
        session.invalidateAndCancel()
        notes.server.stop()
    }

    /// The methods and preconditions of the requests the server saw to the note `id`.
    func writes(to id: String) -> [String] {
        notes.server.requests.filter { $0.path == "/api/notes/\(id)" }.map { request in
            let condition =
                request.header("If-Match").map { "If-Match \($0)" }
                ?? request.header("If-None-Match").map { "If-None-Match \($0)" }
            return request.method + (condition.map { " " + $0 } ?? "")
        }
    }

    @Test("save: If-Match of the version shown; the answer's ETag is the next save's; another device's edit is a 412")
    func conditionalSave() async throws {
        notes.put(Note(id: "n1", text: "milk"))
        let note = api.loadable(Note.self, "notes/n1")
        try await note.synced()
        #expect(note.etag == #""1""#)
        #expect(note.lastModified == NotesServer.lastModified)

        #expect(try await guide.save("oat milk", into: note, api: api))
        #expect(note.contents?.text == "oat milk")
        #expect(note.etag == #""2""#, "the answer's version, for the next save")
        #expect(try await guide.save("soy milk", into: note, api: api), "not a conflict with its own save")
        #expect(notes.notes["n1"]?.text == "soy milk")

        notes.put(Note(id: "n1", text: "rice milk"))  // another device
        #expect(try await guide.save("almond milk", into: note, api: api) == false)
        #expect(notes.notes["n1"]?.text == "rice milk", "the refused save changed nothing")
        try await note.doneSyncing()
        #expect(note.contents?.text == "rice milk")
        #expect(note.etag == #""4""#)
        #expect(
            writes(to: "n1") == [
                "GET", #"PUT If-Match "1""#, #"PUT If-Match "2""#, #"PUT If-Match "3""#, #"GET If-None-Match "3""#,
            ])
    }

    @Test("response(to:) gives the value, the real 2xx, the headers and the validators; header(_:) ignores case")
    func responseCarriesTheAnswer() async throws {
        let created = try await api.response(
            to: .put, "notes/n2", json: Note(id: "n2", text: "eggs"), as: Note.self, precondition: .ifNoneMatchAny)
        #expect(created.value == Note(id: "n2", text: "eggs"))
        #expect(created.status == 201)
        #expect(created.etag == #""1""#)
        #expect(created.lastModified == NotesServer.lastModified)
        #expect(created.header("content-type") == "application/json")
        #expect(created.header("ETAG") == #""1""#)
        #expect(created.headers.keys.contains { $0.lowercased() == "content-length" })

        let read = try await api.response(to: .get, "notes/n2", as: Note.self)
        #expect(read.status == 200)
        #expect(read.etag == #""1""#)
        let edited = try await api.response(
            to: .put, "notes/n2", json: Note(id: "n2", text: "ten eggs"), as: Note.self,
            precondition: .ifMatch(read.etag!))
        #expect(edited.status == 200)
        #expect(edited.etag == #""2""#)
    }

    @Test("create: a repeat after a lost answer is a 412 that means done; one note, not two")
    func createRepeatsHarmlessly() async throws {
        let note = Note(id: UUID().uuidString, text: "bread")
        notes.loseNextAnswer()
        let lost = await failure { try await self.guide.create(note, api: self.api) }
        #expect((lost as? HTTPLoadableError)?.isRetryable == true, "\(String(describing: lost))")
        try await guide.create(note, api: api)
        #expect(notes.notes == [note.id: note])
        #expect(writes(to: note.id) == ["PUT If-None-Match *", "PUT If-None-Match *"])
    }

    @Test("delete: a repeat after a lost answer is a 404 that means done")
    func deleteRepeatsHarmlessly() async throws {
        notes.put(Note(id: "n3", text: "jam"))
        notes.loseNextAnswer()
        #expect(await failure { try await self.guide.delete(noteID: "n3", api: self.api) } != nil)
        try await guide.delete(noteID: "n3", api: api)
        #expect(notes.notes.isEmpty)
        #expect(writes(to: "n3") == ["DELETE", "DELETE"])
    }

    @Test("edit: a repeat's 412 after a lost answer is the first attempt's success; someone else's edit is a conflict")
    func editRepeatsHarmlessly() async throws {
        notes.put(Note(id: "n4", text: "tea"))
        let edited = Note(id: "n4", text: "green tea")
        notes.loseNextAnswer()
        #expect(await failure { _ = try await self.guide.saveEdit(edited, of: #""1""#, api: self.api) } != nil)
        let repeated = try await guide.saveEdit(edited, of: #""1""#, api: api)
        #expect(repeated.value == edited)
        #expect(repeated.etag == #""2""#)

        notes.put(Note(id: "n4", text: "black tea"))  // another device
        let conflict = await failure {
            _ = try await self.guide.saveEdit(Note(id: "n4", text: "mint tea"), of: #""2""#, api: self.api)
        }
        let error = try #require(conflict as? HTTPLoadableError)
        #expect(error.isPreconditionFailed)
        #expect(error.isConflict)
        #expect(!error.isRetryable)
        #expect(notes.notes["n4"]?.text == "black tea")
    }

    @Test("a 409 with Retry-After is the server asking for a retry: retryable, with its delay, not a conflict")
    func conflictWithRetryAfterIsRetryable() async throws {
        let error = try #require(await failure { try await self.api.send(.post, "busy") } as? HTTPLoadableError)
        #expect(statusCode(of: error) == 409)
        #expect(error.isRetryable)
        #expect(error.retryAfter == .seconds(3))
        #expect(!error.isConflict)
        #expect(!error.isPreconditionFailed)
    }

    @Test("Basic: the sample's credentials on the wire; a new password is a sync of the credentials loadable")
    func basicSample() async throws {
        let keychain = GuideKeychain(HTTPBasicCredentials(user: "ana", password: "pässwörd 1"))
        let oldHeader = "Basic " + Data("ana:pässwörd 1".utf8).base64EncodedString()
        let accepted = Locked(oldHeader)
        let server = try LoopbackHTTPServer { request in
            request.header("Authorization") == accepted.withLock({ $0 })
                ? .json(#"{"id":"n1","text":"milk"}"#)
                : .status(401, headers: [.init("WWW-Authenticate", #"Basic realm="notes""#)])
        }
        defer { server.stop() }
        let (credentials, api) = guide.basicService(keychain: keychain, serverURL: server.url("/api"))
        _ = try await api.send(.get, "notes/n1", as: Note.self)

        // The password changes on the server and in the keychain: the 401 syncs the credentials
        // once, and the request goes again with the new password.
        let newHeader = "Basic " + Data("ana:new password".utf8).base64EncodedString()
        accepted.withLock { $0 = newHeader }
        keychain.save(HTTPBasicCredentials(user: "ana", password: "new password"))
        _ = try await api.send(.get, "notes/n1", as: Note.self)
        #expect(credentials.contents?.password == "new password")
        #expect(server.requests.map { $0.header("Authorization") } == [oldHeader, oldHeader, newHeader])

        // A wrong password stays wrong: the credentials' sync gives it back, so the request is not
        // sent again, and the 401 stands.
        keychain.save(HTTPBasicCredentials(user: "ana", password: "wrong"))
        credentials.setContents(HTTPBasicCredentials(user: "ana", password: "wrong"))
        let refused = await failure { _ = try await api.send(.get, "notes/n1", as: Note.self) }
        #expect(statusCode(of: refused) == 401)
        #expect((refused as? HTTPLoadableError)?.header("WWW-Authenticate") == #"Basic realm="notes""#)
        #expect(server.requests.count == 4)
        #expect(
            server.requests.last?.header("Authorization") == "Basic " + Data("ana:wrong".utf8).base64EncodedString())
    }

    @Test("another scheme: Authorization: Token <key>")
    func tokenSample() async throws {
        let server = try LoopbackHTTPServer { request in
            request.header("Authorization") == "Token k1" ? .status(204) : .status(401)
        }
        defer { server.stop() }
        let service = guide.tokenService(
            keychain: GuideKeychain(.init(user: "-", password: "-")), serverURL: server.url("/"))
        try await service.send(.delete, "notes/n1")
        #expect(server.requests.map { $0.header("Authorization") } == ["Token k1"])
    }
}
