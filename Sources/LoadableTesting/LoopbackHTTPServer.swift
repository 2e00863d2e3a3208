public import Foundation
import LoadableSupport

/// A small real HTTP/1.1 server on 127.0.0.1, for testing HTTP clients against a real socket.
///
/// The server listens on a port the system picks (``port``, ``url(_:)``) and answers every request
/// with what its handler returns: a complete response (``Response/status(_:headers:body:)``,
/// ``Response/json(_:status:headers:)``), a body of any size made as it is sent
/// (``Response/stream(byteCount:status:headers:contentLength:gzip:)``), bytes written as they are
/// (``Response/raw(_:thenHold:)``), no answer at all (``Response/hold``), or any of these later:
/// after a delay on the test's clock (``Response/after(_:on:_:)``) or once the test opens a
/// ``Gate`` (``Response/gated(_:_:)``). It records what it received (``arrivals``, ``requests``,
/// ``connectionCount``), and a test waits for it without sleeping (``waitForArrivals(_:)``,
/// ``waitForRequests(_:)``, ``waitUntilNoConnectionIsHeld()``, ``waitUntilNoConnectionIsOpen()``).
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
/// closed, a held connection (one waiting for a delay or a gate, too) lasts until the client
/// closes it or the server stops, and a client that hangs up at any point never raises `SIGPIPE`
/// in the test process.
///
/// `LoopbackHTTPServer` is `Sendable`. It runs on threads of its own, never on the threads of
/// Swift concurrency: one thread accepts connections, and each accepted connection gets a thread
/// that reads its requests, calls the handler and writes the responses (a response that waits
/// for a delay or a gate waits on that thread). Its state is behind one lock that is never held
/// while the handler runs or a waiting task resumes.
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

    /// What the server does with a request: a complete response, a streamed body, raw bytes, or
    /// no answer; at once, after a delay, or once a gate opens.
    ///
    /// ```swift
    /// let clock = ManualClock()
    /// let gate = LoopbackHTTPServer.Gate()
    /// let server = try LoopbackHTTPServer { request in
    ///     switch request.path {
    ///     case "/ok": .json(#"{"ok":true}"#)
    ///     case "/garbage": .raw(Data("HTTP/1.1 200 OK\r\nContent-Len".utf8))
    ///     case "/huge": .stream(byteCount: 4 << 30, gzip: true)
    ///     case "/slow": .after(.seconds(2), on: clock, .json("[]"))
    ///     case "/gated": .gated(gate, .status(204))
    ///     case "/never": .hold
    ///     default: .status(404)
    ///     }
    /// }
    /// ```
    public struct Response: Sendable {
        indirect enum Kind: Sendable {
            case complete(status: Int, headers: [Header], body: Data)
            case raw(Data, thenHold: Bool)
            case hold
            case stream(BodyStream)
            /// `Kind` after `Delay` passed, counted from when the server reaches it.
            case delayed(Delay, Kind)
            /// `Kind` once the gate is open.
            case gated(Gate, Kind)
        }

        let kind: Kind

        /// Whether the connection is held, open without a complete answer, once the handler
        /// returned this response: held for good, or until a delay passes or a gate opens.
        var holdsConnection: Bool {
            switch kind {
            case .complete, .stream, .raw(_, thenHold: false): false
            case .raw(_, thenHold: true), .hold, .delayed, .gated: true
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

        /// `response`, once `delay` has passed on `clock`: a slow server whose time the test moves.
        ///
        /// The delay starts when the handler returns, before the request counts in
        /// ``LoopbackHTTPServer/requests``, so once ``LoopbackHTTPServer/waitForRequests(_:)``
        /// returned, a test can move a `ManualClock` by `delay` and the answer goes out. Until
        /// then the connection is held (``LoopbackHTTPServer/heldConnectionCount``); a task sleeps
        /// on `clock` meanwhile (one pending sleep on a `ManualClock`). If the client closes the
        /// connection or the server stops first, the sleep is cancelled and nothing is sent.
        ///
        /// ```swift
        /// let clock = ManualClock()
        /// let server = try LoopbackHTTPServer { _ in .after(.seconds(2), on: clock, .json("[]")) }
        /// let load = Task { try await session.data(from: server.url("/slow")) }
        /// await server.waitForRequests(1)
        /// await clock.advance(by: .seconds(2))  // now the answer goes out
        /// let (data, _) = try await load.value
        /// ```
        ///
        /// Inside another response that waits (``gated(_:_:)``), the delay starts when that wait
        /// ends. A delay longer than 100 years waits 100 years: far past any server's lifetime.
        ///
        /// - Parameters:
        ///   - delay: How long to wait, `.zero` or more; a negative delay stops the program.
        ///   - clock: The clock to wait on; a `ManualClock` in tests.
        ///   - response: What to send once the delay passed; it may wait again.
        /// - Returns: The response.
        public static func after(_ delay: Duration, on clock: any Clock<Duration>, _ response: Response) -> Response {
            requireValid(
                delay >= .zero,
                "LoopbackHTTPServer.Response.after(_:on:_:): the delay must be >= .zero, got \(delay)")
            return Response(kind: .delayed(Delay(duration: delay, clock: clock), response.kind))
        }

        /// `response`, once `gate` is open: an answer held until the test says so.
        ///
        /// Every request answered with it waits until ``Gate/open()`` (at once if the gate is open
        /// already). Meanwhile the connection is held (``LoopbackHTTPServer/heldConnectionCount``);
        /// if the client closes it or the server stops first, nothing is sent.
        ///
        /// ```swift
        /// let gate = LoopbackHTTPServer.Gate()
        /// let server = try LoopbackHTTPServer { _ in .gated(gate, .json("[]")) }
        /// let load = Task { try await session.data(from: server.url("/slow")) }
        /// await server.waitForRequests(1)
        /// // ... check what the client shows while it waits ...
        /// gate.open()
        /// let (data, _) = try await load.value
        /// ```
        ///
        /// - Parameters:
        ///   - gate: The gate to wait for.
        ///   - response: What to send once the gate is open; it may wait again.
        /// - Returns: The response.
        public static func gated(_ gate: Gate, _ response: Response) -> Response {
            Response(kind: .gated(gate, response.kind))
        }

        /// A body of `byteCount` zero bytes that the server makes as it sends it, never whole in
        /// memory: for testing a client's body limit with bodies of any size.
        ///
        /// The status line and `headers` come first, as for ``status(_:headers:body:)``, then the
        /// server adds the framing: `Content-Length` (with `contentLength: true`) or
        /// `Transfer-Encoding: chunked`. With `gzip: true` it adds `Content-Encoding: gzip` and
        /// sends a gzip stream (RFC 1952) that decompresses to the `byteCount` zero bytes: about a
        /// thousandth of their size on the wire, so a client meets a large body after a small
        /// transfer. `Content-Length` is then the size of the compressed stream.
        ///
        /// The server writes in pieces of 256 KB and stops at once when the client closes the
        /// connection or the server stops, so a test can send a body of several gigabytes and
        /// check that a client gives up early (``LoopbackHTTPServer/waitUntilNoConnectionIsOpen()``).
        /// A response to `HEAD`, or with a status that has no body (1xx, 204, 304), has no body.
        ///
        /// ```swift
        /// let server = try LoopbackHTTPServer { _ in .stream(byteCount: 512 << 20, contentLength: false) }
        /// ```
        ///
        /// - Parameters:
        ///   - byteCount: The size of the body, `0` or more (decompressed, with `gzip`); a negative
        ///     count stops the program.
        ///   - status: The status code, `100...999`; 200 by default.
        ///   - headers: Header fields, sent in this order before the framing.
        ///   - contentLength: Whether to send `Content-Length` (the default) or a chunked body.
        ///   - gzip: Whether to compress the body with gzip.
        /// - Returns: The response.
        public static func stream(
            byteCount: Int, status: Int = 200, headers: [Header] = [], contentLength: Bool = true, gzip: Bool = false
        ) -> Response {
            requireValid(
                byteCount >= 0,
                "LoopbackHTTPServer.Response.stream(byteCount:status:headers:contentLength:gzip:): "
                    + "the byte count must be >= 0, got \(byteCount)")
            requireValid(
                (100...999).contains(status),
                "LoopbackHTTPServer.Response.stream(byteCount:status:headers:contentLength:gzip:): "
                    + "the status must be in 100...999, got \(status)")
            return Response(
                kind: .stream(
                    BodyStream(
                        byteCount: byteCount, status: status, headers: headers, contentLength: contentLength,
                        gzip: gzip)))
        }
    }

    /// A gate that holds the responses waiting on it until a test opens it.
    ///
    /// Answer a request with ``Response/gated(_:_:)`` to hold it on a gate; ``open()`` sends every
    /// held response, and the requests that come later pass at once. A gate stays open, and may
    /// serve several servers.
    ///
    /// ```swift
    /// let gate = LoopbackHTTPServer.Gate()
    /// let server = try LoopbackHTTPServer { request in
    ///     request.path == "/slow" ? .gated(gate, .json(#"{"done":true}"#)) : .status(404)
    /// }
    /// // ... start two requests to /slow ...
    /// await server.waitForRequests(2)
    /// #expect(server.heldConnectionCount == 2)
    /// gate.open()
    /// await server.waitUntilNoConnectionIsHeld()  // both answers are on their way
    /// ```
    ///
    /// `Gate` is `Sendable`: its state is behind a lock that is never held while other code runs.
    public final class Gate: Sendable {
        struct State {
            var isOpen = false
            var nextID = 0
            /// The signals of the connections waiting, by the id they registered with.
            var waiting: [Int: Signal] = [:]
        }

        private let state = Locked(State())

        /// Creates a closed gate.
        public init() {}

        /// Whether ``open()`` was called.
        public var isOpen: Bool { state.withLock { $0.isOpen } }

        /// Opens the gate: every response held on it goes out, and later ones go out at once.
        ///
        /// Returns at once; each held response is written by its connection's thread. Calling it
        /// again does nothing.
        public func open() {
            let signals = state.withLock { state -> [Signal] in
                state.isOpen = true
                defer { state.waiting = [:] }
                return Array(state.waiting.values)
            }
            for signal in signals { signal.fire() }
        }

        /// Registers `signal` to fire when the gate opens; returns its id, or `nil` if the gate is
        /// open already.
        func register(_ signal: Signal) -> Int? {
            state.withLock { state in
                guard !state.isOpen else { return nil }
                defer { state.nextID += 1 }
                state.waiting[state.nextID] = signal
                return state.nextID
            }
        }

        /// Forgets the signal registered with `id`, once its connection stopped waiting.
        func unregister(_ id: Int) {
            _ = state.withLock { $0.waiting.removeValue(forKey: id) }
        }
    }

    /// The wait of ``Response/after(_:on:_:)``: a duration on a clock.
    struct Delay: Sendable {
        /// The longest sleep: longer delays are cut to it, so that no clock's sleep overflows.
        static let longest = Duration.seconds(100 * 365 * 24 * 60 * 60)

        var duration: Duration
        var clock: any Clock<Duration>

        /// Starts the delay now: a task sleeps on the clock until the delay passed, then fires
        /// `signal`. Cancel the task to end the sleep early.
        func start(firing signal: Signal) -> Task<Void, Never> {
            let clock = self.clock
            return Self.sleep(on: clock, for: min(duration, Self.longest), thenFire: signal)
        }

        private static func sleep<C: Clock<Duration>>(
            on clock: C, for duration: Duration, thenFire signal: Signal
        ) -> Task<Void, Never> {
            // The deadline is taken now, not when the task runs, so that a test clock moved in
            // between still counts the delay from now.
            let deadline = clock.now.advanced(by: duration)
            return Task {
                do {
                    try await clock.sleep(until: deadline, tolerance: nil)
                } catch {
                    return
                }
                signal.fire()
            }
        }
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

    /// The requests received so far, from all connections, in the order their handlers returned.
    ///
    /// A request is recorded once the handler returned its response, so a handler that takes its
    /// time delays it; ``arrivals`` counts requests before their handler runs.
    public var requests: [Request] { core.state.withLock { $0.requests } }

    /// How many requests were received so far: the number of ``requests``.
    public var requestCount: Int { core.state.withLock { $0.requests.count } }

    /// How many requests arrived so far: counted when the server has read a request's head and
    /// body, before its handler runs.
    ///
    /// ``requests`` records a request only after its handler returned. The two differ while
    /// handlers run: a handler that blocks (on a semaphore the test signals, say) shows its
    /// request here at once, and in ``requests`` only once it returns. A request the server
    /// refuses itself (a malformed one, say) never arrives.
    ///
    /// ```swift
    /// await server.waitForArrivals(1)
    /// #expect(server.arrivals == 1)
    /// ```
    public var arrivals: Int { core.state.withLock { $0.arrivals } }

    /// How many connections the server accepted so far.
    ///
    /// Fewer connections than requests means that clients reused connections (keep-alive).
    public var connectionCount: Int { core.state.withLock { $0.connectionCount } }

    /// How many connections are open now: accepted, and not yet closed by the server.
    ///
    /// A client that keeps its connection alive (`URLSession` does) keeps it open after its
    /// response; a connection ends when its client closes it, after 60 seconds without a request,
    /// or when the server stops.
    public var openConnectionCount: Int { core.state.withLock { $0.openConnectionCount } }

    /// How many connections are held open without a complete answer.
    ///
    /// ``Response/hold`` and ``Response/raw(_:thenHold:)`` hold a connection until the client
    /// closes it or the server stops; ``Response/after(_:on:_:)`` and ``Response/gated(_:_:)``
    /// hold it until their wait ends and the answer starts (or the client or the server ends it
    /// first).
    public var heldConnectionCount: Int { core.state.withLock { $0.heldConnectionCount } }

    /// Returns once at least `count` requests were received, or once the server stopped.
    ///
    /// A request counts once the handler returned its response, so a held request already counts
    /// in ``heldConnectionCount`` when this returns, and the delay of ``Response/after(_:on:_:)``
    /// has started. Nothing polls or sleeps: the connection thread that records the request
    /// resumes the waiting task. To wait for requests whose handler is still running, use
    /// ``waitForArrivals(_:)``.
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

    /// Returns once at least `count` requests arrived (see ``arrivals``), or once the server
    /// stopped.
    ///
    /// Unlike ``waitForRequests(_:)``, this does not wait for the handlers: a request counts as
    /// soon as it is read, before its handler runs. Nothing polls or sleeps: the connection thread
    /// that reads the request resumes the waiting task.
    ///
    /// ```swift
    /// let release = DispatchSemaphore(value: 0)
    /// let server = try LoopbackHTTPServer { _ in
    ///     _ = release.wait(timeout: .now() + 60)  // a slow handler
    ///     return .status(204)
    /// }
    /// let load = Task { try await session.data(from: server.url("/slow")) }
    /// await server.waitForArrivals(1)
    /// #expect(server.requestCount == 0)  // the handler still runs
    /// release.signal()
    /// _ = try await load.value
    /// ```
    ///
    /// Cancelling the waiting task does not end the wait; the server's stop does, at the latest
    /// when its lifetime ends.
    ///
    /// - Parameter count: How many arrivals to wait for; `0` or less returns at once.
    public func waitForArrivals(_ count: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isSatisfied = core.state.withLock { state -> Bool in
                if state.isStopped || state.arrivals >= count { return true }
                state.arrivalWaits.append(State.RequestWait(count: count, continuation: continuation))
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

    /// Returns once every connection the server accepted is closed (``openConnectionCount`` is 0).
    ///
    /// A test checks with it that the server stopped serving a client: that a client which gave
    /// up on a large ``Response/stream(byteCount:status:headers:contentLength:gzip:)`` closed its
    /// connection and the server stopped writing, say. A client that keeps its connection alive
    /// keeps it open (invalidate a `URLSession` to close its connections). After ``stop()`` every
    /// connection closes promptly, unless a handler never returns. Nothing polls or sleeps: the
    /// connection thread that closes the last connection resumes the waiting task.
    ///
    /// ```swift
    /// let server = try LoopbackHTTPServer { _ in .stream(byteCount: 4 << 30) }
    /// // ... a client reads part of the body, then closes its connection ...
    /// await server.waitUntilNoConnectionIsOpen()  // the server stopped writing
    /// ```
    ///
    /// Cancelling the waiting task does not end the wait.
    public func waitUntilNoConnectionIsOpen() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isSatisfied = core.state.withLock { state -> Bool in
                if state.openConnectionCount == 0 { return true }
                state.noOpenConnectionWaits.append(continuation)
                return false
            }
            if isSatisfied { continuation.resume() }
        }
    }

    /// Stops the server: closes the listening socket and every open connection.
    ///
    /// Returns once the listening socket is closed, so a new connection is refused from then on;
    /// the open connections close on their threads right after, and responses waiting for a delay
    /// or a gate are never sent. Pending ``waitForRequests(_:)``, ``waitForArrivals(_:)`` and
    /// ``waitUntilNoConnectionIsHeld()`` calls return, and later ones return at once. Calling it
    /// again does nothing. Releasing the server stops it too.
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
        var arrivals = 0
        var connectionCount = 0
        var openConnectionCount = 0
        var heldConnectionCount = 0
        /// Set once, by ``LoopbackHTTPServer/stop()`` or at the end of the lifetime; the waits are
        /// empty from then on.
        var isStopped = false
        var requestWaits: [RequestWait] = []
        var arrivalWaits: [RequestWait] = []
        var noHeldConnectionWaits: [CheckedContinuation<Void, Never>] = []
        /// Not emptied by the stop: the connections close on their threads after it.
        var noOpenConnectionWaits: [CheckedContinuation<Void, Never>] = []

        /// Counts an arrived request and returns the waits it satisfies.
        mutating func recordArrival() -> [CheckedContinuation<Void, Never>] {
            arrivals += 1
            var satisfied: [CheckedContinuation<Void, Never>] = []
            arrivalWaits.removeAll { wait in
                guard arrivals >= wait.count else { return false }
                satisfied.append(wait.continuation)
                return true
            }
            return satisfied
        }

        /// Counts a closed connection and returns the waits that this satisfies.
        mutating func closeConnection() -> [CheckedContinuation<Void, Never>] {
            openConnectionCount -= 1
            guard openConnectionCount == 0 else { return [] }
            defer { noOpenConnectionWaits = [] }
            return noOpenConnectionWaits
        }

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
                arrivalWaits = []
                noHeldConnectionWaits = []
            }
            return requestWaits.map(\.continuation) + arrivalWaits.map(\.continuation) + noHeldConnectionWaits
        }
    }
}

