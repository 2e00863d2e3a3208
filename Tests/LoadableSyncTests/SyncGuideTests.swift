import Foundation
import LoadableSupport
import LoadableSync
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The samples of `Docs/Sync.md`, verbatim (`GuideSamplesTests` checks it), compiled and run: the
// first list and the in-process server against each other, the policies' table as a truth table,
// the review screen, a relaunch on a file cache, and the REST remote against a `LoopbackHTTPServer`
// that serves the API it was written for. The Kinto sample is in `SyncGuideKintoTests.swift`.

// MARK: - A first synced list

struct Todo: Identifiable, Codable, Sendable, Equatable {
    var id: String
    var title: String
    var done = false
}

/// The to-do screen's model: the list, pulled again every minute by a syncer.
@MainActor
final class TodoList<Remote: SyncRemote<Todo>> {
    let todos: SyncedCollection<Remote>
    let syncer: LoadableSyncer

    init(remote: Remote, cache: any LoadableCache, clock: any Clock<Duration> = ContinuousClock()) {
        todos = SyncedCollection(remote: remote, cache: cache.scoped("todos/"), conflicts: .fieldwise, clock: clock)
        syncer = LoadableSyncer(todos, timeoutPolicy: BackoffTimeoutPolicy(period: .seconds(60)), clock: clock)
        todos.sync()  // the first pull; the syncer pulls again every minute, and retries a failed pull
    }

    /// The rows, in the order the to-dos first appeared.
    var rows: [Todo] { Array(todos.contents ?? RecordSet()) }

    func add(_ title: String) {
        todos.insert(Todo(id: UUID().uuidString, title: title))  // shown at once, pushed when it can be
    }

    func toggle(_ id: Todo.ID) {
        todos.update(id) { $0.done.toggle() }
    }

    func remove(_ id: Todo.ID) {
        todos.delete(id)
    }

    /// The line under the list.
    var footer: String {
        let status = todos.status
        if status.pendingCount > 0 { return "Not sent yet: \(status.pendingCount)" }
        if todos.error != nil { return "Couldn't sync: showing what this device has" }
        return status.hasSynced ? "Up to date" : "Not synced yet"
    }
}

// MARK: - Live views

extension TodoList {
    /// The open to-dos, by title: kept current as to-dos change, here and on other devices.
    func openTodos() -> RecordView<Todo> {
        todos.view(where: { !$0.done }, sortedBy: { $0.title < $1.title })
    }

    /// One to-do, for its detail screen: the list's own copy.
    func todo(_ id: Todo.ID) -> RecordLoadable<Todo> {
        todos.record(id)
    }
}

// MARK: - Conflicts

/// A to-do ticked on either device stays ticked, the server's title wins, and a delete on either
/// side wins.
let doneWins = ConflictPolicy<Todo>.merge { _, local, remote in
    guard let local, var merged = remote else { return nil }
    merged.done = merged.done || local.done
    return merged
}

/// The review screen of a list made with `conflicts: .manual`: both sides of each conflict.
@MainActor
struct ConflictReview<Remote: SyncRemote<Todo>> {
    let todos: SyncedCollection<Remote>

    /// One line per conflict, oldest first.
    var lines: [String] {
        todos.conflicts.map { conflict in
            let mine = conflict.local?.title ?? "deleted"
            let theirs = conflict.remote?.title ?? "deleted"
            return "\(mine) (this device) or \(theirs) (the server)"
        }
    }

    func keepMine(_ conflict: SyncConflict<Todo>) {
        todos.resolve(conflict.id, with: conflict.local)  // pushed on the server's version; nil: the delete
    }

    func takeTheirs(_ conflict: SyncConflict<Todo>) {
        todos.resolve(conflict.id, with: conflict.remote)  // the server has it: nothing is pushed
    }

    /// Keeps the server's to-do, and this device's as a new one.
    func keepBoth(_ conflict: SyncConflict<Todo>) {
        todos.resolve(conflict.id, with: conflict.remote)
        if var mine = conflict.local {
            mine.id = UUID().uuidString
            todos.insert(mine)
        }
    }
}

// MARK: - Persistence and relaunch

/// The launch: the list as the last launch left it, in the first frame, then a pull of what
/// changed since.
@MainActor
func openTodos<Remote: SyncRemote<Todo>>(remote: Remote, folder: URL) async -> SyncedCollection<Remote> {
    let cache = FileLoadableCache(directory: folder)
    let todos = SyncedCollection(remote: remote, cache: cache.scoped("todos/"), conflicts: .fieldwise)
    await todos.restored()  // records, cursor, unsent changes and conflicts of the last launch
    todos.sync()  // from the saved cursor: only what changed since
    return todos
}

