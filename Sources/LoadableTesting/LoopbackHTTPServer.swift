public import Foundation

/// A small real HTTP/1.1 server on 127.0.0.1, for testing HTTP clients against a real socket.
///
/// The server listens on a port the system picks (``port``, ``url(_:)``) and answers every request
/// with what its handler returns: a complete response (``Response/status(_:headers:body:)``,
/// ``Response/json(_:status:headers:)``), bytes written as they are (``Response/raw(_:thenHold:)``)
/// or no answer at all (``Response/hold``). It records what it received (``requests``,
/// ``connectionCount``), and a test waits for it without sleeping (``waitForRequests(_:)``,
/// ``waitUntilNoConnectionIsHeld()``).
///
/// ```swift
/// @Test func loadsTheSecondPage() async throws {
///     let server = try LoopbackHTTPServer { request in
///         request.path == "/feed" ? .json(#"{"items":[]}"#) : .status(404)
///     }
///     let session = URLSession(configuration: .ephemeral)
///     defer { session.finishTasksAndInvalidate() }
///     let (data, response) = try await session.data(from: server.url("/feed?page=2"))
///     #expect((response as? HTTPURLResponse)?.statusCode == 200)
///     #expect(String(decoding: data, as: UTF8.self) == #"{"items":[]}"#)
///     #expect(server.requests.map(\.target) == ["/feed?page=2"])
/// }
/// ```
///
/// HTTP/1.1 connections are kept alive: after a complete response the server reads the next
/// request on the same connection, unless the client sent `Connection: close` (or spoke HTTP/1.0
/// without `Connection: keep-alive`). Request bodies come by `Content-Length`. A request that the
/// server cannot take never reaches the handler and is not recorded: the server answers it and
/// closes the connection — 400 for a malformed request, 413 for a body over 16 MB, 431 for a head
/// over 64 KB, 501 for a `Transfer-Encoding` body and 505 for an HTTP version other than 1.x.
///
/// The server stops by itself: after `lifetime`, when ``stop()`` is called, or when it is
/// released. Every wait inside is bounded: a connection that sends no request for 60 seconds is
/// closed, a held connection lasts until the client closes it or the server stops, and a client
/// that hangs up at any point never raises `SIGPIPE` in the test process.
///
/// `LoopbackHTTPServer` is `Sendable`. It runs on threads of its own, never on the threads of
/// Swift concurrency: one thread accepts connections, and each accepted connection gets a thread
/// that reads its requests, calls the handler and writes the responses. Its state is behind one
/// lock that is never held while the handler runs or a waiting task resumes.
public final class LoopbackHTTPServer: Sendable {
    /// A request as the server read it.
    ///
    /// ```swift
    /// let request = server.requests[0]
    /// #expect(request.method == "POST")
    /// #expect(request.path == "/posts")
    /// #expect(request.header("content-type") == "application/json")
    /// #expect(request.body == Data(#"{"title":"Hi"}"#.utf8))
    /// ```
    public struct Request: Sendable {
        /// The method, as in `"GET"`.
        public let method: String
        /// The request target as sent, query included, as in `"/feed?page=2"`.
        public let target: String
        /// The protocol version from the request line, as in `"HTTP/1.1"`.
        public let httpVersion: String
        /// The header fields in the order received, names spelled as sent.
        public let headers: [Header]
        /// The body: as many bytes as `Content-Length` said, or none.
        public let body: Data

        /// The target without its query, as in `"/feed"` for `"/feed?page=2"`.
        public var path: String {
            guard let query = target.firstIndex(of: "?") else { return target }
            return String(target[..<query])
        }

        /// The value of the first header field called `name`, compared case-insensitively.
        ///
        /// ```swift
        /// #expect(request.header("Accept") == request.header("accept"))
        /// ```
        ///
        /// - Parameter name: The field name, in any case.
        /// - Returns: The first matching field's value, or `nil` if the request has none.
        public func header(_ name: String) -> String? {
            let name = name.lowercased()
            return headers.first { $0.name.lowercased() == name }?.value
        }
    }

