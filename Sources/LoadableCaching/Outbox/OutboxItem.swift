public import Foundation

/// A change in a ``LoadableOutbox``: what the user did, waiting to reach the server.
///
/// ```swift
/// for item in outbox.items where item.state == .failed {
///     print("\(item.change) was refused: \(item.lastError.map { "\($0)" } ?? "")")
/// }
/// ```
public struct OutboxItem<Change: Codable & Sendable>: Identifiable, Sendable {
    /// Where an item is on its way to the server.
    public enum State: Sendable, Hashable, CustomStringConvertible {
        /// Waiting for its turn (or for a retry, or for the app to be active and online).
        case pending
        /// Its send is running.
        case sending
        /// The server refused it with an error a retry cannot fix; it stays until
        /// ``LoadableOutbox/retry(_:)``, ``LoadableOutbox/resolve(_:with:)`` or
        /// ``LoadableOutbox/discard(_:)``.
        case failed
        /// The server answered with a conflict (``OutboxOutcome/conflict(remote:)``): the item keeps
        /// its layer and its place, is not sent again by itself, holds back no other item, and
        /// waits for ``LoadableOutbox/resolve(_:with:)`` or ``LoadableOutbox/discard(_:)``. Kept
        /// across launches, with ``OutboxItem/remote``.
        case conflict

        /// `pending`, `sending`, `failed` or `conflict`.
        public var description: String {
            switch self {
            case .pending: "pending"
            case .sending: "sending"
            case .failed: "failed"
            case .conflict: "conflict"
            }
        }
    }

    /// Tells this item from the others: a UUID string, kept across launches.
    public let id: String
    /// The change itself: as enqueued, or as merged (the outbox's `coalesce`), rebased (its
    /// `rebase`) or resolved (``LoadableOutbox/resolve(_:with:)``) since.
    public internal(set) var change: Change
    /// Sent with every attempt of this change (a UUID string, kept across launches), so that a
    /// server that honours it applies the change once however many times it arrives. A resolve
    /// gives the item a new one, since its content changed; a merge or a rebase keeps it.
    public internal(set) var idempotencyKey: String
    /// The scope the item was enqueued in (``LoadableOutbox/enqueue(_:scope:)``); `nil` for none.
    /// Items of one scope are sent in order, one at a time; scopes are sent in parallel.
    public let scope: String?
    /// The server's side of a conflict (``State/conflict``): what the send returned with
    /// ``OutboxOutcome/conflict(remote:)``; `nil` otherwise, or when the server has none.
    public internal(set) var remote: Change?
    /// When the change was enqueued (wall-clock time; kept across launches).
    public let enqueuedAt: Date
    /// How many times the change was sent (attempts that began, whatever their outcome).
    public internal(set) var attempts: Int
    /// The error of the last attempt that failed; `nil` when none did. After a relaunch, the
    /// error of an earlier launch is an ``OutboxRestoredError`` with its description.
    public internal(set) var lastError: (any Error)?
    /// Where the item is on its way.
    public internal(set) var state: State

    init(
        id: String, change: Change, idempotencyKey: String, scope: String?, enqueuedAt: Date, attempts: Int,
        lastError: (any Error)?, state: State, remote: Change? = nil
    ) {
        self.id = id
        self.change = change
        self.idempotencyKey = idempotencyKey
        self.scope = scope
        self.enqueuedAt = enqueuedAt
        self.attempts = attempts
        self.lastError = lastError
        self.state = state
        self.remote = remote
    }
}

/// The error an ``OutboxItem`` of an earlier launch failed with, as far as it could be kept: its
/// type's name and its description.
///
/// ```swift
/// if let error = item.lastError as? OutboxRestoredError, error.typeName.hasSuffix("HTTPLoadableError") {
///     showServerRefused(error.description)
/// }
/// ```
public struct OutboxRestoredError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The name of the error's type, as `String(reflecting:)` gives it (`"LoadableHTTP.HTTPLoadableError"`);
    /// empty for an error kept by a release that did not keep it.
    public let typeName: String
    /// The description of the error the item failed with.
    public let description: String

    /// Creates the error.
    ///
    /// - Parameters:
    ///   - typeName: The name of the error's type, as `String(reflecting:)` gives it.
    ///   - description: The description of the error the item failed with.
    public init(typeName: String = "", description: String) {
        self.typeName = typeName
        self.description = description
    }
}
