public import Foundation
import Loadable
public import LoadableHTTP
import LoadableSupport
public import LoadableSyncer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A ``SyncRemote`` for one collection of a [Kinto](https://kinto.readthedocs.io) server: the
/// reference adapter, tested against a real Kinto.
///
/// ```swift
/// struct Note: Identifiable, Codable, Sendable, Equatable {
///     var id: String  // letters, digits, `-` and `_`, as Kinto's ids are
///     var text: String
/// }
///
/// let credentials = AsyncLoadable<HTTPBasicCredentials> { try await keychain.credentials() }
/// let kinto = HTTPService(
///     baseURL: URL(string: "https://kinto.example.com/v1")!,
///     authorization: .basic(LoadableWaiter(credentials, timeout: .seconds(30))))
/// let remote = KintoRemote<Note>(service: kinto, bucket: "notes-app", collection: "notes")
///
/// let page = try await remote.pull(since: nil)  // the first page of every note
/// let created = try await remote.push(.create(Note(id: "n1", text: "Hi")), idempotencyKey: UUID().uuidString)
/// ```
///
/// What it sends, under `buckets/<bucket>/collections/<collection>/records` of the service's base
/// URL (Kinto's `/v1`):
/// - **Pulls**: `GET records?_sort=last_modified`, with `_since=<cursor>` when there is a cursor
///   (then Kinto adds tombstones, `{"id": …, "deleted": true, "last_modified": …}`, which become
///   ``SyncPage/deleted``). Each record is decoded as `Record` from its JSON object with the
///   service's decoder (`id`, `last_modified` and any other field the type does not have are
///   ignored), and its `last_modified` is its version. Kinto sends a `Next-Page` header when more
///   records follow (its `paginate_by` setting): then ``SyncPage/hasMore`` is `true`, and the
///   page's cursor is the **last record's `last_modified`**: the records come in ascending
///   `last_modified` order and Kinto's timestamps are unique in a collection, so `_since=<that>`
///   continues exactly where the page ended, without Kinto's pagination token (which a relaunch
///   would lose); a crash between two pages pulls the next page again, nothing is skipped. The
///   last page's cursor is the **collection's timestamp**, from the `ETag` header (quotes, and a
///   proxy's `W/`, removed), so that the next pull asks only for what changed after everything
///   seen; without a usable `ETag` it is the last record's `last_modified`, else the cursor the
///   pull was given, else `"0"` (everything).
/// - **Creates**: `PUT records/<id>` with `If-None-Match: *` and `{"data": record}`.
/// - **Updates**: `PUT records/<id>` with `If-Match: "<base>"` and `{"data": record}` (the whole
///   record: Kinto replaces it).
/// - **Deletes**: `DELETE records/<id>` with `If-Match: "<base>"`; a `404` is
///   ``PushResult/deleted`` too (it was gone already).
/// - Every push carries the idempotency key as `Idempotency-Key` (Kinto ignores it; the
///   preconditions make a push sent twice harmless).
/// - A `412` reads the record as the server has it (`GET records/<id>`) and answers
///   ``PushResult/conflict(remote:)`` with it (`nil` when it is deleted; a delete then is
///   ``PushResult/deleted``), except a create that finds the server's record equal to the one it
///   sent: that is the same create sent again (its answer was lost, or another process took the
///   outbox over), ``PushResult/applied(_:)``.
/// - Other failures are thrown as the service throws them (`HTTPLoadableError`): a `409` with
///   `Retry-After`, which Kinto's PostgreSQL backend sends for concurrent writes, is retryable and
///   never a conflict; a `401` that another password does not cure stands.
/// - Kinto's `Backoff: <seconds>` header, on any answer, asks clients to wait: until that time
///   passes (on `now`), a pull or a push throws ``KintoRemoteError/Code/backoff`` at once, with the
///   time left as its `retryAfter`, so that a `LoadableSyncer` and the collection's outbox wait.
///   The push or pull that brought the header completes as answered.
///
/// Record ids go in the path as `String(describing: id)`, and must be Kinto ids: ASCII letters,
/// digits, `-` and `_`, starting with a letter or a digit (a `String`, or a `UUID`, whose text is
/// one). Its JSON in the record should be that same string, since Kinto keeps ids as strings. An
/// id that is not one is refused before anything is sent (``KintoRemoteError/Code/invalidID``);
/// so are bucket and collection names that are not.
///
/// A `Sendable` value, usable anywhere: its calls run on no particular actor, and copies share the
/// `Backoff` deadline.
public struct KintoRemote<Record: Identifiable & Codable & Sendable & Equatable>: SyncRemote
where Record.ID: Codable & Sendable {
    /// The service of the Kinto server: base URL (up to `/v1`), authorization, transport, coders.
    public let service: HTTPService
    /// The bucket's id.
    public let bucket: String
    /// The collection's id, in ``bucket``.
    public let collection: String

    /// The current time, for the `Backoff` deadline.
    private let now: @Sendable () -> Date
    /// When the server's last `Backoff` ends; shared by copies.
    private let backoff = BackoffDeadline()

    /// Creates the remote of one collection.
    ///
    /// ```swift
    /// let remote = KintoRemote<Note>(service: kinto, bucket: "notes-app", collection: "notes")
    /// ```
    ///
    /// - Parameters:
    ///   - service: The service of the Kinto server; its base URL ends with Kinto's `/v1`.
    ///   - bucket: The bucket's id (letters, digits, `-`, `_`).
    ///   - collection: The collection's id in the bucket (letters, digits, `-`, `_`).
    ///   - now: The current time, read for the `Backoff` deadline; the system's by default.
    public init(
        service: HTTPService,
        bucket: String,
        collection: String,
        now: @escaping @Sendable () -> Date = { .now }
    ) {
        self.service = service
        self.bucket = bucket
        self.collection = collection
        self.now = now
    }

    /// One page of the records changed and deleted since `cursor`: see ``KintoRemote`` for the
    /// request and the page's cursor.
    ///
    /// - Parameter cursor: The cursor of the last page applied (a Kinto timestamp), or `nil`.
    /// - Returns: The page.
    /// - Throws: ``KintoRemoteError`` (a `Backoff` not over; a bucket or collection name that is
    ///   not a Kinto id), an `HTTPLoadableError` (`HTTPLoadableError.decoding(_:)` for an answer
    ///   that is not Kinto's list of records), the authorization's errors, `CancellationError`.
    public func pull(since cursor: String?) async throws -> SyncPage<Record> {
        try checkBackoff()
        var query = [URLQueryItem(name: "_sort", value: "last_modified")]
        if let cursor { query.append(URLQueryItem(name: "_since", value: cursor)) }
        let request = service.request(.get, try recordsPath(), query: query)
        let (response, data) = try await observingBackoff { try await service.send(request) }
        noteBackoff(response.headerFieldsAsStrings)

        let entries: [Entry]
        do {
            entries = try service.decoder.decode(Envelope<[Entry]>.self, from: data).data
        } catch let error as DecodingError {
            throw HTTPLoadableError.decoding(error)
        }
        var changed: [RemoteRecord<Record>] = []
        var deleted: [Record.ID] = []
        for entry in entries {
            switch entry {
            case .record(let record): changed.append(record)
            case .tombstone(let id, _): deleted.append(id)
            }
        }
        let hasMore = response.value(forHTTPHeaderField: "Next-Page") != nil
        let lastVersion = entries.last?.version
        let page: String
        if hasMore, let lastVersion {
            page = lastVersion
        } else {
            let timestamp = response.value(forHTTPHeaderField: "ETag").flatMap(Self.timestamp(ofETag:))
            page = timestamp ?? lastVersion ?? cursor ?? "0"
        }
        return SyncPage(changed: changed, deleted: deleted, cursor: page, hasMore: hasMore)
    }

    /// Applies one change on the server with Kinto's preconditions: see ``KintoRemote`` for the
    /// requests and how their answers map to a ``PushResult``.
    ///
    /// - Parameters:
    ///   - change: The change.
    ///   - idempotencyKey: Sent as `Idempotency-Key`.
    /// - Returns: What the server did.
    /// - Throws: ``KintoRemoteError`` (a `Backoff` not over; an id, bucket or collection name that
    ///   is not a Kinto id: nothing was sent), an `HTTPLoadableError` (the server's failures, a
    ///   `409` with `Retry-After` included), the service's and the authorization's errors,
    ///   `CancellationError`.
    public func push(_ change: RecordChange<Record>, idempotencyKey: String) async throws -> PushResult<Record> {
        try checkBackoff()
        let path = try recordPath(change.id)
        switch change {
        case .create(let record):
            do {
                let answer = try await observingBackoff {
                    try await service.response(
                        to: .put, path, json: Envelope(data: record), as: Envelope<Stored>.self,
                        idempotencyKey: idempotencyKey, precondition: .ifNoneMatchAny)
                }
                noteBackoff(answer.headers)
                return .applied(answer.value.data.remote)
            } catch let error as HTTPLoadableError where error.isPreconditionFailed {
                guard let current = try await currentRecord(at: path) else { return .conflict(remote: nil) }
                // The same create again (a lost answer, an outbox taken over): applied, not a conflict.
                return current.record == record ? .applied(current) : .conflict(remote: current)
            }
        case .update(let record, let base):
            do {
                let answer = try await observingBackoff {
                    try await service.response(
                        to: .put, path, json: Envelope(data: record), as: Envelope<Stored>.self,
                        idempotencyKey: idempotencyKey, precondition: .ifMatch("\"\(base)\""))
                }
                noteBackoff(answer.headers)
                return .applied(answer.value.data.remote)
            } catch let error as HTTPLoadableError where error.isPreconditionFailed {
                return .conflict(remote: try await currentRecord(at: path))
            }
        case .delete(_, let base):
            do {
                let answer = try await observingBackoff {
                    try await service.response(
                        to: .delete, path, as: Ignored.self,
                        idempotencyKey: idempotencyKey, precondition: .ifMatch("\"\(base)\""))
                }
                noteBackoff(answer.headers)
                return .deleted
            } catch let error as HTTPLoadableError where error.isNotFound {
                return .deleted
            } catch let error as HTTPLoadableError where error.isPreconditionFailed {
                guard let current = try await currentRecord(at: path) else { return .deleted }
                return .conflict(remote: current)
            }
        }
    }

    /// The record at `path` as the server has it now, or `nil` when it has none (`404`).
    private func currentRecord(at path: String) async throws -> RemoteRecord<Record>? {
        do {
            let answer = try await observingBackoff {
                try await service.response(to: .get, path, as: Envelope<Stored>.self)
            }
            noteBackoff(answer.headers)
            return answer.value.data.remote
        } catch let error as HTTPLoadableError where error.isNotFound {
            return nil
        }
    }
}

// MARK: - Paths

extension KintoRemote {
    /// `buckets/<bucket>/collections/<collection>/records`.
    ///
    /// - Throws: ``KintoRemoteError/Code/invalidID`` for a bucket or collection name that is not a
    ///   Kinto id.
    private func recordsPath() throws -> String {
        guard KintoRemoteError.isKintoID(bucket) else { throw KintoRemoteError.invalidID(bucket, of: "bucket") }
        guard KintoRemoteError.isKintoID(collection) else {
            throw KintoRemoteError.invalidID(collection, of: "collection")
        }
        return "buckets/\(bucket)/collections/\(collection)/records"
    }

    /// `buckets/<bucket>/collections/<collection>/records/<id>`.
    ///
    /// - Throws: ``KintoRemoteError/Code/invalidID`` for an id, bucket or collection name that is
    ///   not a Kinto id.
    private func recordPath(_ id: Record.ID) throws -> String {
        let text = String(describing: id)
        guard KintoRemoteError.isKintoID(text) else { throw KintoRemoteError.invalidID(text, of: "record") }
        return try recordsPath() + "/" + text
    }
}

// MARK: - Backoff

extension KintoRemote {
    /// Throws ``KintoRemoteError/Code/backoff`` while the server's last `Backoff` is not over.
    private func checkBackoff() throws {
        let now = now()
        guard let deadline = backoff.deadline.withLock({ $0 }), deadline > now else { return }
        throw KintoRemoteError.backoff(retryAfter: .seconds(deadline.timeIntervalSince(now)))
    }

    /// Keeps the `Backoff` of an answer's headers, if it has one.
    private func noteBackoff(_ headers: [String: String]) {
        let value = headers.first { $0.key.caseInsensitiveCompare("Backoff") == .orderedSame }?.value
        guard let value, let seconds = Int(value.trimmingCharacters(in: .whitespaces)), seconds > 0 else { return }
        let deadline = now().addingTimeInterval(TimeInterval(seconds))
        backoff.deadline.withLock { current in
            if current.map({ $0 < deadline }) ?? true { current = deadline }
        }
    }

    /// Runs `request`, keeping the `Backoff` of a refusal's headers before it is rethrown.
    private func observingBackoff<Answer>(_ request: () async throws -> Answer) async throws -> Answer {
        do {
            return try await request()
        } catch let error as HTTPLoadableError {
            if case .status(_, let headers, _) = error { noteBackoff(headers) }
            throw error
        }
    }

    /// The timestamp of a collection's `ETag`: `"1700000000000"` (or a proxy's weak
    /// `W/"1700000000000"`) without its quotes; `nil` when it is not a timestamp.
    private static func timestamp(ofETag etag: String) -> String? {
        var text = Substring(etag.trimmingCharacters(in: .whitespaces))
        if text.hasPrefix("W/") { text = text.dropFirst(2) }
        if text.hasPrefix("\""), text.hasSuffix("\""), text.count >= 2 { text = text.dropFirst().dropLast() }
        guard !text.isEmpty, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            return nil
        }
        return String(text)
    }
}

