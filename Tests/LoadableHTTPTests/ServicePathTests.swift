import Foundation
import LoadableHTTP
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A path of `HTTPService.request(_:_:query:)` never leaves the base URL's path: its `.` and `..`
/// segments are resolved inside it, never climbing above it.
@Suite("A service's path never leaves the base URL's path", .timeLimit(.minutes(3)))
struct ServicePathTests {
    /// A path as the caller writes it, and the path of the URL it gives, percent-encoded.
    struct Case: CustomTestStringConvertible, Sendable {
        let path: String
        let expected: String

        init(_ path: String, _ expected: String) {
            self.path = path
            self.expected = expected
        }

        var testDescription: String { "\(path.debugDescription) → \(expected)" }
    }

    static let cases = [
        Case("posts", "/v1/posts"),
        Case("/posts/7", "/v1/posts/7"),
        Case("../admin", "/v1/admin"),
        Case("a/../../admin", "/v1/admin"),
        Case("/../../../etc/passwd", "/v1/etc/passwd"),
        Case("a/../b", "/v1/b"),
        Case("a/./b", "/v1/a/b"),
        Case("a/b/..", "/v1/a"),
        Case("a/b/../", "/v1/a/"),
        Case("./", "/v1"),
        Case(".", "/v1"),
        Case("..", "/v1"),
        Case("../", "/v1"),
        Case("", "/v1"),
        Case("/", "/v1"),
        Case("posts/", "/v1/posts/"),
        Case("a//b", "/v1/a//b"),
        Case("...", "/v1/..."),
        Case("a/..b/.c", "/v1/a/..b/.c"),
        Case("%2E%2E/admin", "/v1/%252E%252E/admin"),
        Case("..%2Fadmin", "/v1/..%252Fadmin"),
        Case("tags/a b", "/v1/tags/a%20b"),
    ]

    @Test(
        "dot segments resolve inside the base path, with or without a trailing / on the base",
        arguments: ["https://api.example.com/v1", "https://api.example.com/v1/"], cases)
    func resolved(base: String, case: Case) throws {
        let api = HTTPService(baseURL: URL(string: base)!)
        let url = try #require(api.request(.get, `case`.path, query: [URLQueryItem(name: "q", value: "1")]).url)
        let components = try #require(URLComponents(url: url, resolvingAgainstBaseURL: false))
        #expect(components.percentEncodedPath == `case`.expected)
        #expect(components.host == "api.example.com")
        #expect(components.percentEncodedQuery == "q=1")
    }

    @Test("a base URL without a path: the path stays at the root")
    func atTheRoot() {
        let api = HTTPService(baseURL: URL(string: "https://api.example.com")!)
        #expect(api.request("../../admin").url?.absoluteString == "https://api.example.com/admin")
        #expect(api.request("..").url?.absoluteString == "https://api.example.com")
    }

    @Test("a request for ../admin reaches the server under the base path")
    @MainActor
    func overTheWire() async throws {
        let server = try LoopbackHTTPServer { _ in .status(204) }
        let api = HTTPService(baseURL: server.url("/v1"))
        try await api.send(.get, "../admin")
        try await api.send(.get, "a/../../b/./c")
        #expect(server.requests.map(\.target) == ["/v1/admin", "/v1/b/c"])
    }
}
