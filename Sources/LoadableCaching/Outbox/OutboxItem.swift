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
        /// ``LoadableOutbox/retry(_:)`` or ``LoadableOutbox/discard(_:)``.
        case failed

        /// `pending`, `sending` or `failed`.
        public var description: String {
            switch self {
            case .pending: "pending"
            case .sending: "sending"
            case .failed: "failed"
            }
        }
    }

    /// Tells this item from the others: a UUID string, kept across launches.
    public let id: String
    /// The change itself.
    public let change: Change
    /// Sent with every attempt of this change (a UUID string, kept across launches), so that a
    /// server that honours it applies the change once however many times it arrives.
    public let idempotencyKey: String
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
        id: String, change: Change, idempotencyKey: String, enqueuedAt: Date, attempts: Int,
        lastError: (any Error)?, state: State
    ) {
        self.id = id
        self.change = change
        self.idempotencyKey = idempotencyKey
        self.enqueuedAt = enqueuedAt
        self.attempts = attempts
        self.lastError = lastError
        self.state = state
    }
}

/// The error an ``OutboxItem`` of an earlier launch failed with, as far as it could be kept: its
/// description.
public struct OutboxRestoredError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The description of the error the item failed with.
    public let description: String

    /// Creates the error.
    ///
    /// - Parameter description: The description of the error the item failed with.
    public init(description: String) {
        self.description = description
    }
}