extension LoopbackHTTPServer {
    /// The most bytes a request head (request line and header fields) may take.
    static let maximumHeadSize = 64 * 1024
    /// The largest request body the server reads.
    static let maximumBodySize = 16 * 1024 * 1024

    /// A request line and header fields, parsed (shared with the inspector's server).
    typealias RequestHead = HTTPRequestHead

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
        var bytes = responseHead(
            status: status, headers: headers, contentLength: body.count, request: request, closes: closes)
        if sendsBody(status: status, request: request) { bytes.append(contentsOf: body) }
        return bytes
    }

    /// The status line and header fields of a response, and the empty line that ends them.
    ///
    /// - Parameters:
    ///   - status: The status code.
    ///   - headers: The header fields to send, in this order.
    ///   - contentLength: The `Content-Length` to add, unless `headers` have one or the status
    ///     has no body (1xx, 204); `nil` adds none.
    ///   - request: The request answered: an HTTP/1.0 request that keeps the connection gets
    ///     `Connection: keep-alive`.
    ///   - closes: Whether the server closes the connection afterwards (`Connection: close`).
    static func responseHead(
        status: Int, headers: [Header], contentLength: Int?, request: RequestHead?, closes: Bool
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
        if let contentLength, !hasContentLength && allowsBody(status: status) {
            text += "Content-Length: \(contentLength)\r\n"
        }
        if !hasConnection {
            if closes {
                text += "Connection: close\r\n"
            } else if request?.httpVersion == "HTTP/1.0" {
                text += "Connection: keep-alive\r\n"
            }
        }
        text += "\r\n"
        return Array(text.utf8)
    }

    /// Whether a response with `status` may describe a body at all: not a 1xx or a 204.
    static func allowsBody(status: Int) -> Bool {
        !(100..<200).contains(status) && status != 204
    }

    /// Whether a response with `status` to `request` carries its body: not to a `HEAD` request,
    /// and not with a status that has none (1xx, 204, 304).
    static func sendsBody(status: Int, request: RequestHead?) -> Bool {
        allowsBody(status: status) && status != 304 && request?.method != "HEAD"
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
