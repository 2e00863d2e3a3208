import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The answer to a write, with what the server said about it: the decoded value, the status, the
/// headers, and the validators of the new version (``etag``, ``lastModified``).
///
/// ```swift
/// let saved = try await api.response(to: .put, "records/7", json: edited, as: Record.self,
///                                    precondition: .ifMatch(etag))
/// etag = saved.etag  // the next edit's precondition
/// ```
///
/// Returned by ``HTTPService/response(to:_:json:as:idempotencyKey:precondition:headers:)`` and
/// ``HTTPService/response(to:_:as:idempotencyKey:precondition:headers:)``. A `Sendable` value,
/// usable anywhere.
public struct HTTPResponse<Value: Sendable>: Sendable {
    /// The 2xx body, decoded.
    public let value: Value
    /// The status, a 2xx (as in `200` or `201`).
    public let status: Int
    /// The response's header fields, names as the transport gave them (look them up with
    /// ``header(_:)``, which ignores case).
    public let headers: [String: String]
    /// The `ETag` of the resource as the write left it, as sent (quotes included); `nil` when the
    /// server sent none.
    public var etag: String? { header("ETag") }
    /// The `Last-Modified` of the resource as the write left it, as sent; `nil` when the server
    /// sent none.
    public var lastModified: String? { header("Last-Modified") }

    /// The response of `value` with the status and headers of `response`.
    init(value: Value, response: HTTPURLResponse) {
        self.value = value
        status = response.statusCode
        headers = response.headerFields
    }

    /// The value of the header field `name`, in any case.
    ///
    /// ```swift
    /// response.header("content-type")  // "application/json"
    /// ```
    ///
    /// - Parameter name: The field name, in any case.
    /// - Returns: The field's value, or `nil` when the response had no such field.
    public func header(_ name: String) -> String? {
        HTTPLoadableError.header(name, in: headers)
    }
}

extension HTTPURLResponse {
    /// The header fields as strings, names as the transport gave them.
    var headerFields: [String: String] {
        // Every transport's fields are strings: one cast, not a description of each.
        if let fields = allHeaderFields as? [String: String] { return fields }
        var headers: [String: String] = [:]
        for (name, value) in allHeaderFields {
            headers[String(describing: name)] = String(describing: value)
        }
        return headers
    }
}
