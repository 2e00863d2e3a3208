public import Foundation
public import LoadableSyncer

#if canImport(FoundationNetworking)
    public import FoundationNetworking
#endif

extension HTTPService {
    /// Sends `body` as JSON with `method` to `path`, and decodes the answer.
    ///
    /// ```swift
    /// let comment = try await api.send(.post, "posts/7/comments", json: NewComment(text: "Hi"), as: Comment.self)
    /// ```
    ///
    /// The body goes with `Content-Type: application/json` (unless `headers` sets another, such as
    /// `application/merge-patch+json`). The rules are the service's (see ``HTTPService``): one
    /// renewal and one retry after a `401`, with the same body, key, precondition and headers;
    /// nothing else retried.
    ///
    /// - Parameters:
    ///   - method: The method.
    ///   - path: The path, relative to the base URL's (see ``request(_:_:query:)``).
    ///   - body: The body, encoded with ``encoder`` before anything is sent.
    ///   - type: The type of the answer, decoded from a 2xx body with ``decoder``.
    ///   - idempotencyKey: Sent as the `Idempotency-Key` header (the same on the 401 retry), so that
    ///     a server that honours it applies the write once however often it is sent: visible ASCII,
    ///     as a UUID string is (see ``InvalidHeaderError``).
    ///   - precondition: A condition the server checks before it applies the write (see
    ///     ``HTTPPrecondition``); when it fails, the send throws a `412`
    ///     (``HTTPLoadableError/isPreconditionFailed``).
    ///   - headers: Header fields of this request. They replace the service's ``headers`` of the
    ///     same name (any case), the service's others still go; `Idempotency-Key` and the
    ///     precondition's header replace an entry of the same name here, and with an
    ///     ``authorization`` its `Authorization` header replaces one here.
    /// - Returns: The decoded answer.
    /// - Throws: ``BodyEncodingError`` when the body does not encode, ``InvalidHeaderError`` when
    ///   a header cannot carry a key, a precondition or a header of `headers` (nothing was sent);
    ///   an ``HTTPLoadableError``; the authorization's errors (`LoadableWaiterError`);
    ///   `CancellationError` when the calling task is cancelled.
    public func send<Response: Decodable & Sendable>(
        _ method: HTTPMethod,
        _ path: String,
        json body: some Encodable & Sendable,
        as type: Response.Type,
        idempotencyKey: String? = nil,
        precondition: HTTPPrecondition? = nil,
        headers: [String: String] = [:]
    ) async throws -> Response {
        let request = try jsonRequest(
            method, path, body: body,
            .init(idempotencyKey: idempotencyKey, precondition: precondition, headers: headers))
        return try await answer(to: request) { [decoder] _, data in try decoder.decode(Response.self, from: data) }
    }

    /// Sends `method` to `path` without a body, and decodes the answer.
    ///
    /// ```swift
    /// let post = try await api.send(.post, "posts/7/like", as: Post.self)
    /// ```
    ///
    /// - Parameters:
    ///   - method: The method.
    ///   - path: The path, relative to the base URL's (see ``request(_:_:query:)``).
    ///   - type: The type of the answer, decoded from a 2xx body with ``decoder``.
    ///   - idempotencyKey: Sent as the `Idempotency-Key` header, the same on the 401 retry.
    ///   - precondition: A condition the server checks first (see ``HTTPPrecondition``).
    ///   - headers: Header fields of this request, replacing the service's of the same name (see
    ///     ``send(_:_:json:as:idempotencyKey:precondition:headers:)``).
    /// - Returns: The decoded answer.
    /// - Throws: ``InvalidHeaderError`` when a header cannot carry a value (nothing was sent); an
    ///   ``HTTPLoadableError``; the authorization's errors; `CancellationError`.
    public func send<Response: Decodable & Sendable>(
        _ method: HTTPMethod,
        _ path: String,
        as type: Response.Type,
        idempotencyKey: String? = nil,
        precondition: HTTPPrecondition? = nil,
        headers: [String: String] = [:]
    ) async throws -> Response {
        let request = try request(
            method, path, .init(idempotencyKey: idempotencyKey, precondition: precondition, headers: headers))
        return try await answer(to: request) { [decoder] _, data in try decoder.decode(Response.self, from: data) }
    }