/// Logout: nothing of this user stays on the device, and nothing of theirs is sent.
@MainActor
func logOut<Remote: SyncRemote<Todo>>(of todos: SyncedCollection<Remote>) async {
    todos.removeAll()
    await todos.saved()
}

// MARK: - A remote for a REST API

/// The to-dos of the app's own REST API: `GET /todos?limit=<n>&updated_since=<t>` lists the
/// to-dos written after `t`, oldest first, the deleted ones as tombstones (`410 Gone` when the
/// server no longer keeps tombstones that old); `PUT` and `DELETE /todos/<id>` honour `If-Match`
/// and `If-None-Match: *`.
struct TodosRemote: SyncRemote {
    let api: HTTPService
    var pageSize = 100

    /// A to-do as the API sends it: its fields, the server's `updated_at` (a counter that every
    /// write moves on: the version and the cursor), and `deleted` for a tombstone.
    struct Row: Decodable {
        var id: String
        var updatedAt: Int
        var todo: Todo?

        enum Keys: String, CodingKey {
            case id, deleted
            case updatedAt = "updated_at"
        }

        init(from decoder: any Decoder) throws {
            let row = try decoder.container(keyedBy: Keys.self)
            id = try row.decode(String.self, forKey: .id)
            updatedAt = try row.decode(Int.self, forKey: .updatedAt)
            let deleted = try row.decodeIfPresent(Bool.self, forKey: .deleted) ?? false
            todo = try deleted ? nil : Todo(from: decoder)
        }

        /// The to-do with its version; `nil` for a tombstone.
        var remote: RemoteRecord<Todo>? { todo.map { RemoteRecord(record: $0, version: String(updatedAt)) } }
    }

    func pull(since cursor: String?) async throws -> SyncPage<Todo> {
        var query = [URLQueryItem(name: "limit", value: String(pageSize))]
        if let cursor { query.append(URLQueryItem(name: "updated_since", value: cursor)) }
        do {
            let (_, body) = try await api.send(api.request("todos", query: query))
            let rows = try api.decoder.decode([Row].self, from: body)
            return SyncPage(
                changed: rows.compactMap(\.remote), deleted: rows.filter { $0.todo == nil }.map(\.id),
                cursor: rows.last.map { String($0.updatedAt) } ?? cursor ?? "0", hasMore: rows.count == pageSize)
        } catch HTTPLoadableError.status(code: 410, _, _) {
            throw SyncRemoteError.cursorExpired  // the collection pulls everything again
        }
    }

    func push(_ change: RecordChange<Todo>, idempotencyKey: String) async throws -> PushResult<Todo> {
        let path = "todos/\(change.id)"
        // A create only where no to-do is; an edit or a delete only on the version it was made on.
        let precondition = change.base.map { HTTPPrecondition.ifMatch("\"\($0)\"") } ?? .ifNoneMatchAny
        do {
            guard let todo = change.record else {
                try await api.send(.delete, path, idempotencyKey: idempotencyKey, precondition: precondition)
                return .deleted
            }
            let saved = try await api.send(
                .put, path, json: todo, as: Row.self, idempotencyKey: idempotencyKey, precondition: precondition)
            return saved.remote.map { .applied($0) } ?? .deleted
        } catch HTTPLoadableError.status(code: 404, _, _) where change.record == nil {
            return .deleted  // gone already
        } catch let error as HTTPLoadableError where error.isPreconditionFailed {
            // Someone else wrote it since: the server's side, for the collection's policy.
            do {
                return .conflict(remote: try await api.send(.get, path, as: Row.self).remote)
            } catch HTTPLoadableError.status(code: 404, _, _) {
                return .conflict(remote: nil)
            }
        }
    }
}

// MARK: - Testing