// MARK: - Kinto's JSON

extension KintoRemote {
    /// The keys Kinto adds to a record.
    private enum Key: String, CodingKey {
        case id
        case lastModified = "last_modified"
        case deleted
    }

    /// A record as Kinto gives it: the app's fields, with `id` and `last_modified`.
    private struct Stored: Decodable, Sendable {
        var remote: RemoteRecord<Record>

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: Key.self)
            remote = RemoteRecord(record: try Record(from: decoder), version: try KintoRemote.version(in: container))
        }
    }

    /// An entry of a list of records: a record, or a tombstone (`"deleted": true`).
    private enum Entry: Decodable, Sendable {
        case record(RemoteRecord<Record>)
        case tombstone(Record.ID, version: String)

        /// The entry's `last_modified`.
        var version: String {
            switch self {
            case .record(let record): record.version
            case .tombstone(_, let version): version
            }
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: Key.self)
            let version = try KintoRemote.version(in: container)
            if try container.decodeIfPresent(Bool.self, forKey: .deleted) == true {
                self = .tombstone(try container.decode(Record.ID.self, forKey: .id), version: version)
            } else {
                self = .record(RemoteRecord(record: try Record(from: decoder), version: version))
            }
        }
    }

    /// An answer whose body is not read (a delete's).
    private struct Ignored: Decodable, Sendable {
        init(from decoder: any Decoder) throws {}
    }

    /// The `last_modified` of a record or tombstone: an integer (milliseconds), as text.
    private static func version(in container: KeyedDecodingContainer<Key>) throws -> String {
        String(try container.decode(Int64.self, forKey: .lastModified))
    }
}