    /// One header field: a name and a value.
    ///
    /// ```swift
    /// .status(201, headers: [LoopbackHTTPServer.Header("Location", "/posts/7")])
    /// ```
    public struct Header: Sendable, Hashable {
        /// The field name, as in `"Content-Type"`.
        public let name: String
        /// The field value, as in `"application/json"`.
        public let value: String

        /// Creates a header field.
        ///
        /// - Parameters:
        ///   - name: The field name.
        ///   - value: The field value.
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// What the server does with a request: a complete response, raw bytes, or no answer.
    ///
    /// ```swift
    /// let server = try LoopbackHTTPServer { request in
    ///     switch request.path {
    ///     case "/ok": .json(#"{"ok":true}"#)
    ///     case "/garbage": .raw(Data("HTTP/1.1 200 OK\r\nContent-Len".utf8))
    ///     case "/slow": .hold
    ///     default: .status(404)
    ///     }
    /// }
    /// ```
    public struct Response: Sendable {
        enum Kind: Sendable {
            case complete(status: Int, headers: [Header], body: Data)
            case raw(Data, thenHold: Bool)
            case hold
        }

        let kind: Kind

        /// Whether the connection stays open without an answer after this response.
        var holdsConnection: Bool {
            switch kind {
            case .complete, .raw(_, thenHold: false): false
            case .raw(_, thenHold: true), .hold: true
            }
        }

        /// A complete response: a status line, the headers given, `Content-Length` and the body.
        ///
        /// The status line has the standard reason phrase of `code` (`"Status"` for a code without
        /// one). `Content-Length` is the body's size, unless `headers` already have one: that one
        /// is sent as given, even if it is wrong, and nothing else is added. Following HTTP, a 1xx
        /// or 204 response gets no `Content-Length` added, and a 1xx, 204 or 304 response, or any
        /// response to a `HEAD` request, is sent without its body.
        ///
        /// ```swift
        /// .status(503, headers: [LoopbackHTTPServer.Header("Retry-After", "2")])
        /// ```
        ///
        /// - Parameters:
        ///   - code: The status code, `100...999`; any other value stops the program.
        ///   - headers: Header fields, sent in this order.
        ///   - body: The body.
        /// - Returns: The response.
        public static func status(_ code: Int, headers: [Header] = [], body: Data = Data()) -> Response {
            guard (100...999).contains(code) else {
                fatalError("LoopbackHTTPServer.Response.status(_:): the code must be in 100...999, got \(code)")
            }
            return Response(kind: .complete(status: code, headers: headers, body: body))
        }

        /// A JSON response: `Content-Type: application/json` and `text` as its UTF-8 body.
        ///
        /// A `Content-Type` in `headers` replaces the one added.
        ///
        /// ```swift
        /// .json(#"{"error":"gone"}"#, status: 410)
        /// ```
        ///
        /// - Parameters:
        ///   - text: The JSON text.
        ///   - status: The status code; 200 by default.
        ///   - headers: More header fields, sent after `Content-Type`.
        /// - Returns: The response.
        public static func json(_ text: String, status: Int = 200, headers: [Header] = []) -> Response {
            let hasContentType = headers.contains { $0.name.lowercased() == "content-type" }
            let contentType = hasContentType ? [] : [Header("Content-Type", "application/json")]
            return .status(status, headers: contentType + headers, body: Data(text.utf8))
        }

        /// `bytes` written as they are, then the connection closed or held open.
        ///
        /// Nothing is added: the bytes are the whole answer, status line included, so a test can
        /// send a truncated, malformed or otherwise broken response. With `thenHold: true` the
        /// server sends nothing more and holds the connection open until the client closes it or
        /// the server stops, as ``hold`` does.
        ///
        /// ```swift
        /// .raw(Data("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort".utf8), thenHold: true)
        /// ```
        ///
        /// - Parameters:
        ///   - bytes: Everything the client receives.
        ///   - thenHold: Whether to hold the connection open afterwards instead of closing it.
        /// - Returns: The response.
        public static func raw(_ bytes: Data, thenHold: Bool = false) -> Response {
            Response(kind: .raw(bytes, thenHold: thenHold))
        }

