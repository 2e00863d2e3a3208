/// What the data layer holds at one moment, as ``LoadableInspector/snapshot()`` reads it: every
/// live store entry, outbox item and synced collection.
///
/// A `Codable` value (ages and times in seconds), for a test, a log or the inspector page. The
/// arrays are in a stable order: entries and collections by label, outbox items in each outbox's
/// sending order.
public struct LoadableInspectorSnapshot: Sendable, Equatable, Codable {
    /// The time of the snapshot on the inspector's clock, in seconds.
    public var time: Double
    /// Every live entry of every live store.
    public var entries: [Entry]
    /// Every item of every live outbox.
    public var outboxItems: [OutboxItem]
    /// Every live synced collection.
    public var collections: [Collection]
    /// Whether the inspector simulates being offline (``LoadableInspectorAction/setOffline(_:)``).
    public var isOfflineSimulated: Bool

    /// Creates a snapshot.
    public init(
        time: Double, entries: [Entry] = [], outboxItems: [OutboxItem] = [], collections: [Collection] = [],
        isOfflineSimulated: Bool = false
    ) {
        self.time = time
        self.entries = entries
        self.outboxItems = outboxItems
        self.collections = collections
        self.isOfflineSimulated = isOfflineSimulated
    }

    /// `state` as a snapshot names it (`idle`, `syncing`, `didSyncSuccessfully`, `didFailToSync`):
    /// the one mapping the snapshot's sources share.
    package static func stateName(_ state: LoadableState) -> String {
        switch state {
        case .idle: "idle"
        case .syncing: "syncing"
        case .didSyncSuccessfully: "didSyncSuccessfully"
        case .didFailToSync: "didFailToSync"
        }
    }

    /// A store's entry: one loadable of a keyed store.
    public struct Entry: Sendable, Equatable, Codable {
        /// The loadable's label (``PureLoadable/inspectorLabel``); what an action names.
        public var label: String
        /// The entry's key, as text.
        public var key: String
        /// The loadable's state: `idle`, `syncing`, `didSyncSuccessfully` or `didFailToSync`.
        public var state: String
        /// Seconds since the contents were last confirmed; `nil` when never.
        public var age: Double?
        /// Whether the contents are stale (invalidated, or older than the store's `maxAge`).
        public var isStale: Bool
        /// Live leases of the entry.
        public var leases: Int
        /// Whether optimistic changes are pending on it.
        public var hasPendingChanges: Bool
        /// The last error's description, while the state is `didFailToSync`.
        public var error: String?

        /// Creates an entry.
        public init(
            label: String, key: String, state: String, age: Double?, isStale: Bool, leases: Int,
            hasPendingChanges: Bool, error: String?
        ) {
            self.label = label
            self.key = key
            self.state = state
            self.age = age
            self.isStale = isStale
            self.leases = leases
            self.hasPendingChanges = hasPendingChanges
            self.error = error
        }
    }

    /// An item of an outbox.
    public struct OutboxItem: Sendable, Equatable, Codable {
        /// The outbox's label.
        public var outbox: String
        /// The item's id.
        public var id: String
        /// The item's scope; `nil` for the outbox's own.
        public var scope: String?
        /// What the item is doing: `pending`, `sending`, `waiting` (for a retry) or `conflict`.
        public var status: String
        /// Failed sends so far.
        public var attempts: Int
        /// The last failure's description, if any.
        public var error: String?

        /// Creates an item.
        public init(outbox: String, id: String, scope: String?, status: String, attempts: Int, error: String?) {
            self.outbox = outbox
            self.id = id
            self.scope = scope
            self.status = status
            self.attempts = attempts
            self.error = error
        }
    }

    /// A synced collection.
    public struct Collection: Sendable, Equatable, Codable {
        /// The collection's label; what an action names.
        public var label: String
        /// The collection's state: `idle`, `syncing`, `didSyncSuccessfully` or `didFailToSync`.
        public var state: String
        /// Seconds since the last successful sync; `nil` when never.
        public var age: Double?
        /// The records it shows (pending local changes included, deletions left out).
        public var records: Int
        /// Local changes not yet accepted by the server.
        public var pending: Int
        /// Conflicts waiting for a decision.
        public var conflicts: Int
        /// Live views and record loadables that keep it in use.
        public var leases: Int

        /// Creates a collection.
        public init(
            label: String, state: String, age: Double?, records: Int, pending: Int, conflicts: Int, leases: Int
        ) {
            self.label = label
            self.state = state
            self.age = age
            self.records = records
            self.pending = pending
            self.conflicts = conflicts
            self.leases = leases
        }
    }
}

/// Something ``LoadableInspector/perform(_:)`` does, as the inspector page asks for it.
///
/// `Codable` as `{"action": "sync", "label": …}`, `{"action": "invalidate", "label": …}` and
/// `{"action": "setOffline", "offline": true}`.
public enum LoadableInspectorAction: Sendable, Equatable, Codable {
    /// Syncs the loadable or collection with this label.
    case sync(label: String)
    /// Invalidates the loadable or collection with this label.
    case invalidate(label: String)
    /// Simulates being offline (`true`) or ends it (`false`): every activity monitor of the
    /// process reports the network unreachable while it lasts, so automatic syncing pauses.
    case setOffline(Bool)

    private enum CodingKeys: String, CodingKey {
        case action, label, offline
    }

    /// Encodes the action as one flat object.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .sync(let label):
            try container.encode("sync", forKey: .action)
            try container.encode(label, forKey: .label)
        case .invalidate(let label):
            try container.encode("invalidate", forKey: .action)
            try container.encode(label, forKey: .label)
        case .setOffline(let offline):
            try container.encode("setOffline", forKey: .action)
            try container.encode(offline, forKey: .offline)
        }
    }

    /// Decodes an action; an unknown `action` is a `DecodingError` that names the known ones.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        switch try container.decode(String.self, forKey: .action) {
        case "sync": self = .sync(label: try container.decode(String.self, forKey: .label))
        case "invalidate": self = .invalidate(label: try container.decode(String.self, forKey: .label))
        case "setOffline": self = .setOffline(try container.decode(Bool.self, forKey: .offline))
        case let other:
            throw DecodingError.dataCorruptedError(
                forKey: .action, in: container,
                debugDescription: "unknown action \"\(other)\" (sync, invalidate, setOffline)")
        }
    }
}
