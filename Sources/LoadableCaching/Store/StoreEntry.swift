package import Loadable

/// One key's entry in a ``LoadableStore``: its loadable, its leases, and its place in the list of
/// retained entries.
///
/// The entry, not each lease, keeps its loadable in use: the first lease begins one use of the
/// loadable and the last one ends it, so a lease of a key that is already leased costs a count.
/// Leases hold their entry strongly; the entry holds its store weakly (a lease may outlive it).
///
/// While it is in its store, the entry follows its loadable's core (see ``StoreEntryNode``): it
/// counts the store's syncing entries, marks the loadable as an entry of a store, and gives the
/// loadable's default inspector label its key (`PostLoadable[7]`). The core then holds the entry,
/// and the entry its loadable: the store unsubscribes each entry when it lets go of it (and in
/// its `deinit`), so that they do not keep each other alive.
@MainActor
@usableFromInline
final class StoreEntry<Key: Hashable & Sendable, Value: SyncableLoadable>: StoreEntryNode, LoadableLeaseTracker {
    @usableFromInline let key: Key
    @usableFromInline let value: Value
    /// The loadable as one of the package's (it counts uses and reports syncing through its
    /// core); `nil` for a type of the app's own.
    let owner: (any LoadableCoreOwner)?
    /// The owner's core, read once (the store reads it at every step of the entry's life).
    let core: LoadableCore?
    /// The store, while the entry is in it; `nil` once it left (expired, removed, dropped).
    @exclusivity(unchecked) weak var store: LoadableStore<Key, Value>?
    /// Live leases.
    @exclusivity(unchecked) @usableFromInline var leaseCount = 0

    /// An entry of `store` for `value`, made for `key`.
    @usableFromInline
    init(key: Key, value: Value, store: LoadableStore<Key, Value>) {
        self.key = key
        self.value = value
        let owner = value.loadableCapabilities.owner
        self.owner = owner
        core = owner?.core
        self.store = store
        super.init()
    }

    /// Whether the loadable is syncing now, read without telling Observation: its state as it reads
    /// it (a loadable that shows another one's state, such as a mapped loadable, keeps none in its
    /// core).
    var isSyncing: Bool {
        if let owner { return owner.untrackedStatus.state == .syncing }
        return value.statusUntrackedWherePossible.state == .syncing
    }

    /// The loadable the entry's leases stand for, for their inspector events.
    @usableFromInline var leasedLoadable: any SyncableLoadable { value }

    /// The key as text: what the loadable's default inspector label shows.
    override var inspectorKey: String { "\(key)" }

    /// Tells the store that the loadable began (`1`) or stopped (`-1`) syncing.
    override func syncingDidChange(by delta: Int) {
        store?.syncingCountDidChange(by: delta)
    }

    @usableFromInline func leaseDidBegin() {
        leaseCount += 1
        guard leaseCount == 1 else { return }
        if isRetained { store?.entryIsLeasedAgain(self) }
        owner?.beginUse()
    }

    @usableFromInline func leaseDidEnd() {
        leaseCount -= 1
        guard leaseCount == 0 else { return }
        owner?.endUse()
        guard isInStore else { return }
        store?.entryIsUnused(self)
    }
}

/// The part of a store's entry that its lists link, and that follows the entry's loadable: not
/// generic, so that the lists' code is not either, and so that the store's unspecialized code
/// subscribes an entry through one conformance known at compile time. (The store's own code runs
/// unspecialized, and a generic list called from it would look up its type's metadata at every
/// call.) The store downcasts what the lists hold to its entry type: a list holds only that
/// store's entries.
///
/// As the loadable's core subscriber, it counts the store's syncing entries without observing
/// the loadable (which would count as an observer), and marks the loadable as an entry of a
/// store (an entry must own its loadable).
@MainActor
@usableFromInline
class StoreEntryNode: LoadableCoreSubscriber, LoadableInspectorKeyed {
    /// The entry's place in its store's list of all entries, in the order they were made.
    @exclusivity(unchecked) final var orderLinks = EntryLinks()
    /// The entry's place in its store's list of retained entries, while it is retained.
    @exclusivity(unchecked) final var retainedLinks = EntryLinks()
    /// When a retained entry expires, on the store's clock.
    @exclusivity(unchecked) final var expiresAt: Duration = .zero

