import Foundation
import Loadable
import LoadableHTTP
import LoadableSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A redirect to another origin (scheme, host or port) never carries `Authorization`,
/// `Proxy-Authorization` or `Cookie`; a redirect within the origin keeps them.
@MainActor
@Suite("A redirect to another origin never carries credentials", .timeLimit(.minutes(3)))
struct RedirectCredentialTests {
    /// The headers a redirected request must not take to another origin.
    static let credentials = ["Authorization", "Proxy-Authorization", "Cookie"]

    /// A server that answers `/token` with `"t1"`, redirects every path that `redirects` names,
    /// and answers any other path with `{"items":[1]}`.
    private func server(
        redirects: @escaping @Sendable (LoopbackHTTPServer.Request) -> (Int, String)? = { _ in nil }
    ) throws -> LoopbackHTTPServer {
        try LoopbackHTTPServer { request in
            if request.path == "/token" { return .json(#""t1""#) }
            if let (status, location) = redirects(request) {
                return .status(status, headers: [.init("Location", location)])
            }
            return .json(#"{"items":[1]}"#)
        }
    }

    @Test("an HTTPLoadable with a bearer token: the other origin gets no Authorization")
    func aLoadableWithABearerToken() async throws {
        let other = try server()
        let origin = try server { $0.path == "/feed" ? (302, other.url("/feed").absoluteString) : nil }
        let token = HTTPLoadable<String>(request: URLRequest(url: origin.url("/token")))
        let auth = HTTPAuthorization.bearer(LoadableWaiter(token, timeout: .seconds(30), clock: ManualClock()))
        let feed = HTTPLoadable<Feed>(request: URLRequest(url: origin.url("/feed")), authorization: auth)
        try await feed.synced()
        #expect(feed.contents == Feed(items: [1]))
        #expect(origin.requests.last?.header("Authorization") == "Bearer t1")
        #expect(other.requests.map(\.path) == ["/feed"])
        #expect(other.requests.first?.header("Authorization") == nil)
    }

    @Test("HTTPService.send: the other origin gets no Authorization; the idempotency key goes on")
    func aServiceSend() async throws {
        let other = try server()
        let origin = try server { $0.path == "/api/comments" ? (307, other.url("/comments").absoluteString) : nil }
        let token = HTTPLoadable<String>(request: URLRequest(url: origin.url("/token")))
        let api = HTTPService(
            baseURL: origin.url("/api"),
            authorization: .bearer(LoadableWaiter(token, timeout: .seconds(30), clock: ManualClock())))
        try await api.send(.post, "comments", json: Comment(text: "Hi"), idempotencyKey: "k-1")
        let landed = try #require(other.requests.first)
        #expect(landed.method == "POST")
        #expect(landed.header("Authorization") == nil)
        #expect(landed.header("Idempotency-Key") == "k-1")
        #expect(origin.requests.last?.header("Authorization") == "Bearer t1")
    }

    @Test(
        "a request's own Authorization, Proxy-Authorization and Cookie stay behind",
        arguments: [301, 302, 303, 307, 308])
    func explicitCredentials(status: Int) async throws {
        let other = try server()
        let origin = try server { $0.path == "/start" ? (status, other.url("/landing").absoluteString) : nil }
        let (response, _) = try await URLSession.shared.send(credentialed(origin.url("/start")), maxBodySize: 1 << 20)
        #expect(response.statusCode == 200)
        let landed = try #require(other.requests.first)
        for name in Self.credentials { #expect(landed.header(name) == nil, "\(name)") }
        #expect(landed.header("X-Client") == "t", "other headers go on")
    }

    @Test("127.0.0.1 to localhost on the same port is another origin")
    func anotherHostOnTheSamePort() async throws {
        let origin = try server { request in
            request.path == "/start"
                ? (302, "http://localhost:\(request.header("Host")?.split(separator: ":").last ?? "")/landing") : nil
        }
        let (response, _) = try await URLSession.shared.send(credentialed(origin.url("/start")), maxBodySize: 1 << 20)
        #expect(response.statusCode == 200)
        let landed = try #require(origin.requests.last)
        #expect(landed.path == "/landing")
        #expect(landed.header("Host")?.hasPrefix("localhost:") == true)
        for name in Self.credentials { #expect(landed.header(name) == nil, "\(name)") }
    }

    @Test("once stripped, credentials stay stripped when a later hop comes back to the first origin")
    func strippedForLaterHops() async throws {
        let first = Locked<URL?>(nil)
        let other = try server { request in
            request.path == "/hop" ? (302, first.withLock { $0 }!.appendingPathComponent("end").absoluteString) : nil
        }
        let origin = try server { $0.path == "/start" ? (302, other.url("/hop").absoluteString) : nil }
        first.withLock { $0 = origin.url("/") }
        let (response, _) = try await URLSession.shared.send(credentialed(origin.url("/start")), maxBodySize: 1 << 20)
        #expect(response.statusCode == 200)
        #expect(origin.requests.map(\.path) == ["/start", "/end"])
        let end = try #require(origin.requests.last)
        for name in Self.credentials { #expect(end.header(name) == nil, "\(name)") }
    }

    @Test("a redirect within the origin keeps the credentials", arguments: [301, 302, 307, 308])
    func sameOrigin(status: Int) async throws {
        let origin = try server { request in
            switch request.path {
            case "/start": (status, "/middle")
            case "/middle": (status, "http://\(request.header("Host") ?? "")/end")
            default: nil
            }
        }
        let (response, _) = try await URLSession.shared.send(credentialed(origin.url("/start")), maxBodySize: 1 << 20)
        #expect(response.statusCode == 200)
        #expect(origin.requests.map(\.path) == ["/start", "/middle", "/end"])
        for request in origin.requests {
            #expect(request.header("Authorization") == "Basic dXNlcjpwYXNz")
            #expect(request.header("Proxy-Authorization") == "Basic cHJveHk6cGFzcw==")
            #expect(request.header("Cookie") == "session=1")
        }
    }

    @Test("an HTTPService send redirected within the origin keeps its bearer token")
    func aServiceSendWithinTheOrigin() async throws {
        let origin = try server { $0.path == "/api/comments" ? (307, "/api/comments/new") : nil }
        let token = HTTPLoadable<String>(request: URLRequest(url: origin.url("/token")))
        let api = HTTPService(
            baseURL: origin.url("/api"),
            authorization: .bearer(LoadableWaiter(token, timeout: .seconds(30), clock: ManualClock())))
        try await api.send(.post, "comments", json: Comment(text: "Hi"))
        #expect(origin.requests.last?.path == "/api/comments/new")
        #expect(origin.requests.last?.header("Authorization") == "Bearer t1")
    }

    /// A GET of `url` with every credential header, and one that is not a credential.
    private func credentialed(_ url: URL) -> URLRequest {
        var request = URLRequest(url: url)
        request.setValue("Basic dXNlcjpwYXNz", forHTTPHeaderField: "Authorization")
        request.setValue("Basic cHJveHk6cGFzcw==", forHTTPHeaderField: "Proxy-Authorization")
        request.setValue("session=1", forHTTPHeaderField: "Cookie")
        request.setValue("t", forHTTPHeaderField: "X-Client")
        return request
    }
}
