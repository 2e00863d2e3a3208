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

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A task list's contents, as a server keeps them.
private struct TaskList: Codable, Sendable, Equatable {
    var title: String
}

/// A server of one task list with an `ETag` that changes with every edit: it answers its current
/// `ETag` in `If-None-Match` with a 304, and lets the test edit the list as another device would.
private final class TaskListServer: Sendable {
    private struct State {
        var list = TaskList(title: "milk")
        var version = 1
    }

    private let state = Locked(State())

    var etag: String { state.withLock { "\"v\($0.version)\"" } }

    /// Another device's edit: a new title and a new `ETag`.
    func edit(title: String) {
        state.withLock { state in
            state.list.title = title
            state.version += 1
        }
    }

    func handle(_ request: LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Response {
        state.withLock { state in
            let etag = "\"v\(state.version)\""
            if request.header("If-None-Match") == etag { return .status(304, headers: [.init("ETag", etag)]) }
            let body = try! JSONEncoder().encode(state.list)
            return .status(
                200, headers: [.init("ETag", etag), .init("Content-Type", "application/json")], body: body)
        }
    }
}

/// An edit of the list's title, kept in an outbox.
private struct TitleEdit: Codable, Sendable, Equatable {
    var title: String
}

/// A local write to the base contents of a list that holds "milk".
enum LocalWrite: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case setContents, updateContents, mutateWithoutReconcile, outboxItemJoins

    var testDescription: String { rawValue }
}

