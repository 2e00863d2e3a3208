/// The observers of one loadable, in the order they were added.
///
/// A value stored inline in every ``LoadableCore``. It never calls user code itself: the core runs
/// the notification round (``LoadableCore/notify(_:)``), so no access to this struct is held
/// while a handler runs.
///
/// Rules it implements: observers added during a round are not called in it; observers removed
/// during a round and not yet called are skipped; a notification asked for during a round is
/// queued as one more round after the current one.
///
/// Two kinds of observers share the list, told apart by their identifier: *round* observers
/// (even identifiers; what `addObserver` registers) are called in notification rounds; *immediate*
/// observers (odd identifiers; the bookkeeping of groups, proxies and mapped loadables that follow
/// this loadable) are called at every change, even while a round is running and the next one is
/// queued, so that what follows a loadable never shows a stale state.
///
/// No method releases a handler: ``remove(_:)`` hands the removed handler back, so that the
/// caller drops it after its access to the list ended. Dropping a handler may run any code (the
/// `deinit` of what it captured), which could reach the list again; keeping that outside every
/// access is what lets the core skip dynamic exclusivity checks on the list.
package struct ObserverList {
    package typealias Handler = @MainActor (any PureLoadable) -> Void

    private struct Entry {
        var id: Int
        var handler: Handler?
    }

    // The entries, in the order they were added, are `first` followed by `rest`. The first is
    // stored inline because most loadables have a single observer (their screen, or their group),
    // which then costs no array allocation. `first` is `nil` only when `rest` is empty.
    private var first: Entry?
    private var rest: ContiguousArray<Entry> = []
    // The small fields come last, packed, so that the core can pack its own one-byte fields and
    // its 8-byte confirmation time right after (the list takes 42 bytes; see `LoadableCore`).
    /// The number of observers currently registered, of both kinds.
    private var storedCount: UInt32 = 0
    /// The number of immediate observers registered.
    private var immediateCount: UInt32 = 0
    /// ``isNotifying``, ``hasQueuedRound`` and ``hasRemovedEntries``, one bit each.
    private var flags: UInt8 = 0
    /// How many calls of immediate observers are running, one inside the other.
    private var immediateDepth: UInt8 = 0

    private var isNotifying: Bool {
        get { flags & 1 != 0 }
        set { flags = newValue ? flags | 1 : flags & ~1 }
    }
    private var hasQueuedRound: Bool {
        get { flags & 2 != 0 }
        set { flags = newValue ? flags | 2 : flags & ~2 }
    }
    private var hasRemovedEntries: Bool {
        get { flags & 4 != 0 }
        set { flags = newValue ? flags | 4 : flags & ~4 }
    }

    /// The number of observers currently registered, of both kinds.
    package var count: Int { Int(storedCount) }

    package init() {}

    /// Whether no observer is registered.
    package var isEmpty: Bool { storedCount == 0 }

    /// Whether at least one immediate observer is registered.
    var hasImmediateObservers: Bool { immediateCount > 0 }

    /// Whether `id` is an immediate observer's identifier.
    @inline(__always)
    package static func isImmediate(_ id: Int) -> Bool { id & 1 == 1 }

    /// Whether entries are being visited (a round, or calls of immediate observers), so that a
    /// removal must leave the entry in place (its handler gone) until the visit ends.
    private var isVisiting: Bool { isNotifying || immediateDepth > 0 }

    /// Registers `handler` under `id`, which must be greater than every identifier added before;
    /// an odd `id` registers an immediate observer.
    package mutating func add(_ handler: @escaping Handler, id: Int) {
        if first == nil {
            first = Entry(id: id, handler: handler)
        } else {
            rest.append(Entry(id: id, handler: handler))
        }
        storedCount += 1
        if Self.isImmediate(id) { immediateCount += 1 }
    }

    /// Unregisters the observer `id` and returns its handler, for the caller to drop once its
    /// access to the list ended; `nil` if `id` was not registered.
    package mutating func remove(_ id: Int) -> Handler? {
        if first?.id == id {
            guard let handler = first?.handler.take() else { return nil }
            storedCount -= 1
            if Self.isImmediate(id) { immediateCount -= 1 }
            if isVisiting {
                hasRemovedEntries = true
            } else {
                // The entry's handler was taken: overwriting it releases nothing.
                first = rest.isEmpty ? nil : rest.removeFirst()
            }
            return handler
        }
        // Identifiers grow with every `add`, so the entries are sorted by `id`.
        var low = 0
        var high = rest.count
        while low < high {
            let mid = (low + high) / 2
            if rest[mid].id < id { low = mid + 1 } else { high = mid }
        }
        guard low < rest.count, rest[low].id == id, let handler = rest[low].handler.take() else {
            return nil
        }
        storedCount -= 1
        if Self.isImmediate(id) { immediateCount -= 1 }
        if isVisiting {
            hasRemovedEntries = true
        } else {
            rest.remove(at: low)
        }
        return handler
    }

    /// Starts a round. Returns `false`, and queues one more round, if a round is running.
    mutating func beginRound() -> Bool {
        if isNotifying {
            hasQueuedRound = true
            return false
        }
        isNotifying = true
        hasQueuedRound = false
        return true
    }

    /// Forgets that one more round was asked for: a round that was deferred before it started
    /// (see ``LoadableCore/maxNestingDepth``) shows every change made while it waited.
    mutating func clearQueuedRound() {
        hasQueuedRound = false
    }

    /// The number of entries the round being started visits.
    var roundEnd: Int { first == nil ? 0 : 1 + rest.count }

    /// The handler at `index`, or `nil` if it was removed.
    package func handler(at index: Int) -> Handler? {
        index == 0 ? first?.handler : rest[index - 1].handler
    }

    /// The identifier of the entry at `index`.
    package func id(at index: Int) -> Int {
        index == 0 ? first?.id ?? -1 : rest[index - 1].id
    }

    /// Ends a round. Returns `true` if another round was asked for meanwhile and must run now.
    mutating func endRound() -> Bool {
        if hasQueuedRound {
            hasQueuedRound = false
            return true
        }
        isNotifying = false
        if hasRemovedEntries, immediateDepth == 0 { removeCancelledEntries() }
        return false
    }

    /// Starts calling the immediate observers: removals leave their entries in place meanwhile.
    /// Returns the number of entries to visit.
    mutating func beginImmediateCalls() -> Int {
        immediateDepth += 1
        return roundEnd
    }

    /// Ends calling the immediate observers.
    mutating func endImmediateCalls() {
        immediateDepth -= 1
        if hasRemovedEntries, !isVisiting { removeCancelledEntries() }
    }

    /// Drops the entries removed during the round that just ended.
    private mutating func removeCancelledEntries() {
        rest.removeAll { $0.handler == nil }
        if first?.handler == nil { first = rest.isEmpty ? nil : rest.removeFirst() }
        hasRemovedEntries = false
    }
}
