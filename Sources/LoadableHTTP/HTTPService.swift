public import Foundation
import Loadable
import LoadableSupport

#if canImport(FoundationNetworking)
    public import FoundationNetworking
#endif

/// One backend: what every request to it shares (base URL, transport, authorization, JSON coders,
/// body limit, headers), and every kind of request: loadables for reads, sends for writes.
///
/// ```swift
/// let api = HTTPService(baseURL: URL(string: "https://api.example.com/v1")!, authorization: auth)
///
/// let feed = api.loadable(Feed.self, "feed")  // an HTTPLoadable<Feed> of GET /v1/feed
/// let post = try await api.send(.post, "posts/7/comments", json: NewComment(text: "Hi"), as: Comment.self)
/// try await api.send(.delete, "posts/7/like")  // any 2xx, 204 included
/// ```
///
/// A send follows ``HTTPLoadable``'s rules: a 2xx body is decoded with ``decoder`` off the main
/// actor; any other status throws ``HTTPLoadableError/status(code:headers:bodyPrefix:)`` (with the
/// server's `Retry-After` and ``HTTPLoadableError/isRetryable``), a failed transfer
/// ``HTTPLoadableError/transport(_:)``, a body over ``maxBodySize``
/// ``HTTPLoadableError/tooLarge(maxBodySize:)``, and a body that does not decode
/// ``HTTPLoadableError/decoding(_:)``. Cancelling the task that sends cancels the request (without
/// ever blocking, see ``HTTPTransport``) and throws `CancellationError`.
///
/// With an ``authorization``, sends and the service's loadables share the token: each request
/// waits for it, and any number of concurrent `401`s, from loadables and sends together, cause one
/// refresh; each rejected request is sent once more with another token, and a second `401` throws
/// (see ``HTTPAuthorization``). Nothing else is retried inside a send: a write may not be
/// idempotent, so a `503` comes back to the caller with its `Retry-After`, and retries belong to
/// the caller (or an outbox). An `idempotencyKey` goes out as `Idempotency-Key`, the same on the
/// 401 retry.
///
/// A `Sendable` value: make one per backend and share it. Sends can be called from any isolation
/// (an app calls them from the main actor); the authorization's work runs on the main actor, the
/// transfer, the encoding and the decoding off it. ``loadable(_:_:query:clock:)`` is isolated to
/// the main actor, as loadables are.
public struct HTTPService: Sendable {
    /// Where paths are resolved: a relative path goes under this URL's path.
    public let baseURL: URL
    /// What sends the requests.
    public let transport: any HTTPTransport
    /// How requests are authorized, if they are; shared with the service's loadables.
    public let authorization: HTTPAuthorization?
    /// What encodes a JSON body.
    public let encoder: JSONEncoder
    /// What decodes a 2xx body.
    public let decoder: JSONDecoder
    /// The most bytes of an answer's body accepted; a larger body fails the request with
    /// ``HTTPLoadableError/tooLarge(maxBodySize:)``.
    public let maxBodySize: Int
    /// Header fields added to every request, unless the request sets the same field itself.
    public let headers: [String: String]

    /// The base URL up to its path, without a trailing `/`, its query or its fragment.
    private let base: String
    /// The base URL's query, percent-encoded, if it has one.
    private let baseQuery: String?

