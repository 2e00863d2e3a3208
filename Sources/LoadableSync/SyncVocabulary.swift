public import Foundation

/// How a ``SyncedCollection`` settles a conflict: a record changed on the server since the version
/// a pending local change was made on, or deleted there, or changed there after a local delete.
///
/// What each policy does (`Docs/Sync.md` has the table):
///
/// | | local edit, remote edit | local edit, remote delete | local delete, remote edit |
/// |---|---|---|---|
/// | `.serverWins` | the server's record | deleted | the server's record |
/// | `.clientWins` | the local record, pushed on the new version | the local record, created again | deleted, on the new version |
/// | `.fieldwise` | per field (below) | deleted | the server's record |
/// | `.merge` | the closure's result | the closure's result | the closure's result |
/// | `.manual` | held until ``SyncedCollection/resolve(_:with:)`` | held | held |
///
/// Both sides deleting is no conflict: the record is gone. A pending change whose record equals the
/// server's record is no conflict either: the server has it (a change that reached the server
/// before its answer was lost).
public enum ConflictPolicy<Record: Sendable>: Sendable {
    /// The server's side wins: the record's pending local changes are dropped.
    case serverWins
    /// The local side wins: the pending change is pushed again on the server's new version (a
    /// record the server deleted is created again).
    case clientWins
    /// Field by field, over the top-level fields of the records' JSON: a field only one side
    /// changed since the base takes that side's value, a field both changed takes the server's. A
    /// delete against an edit takes the server's side. When the base record is not known (a
    /// create that met a record of the same id), every field that differs takes the server's.
    case fieldwise
    /// The closure decides, once per conflict: given the record at the base version, the local
    /// record and the server's (`nil`: deleted), it returns the record to keep (`nil`: delete). A
    /// result equal to the server's record is kept without a push; any other is pushed on the
    /// server's version.
    case merge(@MainActor @Sendable (_ base: Record?, _ local: Record?, _ remote: Record?) -> Record?)
    /// Kept as a ``SyncConflict`` in ``SyncedCollection/conflicts`` (and in the cache, across
    /// relaunches) until ``SyncedCollection/resolve(_:with:)``; the record shows the local side
    /// meanwhile, and nothing of it is pushed.
    case manual
}

/// What waits for the app's decision about one record: a conflict held by
/// ``ConflictPolicy/manual`` (the three sides of the record), or a local change the server refused
/// for good (``isRefused``).
public struct SyncConflict<Record: Identifiable & Sendable>: Identifiable, Sendable where Record.ID: Sendable {
    /// The record's id.
    public var id: Record.ID
    /// The record at the version the local change was made on; `nil` when not known (a create, or
    /// a base the collection no longer has).
    public var base: Record?
    /// The record as shown, with its pending local changes; `nil`: deleted locally.
    public var local: Record?
    /// The server's record; `nil`: deleted on the server. For a refused change: the server's
    /// record as last pulled.
    public var remote: Record?
    /// Whether the server refused the local change for good (a `400`, a `403`: an error that is
    /// not retried, which ``SyncedCollection/onError`` was told), rather than a conflict.
    public var isRefused: Bool

    /// Creates a conflict.
    ///
    /// - Parameters:
    ///   - id: The record's id.
    ///   - base: The record at the local change's base version.
    ///   - local: The record as shown locally.
    ///   - remote: The server's record.
    ///   - isRefused: Whether the server refused the local change for good.
    public init(id: Record.ID, base: Record?, local: Record?, remote: Record?, isRefused: Bool = false) {
        self.id = id
        self.base = base
        self.local = local
        self.remote = remote
        self.isRefused = isRefused
    }
}

extension SyncConflict: Equatable where Record: Equatable {}

/// Where a ``SyncedCollection`` stands with its server.
public struct SyncStatus: Sendable, Hashable {
    /// Whether a pull ever finished (in this launch or an earlier one whose records were restored).
    public var hasSynced: Bool
    /// When the last pull finished, by the collection's `now`; `nil` before the first.
    public var lastSyncedAt: Date?
    /// Whether a pull runs.
    public var isPulling: Bool
    /// Whether a local change is being pushed.
    public var isPushing: Bool
    /// The local changes on their way to the server: pending or being pushed (held conflicts and
    /// refused changes, which wait for the app, are counted by ``conflictCount``).
    public var pendingCount: Int
    /// What waits for the app's decision: held conflicts and refused changes
    /// (``SyncedCollection/conflicts``).
    public var conflictCount: Int

    /// Creates a status.
    public init(
        hasSynced: Bool = false, lastSyncedAt: Date? = nil, isPulling: Bool = false, isPushing: Bool = false,
        pendingCount: Int = 0, conflictCount: Int = 0
    ) {
        self.hasSynced = hasSynced
        self.lastSyncedAt = lastSyncedAt
        self.isPulling = isPulling
        self.isPushing = isPushing
        self.pendingCount = pendingCount
        self.conflictCount = conflictCount
    }
}