/// The server of the tests, in memory: one version counter for every write, the last change of
/// each to-do (a delete leaves a tombstone), and a switch that takes it offline.
actor InMemoryTodos: SyncRemote {
    private var rows: [Todo.ID: (version: Int, todo: Todo?)] = [:]
    private var lastVersion = 0
    private var isOffline = false

    /// Another device's write.
    func put(_ todo: Todo) {
        lastVersion += 1
        rows[todo.id] = (lastVersion, todo)
    }

    /// Another device's delete.
    func remove(_ id: Todo.ID) {
        lastVersion += 1
        rows[id] = (lastVersion, nil)
    }

    func setOffline(_ offline: Bool) { isOffline = offline }

    func todo(_ id: Todo.ID) -> Todo? { rows[id]?.todo }

    func pull(since cursor: String?) throws -> SyncPage<Todo> {
        if isOffline { throw URLError(.notConnectedToInternet) }
        let since = cursor.flatMap { Int($0) } ?? 0
        let ids = rows.filter { $0.value.version > since }.sorted { $0.value.version < $1.value.version }.map(\.key)
        return SyncPage(
            changed: ids.compactMap { remote($0) }, deleted: cursor == nil ? [] : ids.filter { rows[$0]?.todo == nil },
            cursor: String(lastVersion), hasMore: false)
    }

    func push(_ change: RecordChange<Todo>, idempotencyKey: String) throws -> PushResult<Todo> {
        if isOffline { throw URLError(.notConnectedToInternet) }
        let current = remote(change.id)
        guard change.base == current?.version else { return .conflict(remote: current) }  // written since
        lastVersion += 1
        rows[change.id] = (lastVersion, change.record)
        return remote(change.id).map { .applied($0) } ?? .deleted
    }

    private func remote(_ id: Todo.ID) -> RemoteRecord<Todo>? {
        rows[id].flatMap { row in row.todo.map { RemoteRecord(record: $0, version: String(row.version)) } }
    }
}

extension SyncedCollection {
    /// Returns once no local change waits to be sent (conflicts held aside): the collection tells
    /// its observers each time that count changes. Call it when the pushes can succeed.
    func pushed() async {
        for await _ in states() where status.pendingCount == 0 { return }
    }
}

// MARK: - Tests of what the guide says

/// A to-do server of the REST API `TodosRemote` is written for, on 127.0.0.1: one counter for
/// every write (`updated_at`, and the `ETag`), tombstones, `410` for a cursor older than the
/// tombstones it keeps, `If-Match` and `If-None-Match: *` checked; it can lose the answer to the
/// next write after applying it, and lets the test write as another device would.
final class TodosAPIServer: Sendable {
    private struct State {
        var rows: [String: (updatedAt: Int, todo: Todo?)] = [:]
        var counter = 0
        /// Tombstones at or before this were dropped: a cursor before it gets a `410`.
        var forgottenUpTo = 0
        var losesNextAnswer = false
    }

    private let state = Locked(State())
    let server: LoopbackHTTPServer

    init() throws {
        let state = state
        server = try LoopbackHTTPServer { request in Self.handle(request, state) }
    }

    /// Another device's write.
    func put(_ todo: Todo) {
        state.withLock { state in
            state.counter += 1
            state.rows[todo.id] = (state.counter, todo)
        }
    }

    /// Another device's delete.
    func remove(_ id: String) {
        state.withLock { state in
            state.counter += 1
            state.rows[id] = (state.counter, nil)
        }
    }

    /// Drops every tombstone: a pull from an older cursor gets a `410`.
    func forgetTombstones() {
        state.withLock { state in
            state.rows = state.rows.filter { $0.value.todo != nil }
            state.forgottenUpTo = state.counter
        }
    }

    /// The next write is applied, and its answer lost.
    func loseNextAnswer() { state.withLock { $0.losesNextAnswer = true } }

    var todos: [String: Todo] { state.withLock { $0.rows.compactMapValues(\.todo) } }

    /// Each request as `METHOD target [If-Match …|If-None-Match …]`, in order.
    var log: [String] {
        server.requests.map { request in
            let condition =
                request.header("If-Match").map { " If-Match \($0)" }
                ?? request.header("If-None-Match").map { " If-None-Match \($0)" } ?? ""
            return "\(request.method) \(request.target)\(condition)"
        }
    }

