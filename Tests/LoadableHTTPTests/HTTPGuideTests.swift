import Foundation
import LoadableHTTP
import LoadableTesting
import Testing

/// The samples of `Docs/HTTP.md` (and the HTTP sample of `Docs/Testing.md`), compiled and run against a `LoopbackHTTPServer`.
enum Guide {
    struct Item: Decodable, Sendable, Equatable {
        let id: Int
    }

    struct Feed: Decodable, Sendable, Equatable {
        let items: [Item]
    }

    struct Profile: Decodable, Sendable, Equatable {
        let name: String
    }

    struct AccessToken: Decodable, Sendable {
        let value: String
    }

    static func message(for error: (any Error)?) -> String? {
        switch error as? HTTPLoadableError {
        case .status(code: 404, _, _)?: "Not found"
        case .status(let code, _, _)?: "The server answered \(code)"
        case .transport?: "You seem to be offline"
        case .decoding?, .tooLarge?: "Something went wrong"
        case nil: error.map { "\($0)" }
        }
    }

    struct ScriptedTransport: HTTPTransport {
        let answer: @Sendable (URLRequest) -> (status: Int, body: Data)

        func send(_ request: URLRequest, maxBodySize: Int) async throws -> (HTTPURLResponse, Data) {
            let (status, body) = answer(request)
            guard body.count <= maxBodySize else { throw HTTPLoadableError.tooLarge(maxBodySize: maxBodySize) }
            let response = HTTPURLResponse(
                url: request.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: [:])!
            return (response, body)
        }
    }
}

@MainActor
@Suite(.timeLimit(.minutes(5))) struct HTTPGuideTests {
    typealias Feed = Guide.Feed

    @Test func aFeedAndItsErrors() async throws {
        let server = try LoopbackHTTPServer { request in
            request.path == "/feed" ? .json(#"{"items":[{"id":1}]}"#) : .status(404)
        }
        let feed = HTTPLoadable<Feed>(request: URLRequest(url: server.url("/feed")))
        try await feed.synced()
        #expect(feed.contents == Feed(items: [.init(id: 1)]))
        let missing = HTTPLoadable<Feed>(request: URLRequest(url: server.url("/gone")))
        try? await missing.synced()
        #expect(Guide.message(for: missing.error) == "Not found")
        #expect(
            Guide.message(for: HTTPLoadableError.status(code: 500, headers: [:], bodyPrefix: Data()))
                == "The server answered 500")
        #expect(Guide.message(for: HTTPLoadableError.transport(URLError(.timedOut))) == "You seem to be offline")
        #expect(Guide.message(for: HTTPLoadableError.tooLarge(maxBodySize: 1)) == "Something went wrong")
        #expect(Guide.message(for: nil) == nil)
    }

    @Test func aBearerTokenSharedByTwoLoadables() async throws {
        let server = try LoopbackHTTPServer { request in
            switch request.path {
            case "/token": return .json(#"{"value":"abc"}"#)
            case "/me": return .json(#"{"name":"Ann"}"#)
            default: return .json(#"{"items":[]}"#)
            }
        }
        let token = HTTPLoadable<Guide.AccessToken>(request: URLRequest(url: server.url("/token")))
        let auth = HTTPAuthorization.bearer(LoadableWaiter(token, timeout: .seconds(30))) { $0.value }

        let profile = HTTPLoadable<Guide.Profile>(request: URLRequest(url: server.url("/me")), authorization: auth)
        let feed = HTTPLoadable<Feed>(request: URLRequest(url: server.url("/feed")), authorization: auth)
        profile.sync()
        feed.sync()
        try await profile.doneSyncing()
        try await feed.doneSyncing()
        #expect(profile.contents == Guide.Profile(name: "Ann"))
        #expect(feed.contents == Feed(items: []))
        let requests = server.requests
        #expect(requests.filter { $0.path == "/token" }.count == 1)
        #expect(requests.filter { $0.path != "/token" }.allSatisfy { $0.header("Authorization") == "Bearer abc" })
    }

    @Test func yourOwnTransport() async throws {
        let data = Data(#"{"items":[{"id":2}]}"#.utf8)
        let feed = HTTPLoadable<Feed>(
            request: URLRequest(url: URL(string: "https://api.example.com/feed")!),
            transport: Guide.ScriptedTransport { _ in (200, data) }
        )
        try await feed.synced()
        #expect(feed.contents == Feed(items: [.init(id: 2)]))
        let small = HTTPLoadable<Feed>(
            request: URLRequest(url: URL(string: "https://api.example.com/feed")!),
            transport: Guide.ScriptedTransport { _ in (200, data) },
            maxBodySize: 4
        )
        try? await small.synced()
        #expect(small.error.map { "\($0)" } == "response body over maxBodySize (4 bytes)")
    }

    @Test func revalidates() async throws {
        let server = try LoopbackHTTPServer { request in
            request.header("If-None-Match") == "\"v1\""
                ? .status(304)
                : .json(#"{"items":[]}"#, headers: [.init("ETag", "\"v1\"")])
        }
        let feed = HTTPLoadable<Feed>(request: URLRequest(url: server.url("/feed")))
        try await feed.synced(forceSync: true)
        try await feed.synced(forceSync: true)
        #expect(server.requests.map { $0.header("If-None-Match") } == [nil, "\"v1\""])
    }

    /// The sample of `Docs/Testing.md`.
    @Test func cancelsAHeldRequest() async throws {
        let server = try LoopbackHTTPServer { _ in .hold }
        let feed = HTTPLoadable<Feed>(request: URLRequest(url: server.url("/feed")))
        feed.sync()
        await server.waitForRequests(1)
        feed.cancelSync()
        await server.waitUntilNoConnectionIsHeld()  // the client closed its connection
        #expect(feed.loadableState == .idle)
    }
}
