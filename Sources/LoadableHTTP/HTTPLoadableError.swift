public import Foundation
public import LoadableSyncer

/// Why an ``HTTPLoadable`` sync failed.
///
/// It is `RetryAfterProviding`: a `429` or `503` with a `Retry-After` header gives
/// the syncer the server's hint, and ``isRetryable`` is what a syncer retries by default (timeouts,
/// `429`, `5xx`, transport failures), so a `404` or a body that does not decode is not retried
/// again and again.
///
/// ```swift
/// switch feed.error as? HTTPLoadableError {
/// case .status(code: 404, _, _)?: showNotFound()
/// case .status(code: let code, _, _)?: show("The server answered \(code)")
/// case .transport(let error)?: show(error.localizedDescription)  // offline, timed out, …
/// case .decoding?, .tooLarge?, nil: show("Something went wrong")
/// }
/// ```
///
/// A `Sendable` value, usable anywhere.
public enum HTTPLoadableError: Error, Sendable, RetryAfterProviding, CustomStringConvertible {
    /// The server answered with a status that is neither 2xx nor an expected 304.
    ///
    /// - `code`: the status code.
    /// - `headers`: the response's header fields, names as the transport gave them (look them up
    ///   with ``header(_:)``, which ignores case).
    /// - `bodyPrefix`: the first bytes of the body (at most ``bodyPrefixLimit``), often the
    ///   server's explanation.
    case status(code: Int, headers: [String: String], bodyPrefix: Data)
    /// A 2xx body that is not valid JSON for the contents type. The contents are kept.
    case decoding(DecodingError)
    /// The request did not get a response: offline, timed out, connection lost, a malformed
    /// response, and so on.
    case transport(URLError)
    /// The body was larger than the loadable's `maxBodySize`; the transfer was stopped.
    case tooLarge(maxBodySize: Int)

    /// The most bytes of a failed response's body kept in ``status(code:headers:bodyPrefix:)``:
    /// 4 KB.
    public static let bodyPrefixLimit = 4_096

    /// Whether a retry may succeed: `408`, `425`, `429` and `5xx` statuses, a `409` that carries
    /// `Retry-After`, and every transport failure are retryable; other statuses, decoding failures
    /// and bodies over the limit are not.
    ///
    /// ```swift
    /// HTTPLoadableError.status(code: 503, headers: [:], bodyPrefix: Data()).isRetryable  // true
    /// HTTPLoadableError.status(code: 404, headers: [:], bodyPrefix: Data()).isRetryable  // false
    /// HTTPLoadableError.status(code: 409, headers: ["Retry-After": "3"], bodyPrefix: Data()).isRetryable  // true
    /// ```
    ///
    /// A `409` with `Retry-After` is the server asking for the same request again later, not a
    /// conflict of versions: Kinto on PostgreSQL answers parallel writes to one collection so
    /// ("please retry", `Retry-After: 3`), and so does a server that honours `Idempotency-Key`
    /// while the first request with the same key is still being processed.
    public var isRetryable: Bool {
        switch self {
        case .status(let code, let headers, _):
            switch code {
            case 408, 425, 429, 500...599: true
            case 409: Self.header("Retry-After", in: headers) != nil
            default: false
            }
        case .transport: true
        case .decoding, .tooLarge: false
        }
    }

    /// Whether a write that carried an idempotency key may be sent again with it: when
    /// ``isRetryable``, and for a `409` without `Retry-After`, which to such a request means "a
    /// request with this key is still being processed" (the IETF `Idempotency-Key` draft). A
    /// server that answers `409` for a real conflict to a keyed write should be told apart in the
    /// outbox's `send` (return a conflict outcome there).
    public var isRetryableWithIdempotencyKey: Bool {
        if isRetryable { return true }
        guard case .status(409, _, _) = self else { return false }
        return true
    }

    /// Whether the server refused a write because the resource is not in the state the request
    /// expected: a `412 Precondition Failed` (see ``isPreconditionFailed``), or a `409 Conflict`
    /// without `Retry-After`.
    ///
    /// ```swift
    /// do {
    ///     try await api.send(.put, "records/7", json: edit, precondition: .ifMatch(shownETag))
    /// } catch let error as HTTPLoadableError where error.isConflict {
    ///     // Someone else changed it: load the server's version and decide.
    /// }
    /// ```
    ///
    /// A `409` that carries `Retry-After` is not a conflict but a request to retry later (see
    /// ``isRetryable``). `false` for every failure other than a status.
    public var isConflict: Bool {
        guard case .status(let code, let headers, _) = self else { return false }
        return code == 412 || (code == 409 && Self.header("Retry-After", in: headers) == nil)
    }