    /// Sends `body` as JSON with `method` to `path`; any 2xx (`204` included) is a success, and
    /// its body is not read.
    ///
    /// ```swift
    /// try await api.send(.put, "posts/7", json: Edit(title: "New title"), precondition: .ifMatch(etag))
    /// ```
    ///
    /// - Parameters:
    ///   - method: The method.
    ///   - path: The path, relative to the base URL's (see ``request(_:_:query:)``).
    ///   - body: The body, encoded with ``encoder`` before anything is sent.
    ///   - idempotencyKey: Sent as the `Idempotency-Key` header, the same on the 401 retry.
    ///   - precondition: A condition the server checks first (see ``HTTPPrecondition``).
    ///   - headers: Header fields of this request, replacing the service's of the same name (see
    ///     ``send(_:_:json:as:idempotencyKey:precondition:headers:)``).
    /// - Throws: ``BodyEncodingError`` when the body does not encode, ``InvalidHeaderError`` when
    ///   a header cannot carry a value (nothing was sent); an ``HTTPLoadableError``; the
    ///   authorization's errors; `CancellationError`.
    public func send(
        _ method: HTTPMethod,
        _ path: String,
        json body: some Encodable & Sendable,
        idempotencyKey: String? = nil,
        precondition: HTTPPrecondition? = nil,
        headers: [String: String] = [:]
    ) async throws {
        let request = try jsonRequest(
            method, path, body: body,
            .init(idempotencyKey: idempotencyKey, precondition: precondition, headers: headers))
        try await answer(to: request) { _, _ in }
    }

    /// Sends `method` to `path` without a body; any 2xx (`204` included) is a success, and its
    /// body is not read.
    ///
    /// ```swift
    /// try await api.send(.delete, "posts/7/like")
    /// ```
    ///
    /// - Parameters:
    ///   - method: The method.
    ///   - path: The path, relative to the base URL's (see ``request(_:_:query:)``).
    ///   - idempotencyKey: Sent as the `Idempotency-Key` header, the same on the 401 retry.
    ///   - precondition: A condition the server checks first (see ``HTTPPrecondition``).
    ///   - headers: Header fields of this request, replacing the service's of the same name (see
    ///     ``send(_:_:json:as:idempotencyKey:precondition:headers:)``).
    /// - Throws: ``InvalidHeaderError`` when a header cannot carry a value (nothing was sent); an
    ///   ``HTTPLoadableError``; the authorization's errors; `CancellationError`.
    public func send(
        _ method: HTTPMethod,
        _ path: String,
        idempotencyKey: String? = nil,
        precondition: HTTPPrecondition? = nil,
        headers: [String: String] = [:]
    ) async throws {
        let request = try request(
            method, path, .init(idempotencyKey: idempotencyKey, precondition: precondition, headers: headers))
        try await answer(to: request) { _, _ in }
    }

    /// Sends `body` as JSON with `method` to `path`, and returns the decoded answer with its
    /// status, headers and validators: a send for when the new version matters (the next edit's
    /// `If-Match`, a `201` against a `200`).
    ///
    /// ```swift
    /// let created = try await api.response(
    ///     to: .put, "records/\(id)", json: draft, as: Record.self, precondition: .ifNoneMatchAny)
    /// created.status  // 201
    /// created.etag    // "\"1700000000000\"": the precondition of the next edit
    /// ```
    ///
    /// The rules are those of ``send(_:_:json:as:idempotencyKey:precondition:headers:)``.
    ///
    /// - Parameters:
    ///   - method: The method.
    ///   - path: The path, relative to the base URL's (see ``request(_:_:query:)``).
    ///   - body: The body, encoded with ``encoder`` before anything is sent.
    ///   - type: The type of the answer, decoded from a 2xx body with ``decoder``.
    ///   - idempotencyKey: Sent as the `Idempotency-Key` header, the same on the 401 retry.
    ///   - precondition: A condition the server checks first (see ``HTTPPrecondition``).
    ///   - headers: Header fields of this request, replacing the service's of the same name.
    /// - Returns: The answer: the decoded value, the 2xx status, the headers, `ETag` and
    ///   `Last-Modified`.
    /// - Throws: ``BodyEncodingError``, ``InvalidHeaderError`` (nothing was sent); an
    ///   ``HTTPLoadableError``; the authorization's errors; `CancellationError`.
    public func response<Value: Decodable & Sendable>(
        to method: HTTPMethod,
        _ path: String,
        json body: some Encodable & Sendable,
        as type: Value.Type,
        idempotencyKey: String? = nil,
        precondition: HTTPPrecondition? = nil,
        headers: [String: String] = [:]
    ) async throws -> HTTPResponse<Value> {
        let request = try jsonRequest(
            method, path, body: body,
            .init(idempotencyKey: idempotencyKey, precondition: precondition, headers: headers))
        return try await answer(to: request) { [decoder] response, data in
            HTTPResponse(value: try decoder.decode(Value.self, from: data), response: response)
        }
    }