        /// No answer at all: the connection is held open until the client closes it or the server
        /// stops.
        ///
        /// The client's request stays pending, so a test can check what a client shows while it
        /// waits, then cancel it and ``LoopbackHTTPServer/waitUntilNoConnectionIsHeld()``.
        public static var hold: Response { Response(kind: .hold) }
    }

    /// The error thrown when the server cannot set up its sockets.
    ///
    /// ```swift
    /// do {
    ///     _ = try LoopbackHTTPServer { _ in .status(200) }
    /// } catch {
    ///     print(error)  // LoopbackHTTPServer could not start: bind failed with errno 98 (Address already in use)
    /// }
    /// ```
    public struct StartError: Error, CustomStringConvertible, Sendable {
        /// The system call that failed, as in `"bind"`.
        public let operation: String
        /// The `errno` value the call set.
        public let code: Int32
        /// The call, the `errno` value and its meaning.
        public let description: String
    }

    /// The port the server listens on, on 127.0.0.1.
    public let port: Int
    private let core: Core

    /// Starts listening on 127.0.0.1 on a port the system picks.
    ///
    /// The handler is called for each request on the connection's own thread, so it must be quick
    /// and `Sendable`: a test keeps the state the handler needs in a lock or in immutable values.
    /// The server stops by itself after `lifetime`, on ``stop()``, or when it is released.
    ///
    /// ```swift
    /// let server = try LoopbackHTTPServer { request in
    ///     request.method == "GET" ? .json("[]") : .status(405)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - lifetime: How long the server runs at most; 5 minutes by default.
    ///   - handler: Decides the response to each request.
    /// - Throws: ``StartError`` if a socket cannot be set up.
    public init(lifetime: Duration = .seconds(300), handler: @escaping @Sendable (Request) -> Response) throws {
        let sockets = try Sockets.open()
        port = sockets.port
        core = Core(sockets: sockets, lifetimeEnd: .now + lifetime, handler: handler)
        core.startAcceptLoop()
    }

    deinit { core.stop() }

    /// The URL of `pathAndQuery` on this server: `http://127.0.0.1:<port>` followed by it.
    ///
    /// ```swift
    /// server.url("/feed?page=2")  // http://127.0.0.1:41235/feed?page=2
    /// ```
    ///
    /// - Parameter pathAndQuery: A path that starts with `/`, with an optional query; anything
    ///   else stops the program with a message.
    /// - Returns: The URL.
    public func url(_ pathAndQuery: String) -> URL {
        guard pathAndQuery.hasPrefix("/") else {
            fatalError("LoopbackHTTPServer.url(_:): the path must start with \"/\", got \"\(pathAndQuery)\"")
        }
        guard let url = URL(string: "http://127.0.0.1:\(port)\(pathAndQuery)") else {
            fatalError("LoopbackHTTPServer.url(_:): \"\(pathAndQuery)\" does not make a valid URL")
        }
        return url
    }

    /// The requests received so far, from all connections, in the order they arrived.
    ///
    /// A request is recorded once the handler returned its response.
    public var requests: [Request] { core.state.withLock { $0.requests } }

    /// How many requests were received so far: the number of ``requests``.
    public var requestCount: Int { core.state.withLock { $0.requests.count } }

    /// How many connections the server accepted so far.
    ///
    /// Fewer connections than requests means that clients reused connections (keep-alive).
    public var connectionCount: Int { core.state.withLock { $0.connectionCount } }

    /// How many connections are held open by ``Response/hold`` or ``Response/raw(_:thenHold:)``.
    public var heldConnectionCount: Int { core.state.withLock { $0.heldConnectionCount } }