    /// Whether the entry is in its store (its store may be gone while this is still `true`).
    final var isInStore: Bool { orderLinks.isLinked }
    /// Whether the entry is in the store's list of retained entries.
    final var isRetained: Bool { retainedLinks.isLinked }

    @usableFromInline
    init() {}

    /// The loadable began (`1`) or stopped (`-1`) syncing; ``StoreEntry`` tells its store.
    func syncingDidChange(by delta: Int) {}

    /// The entry's key as text; ``StoreEntry`` gives it.
    var inspectorKey: String { "" }

    /// An entry follows its loadable's state: whether it syncs.
    final var coreEvents: LoadableCoreEvent.Kinds { .stateChanged }

    /// Tells ``syncingDidChange(by:)`` when the loadable begins or stops syncing.
    final func loadableCoreDidEmit(_ event: LoadableCoreEvent) {
        guard case .stateChanged(let from, let to) = event, (from == .syncing) != (to == .syncing) else { return }
        syncingDidChange(by: to == .syncing ? 1 : -1)
    }
}

/// The links of an entry in one of its store's lists.
struct EntryLinks {
    // Unowned: the store's dictionary keeps every entry of its lists alive, and an entry leaves
    // the lists before it leaves the dictionary.
    unowned(unsafe) var older: StoreEntryNode?
    unowned(unsafe) var newer: StoreEntryNode?
    var isLinked = false
}

/// A list of a store's entries, oldest first: an intrusive doubly linked list through the
/// entries, so that an entry leaves it at once, wherever it is.
///
/// A store keeps two. *All entries* in the order they were made: what the store walks to
/// invalidate or remove entries, in an order that does not depend on hashing (observers see the
/// same order in every run). *Retained entries* in the order they were released: expiry and
/// `maxRetained` drop from its head, and since every entry expires `retention` after its release,
/// the head always expires first, so one timer, armed for the head, serves the whole list.
@MainActor
struct EntryList {
    /// Whether this is the list of retained entries (it uses their `retainedLinks`), rather than
    /// the list of all entries (`orderLinks`).
    private let isRetainedList: Bool
    private(set) unowned(unsafe) var head: StoreEntryNode?
    private unowned(unsafe) var tail: StoreEntryNode?
    private(set) var count = 0

    /// Creates an empty list of retained entries, or of all entries.
    init(retained: Bool) {
        isRetainedList = retained
    }

    private func links(of entry: StoreEntryNode) -> EntryLinks {
        isRetainedList ? entry.retainedLinks : entry.orderLinks
    }

    private func update(_ entry: StoreEntryNode, _ body: (inout EntryLinks) -> Void) {
        if isRetainedList { body(&entry.retainedLinks) } else { body(&entry.orderLinks) }
    }

    /// Whether `entry` is in this list.
    func contains(_ entry: StoreEntryNode) -> Bool { links(of: entry).isLinked }

    /// Adds `entry` at the end (the newest).
    mutating func append(_ entry: StoreEntryNode) {
        let tail = tail
        update(entry) { $0 = EntryLinks(older: tail, newer: nil, isLinked: true) }
        if let tail { update(tail) { $0.newer = entry } } else { head = entry }
        self.tail = entry
        count += 1
    }

    /// Takes `entry` out of the list; does nothing if it is not in it.
    mutating func remove(_ entry: StoreEntryNode) {
        let links = links(of: entry)
        guard links.isLinked else { return }
        if let older = links.older { update(older) { $0.newer = links.newer } } else { head = links.newer }
        if let newer = links.newer { update(newer) { $0.older = links.older } } else { tail = links.older }
        update(entry) { $0 = EntryLinks() }
        count -= 1
    }

    /// The entry after `entry` (made or released later); `nil` after the newest.
    func newer(than entry: StoreEntryNode) -> StoreEntryNode? { links(of: entry).newer }

    /// Takes every entry out of the list.
    mutating func removeAll() {
        var entry = head
        while let current = entry {
            entry = links(of: current).newer
            update(current) { $0 = EntryLinks() }
        }
        head = nil
        tail = nil
        count = 0
    }
}
