/// A server that keeps a collection of records for a ``SyncedCollection``: it gives the records
/// changed since a cursor, page by page, and applies one change at a time.
///
/// Implement it for your server in a few dozen lines (`Docs/Sync.md` shows one for a REST API with
/// `updated_since`), or use ``KintoRemote`` for Kinto.
///
/// - The cursor is the remote's own string (a timestamp, a sequence number, an opaque token): the
///   collection keeps the last page's and passes it back; `nil` asks for everything.
/// - Each record has a version (an ETag, a row version, Kinto's `last_modified`): a change says
///   which version it was made on (``RecordChange``), so the server can refuse a change made on a
///   version it replaced (``PushResult/conflict(remote:)``).
/// - Throw ``SyncRemoteError/cursorExpired`` when the server no longer has history as old as the
///   cursor: the collection then pulls everything again.
/// - Other errors are the collection's sync failures (pulls) or retried by its outbox (pushes:
///   errors whose `RetryAfterProviding.isRetryableWithIdempotencyKey` is `true`, and
///   `URLError`s; anything else keeps the change as failed).
///
/// The requirements are `nonisolated` and `async`: the collection calls them from the main actor,
/// and they may run anywhere.
public protocol SyncRemote<Record>: Sendable {
    /// The record type: identified, encodable (the collection saves records in its cache), and
    /// comparable (a pulled record equal to the one shown changes nothing).
    associatedtype Record: Identifiable & Codable & Sendable & Equatable
    where Record.ID: Codable & Sendable

    /// One page of the records changed and deleted since `cursor` (`nil`: every record; a full
    /// pull's pages carry no tombstones). Called again with the page's cursor while
    /// ``SyncPage/hasMore``.
    ///
    /// - Parameter cursor: The cursor of the last page applied, or `nil`.
    /// - Returns: The page.
    /// - Throws: ``SyncRemoteError/cursorExpired`` when `cursor` is older than the server's
    ///   history; any other error fails the pull.
    func pull(since cursor: String?) async throws -> SyncPage<Record>

    /// Applies one change on the server, only if the record is still at the change's base version
    /// (creates: only if the record does not exist).
    ///
    /// - Parameters:
    ///   - change: The change.
    ///   - idempotencyKey: The same for every attempt of one change: send it along (as the
    ///     `Idempotency-Key` header) where the server honours it. A server that ignores it still
    ///     applies a change once through the preconditions.
    /// - Returns: What the server did.
    /// - Throws: When the change did not reach the server, or the server failed.
    func push(_ change: RecordChange<Record>, idempotencyKey: String) async throws -> PushResult<Record>
}

/// A record as the server has it, with its version.
public struct RemoteRecord<Record: Sendable>: Sendable {
    /// The record.
    public var record: Record
    /// The server's version of it: an ETag, Kinto's `last_modified`, a row version. Changes made
    /// on this record carry it as their base.
    public var version: String

    /// Creates a remote record.
    ///
    /// - Parameters:
    ///   - record: The record.
    ///   - version: The server's version of it.
    public init(record: Record, version: String) {
        self.record = record
        self.version = version
    }
}

extension RemoteRecord: Equatable where Record: Equatable {}
extension RemoteRecord: Codable where Record: Codable {}

/// One page of a pull: the records changed and deleted since the cursor the pull was given.
public struct SyncPage<Record: Identifiable & Sendable>: Sendable where Record.ID: Sendable {
    /// The records created or changed, with their versions.
    public var changed: [RemoteRecord<Record>]
    /// The records deleted (tombstones).
    public var deleted: [Record.ID]
    /// Where the next pull starts: kept by the collection once the page is applied and saved.
    public var cursor: String
    /// Whether more pages follow (the collection pulls the next one with ``cursor``).
    public var hasMore: Bool