    /// Returns once at least `count` requests were received, or once the server stopped.
    ///
    /// A request counts once the handler returned its response, so a held request already counts
    /// in ``heldConnectionCount`` when this returns. Nothing polls or sleeps: the connection thread
    /// that records the request resumes the waiting task.
    ///
    /// ```swift
    /// let load = Task { try await session.data(from: server.url("/slow")) }
    /// await server.waitForRequests(1)
    /// #expect(server.heldConnectionCount == 1)
    /// ```
    ///
    /// Cancelling the waiting task does not end the wait; the server's stop does, at the latest
    /// when its lifetime ends.
    ///
    /// - Parameter count: How many requests to wait for; `0` or less returns at once.
    public func waitForRequests(_ count: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isSatisfied = core.state.withLock { state -> Bool in
                if state.isStopped || state.requests.count >= count { return true }
                state.requestWaits.append(State.RequestWait(count: count, continuation: continuation))
                return false
            }
            if isSatisfied { continuation.resume() }
        }
    }

    /// Returns once no connection is held open, or once the server stopped.
    ///
    /// A held connection ends when its client closes it (a cancelled request) or the server
    /// stops. Nothing polls or sleeps: the connection thread that ends the hold resumes the
    /// waiting task.
    ///
    /// ```swift
    /// load.cancel()
    /// await server.waitUntilNoConnectionIsHeld()
    /// ```
    ///
    /// Cancelling the waiting task does not end the wait; the server's stop does, at the latest
    /// when its lifetime ends.
    public func waitUntilNoConnectionIsHeld() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isSatisfied = core.state.withLock { state -> Bool in
                if state.isStopped || state.heldConnectionCount == 0 { return true }
                state.noHeldConnectionWaits.append(continuation)
                return false
            }
            if isSatisfied { continuation.resume() }
        }
    }

    /// Stops the server: closes the listening socket and every open connection.
    ///
    /// Returns once the listening socket is closed, so a new connection is refused from then on;
    /// the open connections close on their threads right after. Pending ``waitForRequests(_:)``
    /// and ``waitUntilNoConnectionIsHeld()`` calls return, and later ones return at once. Calling
    /// it again does nothing. Releasing the server stops it too.
    public func stop() { core.stop() }
}

extension LoopbackHTTPServer {
    /// The state that the server's threads and its users share, behind ``Core/state``.
    struct State {
        struct RequestWait {
            var count: Int
            var continuation: CheckedContinuation<Void, Never>
        }

        var requests: [Request] = []
        var connectionCount = 0
        var heldConnectionCount = 0
        /// Set once, by ``LoopbackHTTPServer/stop()`` or at the end of the lifetime; the waits are
        /// empty from then on.
        var isStopped = false
        var requestWaits: [RequestWait] = []
        var noHeldConnectionWaits: [CheckedContinuation<Void, Never>] = []

        /// Records a handled request and returns the waits it satisfies.
        mutating func record(_ request: Request, holdsConnection: Bool) -> [CheckedContinuation<Void, Never>] {
            requests.append(request)
            if holdsConnection { heldConnectionCount += 1 }
            var satisfied: [CheckedContinuation<Void, Never>] = []
            requestWaits.removeAll { wait in
                guard requests.count >= wait.count else { return false }
                satisfied.append(wait.continuation)
                return true
            }
            return satisfied
        }

        /// Ends one hold and returns the waits that this satisfies.
        mutating func endHold() -> [CheckedContinuation<Void, Never>] {
            heldConnectionCount -= 1
            guard heldConnectionCount == 0 else { return [] }
            defer { noHeldConnectionWaits = [] }
            return noHeldConnectionWaits
        }

        /// Marks the server stopped and returns every pending wait, or `nil` if it was stopped
        /// already.
        mutating func markStopped() -> [CheckedContinuation<Void, Never>]? {
            guard !isStopped else { return nil }
            isStopped = true
            defer {
                requestWaits = []
                noHeldConnectionWaits = []
            }
            return requestWaits.map(\.continuation) + noHeldConnectionWaits
        }
    }
}