    /// A service on the server's `/api`, through an ephemeral session of its own whose requests may
    /// wait 300 s (a busy machine); invalidate the session when done.
    func makeService() -> (session: URLSession, api: HTTPService) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 300
        let session = URLSession(configuration: configuration)
        return (session, HTTPService(baseURL: server.url("/api"), transport: session))
    }

    private typealias Response = LoopbackHTTPServer.Response

    private static func handle(_ request: LoopbackHTTPServer.Request, _ state: Locked<State>) -> Response {
        if request.path == "/api/todos", request.method == "GET" {
            let query = URLComponents(string: request.target)?.queryItems ?? []
            let limit = query.first { $0.name == "limit" }?.value.flatMap { Int($0) } ?? 1_000
            let since = query.first { $0.name == "updated_since" }?.value.flatMap { Int($0) }
            return state.withLock { state in
                if let since, since < state.forgottenUpTo { return .status(410) }
                let rows = state.rows
                    .filter { $0.value.updatedAt > since ?? 0 && (since != nil || $0.value.todo != nil) }
                    .sorted { $0.value.updatedAt < $1.value.updatedAt }
                    .prefix(limit)
                    .map { row(id: $0.key, updatedAt: $0.value.updatedAt, todo: $0.value.todo) }
                // Before an answer that gets lost, a fresh connection for each request: on Linux, a
                // write whose answer is lost on a kept-alive connection fails only after this server's
                // 60 s idle timeout (a second connection opens, and no request comes on it).
                let close: [LoopbackHTTPServer.Header] = state.losesNextAnswer ? [.init("Connection", "close")] : []
                return .json("[" + rows.joined(separator: ",") + "]", headers: close)
            }
        }
        guard request.path.hasPrefix("/api/todos/") else { return .status(404) }
        let id = String(request.path.dropFirst("/api/todos/".count))
        return state.withLock { state -> Response in
            let current = state.rows[id].flatMap { row in row.todo.map { (row.updatedAt, $0) } }
            let currentTag = current.map { "\"\($0.0)\"" }
            if request.method == "GET" {
                guard let current, let currentTag else { return .status(404) }
                return .json(row(id: id, updatedAt: current.0, todo: current.1), headers: [.init("ETag", currentTag)])
            }
            if let ifMatch = request.header("If-Match"), ifMatch != currentTag { return .status(412) }
            if request.header("If-None-Match") == "*", current != nil { return .status(412) }
            let loses = state.losesNextAnswer
            state.losesNextAnswer = false
            let response: Response
            switch request.method {
            case "PUT":
                guard let todo = try? JSONDecoder().decode(Todo.self, from: request.body), todo.id == id else {
                    return .status(400)
                }
                state.counter += 1
                state.rows[id] = (state.counter, todo)
                response = .json(
                    row(id: id, updatedAt: state.counter, todo: todo), status: current == nil ? 201 : 200,
                    headers: [.init("ETag", "\"\(state.counter)\"")])
            case "DELETE":
                guard current != nil else { return .status(404) }
                state.counter += 1
                state.rows[id] = (state.counter, nil)
                response = .status(204)
            default:
                return .status(405)
            }
            return loses ? .raw(Data()) : response
        }
    }

    /// A row of the API: the to-do's fields and `updated_at`, or a tombstone.
    private static func row(id: String, updatedAt: Int, todo: Todo?) -> String {
        guard let todo else { return #"{"id":"\#(id)","deleted":true,"updated_at":\#(updatedAt)}"# }
        return #"{"id":"\#(id)","title":"\#(todo.title)","done":\#(todo.done),"updated_at":\#(updatedAt)}"#
    }
}

/// A remote whose first push is refused for good (an error that is not retried).
struct RefusingFirstPush: SyncRemote {
    struct Refusal: Error, CustomStringConvertible {
        var description: String { "refused" }
    }

    let server: InMemoryTodos
    private let refused = Locked(false)

    init(server: InMemoryTodos) {
        self.server = server
    }

    func pull(since cursor: String?) async throws -> SyncPage<Todo> {
        try await server.pull(since: cursor)
    }

    func push(_ change: RecordChange<Todo>, idempotencyKey: String) async throws -> PushResult<Todo> {
        let isFirst = refused.withLock { refused in
            defer { refused = true }
            return !refused
        }
        if isFirst { throw Refusal() }
        return try await server.push(change, idempotencyKey: idempotencyKey)
    }
}

/// The policies of the guide's table, by name.
enum GuidePolicy: String, CaseIterable, Sendable {
    case serverWins, clientWins, fieldwise, mergeDoneWins, manual

    var policy: ConflictPolicy<Todo> {
        switch self {
        case .serverWins: .serverWins
        case .clientWins: .clientWins
        case .fieldwise: .fieldwise
        case .mergeDoneWins: doneWins
        case .manual: .manual
        }
    }
}

/// What the two devices did to one to-do (`"Buy milk"`, not done) while apart.
enum GuideConflict: String, CaseIterable, Sendable {
    /// Here: renamed `"Buy 2 milk"` and ticked; there: renamed `"Buy oat milk"`.
    case editEdit
    /// Here: renamed and ticked; there: deleted.
    case localEditRemoteDelete
    /// Here: deleted; there: renamed.
    case localDeleteRemoteEdit
    /// Deleted on both sides.
    case deleteDelete
    /// The same rename on both sides.
    case sameEdit
}

/// How a conflict ends, on the server and on the device alike (`held`: only on the device).
enum GuideOutcome: Equatable, CustomTestStringConvertible {
    case record(Todo)
    case gone
    /// A `.manual` conflict: the device shows `shown` and keeps the conflict; the server is left.
    case held(shown: Todo?)