/// The validators of an `HTTPLoadable` describe the server's contents, never a write of the app's
/// own: after `setContents`, `updateContents`, a committed `mutate` without `reconcile` or an
/// outbox item joining, the `ETag` is dropped in memory and in the persisted entry, so that the
/// next sync is unconditional and no `304` confirms contents the server never had. A `304`
/// touches the persisted entry instead of writing the contents again.
@MainActor
@Suite(.timeLimit(.minutes(5))) final class HTTPValidatorTests {
    let session: URLSession
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("http-validators-\(UUID())")

    init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 300
        session = URLSession(configuration: configuration)
    }

    deinit {
        session.invalidateAndCancel()
        try? FileManager.default.removeItem(at: directory)
    }

    private func makeList(_ server: LoopbackHTTPServer) -> HTTPLoadable<TaskList> {
        HTTPLoadable<TaskList>(request: URLRequest(url: server.url("/list")), transport: session)
    }

    @Test(
        "a local write drops the validators: the next sync is unconditional, the saved entry has none",
        arguments: LocalWrite.allCases)
    func localWriteDropsValidators(write: LocalWrite) async throws {
        let tasks = TaskListServer()
        let server = try LoopbackHTTPServer { tasks.handle($0) }
        let cache: any LoadableCache = InMemoryLoadableCache()
        let list = makeList(server)
        let persistence = list.persist(in: cache, key: "list")
        try await list.synced(forceSync: true)
        await persistence.saved()
        #expect(try await cache.load(key: "list")?.metadata == ["ETag": #""v1""#])
        #expect(list.etag == #""v1""#)

        let outbox = LoadableOutbox<TitleEdit>(cache: InMemoryLoadableCache(), clock: ManualClock()) { _, _ in }
        outbox.show(on: list) { list, edit in
            list.title = edit.title
            return true
        }
        switch write {
        case .setContents: list.setContents(TaskList(title: "local"))
        case .updateContents: list.updateContents { $0.title = "local" }
        case .mutateWithoutReconcile:
            try await list.mutate {
                $0.title = "local"
            } commit: {
            }
        case .outboxItemJoins:
            outbox.enqueue(TitleEdit(title: "local"))
            await settle { outbox.items.isEmpty }
        }
        #expect(list.contents?.title == "local")
        #expect(list.etag == nil, "the server never had the contents shown")
        await persistence.saved()
        let saved = try #require(try await cache.load(key: "list"))
        #expect(saved.metadata == [:], "the saved entry keeps no validator of contents the server may not have")
        #expect(try JSONDecoder().decode(TaskList.self, from: saved.data).title == "local")

        try await list.synced(forceSync: true)
        #expect(server.requests.last?.header("If-None-Match") == nil)
        #expect(list.contents?.title == "milk", "the server's contents, not a 304 confirming the local write")
        #expect(list.etag == #""v1""#)
        await persistence.saved()
        #expect(try await cache.load(key: "list")?.metadata == ["ETag": #""v1""#])
        server.stop()
    }

    @Test("a commit reconciled with the server's answer keeps the validators; a failed commit keeps them")
    func reconciledAndFailedCommitsKeepValidators() async throws {
        let tasks = TaskListServer()
        let server = try LoopbackHTTPServer { tasks.handle($0) }
        let list = makeList(server)
        try await list.synced(forceSync: true)

        _ = try await list.mutate(
            optimistic: { $0.title = "shown" }, commit: { TaskList(title: "milk") },
            reconcile: { list, answer in list = answer })
        await #expect(throws: TestError.self) {
            try await list.mutate {
                $0.title = "refused"
            } commit: {
                throw TestError()
            }
        }
        #expect(list.contents?.title == "milk")
        #expect(list.etag == #""v1""#)
        try await list.synced(forceSync: true)
        #expect(server.requests.map { $0.header("If-None-Match") } == [nil, #""v1""#])
        server.stop()
    }

    @Test("a 304 to a request sent before a local write keeps no validator: the next sync is unconditional")
    func notModifiedAfterALocalWriteKeepsNoValidators() async throws {
        let transport = ScriptedTransport()
        let list = HTTPLoadable<TaskList>(
            request: URLRequest(url: URL(string: "http://127.0.0.1:9/list")!), transport: transport)
        list.sync()
        await transport.waitForRequests(1)
        transport.answer(0, headers: ["ETag": #""v1""#], body: #"{"title":"milk"}"#)
        try await list.doneSyncing()

        list.sync()
        await transport.waitForRequests(2)
        #expect(transport.requests[1].value(forHTTPHeaderField: "If-None-Match") == #""v1""#)
        list.setContents(TaskList(title: "local"))
        #expect(list.etag == nil)
        transport.answer(1, status: 304, headers: ["ETag": #""v1""#])
        try await list.doneSyncing()
        #expect(list.loadableState == .didSyncSuccessfully)
        #expect(list.etag == nil, "the 304 confirmed contents the local write has replaced")

        list.sync()
        await transport.waitForRequests(3)
        #expect(transport.requests[2].value(forHTTPHeaderField: "If-None-Match") == nil)
        transport.answer(2, headers: ["ETag": #""v1""#], body: #"{"title":"milk"}"#)
        try await list.doneSyncing()
        #expect(list.contents?.title == "milk")
    }

    /// The trial's "server wins" episode: an edit the server refused joins the list through an
    /// outbox whose send returned normally; every later launch must show the server's title, not
    /// the refused one confirmed by a 304.
    @Test("a refused edit joined after a refresh is never confirmed by a 304 after a relaunch")
    func serverWinsEpisode() async throws {
        let tasks = TaskListServer()
        let server = try LoopbackHTTPServer { tasks.handle($0) }
        let cache = FileLoadableCache(directory: directory)
        let activity = ActivityMonitor()

        func launch() -> (HTTPLoadable<TaskList>, LoadablePersistence, LoadableOutbox<TitleEdit>) {
            let list = makeList(server)
            let persistence = list.persist(in: cache.scoped("lists/"), key: "tasks")
            // The app's policy on a conflict is "server wins": the send returns as if applied.
            let outbox = LoadableOutbox<TitleEdit>(
                cache: cache.scoped("outbox/"), activity: activity, clock: ManualClock()
            ) { _, _ in }
            outbox.show(on: list) { list, edit in
                list.title = edit.title
                return true
            }
            return (list, persistence, outbox)
        }

        var (list, persistence, outbox): (HTTPLoadable<TaskList>?, LoadablePersistence?, LoadableOutbox<TitleEdit>?) =
            launch()
        try await list?.synced(forceSync: true)
        activity.connectivity = .offline
        outbox?.enqueue(TitleEdit(title: "Phone's milk"))
        tasks.edit(title: "Laptop's milk")
        try await list?.synced(forceSync: true)
        #expect(list?.contents?.title == "Phone's milk", "the pending edit shows over the refresh")
        activity.connectivity = .online
        await settle { outbox?.items.isEmpty == true }
        #expect(list?.contents?.title == "Phone's milk")
        await persistence?.saved()
        await outbox?.saved()

        (list, persistence, outbox) = (nil, nil, nil)
        (list, persistence, outbox) = launch()
        await persistence?.restored()
        try await list?.synced(forceSync: true)
        #expect(server.requests.last?.header("If-None-Match") == nil)
        #expect(list?.contents?.title == "Laptop's milk")
        server.stop()
    }

    @Test("a 304 after a relaunch touches the entry file in place: a new date, the same data, no new file")
    func notModifiedTouchesTheFile() async throws {
        let tasks = TaskListServer()
        let server = try LoopbackHTTPServer { tasks.handle($0) }
        let cache = FileLoadableCache(directory: directory)
        let now = Locked(Date(timeIntervalSinceReferenceDate: 1_000))
        let clock: @Sendable () -> Date = { now.withLock { $0 } }
        var first: HTTPLoadable<TaskList>? = makeList(server)
        let persistence = try #require(first).persist(in: cache, key: "tasks", now: clock)
        try await first?.synced(forceSync: true)
        await persistence.saved()
        first = nil
        let file = cache.entriesDirectory.appendingPathComponent(FileLoadableCache.fileName(forKey: "tasks")).path
        let before = try #require(Self.fileIdentity(file))

        now.withLock { $0 = Date(timeIntervalSinceReferenceDate: 5_000) }
        let second = makeList(server)
        let secondPersistence = second.persist(in: cache, key: "tasks", now: clock)
        await secondPersistence.restored()
        try await second.synced(forceSync: true)
        await secondPersistence.saved()
        #expect(server.requests.last?.header("If-None-Match") == #""v1""#)
        let entry = try #require(try await cache.load(key: "tasks"))
        #expect(entry.savedAt == Date(timeIntervalSinceReferenceDate: 5_000))
        #expect(entry.metadata == ["ETag": #""v1""#])
        #expect(try JSONDecoder().decode(TaskList.self, from: entry.data) == TaskList(title: "milk"))
        #expect(Self.fileIdentity(file) == before, "the same file, written in place")
        server.stop()
    }

    /// The file's inode: a save writes a new file and renames it over the old one.
    private static func fileIdentity(_ path: String) -> UInt64? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return UInt64(info.st_ino)
    }
}