extension LoopbackHTTPServer {
    /// The most bytes a request head (request line and header fields) may take.
    static let maximumHeadSize = 64 * 1024
    /// The largest request body the server reads.
    static let maximumBodySize = 16 * 1024 * 1024

    /// A request line and header fields, parsed.
    struct RequestHead {
        var method: String
        var target: String
        var httpVersion: String
        var headers: [Header]
        var contentLength: Int
        /// Whether the connection stays open after the response, as the client asked.
        var keepsAlive: Bool
        /// Whether the client waits for `100 Continue` before it sends the body.
        var expectsContinue: Bool

        /// Why the server answers a request itself, and closes the connection.
        struct Refusal: Error {
            var status: Int
            var reason: String

            static func badRequest(_ reason: String) -> Refusal { Refusal(status: 400, reason: reason) }
        }

        /// Parses `bytes`: the head up to, not including, the empty line that ends it.
        static func parse(_ bytes: ArraySlice<UInt8>) -> Result<RequestHead, Refusal> {
            var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { line in
                line.last == UInt8(ascii: "\r") ? line.dropLast() : line
            }
            guard !lines.isEmpty else { return .failure(.badRequest("empty request line")) }
            let requestLine = lines.removeFirst()
            let parts = requestLine.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
            guard parts.count == 3, parts.allSatisfy({ !$0.isEmpty }),
                parts[0].allSatisfy(isTokenCharacter), parts[1].allSatisfy({ $0 > 0x20 && $0 != 0x7F })
            else {
                return .failure(.badRequest("malformed request line"))
            }
            let version = Array(parts[2])
            guard version.count == 8, version[..<5].elementsEqual("HTTP/".utf8), isDigit(version[5]),
                version[6] == UInt8(ascii: "."), isDigit(version[7])
            else {
                return .failure(.badRequest("malformed HTTP version"))
            }
            guard version[5] == UInt8(ascii: "1") else {
                return .failure(Refusal(status: 505, reason: "only HTTP/1.x is supported"))
            }

            var headers: [Header] = []
            for line in lines {
                guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
                    line[..<colon].allSatisfy(isTokenCharacter)
                else {
                    return .failure(.badRequest("malformed header field"))
                }
                let name = String(decoding: line[..<colon], as: UTF8.self)
                let value = String(decoding: trimmingWhitespace(line[line.index(after: colon)...]), as: UTF8.self)
                headers.append(Header(name, value))
            }

            func values(of name: String) -> [String] {
                headers.filter { $0.name.lowercased() == name }.map(\.value)
            }
            func tokens(of name: String) -> [String] {
                values(of: name).flatMap { $0.split(separator: ",") }.map {
                    $0.trimmingCharacters(in: .whitespaces).lowercased()
                }
            }

            guard values(of: "transfer-encoding").isEmpty else {
                return .failure(Refusal(status: 501, reason: "Transfer-Encoding request bodies are not supported"))
            }
            var contentLength = 0
            let lengths = Set(values(of: "content-length"))
            if let length = lengths.first {
                guard lengths.count == 1, !length.isEmpty, length.utf8.allSatisfy(isDigit) else {
                    return .failure(.badRequest("malformed Content-Length"))
                }
                guard length.utf8.count <= 9, let value = Int(length), value <= maximumBodySize else {
                    return .failure(Refusal(status: 413, reason: "the body is over \(maximumBodySize) bytes"))
                }
                contentLength = value
            }
            let connection = tokens(of: "connection")
            let isHTTP10 = version[7] == UInt8(ascii: "0")
            let keepsAlive = isHTTP10 ? connection.contains("keep-alive") : !connection.contains("close")
            return .success(
                RequestHead(
                    method: String(decoding: parts[0], as: UTF8.self),
                    target: String(decoding: parts[1], as: UTF8.self),
                    httpVersion: String(decoding: version, as: UTF8.self),
                    headers: headers,
                    contentLength: contentLength,
                    keepsAlive: keepsAlive,
                    expectsContinue: tokens(of: "expect").contains("100-continue")
                )
            )
        }