    /// Whether the server answered `412 Precondition Failed`: the request's precondition
    /// (``HTTPPrecondition``) did not hold. After ``HTTPPrecondition/ifMatch(_:)``, someone else
    /// changed the resource; after ``HTTPPrecondition/ifNoneMatchAny``, it exists already.
    ///
    /// ```swift
    /// HTTPLoadableError.status(code: 412, headers: [:], bodyPrefix: Data()).isPreconditionFailed  // true
    /// ```
    ///
    /// `false` for every failure other than a status.
    public var isPreconditionFailed: Bool {
        guard case .status(let code, _, _) = self else { return false }
        return code == 412
    }

    /// The server's `Retry-After` for a ``status(code:headers:bodyPrefix:)`` failure; `nil` when
    /// it sent none, or one that is not valid (`-5`, `soon`), or for any other failure.
    ///
    /// Delay-seconds (`Retry-After: 120`) are read as they are. An HTTP-date is measured from the
    /// response's own `Date` header, not from this machine's clock, so that a client whose clock
    /// is off still waits as long as the server asked; without a `Date` header a date gives `nil`.
    public var retryAfter: Duration? {
        guard case .status(_, let headers, _) = self, let value = Self.header("Retry-After", in: headers) else {
            return nil
        }
        return RetryAfter.parse(value, responseDate: Self.header("Date", in: headers))
    }

    /// The value of the header field `name` (any case) of a
    /// ``status(code:headers:bodyPrefix:)`` failure; `nil` for other failures.
    ///
    /// ```swift
    /// error.header("retry-after")  // "120"
    /// ```
    ///
    /// - Parameter name: The field name, in any case.
    /// - Returns: The field's value, or `nil` when the response had no such field.
    public func header(_ name: String) -> String? {
        guard case .status(_, let headers, _) = self else { return nil }
        return Self.header(name, in: headers)
    }

    /// A one-line account: `HTTP 503 (Retry-After: 120): <body prefix>`, `decoding failed: …`.
    public var description: String {
        switch self {
        case .status(let code, _, let bodyPrefix):
            var text = "HTTP \(code)"
            if let retryAfter = header("Retry-After") { text += " (Retry-After: \(retryAfter))" }
            let body = String(decoding: bodyPrefix.prefix(200), as: UTF8.self)
                .replacingOccurrences(of: "\n", with: " ")
            if !body.isEmpty { text += ": \(body)" }
            return text
        case .decoding(let error): return "decoding failed: \(Self.describe(error))"
        case .transport(let error): return "transport failed: \(Self.describe(error.code))"
        case .tooLarge(let maxBodySize): return "response body over maxBodySize (\(maxBodySize) bytes)"
        }
    }

    static func header(_ name: String, in headers: [String: String]) -> String? {
        if let value = headers[name] { return value }
        return headers.first { isSameFieldName($0.key, name) }?.value
    }

    /// Whether two field names are the same in ASCII, whatever their case (field names are ASCII
    /// tokens; Foundation's case-insensitive comparison costs ten times more).
    static func isSameFieldName(_ a: String, _ b: String) -> Bool {
        var (first, second) = (a.utf8.makeIterator(), b.utf8.makeIterator())
        while true {
            switch (first.next(), second.next()) {
            case (nil, nil): return true
            case (let x?, let y?):
                if x == y { continue }
                let lower = { (byte: UInt8) in (0x41...0x5A).contains(byte) ? byte | 0x20 : byte }
                if lower(x) != lower(y) { return false }
            default: return false
            }
        }
    }

    /// `URLError` codes by name where the name says what happened; others by number.
    private static func describe(_ code: URLError.Code) -> String {
        let names: [URLError.Code: String] = [
            .unknown: "unknown",
            .cancelled: "cancelled",
            .badURL: "bad URL",
            .timedOut: "timed out",
            .unsupportedURL: "unsupported URL",
            .cannotFindHost: "cannot find host",
            .cannotConnectToHost: "cannot connect to host",
            .networkConnectionLost: "network connection lost",
            .dnsLookupFailed: "DNS lookup failed",
            .notConnectedToInternet: "not connected to the internet",
            .badServerResponse: "bad server response",
            .userAuthenticationRequired: "user authentication required (no usable token)",
            .secureConnectionFailed: "secure connection failed",
        ]
        return "URLError \(code.rawValue)" + (names[code].map { " (\($0))" } ?? "")
    }

    private static func describe(_ error: DecodingError) -> String {
        let context: DecodingError.Context
        switch error {
        case .typeMismatch(_, let c), .valueNotFound(_, let c), .keyNotFound(_, let c), .dataCorrupted(let c):
            context = c
        @unknown default:
            return String(describing: error)
        }
        let path = context.codingPath.map(\.stringValue).joined(separator: ".")
        return path.isEmpty ? context.debugDescription : "\(path): \(context.debugDescription)"
    }
}
