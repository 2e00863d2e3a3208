import Foundation
import LoadableHTTP
import LoadableSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A backend on a `LoopbackHTTPServer` that hands out tokens `t1`, `t2`, … at `/token` and accepts
/// only the latest one (``revoke()`` makes it refuse that one too, until the next).
final class TokenBackend: Sendable {
    private struct State {
        var issued = 0
        var isRevoked = false
        var comments: [Comment] = []
    }

    private let state = Locked(State())
    let server: LoopbackHTTPServer

    init(extra: @escaping @Sendable (LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Response? = { _ in nil }) throws
    {
        let state = state
        server = try LoopbackHTTPServer { request in
            if request.path == "/token" {
                let token = state.withLock { state in
                    state.issued += 1
                    state.isRevoked = false
                    return "t\(state.issued)"
                }
                return .json("\"\(token)\"")
            }
            let isValid = state.withLock { !$0.isRevoked && request.header("Authorization") == "Bearer t\($0.issued)" }
            guard isValid else { return .status(401, body: Data("expired".utf8)) }
            if let answer = extra(request) { return answer }
            switch (request.method, request.path) {
            case ("POST", "/api/comments"):
                guard var comment = try? JSONDecoder().decode(Comment.self, from: request.body) else {
                    return .status(400)
                }
                let id = state.withLock { state in
                    comment.id = state.comments.count + 1
                    state.comments.append(comment)
                    return state.comments.count
                }
                return .json(#"{"id":\#(id),"text":"\#(comment.text)"}"#, status: 201)
            case ("GET", "/api/feed"): return .json(#"{"items":[1,2]}"#)
            default: return .status(204)
            }
        }
    }

    /// The server stops accepting the current token.
    func revoke() { state.withLock { $0.isRevoked = true } }

    var tokenRequests: Int { server.requests.count { $0.path == "/token" } }
}

/// `HTTPService` through `URLSession` against a real server on 127.0.0.1.
@MainActor
@Suite(.timeLimit(.minutes(5))) struct HTTPServiceServerTests {
    let clock = ManualClock()

    func service(_ backend: TokenBackend, token: HTTPLoadable<String>? = nil) -> (HTTPService, HTTPLoadable<String>) {
        let token = token ?? HTTPLoadable<String>(request: URLRequest(url: backend.server.url("/token")))
        let auth = HTTPAuthorization.bearer(LoadableWaiter(token, timeout: .seconds(30), clock: clock))
        return (
            HTTPService(baseURL: backend.server.url("/api"), authorization: auth, headers: ["X-Client": "t"]), token
        )
    }

    @Test("a JSON POST goes out with its headers and body; the answer is decoded")
    func aJSONPost() async throws {
        let backend = try TokenBackend()
        let (api, _) = service(backend)
        let comment = try await api.send(
            .post, "comments", json: Comment(text: "Hi"), as: Comment.self, idempotencyKey: "k-1")
        #expect(comment == Comment(id: 1, text: "Hi"))
        let request = try #require(backend.server.requests.last)
        #expect(request.method == "POST")
        #expect(request.target == "/api/comments")
        #expect(request.header("Content-Type") == "application/json")
        #expect(request.header("Authorization") == "Bearer t1")
        #expect(request.header("Idempotency-Key") == "k-1")
        #expect(request.header("X-Client") == "t")
        #expect(try JSONDecoder().decode(Comment.self, from: request.body) == Comment(text: "Hi"))
    }

    @Test("a 204 ends a Void send; a 503 comes back with its Retry-After, sent once")
    func voidAndA503() async throws {
        let backend = try TokenBackend { request in
            request.path == "/api/busy" ? .status(503, headers: [.init("Retry-After", "30")]) : nil
        }
        let (api, _) = service(backend)
        try await api.send(.delete, "posts/7/like")
        #expect(backend.server.requests.last?.method == "DELETE")
        let error = try #require(await #expect(throws: HTTPLoadableError.self) { try await api.send(.post, "busy") })
        #expect(error.retryAfter == .seconds(30))
        #expect(backend.server.requests.count { $0.path == "/api/busy" } == 1)
    }

    @Test("a body over maxBodySize and a server that is gone")
    func limitsAndTransport() async throws {
        let server = try LoopbackHTTPServer { _ in .stream(byteCount: 4 << 20, contentLength: false) }
        let api = HTTPService(baseURL: server.url("/"), maxBodySize: 1 << 16)
        let tooLarge = await failure { try await api.send(.post, "x") }
        guard case .tooLarge(65_536)? = tooLarge as? HTTPLoadableError else {
            Issue.record("expected .tooLarge"); return
        }
        let url = server.url("/")
        server.stop()
        await server.waitUntilNoConnectionIsOpen()
        let gone = HTTPService(baseURL: url)
        let refused = await failure { try await gone.send(.post, "x") }
        guard case .transport? = refused as? HTTPLoadableError else {
            Issue.record("expected .transport"); return
        }
    }

    @Test("a revoked token: loadables and sends rejected together cause one refresh, each retried once")
    func oneRefreshOverTheWire() async throws {
        let backend = try TokenBackend()
        let (api, _) = service(backend)
        let feeds = (0..<3).map { _ in api.loadable(Feed.self, "feed", clock: clock) }
        try await feeds[0].synced()
        #expect(backend.tokenRequests == 1)
        backend.revoke()
        for feed in feeds { feed.sync() }
        async let first = api.send(.post, "comments", json: Comment(text: "a"), as: Comment.self, idempotencyKey: "a")
        async let second = api.send(.post, "comments", json: Comment(text: "b"), as: Comment.self, idempotencyKey: "b")
        async let third: Void = api.send(.put, "posts/1/like")
        let comments = try await [first, second]
        try await third
        for feed in feeds { try await feed.doneSyncing() }
        #expect(Set(comments.map(\.text)) == ["a", "b"])
        #expect(feeds.allSatisfy { $0.contents == Feed(items: [1, 2]) })
        #expect(backend.tokenRequests == 2)
        let posts = backend.server.requests.filter { $0.path == "/api/comments" }
        // Each POST went out twice (t1 refused, t2 accepted), with the same key and body.
        #expect(posts.count == 4)
        for key in ["a", "b"] {
            let sent = posts.filter { $0.header("Idempotency-Key") == key }
            #expect(sent.map { $0.header("Authorization") } == ["Bearer t1", "Bearer t2"])
            #expect(Set(sent.map(\.body)).count == 1)
        }
    }

    @Test("a second 401 over the wire fails the send with it")
    func aSecond401() async throws {
        let backend = try TokenBackend { request in request.path == "/api/forbidden" ? .status(401) : nil }
        let (api, _) = service(backend)
        let error = await failure { try await api.send(.post, "forbidden") }
        #expect(statusCode(of: error) == 401)
        #expect(backend.tokenRequests == 2)
        #expect(backend.server.requests.count { $0.path == "/api/forbidden" } == 2)
    }

    @Test("cancelling a send whose answer the server holds closes the connection at once")
    func cancellingAHeldSend() async throws {
        let server = try LoopbackHTTPServer { _ in .hold }
        let api = HTTPService(baseURL: server.url("/api"))
        let send = Task { try await api.send(.post, "comments", json: Comment(text: "Hi"), as: Comment.self) }
        await server.waitForRequests(1)
        send.cancel()
        #expect(await send.result.failure is CancellationError)
        await server.waitUntilNoConnectionIsHeld()
    }

    @Test("cancelling an authorized write while the token loads and while its retry is out")
    func cancellingAtEachStep() async throws {
        let tokenGate = LoopbackHTTPServer.Gate()
        let retryGate = LoopbackHTTPServer.Gate()
        let backend = try TokenBackend { request in
            request.path == "/api/slow" ? .gated(retryGate, .status(204)) : nil
        }
        let gatedToken = HTTPLoadable<String>(
            request: URLRequest(url: backend.server.url("/token")),
            transport: GatedTransport(gate: tokenGate)
        )
        let (api, token) = service(backend, token: gatedToken)
        // 1. While the token loads.
        let waiting = Task { try await api.send(.post, "a") }
        await settle { token.loadableState == .syncing }
        waiting.cancel()
        #expect(await waiting.result.failure is CancellationError)
        tokenGate.open()
        try await token.doneSyncing()
        #expect(backend.server.requests.count { $0.path != "/token" } == 0)
        // 2. While the retry after a refresh is out (the first request's answer, a 401, came).
        backend.revoke()
        let retried = Task { try await api.send(.post, "slow") }
        await backend.server.waitForRequests(4)
        #expect(backend.tokenRequests == 2)
        retried.cancel()
        #expect(await retried.result.failure is CancellationError)
        await backend.server.waitUntilNoConnectionIsHeld()
        retryGate.open()
    }
}

/// `URLSession.shared`, once a gate opens: a token endpoint that answers when the test says.
struct GatedTransport: HTTPTransport {
    let gate: LoopbackHTTPServer.Gate

    func send(_ request: URLRequest, maxBodySize: Int) async throws -> (HTTPURLResponse, Data) {
        while !gate.isOpen {
            try Task.checkCancellation()
            await Task.yield()
        }
        return try await URLSession.shared.send(request, maxBodySize: maxBodySize)
    }
}

/// A base URL that is not http or https, and a body limit of 0, stop the program at init.
@Suite("HTTPService's configuration is checked at init")
struct HTTPServiceConfigurationExitTests {
    @Test(
        "a base URL that is not http or https (or has no host) stops the program, naming it",
        arguments: ["ftp://example.test/api", "file:///tmp/api", "http:api"])
    func aBaseURLThatIsNotHTTP(url: String) async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) { [url] in
            _ = HTTPService(baseURL: URL(string: url)!)
        }
        #expect(
            bytes(
                result?.standardErrorContent ?? [],
                contain: "HTTPService: baseURL must be an http or https URL with a host, got \(url)"))
    }

    @Test("a maxBodySize of 0 stops the program")
    func aMaxBodySizeOfZero() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = HTTPService(baseURL: URL(string: "https://example.test")!, maxBodySize: 0)
        }
        #expect(bytes(result?.standardErrorContent ?? [], contain: "HTTPService: maxBodySize must be > 0, got 0"))
    }
}

/// The error `work` throws; `nil` when it returns.
@MainActor
func failure(_ work: @MainActor () async throws -> Void) async -> (any Error)? {
    do {
        try await work()
        return nil
    } catch {
        return error
    }
}