        private static func isDigit(_ byte: UInt8) -> Bool {
            byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
        }

        /// `bytes` without leading and trailing spaces and tabs.
        private static func trimmingWhitespace(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
            let isWhitespace = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
            guard let first = bytes.firstIndex(where: { !isWhitespace($0) }),
                let last = bytes.lastIndex(where: { !isWhitespace($0) })
            else { return [] }
            return bytes[first...last]
        }

        /// Whether `byte` may appear in a method or a header field name (RFC 9110's `tchar`).
        private static func isTokenCharacter(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                true
            default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
        }
    }

    /// The bytes of a complete response.
    ///
    /// - Parameters:
    ///   - status: The status code.
    ///   - headers: The handler's header fields.
    ///   - body: The body.
    ///   - request: The request answered: a `HEAD` request gets no body, an HTTP/1.0 request
    ///     that keeps the connection gets `Connection: keep-alive`.
    ///   - closes: Whether the server closes the connection afterwards (`Connection: close`).
    static func responseBytes(
        status: Int, headers: [Header], body: Data, request: RequestHead?, closes: Bool
    ) -> [UInt8] {
        var text = "HTTP/1.1 \(status) \(reasonPhrase(for: status))\r\n"
        var hasContentLength = false
        var hasConnection = false
        for header in headers {
            text += "\(header.name): \(header.value)\r\n"
            switch header.name.lowercased() {
            case "content-length": hasContentLength = true
            case "connection": hasConnection = true
            default: break
            }
        }
        let isInformational = (100..<200).contains(status)
        if !hasContentLength && !isInformational && status != 204 {
            text += "Content-Length: \(body.count)\r\n"
        }
        if !hasConnection {
            if closes {
                text += "Connection: close\r\n"
            } else if request?.httpVersion == "HTTP/1.0" {
                text += "Connection: keep-alive\r\n"
            }
        }
        text += "\r\n"
        let sendsBody = !isInformational && status != 204 && status != 304 && request?.method != "HEAD"
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count + (sendsBody ? body.count : 0))
        bytes.append(contentsOf: text.utf8)
        if sendsBody { bytes.append(contentsOf: body) }
        return bytes
    }

    /// The standard reason phrase of `status`, or `"Status"` for a code without one.
    static func reasonPhrase(for status: Int) -> String {
        reasonPhrases[status] ?? "Status"
    }

    private static let reasonPhrases: [Int: String] = [
        100: "Continue", 101: "Switching Protocols", 102: "Processing", 103: "Early Hints",
        200: "OK", 201: "Created", 202: "Accepted", 203: "Non-Authoritative Information", 204: "No Content",
        205: "Reset Content", 206: "Partial Content", 207: "Multi-Status", 208: "Already Reported", 226: "IM Used",
        300: "Multiple Choices", 301: "Moved Permanently", 302: "Found", 303: "See Other", 304: "Not Modified",
        305: "Use Proxy", 307: "Temporary Redirect", 308: "Permanent Redirect",
        400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden", 404: "Not Found",
        405: "Method Not Allowed", 406: "Not Acceptable", 407: "Proxy Authentication Required",
        408: "Request Timeout", 409: "Conflict", 410: "Gone", 411: "Length Required", 412: "Precondition Failed",
        413: "Content Too Large", 414: "URI Too Long", 415: "Unsupported Media Type",
        416: "Range Not Satisfiable", 417: "Expectation Failed", 418: "I'm a teapot", 421: "Misdirected Request",
        422: "Unprocessable Content", 423: "Locked", 424: "Failed Dependency", 425: "Too Early",
        426: "Upgrade Required", 428: "Precondition Required", 429: "Too Many Requests",
        431: "Request Header Fields Too Large", 451: "Unavailable For Legal Reasons",
        500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable",
        504: "Gateway Timeout", 505: "HTTP Version Not Supported", 506: "Variant Also Negotiates",
        507: "Insufficient Storage", 508: "Loop Detected", 510: "Not Extended",
        511: "Network Authentication Required",
    ]
}