    /// Sends `method` to `path` without a body, and returns the decoded answer with its status,
    /// headers and validators.
    ///
    /// ```swift
    /// let current = try await api.response(to: .get, "records/7", as: Record.self)
    /// let etag = current.etag
    /// ```
    ///
    /// The rules are those of ``send(_:_:as:idempotencyKey:precondition:headers:)``.
    ///
    /// - Parameters:
    ///   - method: The method.
    ///   - path: The path, relative to the base URL's (see ``request(_:_:query:)``).
    ///   - type: The type of the answer, decoded from a 2xx body with ``decoder``.
    ///   - idempotencyKey: Sent as the `Idempotency-Key` header, the same on the 401 retry.
    ///   - precondition: A condition the server checks first (see ``HTTPPrecondition``).
    ///   - headers: Header fields of this request, replacing the service's of the same name.
    /// - Returns: The answer: the decoded value, the 2xx status, the headers, `ETag` and
    ///   `Last-Modified`.
    /// - Throws: ``InvalidHeaderError`` (nothing was sent); an ``HTTPLoadableError``; the
    ///   authorization's errors; `CancellationError`.
    public func response<Value: Decodable & Sendable>(
        to method: HTTPMethod,
        _ path: String,
        as type: Value.Type,
        idempotencyKey: String? = nil,
        precondition: HTTPPrecondition? = nil,
        headers: [String: String] = [:]
    ) async throws -> HTTPResponse<Value> {
        let request = try request(
            method, path, .init(idempotencyKey: idempotencyKey, precondition: precondition, headers: headers))
        return try await answer(to: request) { [decoder] response, data in
            HTTPResponse(value: try decoder.decode(Value.self, from: data), response: response)
        }
    }

    /// Sends a request of any kind (a form, an upload, a request to another host) with the
    /// service's headers, authorization, transport and body limit, and returns the 2xx answer as
    /// it is.
    ///
    /// ```swift
    /// var upload = api.request(.put, "avatar")
    /// upload.setValue("image/png", forHTTPHeaderField: "Content-Type")
    /// upload.httpBody = png
    /// let (response, data) = try await api.send(upload)
    /// ```
    ///
    /// The service's headers are added where the request does not set the same field; with an
    /// ``authorization``, its `Authorization` header replaces the request's. A body in `httpBody`
    /// goes out again on the retry after a `401`; a body stream (`httpBodyStream`) cannot, since
    /// the refused request read it: the credential is renewed, and the send throws
    /// ``BodyStreamSpentError`` for the caller to send again with a new stream.
    ///
    /// - Parameter request: The request.
    /// - Returns: The response and its body, for any 2xx.
    /// - Throws: ``HTTPLoadableError/status(code:headers:bodyPrefix:)`` for any other status (a
    ///   `304` too); ``BodyStreamSpentError`` for a body stream refused with a `401`; and the
    ///   service's other errors (see ``HTTPService``).
    public func send(_ request: URLRequest) async throws -> (HTTPURLResponse, Data) {
        var request = request
        for (name, value) in headers where request.value(forHTTPHeaderField: name) == nil {
            request.setValue(value, forHTTPHeaderField: name)
        }
        return try await answer(to: request) { response, data in (response, data) }
    }

    /// What a send adds to its request beyond the method, path and body.
    private struct Extras {
        var idempotencyKey: String?
        var precondition: HTTPPrecondition?
        var headers: [String: String]
    }

    /// The request of a send without a body: the service's headers, then the send's own, the key
    /// and the precondition, each replacing a field of the same name.
    ///
    /// - Throws: ``InvalidHeaderError`` for a header that a request cannot carry.
    private func request(_ method: HTTPMethod, _ path: String, _ extras: Extras) throws -> URLRequest {
        var request = request(method, path)
        try add(extras, to: &request)
        return request
    }