    /// Creates a page.
    ///
    /// - Parameters:
    ///   - changed: The records created or changed, with their versions.
    ///   - deleted: The records deleted.
    ///   - cursor: Where the next pull starts.
    ///   - hasMore: Whether more pages follow.
    public init(changed: [RemoteRecord<Record>], deleted: [Record.ID], cursor: String, hasMore: Bool) {
        self.changed = changed
        self.deleted = deleted
        self.cursor = cursor
        self.hasMore = hasMore
    }
}

/// A local change of one record, as pushed to the server.
public enum RecordChange<Record: Identifiable & Codable & Sendable>: Codable, Sendable
where Record.ID: Codable & Sendable {
    /// A new record: the server creates it only if no record has its id.
    case create(Record)
    /// A changed record, made on the server's version `base`.
    case update(Record, base: String)
    /// A deleted record, deleted on the server's version `base`.
    case delete(Record.ID, base: String)

    /// The id of the record the change is about.
    public var id: Record.ID {
        switch self {
        case .create(let record), .update(let record, _): record.id
        case .delete(let id, _): id
        }
    }

    /// The record as the change leaves it: `nil` for a delete.
    public var record: Record? {
        switch self {
        case .create(let record), .update(let record, _): record
        case .delete: nil
        }
    }

    /// The version the change was made on: `nil` for a create.
    public var base: String? {
        switch self {
        case .create: nil
        case .update(_, let base), .delete(_, let base): base
        }
    }
}

extension RecordChange: Equatable where Record: Equatable {}

extension RecordChange {
    private enum CodingKeys: String, CodingKey {
        case kind, record, id, base
    }

    /// Decodes a change from its flat JSON form: `{"kind": "create" | "update" | "delete",
    /// "record": …, "id": …, "base": …}` (the form ``encode(to:)`` writes, which a synced
    /// collection keeps in its cache).
    ///
    /// - Parameter decoder: The decoder to read from.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        switch try container.decode(String.self, forKey: .kind) {
        case "create": self = .create(try container.decode(Record.self, forKey: .record))
        case "update":
            self = .update(
                try container.decode(Record.self, forKey: .record),
                base: try container.decode(String.self, forKey: .base))
        case "delete":
            self = .delete(
                try container.decode(Record.ID.self, forKey: .id),
                base: try container.decode(String.self, forKey: .base))
        case let kind:
            throw DecodingError.dataCorruptedError(
                forKey: .kind, in: container, debugDescription: "unknown change kind \"\(kind)\"")
        }
    }

    /// Encodes the change in a flat JSON form: its kind, then the record (a create or an update) or
    /// the id (a delete), then the base version (an update or a delete).
    ///
    /// - Parameter encoder: The encoder to write to.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .create(let record):
            try container.encode("create", forKey: .kind)
            try container.encode(record, forKey: .record)
        case .update(let record, let base):
            try container.encode("update", forKey: .kind)
            try container.encode(record, forKey: .record)
            try container.encode(base, forKey: .base)
        case .delete(let id, let base):
            try container.encode("delete", forKey: .kind)
            try container.encode(id, forKey: .id)
            try container.encode(base, forKey: .base)
        }
    }
}

/// What the server did with a pushed change.
public enum PushResult<Record: Sendable>: Sendable {
    /// The server applied the change; this is the record as it now has it, with its new version.
    case applied(RemoteRecord<Record>)
    /// The server applied a delete (or the record was already gone).
    case deleted
    /// The server refused the change: the record is no longer at the change's base version (or,
    /// for a create, already exists). `remote` is the server's record now, `nil` when it was
    /// deleted there. The collection's ``ConflictPolicy`` settles it.
    case conflict(remote: RemoteRecord<Record>?)
}

extension PushResult: Equatable where Record: Equatable {}

/// What a ``SyncRemote`` throws for the collection to act on.
public enum SyncRemoteError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The server no longer has history as old as the cursor: the collection pulls every record
    /// again (in the same sync), removes those the full pull lacks, and keeps its pending changes.
    case cursorExpired

    /// A description for logs.
    public var description: String {
        switch self {
        case .cursorExpired: "the server no longer has the changes since the cursor (pulling everything again)"
        }
    }
}