    /// Creates the service of one backend.
    ///
    /// ```swift
    /// let api = HTTPService(
    ///     baseURL: URL(string: "https://api.example.com/v1")!,
    ///     authorization: .bearer(LoadableWaiter(token, timeout: .seconds(30))) { $0.value },
    ///     headers: ["Accept-Language": "en"]
    /// )
    /// ```
    ///
    /// - Parameters:
    ///   - baseURL: An `http` or `https` URL with a host (anything else stops the program with a
    ///     message); with or without a trailing `/`, which changes nothing.
    ///   - transport: What sends the requests; `URLSession.shared` by default.
    ///   - authorization: How to authorize the requests, if they need it.
    ///   - encoder: Encodes JSON bodies.
    ///   - decoder: Decodes 2xx bodies.
    ///   - maxBodySize: The most bytes of an answer's body accepted, greater than 0; 10 MB by
    ///     default.
    ///   - headers: Header fields added to every request (loadables' too) that does not set the
    ///     same field itself.
    public init(
        baseURL: URL,
        transport: any HTTPTransport = URLSession.shared,
        authorization: HTTPAuthorization? = nil,
        encoder: JSONEncoder = JSONEncoder(),
        decoder: JSONDecoder = JSONDecoder(),
        maxBodySize: Int = 10 * 1_024 * 1_024,
        headers: [String: String] = [:]
    ) {
        let scheme = baseURL.scheme?.lowercased()
        var components = URLComponents(url: baseURL, resolvingAgainstBaseURL: true)
        requireValid(
            (scheme == "http" || scheme == "https") && components?.host?.isEmpty == false,
            "HTTPService: baseURL must be an http or https URL with a host, got \(baseURL.absoluteString)"
        )
        requireValid(maxBodySize > 0, "HTTPService: maxBodySize must be > 0, got \(maxBodySize)")
        baseQuery = components?.percentEncodedQuery
        components?.percentEncodedQuery = nil
        components?.fragment = nil
        var base = components?.string ?? baseURL.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        self.base = base
        self.baseURL = baseURL
        self.transport = transport
        self.authorization = authorization
        self.encoder = encoder
        self.decoder = decoder
        self.maxBodySize = maxBodySize
        self.headers = headers
    }

    /// A request of `method` for `path` under the base URL, with the service's headers.
    ///
    /// ```swift
    /// // baseURL https://api.example.com/v1 (or …/v1/):
    /// api.request(.get, "posts", query: [URLQueryItem(name: "q", value: "a&b")])
    /// // GET https://api.example.com/v1/posts?q=a%26b
    /// ```
    ///
    /// The path always goes under the base URL's path: `"posts"` and `"/posts"` are the same. Its
    /// `.` and `..` segments are resolved here, inside the base path and never above it, so that
    /// no server or URL normalization can take the request out of it: `"a/./b"` is `a/b`,
    /// `"a/../b"` is `b`, `"a/b/.."` is `a`, `"../admin"` and `"a/../../admin"` are `admin`, and
    /// `"./"` is the base URL itself; a trailing `/` stays. The path is written unencoded
    /// (`"tags/a b"` goes out as `tags/a%20b`, and a `%` is encoded too, so `"%2E%2E"` is a name,
    /// never a `..`); the query items are percent-encoded, `+` included, and come after the base
    /// URL's own query, if it has one. The request carries no `Authorization` header: a send adds
    /// it.
    ///
    /// - Parameters:
    ///   - method: The method.
    ///   - path: The path, relative to the base URL's.
    ///   - query: Query items, in order.
    /// - Returns: The request, to change further or to pass to ``send(_:)``.
    public func request(_ method: HTTPMethod, _ path: String, query: [URLQueryItem] = []) -> URLRequest {
        var request = URLRequest(url: url(path, query: query))
        request.httpMethod = method.rawValue
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return request
    }

    /// A GET request for `path` under the base URL, with the service's headers; see
    /// ``request(_:_:query:)``.
    ///
    /// ```swift
    /// let profile = HTTPLoadable<Profile>(request: api.request("me"), authorization: api.authorization)
    /// ```
    ///
    /// - Parameters:
    ///   - path: The path, relative to the base URL's.
    ///   - query: Query items, in order.
    /// - Returns: The request.
    public func request(_ path: String, query: [URLQueryItem] = []) -> URLRequest {
        request(.get, path, query: query)
    }