    /// Adds the send's own headers, key and precondition to `request`, in that order.
    private func add(_ extras: Extras, to request: inout URLRequest) throws {
        for (name, value) in extras.headers {
            try InvalidHeaderError.checkName(name)
            try InvalidHeaderError.check(value, of: name)
            request.setValue(value, forHTTPHeaderField: name)
        }
        if let idempotencyKey = extras.idempotencyKey {
            try InvalidHeaderError.check(idempotencyKey, of: "Idempotency-Key")
            request.setValue(idempotencyKey, forHTTPHeaderField: "Idempotency-Key")
        }
        if let precondition = extras.precondition {
            try InvalidHeaderError.check(precondition.headerValue, of: precondition.headerName)
            request.setValue(precondition.headerValue, forHTTPHeaderField: precondition.headerName)
        }
    }

    /// The request of a send with a JSON body: `Content-Type: application/json` unless the send's
    /// own headers set another.
    private func jsonRequest<Body: Encodable>(
        _ method: HTTPMethod, _ path: String, body: Body, _ extras: Extras
    ) throws -> URLRequest {
        let data: Data
        do {
            data = try encoder.encode(body)
        } catch {
            throw BodyEncodingError(typeName: String(describing: Body.self), error: error)
        }
        var request = request(method, path)
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        try add(extras, to: &request)
        request.httpBody = data
        return request
    }

    /// Sends `request` (authorized, with the one retry after a 401) and reads a 2xx with `read`,
    /// off the main actor.
    private func answer<Answer: Sendable>(
        to request: URLRequest,
        read: @escaping @Sendable (HTTPURLResponse, Data) throws -> Answer
    ) async throws -> Answer {
        let exchange = Exchange(transport: transport, maxBodySize: maxBodySize, read: read)
        switch try await exchange.run(request, authorization: authorization) {
        case .decoded(let answer, _, _): return answer
        case .unauthorized(let rejection): throw rejection
        case .notModified: throw HTTPLoadableError.status(code: 304, headers: [:], bodyPrefix: Data())
        }
    }
}

extension HTTPService {
    /// A body that could not be encoded as JSON; the send failed before anything was sent.
    ///
    /// ```swift
    /// struct Reading: Encodable, Sendable { let value: Double }
    /// do {
    ///     try await api.send(.post, "readings", json: Reading(value: .nan))
    /// } catch let error as HTTPService.BodyEncodingError {
    ///     print(error)  // HTTPService: the JSON body of type Reading could not be encoded: value: …
    /// }
    /// ```
    ///
    /// A programming error rather than a failure of the network: it is not `RetryAfterProviding`,
    /// so a syncer or an outbox does not retry it. A `Sendable` value, usable anywhere.
    public struct BodyEncodingError: Error, Sendable, CustomStringConvertible {
        /// The name of the body's type, as in `"Reading"`.
        public let typeName: String
        /// Why the encoder refused it: the coding path and the encoder's explanation.
        public let reason: String

        init(typeName: String, error: any Error) {
            self.typeName = typeName
            if let error = error as? EncodingError, case .invalidValue(_, let context) = error {
                let path = context.codingPath.map(\.stringValue).joined(separator: ".")
                reason = path.isEmpty ? context.debugDescription : "\(path): \(context.debugDescription)"
            } else {
                reason = String(describing: error)
            }
        }

        /// `HTTPService: the JSON body of type <type> could not be encoded: <reason>`.
        public var description: String {
            "HTTPService: the JSON body of type \(typeName) could not be encoded: \(reason)"
        }
    }

    /// A request whose body is a stream (`httpBodyStream`) was refused with a `401`: the refused
    /// request read the stream, so it is not sent again with the renewed credential.
    ///
    /// A body in `httpBody` (`Data`) is sent again after a `401`, as every send's is; a stream
    /// can be read once. The credential was renewed all the same, so the next attempt, with a new
    /// stream, goes out with it:
    ///
    /// ```swift
    /// func upload(_ file: URL) async throws {
    ///     var request = api.request(.put, "avatar")
    ///     request.httpBodyStream = InputStream(url: file)
    ///     do {
    ///         _ = try await api.send(request)
    ///     } catch let error as HTTPService.BodyStreamSpentError {
    ///         print(error.rejection)  // HTTP 401: …
    ///         request.httpBodyStream = InputStream(url: file)  // a new stream, the new credential
    ///         _ = try await api.send(request)
    ///     }
    /// }
    /// ```
    ///
    /// It is `RetryAfterProviding`, retryable, without a `Retry-After`: an outbox (or a syncer)
    /// retries it, and each retry of an outbox's send builds a new request with a new stream.
    /// Thrown by ``HTTPService/send(_:)`` and by a loadable whose request has a body stream. A
    /// `Sendable` value, usable anywhere.
    public struct BodyStreamSpentError: Error, Sendable, RetryAfterProviding, CustomStringConvertible {
        /// The server's refusal: ``HTTPLoadableError/status(code:headers:bodyPrefix:)`` with
        /// code 401.
        public let rejection: HTTPLoadableError

