/// A condition the server checks before it applies a write: the write happens only if the
/// resource is still as the app last saw it (``ifMatch(_:)``, ``ifUnmodifiedSince(_:)``), or does
/// not exist yet (``ifNoneMatchAny``). When the condition fails, the server changes nothing and
/// answers `412 Precondition Failed` (``HTTPLoadableError/isPreconditionFailed``).
///
/// ```swift
/// // Save an edit only if nobody changed the record since it was shown.
/// let etag = recordLoadable.etag!  // "\"1700000000000\""
/// do {
///     try await api.send(.put, "records/7", json: edited, precondition: .ifMatch(etag))
/// } catch let error as HTTPLoadableError where error.isPreconditionFailed {
///     // Someone else saved first: show their version, ask what to keep.
/// }
/// ```
///
/// The value goes out verbatim: an entity tag keeps its quotes, as the server sent it in `ETag`
/// (``HTTPResponse/etag``, ``HTTPLoadable/etag``). A value a header cannot carry fails the send
/// before anything is sent (``HTTPService/InvalidHeaderError``): a write that went out without
/// its condition could overwrite someone else's.
///
/// A `Sendable` value, usable anywhere.
public struct HTTPPrecondition: Sendable, Hashable {
    /// The header's name: `If-Match`, `If-None-Match` or `If-Unmodified-Since`.
    public let headerName: String
    /// The header's value, as given.
    public let headerValue: String

    private init(_ headerName: String, _ headerValue: String) {
        self.headerName = headerName
        self.headerValue = headerValue
    }

    /// `If-Match: <etag>`: the write happens only if the resource's current entity tag is `etag`.
    ///
    /// ```swift
    /// HTTPPrecondition.ifMatch("\"17\"")  // If-Match: "17"
    /// ```
    ///
    /// - Parameter etag: The entity tag, quotes included, as the server sent it (a list of tags
    ///   separated by commas is sent as it is too).
    /// - Returns: The precondition.
    public static func ifMatch(_ etag: String) -> HTTPPrecondition {
        HTTPPrecondition("If-Match", etag)
    }

    /// `If-None-Match: *`: the write happens only if the resource does not exist, so that a
    /// create never replaces what someone else created under the same name, and a create sent
    /// again after a lost answer is refused with a `412` instead of applied twice.
    public static let ifNoneMatchAny = HTTPPrecondition("If-None-Match", "*")

    /// `If-Unmodified-Since: <httpDate>`: the write happens only if the resource has not changed
    /// since then, for servers that give `Last-Modified` and no `ETag`.
    ///
    /// ```swift
    /// HTTPPrecondition.ifUnmodifiedSince("Tue, 24 Nov 2026 10:00:00 GMT")
    /// ```
    ///
    /// - Parameter httpDate: An HTTP date, as the server sent it in `Last-Modified`
    ///   (``HTTPResponse/lastModified``, ``HTTPLoadable/lastModified``).
    /// - Returns: The precondition.
    public static func ifUnmodifiedSince(_ httpDate: String) -> HTTPPrecondition {
        HTTPPrecondition("If-Unmodified-Since", httpDate)
    }
}