    /// A loadable of a GET of `path`, with the service's transport, authorization, decoder, body
    /// limit and headers.
    ///
    /// ```swift
    /// let feed = api.loadable(Feed.self, "feed", query: [URLQueryItem(name: "page", value: "1")])
    /// ```
    ///
    /// - Parameters:
    ///   - type: The type of the contents.
    ///   - path: The path, relative to the base URL's.
    ///   - query: Query items, in order.
    ///   - clock: The clock of the loadable's freshness and watchdog.
    /// - Returns: A new ``HTTPLoadable``.
    @MainActor
    public func loadable<Contents: Decodable & Sendable>(
        _ type: Contents.Type,
        _ path: String,
        query: [URLQueryItem] = [],
        clock: any Clock<Duration> = ContinuousClock()
    ) -> HTTPLoadable<Contents> {
        HTTPLoadable(
            request: request(path, query: query),
            transport: transport,
            decoder: decoder,
            maxBodySize: maxBodySize,
            authorization: authorization,
            clock: clock
        )
    }

    /// A loadable of a GET of `path` whose contents type is inferred; see
    /// ``loadable(_:_:query:clock:)``.
    ///
    /// ```swift
    /// let profile: HTTPLoadable<Profile> = api.loadable("me")
    /// ```
    ///
    /// - Parameters:
    ///   - path: The path, relative to the base URL's.
    ///   - query: Query items, in order.
    ///   - clock: The clock of the loadable's freshness and watchdog.
    /// - Returns: A new ``HTTPLoadable``.
    @MainActor
    public func loadable<Contents: Decodable & Sendable>(
        _ path: String,
        query: [URLQueryItem] = [],
        clock: any Clock<Duration> = ContinuousClock()
    ) -> HTTPLoadable<Contents> {
        loadable(Contents.self, path, query: query, clock: clock)
    }

    /// The URL of `path` and `query` under the base URL.
    private func url(_ path: String, query: [URLQueryItem]) -> URL {
        var text = base
        let relative = Self.resolvingDotSegments(path)
        if !relative.isEmpty {
            text += "/"
            // Most paths are letters, digits and `-._~/`, which need no encoding: the encoder is
            // the dearest part of a request's URL.
            text +=
                Self.needsNoEncoding(relative)
                ? relative : relative.addingPercentEncoding(withAllowedCharacters: Self.pathAllowed) ?? ""
        }
        var separator = "?"
        if let baseQuery {
            text += "?" + baseQuery
            separator = "&"
        }
        for item in query {
            text += separator
            text += item.name.addingPercentEncoding(withAllowedCharacters: Self.queryAllowed) ?? ""
            if let value = item.value {
                text += "="
                text += value.addingPercentEncoding(withAllowedCharacters: Self.queryAllowed) ?? ""
            }
            separator = "&"
        }
        guard let url = URL(string: text) else {
            // Every part is percent-encoded: a URL that does not parse is a bug of this function.
            fatalError("HTTPService: could not make a URL of \(text)")
        }
        return url
    }

    /// `path` without its leading `/`s and with its `.` and `..` segments resolved, never
    /// climbing above its root (a `..` there is dropped); its other segments, empty ones included,
    /// and a trailing `/` stay as they are.
    private static func resolvingDotSegments(_ path: String) -> String {
        // Without a `.`, there is no segment to resolve.
        if !path.utf8.contains(UInt8(ascii: ".")) { return String(path.drop(while: { $0 == "/" })) }
        var segments: [Substring] = []
        for segment in path.drop(while: { $0 == "/" }).split(separator: "/", omittingEmptySubsequences: false) {
            switch segment {
            case ".": continue
            case "..": _ = segments.popLast()
            default: segments.append(segment)
            }
        }
        return segments.joined(separator: "/")
    }

    /// Whether `path` has only ASCII letters, digits and `-._~/`, which every path carries
    /// unencoded.
    private static func needsNoEncoding(_ path: String) -> Bool {
        path.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"), UInt8(ascii: "/"):
                true
            default: false
            }
        }
    }

    /// What a path may carry unencoded.
    private static let pathAllowed = CharacterSet.urlPathAllowed
    /// What a query item's name or value may carry unencoded: not `&`, `=`, `+` or `;`, which a
    /// server may read as separators or as a space.
    private static let queryAllowed = CharacterSet.urlQueryAllowed.subtracting(CharacterSet(charactersIn: "&=+;"))
}