/// `{"data": …}`: Kinto's envelope of bodies and answers (its other keys, such as `permissions`,
/// are ignored).
private struct Envelope<Value: Sendable>: Sendable {
    var data: Value
}

extension Envelope: Encodable where Value: Encodable {}
extension Envelope: Decodable where Value: Decodable {}

/// Why a ``KintoRemote`` did not pull or push: the server asked clients to back off, or a name is
/// not a Kinto id. (The server's own failures are `HTTPLoadableError`s.)
///
/// ```swift
/// do {
///     _ = try await remote.pull(since: cursor)
/// } catch let error as KintoRemoteError where error.code == .backoff {
///     print(error.retryAfter)  // the time left, as the server asked
/// }
/// ```
///
/// It is `RetryAfterProviding`: a backoff is retryable after ``retryAfter``, so a `LoadableSyncer`
/// and an outbox wait as the server asked; an invalid id is not retryable (it never becomes
/// valid). A `Sendable` value, usable anywhere.
public struct KintoRemoteError: Error, Sendable, Hashable, RetryAfterProviding, CustomStringConvertible {
    /// What went wrong; more codes may come.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Kind: Sendable, Hashable {
            case backoff
            case invalidID
        }

        private let kind: Kind

        /// The server sent `Backoff: <seconds>` on an earlier answer, and that time is not over:
        /// nothing was sent.
        public static let backoff = Code(kind: .backoff)
        /// A record id, bucket or collection name has characters a Kinto id cannot have (ASCII
        /// letters, digits, `-` and `_`, starting with a letter or a digit): nothing was sent.
        public static let invalidID = Code(kind: .invalidID)

        /// `backoff` or `invalidID`.
        public var description: String {
            switch kind {
            case .backoff: "backoff"
            case .invalidID: "invalidID"
            }
        }
    }

    /// What went wrong.
    public let code: Code
    /// For ``Code/backoff``, the time left before the server's `Backoff` is over; `nil` otherwise.
    public let retryAfter: Duration?
    /// For ``Code/invalidID``, the refused id or name, as it would have gone in the path; `nil`
    /// otherwise.
    public let invalidID: String?
    /// What the refused id names (`record`, `bucket`, `collection`); `nil` for a backoff.
    private let role: String?

    /// Whether a retry may succeed: `true` for ``Code/backoff`` (after ``retryAfter``), `false`
    /// for ``Code/invalidID``.
    public var isRetryable: Bool { code == .backoff }

    /// One line, for logs: the code and what it means.
    public var description: String {
        switch code {
        case .backoff:
            let seconds = retryAfter.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 }
            return "KintoRemote: the server asked clients to back off (Backoff header); "
                + "retry in \(seconds.map { String(format: "%.1f", $0) } ?? "?") s"
        default:
            let escaped = invalidID.map { $0.unicodeScalars.map { $0.escaped(asASCII: true) }.joined() } ?? ""
            return "KintoRemote: the \(role ?? "record") id \"\(escaped)\" is not a Kinto id "
                + "(ASCII letters, digits, - and _, starting with a letter or a digit); nothing was sent"
        }
    }

    /// A backoff with `retryAfter` left.
    static func backoff(retryAfter: Duration) -> KintoRemoteError {
        KintoRemoteError(code: .backoff, retryAfter: retryAfter, invalidID: nil, role: nil)
    }

    /// The refusal of `id`, the id of a `role` (`record`, `bucket`, `collection`).
    static func invalidID(_ id: String, of role: String) -> KintoRemoteError {
        KintoRemoteError(code: .invalidID, retryAfter: nil, invalidID: id, role: role)
    }

    /// Whether `text` is a Kinto id: `^[a-zA-Z0-9][a-zA-Z0-9_-]*$`.
    static func isKintoID(_ text: String) -> Bool {
        func isAlphanumeric(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                true
            default: false
            }
        }
        guard let first = text.utf8.first, isAlphanumeric(first) else { return false }
        return text.utf8.allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
    }
}

/// When the server's last `Backoff` ends, shared by the copies of a ``KintoRemote``.
private final class BackoffDeadline: Sendable {
    /// The end of the last `Backoff`, or `nil` before any.
    let deadline = Locked<Date?>(nil)
}

extension HTTPLoadableError {
    /// Whether the server answered `404 Not Found`.
    fileprivate var isNotFound: Bool {
        guard case .status(404, _, _) = self else { return false }
        return true
    }
}

extension HTTPURLResponse {
    /// The header fields as strings.
    fileprivate var headerFieldsAsStrings: [String: String] {
        var headers: [String: String] = [:]
        for (name, value) in allHeaderFields {
            headers[String(describing: name)] = String(describing: value)
        }
        return headers
    }
}