    var testDescription: String {
        switch self {
        case .record(let todo): "\(todo.title)\(todo.done ? " (done)" : "")"
        case .gone: "gone"
        case .held(let shown): "held, showing \(shown.map { $0.title } ?? "nothing")"
        }
    }
}

@MainActor
@Suite(.timeLimit(.minutes(5))) struct SyncGuideTests {
    static let original = Todo(id: "milk", title: "Buy milk")
    static let mine = Todo(id: "milk", title: "Buy 2 milk", done: true)
    static let theirs = Todo(id: "milk", title: "Buy oat milk")

    /// The guide's table, and its two rows in prose (both deleted; the same change).
    static func outcome(of conflict: GuideConflict, under policy: GuidePolicy) -> GuideOutcome {
        switch (conflict, policy) {
        case (.editEdit, .serverWins): .record(theirs)
        case (.editEdit, .clientWins): .record(mine)
        case (.editEdit, .fieldwise), (.editEdit, .mergeDoneWins):
            .record(Todo(id: "milk", title: "Buy oat milk", done: true))
        case (.editEdit, .manual), (.localEditRemoteDelete, .manual): .held(shown: mine)
        case (.localEditRemoteDelete, .clientWins): .record(mine)
        case (.localEditRemoteDelete, _): .gone
        case (.localDeleteRemoteEdit, .serverWins), (.localDeleteRemoteEdit, .fieldwise): .record(theirs)
        case (.localDeleteRemoteEdit, .clientWins), (.localDeleteRemoteEdit, .mergeDoneWins): .gone
        case (.localDeleteRemoteEdit, .manual): .held(shown: nil)
        case (.deleteDelete, _): .gone
        case (.sameEdit, _): .record(theirs)
        }
    }

    // The guide's test of the first list.
    @Test @MainActor func aTickMadeOfflineMeetsARenameAndBothStay() async throws {
        let server = InMemoryTodos()
        await server.put(Todo(id: "milk", title: "Buy milk"))
        let clock = ManualClock()
        let phone = TodoList(remote: server, cache: InMemoryLoadableCache(), clock: clock)
        try await phone.todos.synced()

        await server.setOffline(true)
        phone.toggle("milk")  // ticked in the train: shown at once; its push fails
        await clock.waitForSleepers(count: 2)  // the syncer's next pull, and the push's retry
        await server.put(Todo(id: "milk", title: "Buy oat milk"))  // meanwhile, the laptop renames it
        await server.setOffline(false)
        await clock.advance(by: .seconds(1))  // the retry: a conflict, settled field by field
        await phone.todos.pushed()
        #expect(phone.rows == [Todo(id: "milk", title: "Buy oat milk", done: true)])
        #expect(await server.todo("milk") == Todo(id: "milk", title: "Buy oat milk", done: true))

        await server.put(Todo(id: "bread", title: "Buy bread"))  // the laptop adds one
        await clock.advance(by: .seconds(60))  // the syncer's next pull
        try await phone.todos.doneSyncing()
        #expect(phone.rows.map(\.title) == ["Buy oat milk", "Buy bread"])
        #expect(phone.footer == "Up to date")
    }

    @Test(
        "each policy settles each kind of conflict as the guide's table says, found by a pull or by the push",
        arguments: GuideConflict.allCases, GuidePolicy.allCases)
    func policyTable(conflict: GuideConflict, policy: GuidePolicy) async throws {
        for foundByPull in [true, false] {
            let server = InMemoryTodos()
            await server.put(Self.original)
            let activity = ActivityMonitor()
            let todos = SyncedCollection(
                remote: server, cache: InMemoryLoadableCache(), conflicts: policy.policy, activity: activity,
                clock: ManualClock())
            try await todos.synced()
            activity.connectivity = .offline  // the change waits here while the other device writes
            switch conflict {
            case .editEdit, .localEditRemoteDelete: todos.update("milk") { $0 = Self.mine }
            case .localDeleteRemoteEdit, .deleteDelete: todos.delete("milk")
            case .sameEdit: todos.update("milk") { $0 = Self.theirs }
            }
            switch conflict {
            case .editEdit, .localDeleteRemoteEdit, .sameEdit: await server.put(Self.theirs)
            case .localEditRemoteDelete, .deleteDelete: await server.remove("milk")
            }
            if foundByPull { try await todos.synced(forceSync: true) }
            activity.connectivity = .online
            await todos.pushed()
            try await todos.synced(forceSync: true)

            let expected = Self.outcome(of: conflict, under: policy)
            let context = Comment(rawValue: foundByPull ? "found by the pull" : "found by the push")
            switch expected {
            case .record(let todo):
                #expect(await server.todo("milk") == todo, context)
                #expect(todos.contents?[id: "milk"] == todo, context)
                #expect(todos.conflicts.isEmpty, context)
            case .gone:
                #expect(await server.todo("milk") == nil, context)
                #expect(todos.contents?[id: "milk"] == nil, context)
                #expect(todos.conflicts.isEmpty, context)
            case .held(let shown):
                #expect(todos.contents?[id: "milk"] == shown, context)
                #expect(todos.conflicts.map(\.id) == ["milk"], context)
                #expect(todos.conflicts.first?.local == shown, context)
                #expect(todos.conflicts.first?.base == Self.original, context)
                let remote = conflict == .localEditRemoteDelete ? nil : Self.theirs
                #expect(todos.conflicts.first?.remote == remote, context)
                #expect(todos.status.conflictCount == 1, context)
                #expect(todos.status.pendingCount == 0, context)
                #expect(await server.todo("milk") == remote, "nothing was pushed; \(context)")
            }
        }
    }

    @Test("the first list: writes show at once, before the first pull too; the footer follows the status")
    func firstList() async throws {
        let server = InMemoryTodos()
        await server.put(Todo(id: "milk", title: "Buy milk"))
        await server.setOffline(true)
        let clock = ManualClock()
        let list = TodoList(remote: server, cache: InMemoryLoadableCache(), clock: clock)
        #expect(list.footer == "Not synced yet")
        list.add("Buy bread")  // before any pull, offline
        #expect(list.rows.map(\.title) == ["Buy bread"])
        #expect(list.footer == "Not sent yet: 1")
        try? await list.todos.doneSyncing()
        #expect(list.todos.error != nil)

        await server.setOffline(false)
        list.todos.sync()
        try await list.todos.doneSyncing()
        await clock.advance(by: .seconds(60))  // the push's retries fall due
        await list.todos.pushed()
        #expect(list.rows.map(\.title) == ["Buy bread", "Buy milk"], "new records go at the end")
        #expect(list.footer == "Up to date")

        let bread = try #require(list.rows.first { $0.title == "Buy bread" })
        list.toggle(bread.id)
        list.remove("milk")
        #expect(list.rows == [Todo(id: bread.id, title: "Buy bread", done: true)])
        await list.todos.pushed()
        #expect(await server.todo(bread.id)?.done == true)
        #expect(await server.todo("milk") == nil)
        #expect(list.todos.status.lastSyncedAt != nil)
    }

    @Test(
        "live views: the open to-dos stay sorted as to-dos change here and on the server; the detail is the list's copy"
    )
    func liveViews() async throws {
        let server = InMemoryTodos()
        await server.put(Todo(id: "milk", title: "Buy milk"))
        await server.put(Todo(id: "eggs", title: "Buy eggs", done: true))
        let clock = ManualClock()
        let list = TodoList(remote: server, cache: InMemoryLoadableCache(), clock: clock)
        let open = list.openTodos()
        let milk = list.todo("milk")
        try await list.todos.doneSyncing()
        #expect(open.contents?.map(\.title) == ["Buy milk"])
        #expect(milk.contents?.title == "Buy milk")

        var redraws = 0
        let observation = open.observe { _ in redraws += 1 }
        list.add("Buy bread")
        list.toggle("eggs")
        #expect(open.contents?.map(\.title) == ["Buy bread", "Buy eggs", "Buy milk"])
        await server.put(Todo(id: "milk", title: "Buy oat milk"))
        list.todos.sync()
        try await list.todos.doneSyncing()
        #expect(open.contents?.map(\.title) == ["Buy bread", "Buy eggs", "Buy oat milk"])
        #expect(milk.contents?.title == "Buy oat milk")
        #expect(redraws == 3)
        list.todos.sync()  // nothing new: the list is not redrawn
        try await list.todos.doneSyncing()
        #expect(redraws == 3)
        observation.cancel()
    }

    @Test("a change the server refused: onError is told, it stays shown, and a pull of a newer version settles it")
    func refusedChange() async throws {
        let server = InMemoryTodos()
        await server.put(Todo(id: "milk", title: "Buy milk"))
        let remote = RefusingFirstPush(server: server)
        let todos = SyncedCollection(
            remote: remote, cache: InMemoryLoadableCache(), conflicts: .fieldwise, activity: ActivityMonitor(),
            clock: ManualClock())
        var errors: [String] = []
        todos.onError = { errors.append("\($0)") }
        try await todos.synced()
        todos.update("milk") { $0.done = true }
        #expect(await settle { !errors.isEmpty })
        #expect(errors == ["refused"])
        #expect(todos.status.pendingCount == 0)
        #expect(todos.conflicts.map(\.isRefused) == [true], "listed for the app to settle")
        #expect(todos.contents?[id: "milk"]?.done == true, "a refused change stays shown")

        await server.put(Todo(id: "milk", title: "Buy oat milk"))
        try await todos.synced(forceSync: true)
        await todos.pushed()
        #expect(await server.todo("milk") == Todo(id: "milk", title: "Buy oat milk", done: true))
        #expect(todos.contents?[id: "milk"] == Todo(id: "milk", title: "Buy oat milk", done: true))
        #expect(todos.conflicts.isEmpty)
    }

    @Test("the review screen: keep mine pushes mine; take theirs pushes nothing; keep both adds mine as a new to-do")
    func reviewScreen() async throws {
        let server = InMemoryTodos()
        for id in ["a", "b", "c"] { await server.put(Todo(id: id, title: id)) }
        let activity = ActivityMonitor()
        let todos = SyncedCollection(
            remote: server, cache: InMemoryLoadableCache(), conflicts: .manual, activity: activity,
            clock: ManualClock())
        try await todos.synced()
        activity.connectivity = .offline
        for id in ["a", "b", "c"] {
            todos.update(id) { $0.title = "\(id) mine" }
            await server.put(Todo(id: id, title: "\(id) theirs"))
        }
        try await todos.synced(forceSync: true)
        activity.connectivity = .online
        let review = ConflictReview(todos: todos)
        #expect(
            review.lines == [
                "a mine (this device) or a theirs (the server)", "b mine (this device) or b theirs (the server)",
                "c mine (this device) or c theirs (the server)",
            ])
        #expect(todos.status.pendingCount == 0, "a held conflict pushes nothing")
        todos.update("a") { $0.title = "a mine, edited" }
        #expect(todos.conflicts.first?.local?.title == "a mine, edited", "an edit changes the local side")
        await server.put(Todo(id: "b", title: "b theirs, edited"))
        try await todos.synced(forceSync: true)
        #expect(todos.conflicts.dropFirst().first?.remote?.title == "b theirs, edited", "a pull, the remote side")
        #expect(todos.conflicts.count == 3)

        review.keepMine(todos.conflicts[0])
        review.takeTheirs(todos.conflicts[0])
        review.keepBoth(todos.conflicts[0])
        #expect(todos.conflicts.isEmpty)
        await todos.pushed()
        #expect(await server.todo("a")?.title == "a mine, edited")
        #expect(await server.todo("b")?.title == "b theirs, edited")
        #expect(await server.todo("c")?.title == "c theirs")
        #expect(todos.contents?.map(\.title) == ["a mine, edited", "b theirs, edited", "c theirs", "c mine"])
        try await todos.synced(forceSync: true)
        #expect(todos.conflicts.isEmpty, "a resolved conflict never comes back")
        #expect(todos.contents?.count == 4)
    }

    @Test("a relaunch shows the records and the unsent changes before the first pull; logout leaves nothing")
    func relaunchAndLogout() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-guide-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let server = InMemoryTodos()
        await server.put(Todo(id: "milk", title: "Buy milk"))
        /// A launch of the test's own, on the guide's cache and key: offline, on a manual clock.
        func offlineLaunch() -> SyncedCollection<InMemoryTodos> {
            SyncedCollection(
                remote: server, cache: FileLoadableCache(directory: folder).scoped("todos/"), conflicts: .fieldwise,
                activity: ActivityMonitor(connectivity: .offline), clock: ManualClock())
        }
        weak var released: SyncedCollection<InMemoryTodos>?
        do {
            let todos = offlineLaunch()
            released = todos
            try await todos.synced()
            todos.update("milk") { $0.done = true }
            await todos.saved()
        }
        #expect(await settle { released == nil }, "the app is killed")
        await server.put(Todo(id: "bread", title: "Buy bread"))

        do {
            let todos = await openTodos(remote: server, folder: folder)
            released = todos
            #expect(todos.contents.map { Array($0) } == [Todo(id: "milk", title: "Buy milk", done: true)])
            #expect(todos.status.hasSynced)
            #expect(todos.status.pendingCount == 1)
            try await todos.doneSyncing()
            await todos.pushed()
            #expect(todos.contents?.map(\.title) == ["Buy milk", "Buy bread"])
            #expect(await server.todo("milk")?.done == true)

            await logOut(of: todos)
            #expect(todos.contents == nil)
            #expect(!todos.status.hasSynced)
        }
        #expect(await settle { released == nil })

        let next = offlineLaunch()
        await next.restored()
        #expect(next.contents == nil)
        #expect(!next.status.hasSynced)
        #expect(next.status.pendingCount == 0)
    }
}