        /// `true`: the credential was renewed, and a new attempt with a new stream may succeed.
        public var isRetryable: Bool { true }

        /// `nil`: a new attempt may go at once.
        public var retryAfter: Duration? { nil }

        /// One line: the stream was read by a request refused with a `401`, the credential was
        /// renewed, and what to do.
        public var description: String {
            "HTTPService: the request's body stream was read by a request the server refused with 401 "
                + "(\(rejection)); the credential was renewed: send the request again with a new stream, "
                + "or pass the body as Data (httpBody), which the retry after a 401 sends again"
        }
    }

    /// A header value that a request cannot carry; the send failed before anything was sent.
    ///
    /// ```swift
    /// do {
    ///     try await api.send(.post, "orders", json: order, idempotencyKey: "order\n7")
    /// } catch let error as HTTPService.InvalidHeaderError {
    ///     print(error)  // HTTPService: the Idempotency-Key header cannot carry its value: it has a line break; …
    /// }
    /// ```
    ///
    /// A value goes in a header as it is or not at all: `URLRequest` drops one it cannot send,
    /// and the request would go out without it (a write without its idempotency key could be
    /// applied twice). A valid value is not empty, has only visible ASCII characters (`!` to `~`)
    /// and spaces or tabs between them (RFC 9110's field value), and does not start or end with a
    /// space or a tab. A UUID string, as the outbox makes, always is.
    ///
    /// A programming error rather than a failure of the network: it is not `RetryAfterProviding`,
    /// so a syncer or an outbox does not retry it. A `Sendable` value, usable anywhere.
    public struct InvalidHeaderError: Error, Sendable, CustomStringConvertible {
        /// The header's name, as in `"Idempotency-Key"`.
        public let name: String
        /// The value refused, as given.
        public let value: String
        /// Why a header cannot carry it, as in `"it has a line break"`.
        public let reason: String

        /// Throws when a header called `name` cannot carry `value`.
        static func check(_ value: String, of name: String) throws {
            func refuse(_ reason: String) -> InvalidHeaderError {
                InvalidHeaderError(name: name, value: value, reason: reason)
            }
            guard !value.isEmpty else { throw refuse("it is empty") }
            for scalar in value.unicodeScalars {
                switch scalar.value {
                case 0x21...0x7E, 0x20, 0x09: continue
                case 0x0A, 0x0D: throw refuse("it has a line break")
                case 0x00..<0x20, 0x7F: throw refuse("it has a control character")
                default: throw refuse("it has a character outside visible ASCII (\(scalar.escaped(asASCII: true)))")
                }
            }
            let isBlank = { (scalar: Unicode.Scalar?) in scalar == " " || scalar == "\t" }
            if isBlank(value.unicodeScalars.first) || isBlank(value.unicodeScalars.last) {
                throw refuse("it starts or ends with a space or a tab")
            }
        }

        /// Throws when `name` is not a field name a request can carry.
        static func checkName(_ name: String) throws {
            guard isToken(name) else {
                throw InvalidHeaderError(
                    name: name, value: "", reason: "its name is not an HTTP token (letters, digits and !#$%&'*+-.^_`|~)"
                )
            }
        }

        /// Whether `text` is an HTTP token (RFC 9110): not empty, letters, digits and
        /// `!#$%&'*+-.^_|~` and the backtick only, as a field name or an authorization scheme is.
        static func isToken(_ text: String) -> Bool {
            !text.isEmpty
                && text.unicodeScalars.allSatisfy { scalar in
                    switch scalar {
                    case "a"..."z", "A"..."Z", "0"..."9": true
                    default: "!#$%&'*+-.^_`|~".unicodeScalars.contains(scalar)
                    }
                }
        }

        /// `HTTPService: the <name> header cannot carry its value: <reason>; nothing was sent`
        /// (without the value, which may be a secret in another header).
        public var description: String {
            "HTTPService: the \(name) header cannot carry its value: \(reason); nothing was sent"
        }
    }
}
