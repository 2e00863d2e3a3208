import Foundation
import Loadable
import LoadableCaching
import LoadableHTTP
import LoadableSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `URLSession.shared`, reading a body stream as a transport does (to its end, once) and sending
/// what it read as the body: `LoopbackHTTPServer` takes bodies by `Content-Length` only, and
/// `URLSession` sends a stream chunked. A stream read before gives an empty body, as it does to
/// `URLSession`.
struct StreamReadingTransport: HTTPTransport {
    func send(_ request: URLRequest, maxBodySize: Int) async throws -> (HTTPURLResponse, Data) {
        var request = request
        if let stream = request.httpBodyStream {
            request.httpBody = Self.read(stream)
        }
        return try await URLSession.shared.send(request, maxBodySize: maxBodySize)
    }

    /// What is left to read of `stream`.
    private static func read(_ stream: InputStream) -> Data {
        if stream.streamStatus == .notOpen { stream.open() }
        defer { stream.close() }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while true {
            let count = stream.read(&buffer, maxLength: buffer.count)
            guard count > 0 else { return data }
            data.append(contentsOf: buffer[..<count])
        }
    }
}

/// A server of uploads behind bearer tokens `t1`, `t2`, …: `/token` hands out the next token, and
/// `/api/upload` refuses every token but the latest with a 401.
private final class UploadServer: Sendable {
    private let issued = Locked(0)
    let server: LoopbackHTTPServer

    init() throws {
        let issued = issued
        server = try LoopbackHTTPServer { request in
            if request.path == "/token" {
                return .json(
                    issued.withLock { count in
                        count += 1
                        return "\"t\(count)\""
                    })
            }
            let latest = issued.withLock { "Bearer t\($0)" }
            return request.header("Authorization") == latest
                ? .status(204) : .status(401, body: Data("expired".utf8))
        }
    }

    var tokenCount: Int { issued.withLock { $0 } }

    /// Hands out a token to someone else: the token loadable's is refused from then on.
    func issueAnotherToken() async throws {
        _ = try await URLSession.shared.send(
            URLRequest(url: server.url("/token")), maxBodySize: 1 << 10)
    }

    /// The uploads received, in order.
    var uploads: [LoopbackHTTPServer.Request] { server.requests.filter { $0.path == "/api/upload" } }
}

/// The 401 retry of `HTTPService.send(_:)` never sends a body stream that the refused request read.
@MainActor
@Suite("A body stream spent by a refused request is never sent again", .timeLimit(.minutes(3)))
struct SpentBodyStreamTests {
    /// A service of `backend` whose token loadable is `t1` already, and the token loadable.
    private func service(_ backend: UploadServer) async throws -> (HTTPService, HTTPLoadable<String>) {
        let token = HTTPLoadable<String>(request: URLRequest(url: backend.server.url("/token")))
        let api = HTTPService(
            baseURL: backend.server.url("/api"), transport: StreamReadingTransport(),
            authorization: .bearer(LoadableWaiter(token, timeout: .seconds(30), clock: ManualClock())))
        try await token.synced()
        return (api, token)
    }

    /// A PUT of `payload` to `/api/upload` as a body stream.
    private func upload(_ api: HTTPService, _ payload: String) -> URLRequest {
        var request = api.request(.put, "upload")
        request.httpBodyStream = InputStream(data: Data(payload.utf8))
        return request
    }

    @Test(
        "a 401 renews the token and throws BodyStreamSpentError; the next attempt with a new stream goes through"
    )
    func aStreamIsNotSentAgain() async throws {
        let backend = try UploadServer()
        let (api, token) = try await service(backend)
        try await backend.issueAnotherToken()
        let error = await failure { _ = try await api.send(upload(api, "payload")) }
        #expect(backend.uploads.map(\.body) == [Data("payload".utf8)], "no second request with an empty body")
        let spent = try #require(error as? HTTPService.BodyStreamSpentError)
        #expect(statusCode(of: spent.rejection) == 401)
        #expect(spent.isRetryable)
        #expect(spent.retryAfter == nil)
        #expect(backend.tokenCount == 3, "the token was renewed")
        #expect(token.contents == "t3")

        _ = try await api.send(upload(api, "payload"))
        #expect(backend.uploads.map(\.body) == [Data("payload".utf8), Data("payload".utf8)])
        #expect(backend.uploads.map { $0.header("Authorization") } == ["Bearer t1", "Bearer t3"])
    }

    @Test("a body in httpBody is sent again after a 401, as it was")
    func aDataBodyIsReplayed() async throws {
        let backend = try UploadServer()
        let (api, _) = try await service(backend)
        try await backend.issueAnotherToken()
        var request = api.request(.put, "upload")
        request.httpBody = Data("payload".utf8)
        _ = try await api.send(request)
        #expect(backend.uploads.map(\.body) == [Data("payload".utf8), Data("payload".utf8)])
        #expect(backend.uploads.map { $0.header("Authorization") } == ["Bearer t1", "Bearer t3"])
    }

    @Test("an outbox retries a spent stream with a new one")
    func anOutboxRetries() async throws {
        let backend = try UploadServer()
        let (api, _) = try await service(backend)
        try await backend.issueAnotherToken()
        let clock = ManualClock()
        let outbox = LoadableOutbox<String>(
            cache: InMemoryLoadableCache(), activity: ActivityMonitor(),
            retryPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(64), multiplier: 2),
            clock: clock
        ) { payload, _ in
            _ = try await api.send(upload(api, payload))
        }
        outbox.enqueue("payload")
        try await withRealTimeLimit("the outbox's first attempt") {
            await changes(of: outbox) { !outbox.isSending && (outbox.items.first?.attempts ?? 1) >= 1 }
        }
        try #require(outbox.items.first?.state == .pending, "kept for a retry")
        #expect(outbox.items.first?.lastError is HTTPService.BodyStreamSpentError)
        try await withRealTimeLimit("the outbox's wait for its retry") { await clock.waitForSleepers() }
        await clock.advance(by: .seconds(1))
        try await withRealTimeLimit("the outbox's retry") {
            await changes(of: outbox) { outbox.items.isEmpty }
        }
        #expect(backend.uploads.map(\.body) == [Data("payload".utf8), Data("payload".utf8)])
        #expect(backend.uploads.map { $0.header("Authorization") } == ["Bearer t1", "Bearer t3"])
    }
}