@MainActor
@Suite(.timeLimit(.minutes(5))) final class SyncGuideRESTTests {
    let api: TodosAPIServer
    let session: URLSession
    let service: HTTPService

    init() throws {
        api = try TodosAPIServer()
        (session, service) = api.makeService()
    }

    deinit {
        session.invalidateAndCancel()
        api.server.stop()
    }

    func makeTodos(pageSize: Int = 100, clock: ManualClock = ManualClock()) -> SyncedCollection<TodosRemote> {
        SyncedCollection(
            remote: TodosRemote(api: service, pageSize: pageSize), cache: InMemoryLoadableCache(),
            conflicts: .fieldwise, activity: ActivityMonitor(), clock: clock)
    }

    @Test("the REST remote: pulls page by page, pushes with preconditions, and meets a conflict")
    func pullsPushesAndMeetsAConflict() async throws {
        api.put(Todo(id: "a", title: "A"))
        api.put(Todo(id: "b", title: "B"))
        api.put(Todo(id: "c", title: "C"))
        let todos = makeTodos(pageSize: 2)
        try await todos.synced()
        #expect(todos.contents?.map(\.title) == ["A", "B", "C"])
        #expect(api.log == ["GET /api/todos?limit=2", "GET /api/todos?limit=2&updated_since=2"])

        todos.insert(Todo(id: "d", title: "D"))
        await todos.pushed()
        todos.update("a") { $0.done = true }
        await todos.pushed()
        todos.delete("b")
        await todos.pushed()
        #expect(
            api.todos == [
                "a": Todo(id: "a", title: "A", done: true), "c": Todo(id: "c", title: "C"),
                "d": Todo(id: "d", title: "D"),
            ])
        #expect(
            api.log.dropFirst(2) == [
                "PUT /api/todos/d If-None-Match *", #"PUT /api/todos/a If-Match "1""#,
                #"DELETE /api/todos/b If-Match "2""#,
            ])

        // Another device renames c; this one ticks it, on the version it had: a 412, then the
        // server's side, merged field by field, and pushed on the server's version.
        api.put(Todo(id: "c", title: "C renamed"))
        todos.update("c") { $0.done = true }
        await todos.pushed()
        #expect(api.todos["c"] == Todo(id: "c", title: "C renamed", done: true))
        #expect(todos.contents?[id: "c"] == Todo(id: "c", title: "C renamed", done: true))
        #expect(
            api.log.dropFirst(5) == [
                #"PUT /api/todos/c If-Match "3""#, "GET /api/todos/c", #"PUT /api/todos/c If-Match "7""#,
            ])

        try await todos.synced(forceSync: true)
        #expect(api.log.last == "GET /api/todos?limit=2&updated_since=8")
        #expect(todos.contents?.map(\.title) == ["A", "C renamed", "D"])
        #expect(todos.conflicts.isEmpty)
    }

    @Test("the REST remote: a 410 pulls everything again; what the server lacks goes, unsent changes stay")
    func expiredCursor() async throws {
        api.put(Todo(id: "a", title: "A"))
        api.put(Todo(id: "b", title: "B"))
        let todos = makeTodos()
        try await todos.synced()
        api.remove("b")
        api.forgetTombstones()
        todos.insert(Todo(id: "n", title: "N"))
        try await todos.synced(forceSync: true)
        await todos.pushed()
        #expect(todos.error == nil)
        #expect(Set(todos.contents?.ids ?? []) == ["a", "n"])
        #expect(
            api.log.filter { $0.hasPrefix("GET") }.suffix(2) == [
                "GET /api/todos?limit=100&updated_since=2", "GET /api/todos?limit=100",
            ])
    }

    @Test("the REST remote: a write whose answer was lost is sent again; its 412 finds its own write, no conflict")
    func lostAnswer() async throws {
        api.put(Todo(id: "a", title: "A"))
        let clock = ManualClock()
        let todos = makeTodos(clock: clock)
        api.loseNextAnswer()
        try await todos.synced()
        todos.update("a") { $0.title = "A2" }
        await clock.waitForSleepers()  // the retry of the push whose answer was lost
        await clock.advance(by: .seconds(1))
        await todos.pushed()
        #expect(api.todos["a"] == Todo(id: "a", title: "A2"))
        #expect(todos.conflicts.isEmpty)
        #expect(todos.contents?[id: "a"] == Todo(id: "a", title: "A2"))
        #expect(
            api.log.dropFirst() == [
                #"PUT /api/todos/a If-Match "1""#, #"PUT /api/todos/a If-Match "1""#, "GET /api/todos/a",
            ])
    }
}
