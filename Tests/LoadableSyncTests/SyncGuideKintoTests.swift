import Foundation
import LoadableSupport
import LoadableSync
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The Kinto sample of `Docs/Sync.md`, verbatim (`GuideSamplesTests` checks it), run against a
// `LoopbackHTTPServer` that answers the first pull as Kinto would: the credentials go out as Basic
// authentication, and the records of the page show. `KintoRemoteTests` test the remote against a
// real Kinto.

/// Where the app keeps the user's password.
final class Keychain: Sendable {
    private let stored: Locked<HTTPBasicCredentials>

    init(_ credentials: HTTPBasicCredentials) {
        stored = Locked(credentials)
    }

    func credentials() async throws -> HTTPBasicCredentials { stored.withLock { $0 } }
}

/// The to-dos of a Kinto server (its `/v1` URL), as the user signed in.
@MainActor
func makeKintoTodos(url: URL, keychain: Keychain, cache: any LoadableCache) -> SyncedCollection<KintoRemote<Todo>> {
    let credentials = AsyncLoadable<HTTPBasicCredentials> { try await keychain.credentials() }
    let kinto = HTTPService(baseURL: url, authorization: .basic(LoadableWaiter(credentials, timeout: .seconds(30))))
    let remote = KintoRemote<Todo>(service: kinto, bucket: "todo-app", collection: "todos")
    return SyncedCollection(remote: remote, cache: cache.scoped("todos/"), conflicts: .fieldwise)
}

@MainActor
@Suite(.timeLimit(.minutes(5))) struct SyncGuideKintoTests {
    @Test("the Kinto sample: the user's credentials go out as Basic authentication, and the pulled records show")
    func kintoSample() async throws {
        let server = try LoopbackHTTPServer { request in
            guard request.path == "/v1/buckets/todo-app/collections/todos/records" else { return .status(404) }
            return .json(
                #"{"data":[{"id":"milk","title":"Buy milk","done":false,"last_modified":1700000000000}]}"#,
                headers: [.init("ETag", #""1700000000000""#)])
        }
        defer { server.stop() }
        let keychain = Keychain(HTTPBasicCredentials(user: "ana", password: "s3cret"))
        let todos = makeKintoTodos(url: server.url("/v1"), keychain: keychain, cache: InMemoryLoadableCache())
        try await withRealTimeLimit("the first pull") { try await todos.synced() }
        #expect(todos.contents.map { Array($0) } == [Todo(id: "milk", title: "Buy milk")])
        let basic = "Basic " + Data("ana:s3cret".utf8).base64EncodedString()
        #expect(server.requests.map { $0.header("Authorization") } == [basic])
        #expect(server.requests.first?.path == "/v1/buckets/todo-app/collections/todos/records")
    }
}
