/// The observers of one loadable, in the order they were added.
///
/// A value stored inline in every loadable. It never calls user code itself: the owner runs the
/// notification round (``ObserverOwner/notifyObservers()``, or ``PushLoadable``'s own copy of it)
/// so no access to this struct is held while a handler runs.
///
/// Rules it implements: observers added during a round are not called in it; observers removed
/// during a round and not yet called are skipped; a notification asked for during a round is
/// queued as one more round after the current one.
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
    private var nextID = 0
    /// The number of observers currently registered.
    package private(set) var count = 0
    // The flags come last so that an owner can pack its own one-byte fields right after them.
    private var isNotifying = false
    private var hasQueuedRound = false
    private var hasRemovedEntries = false

    package init() {}

    /// Whether no observer is registered.
    package var isEmpty: Bool { count == 0 }

    /// Registers `handler` and returns its identifier.
    package mutating func add(_ handler: @escaping Handler) -> Int {
        let id = nextID
        nextID += 1
        if first == nil {
            first = Entry(id: id, handler: handler)
        } else {
            rest.append(Entry(id: id, handler: handler))
        }
        count += 1
        return id
    }

    /// Unregisters the observer `id`. Returns `false` if it was not registered.
    package mutating func remove(_ id: Int) -> Bool {
        if let first, first.id == id {
            guard first.handler != nil else { return false }
            count -= 1
            if isNotifying {
                self.first?.handler = nil
                hasRemovedEntries = true
            } else {
                self.first = rest.isEmpty ? nil : rest.removeFirst()
            }
            return true
        }
        // Identifiers grow with every `add`, so the entries are sorted by `id`.
        var low = 0
        var high = rest.count
        while low < high {
            let mid = (low + high) / 2
            if rest[mid].id < id { low = mid + 1 } else { high = mid }
        }
        guard low < rest.count, rest[low].id == id, rest[low].handler != nil else {
            return false
        }
        count -= 1
        if isNotifying {
            rest[low].handler = nil
            hasRemovedEntries = true
        } else {
            rest.remove(at: low)
        }
        return true
    }

    /// Starts a round. Returns `false`, and queues one more round, if a round is running.
    package mutating func beginRound() -> Bool {
        if isNotifying {
            hasQueuedRound = true
            return false
        }
        isNotifying = true
        hasQueuedRound = false
        return true
    }

    /// The number of entries the round being started visits.
    package var roundEnd: Int { first == nil ? 0 : 1 + rest.count }

    /// The handler at `index`, or `nil` if it was removed.
    package func handler(at index: Int) -> Handler? {
        index == 0 ? first?.handler : rest[index - 1].handler
    }

    /// Ends a round. Returns `true` if another round was asked for meanwhile and must run now.
    package mutating func endRound() -> Bool {
        if hasQueuedRound {
            hasQueuedRound = false
            return true
        }
        isNotifying = false
        if hasRemovedEntries { removeCancelledEntries() }
        return false
    }

    /// Drops the entries removed during the round that just ended.
    private mutating func removeCancelledEntries() {
        rest.removeAll { $0.handler == nil }
        if first?.handler == nil { first = rest.isEmpty ? nil : rest.removeFirst() }
        hasRemovedEntries = false
    }
}

/// What a ``LoadableObservation`` token points at: something that registered an observer under
/// an identifier and can remove it.
@MainActor
package protocol ObserverRegistry: AnyObject, Sendable {
    /// Removes the observer `id` (called by its token).
    func unregisterObserver(_ id: Int)
}

/// A loadable that keeps an ``ObserverList`` and hands out ``LoadableObservation`` tokens.
///
/// ``PushLoadable`` does not conform: it keeps its list private and runs its own notification
/// round, so that the compiler sees every access to the list (fewer dynamic exclusivity checks,
/// no generic protocol accessors or metadata lookups on the hot path).
@MainActor
package protocol ObserverOwner: PureLoadable, ObserverRegistry {
    /// The observers.
    var observerList: ObserverList { get set }
    /// Called after the first observer was added.
    func observerListDidBecomeNonEmpty()
    /// Called after the last observer was removed.
    func observerListDidBecomeEmpty()
}

extension ObserverOwner {
    package func observerListDidBecomeNonEmpty() {}
    package func observerListDidBecomeEmpty() {}

    /// Registers `handler` and returns the token that keeps it registered.
    package func registerObserver(_ handler: @escaping ObserverList.Handler) -> LoadableObservation {
        let id = observerList.add(handler)
        if observerList.count == 1 { observerListDidBecomeNonEmpty() }
        return LoadableObservation(owner: self, id: id)
    }

    /// Removes the observer `id` (called by its token).
    package func unregisterObserver(_ id: Int) {
        if observerList.remove(id), observerList.isEmpty { observerListDidBecomeEmpty() }
    }

    /// Calls every observer with `self`, in the order they were added.
    ///
    /// If a round is running (an observer changed this loadable), the notification is queued as
    /// one more round right after the current one instead of nesting.
    ///
    /// Always inlined so that it runs on the owner's own stored ``ObserverOwner/observerList``
    /// instead of through the protocol's accessors (a generic call, a copy of the list and a type
    /// lookup for each access).
    @inline(__always)
    package func notifyObservers() {
        guard observerList.beginRound() else { return }
        // Keep the loadable alive for the whole round even if an observer releases the last
        // reference to it.
        let subject: any PureLoadable = self
        defer {
            #if compiler(>=6.2)
                extendLifetime(subject)
            #else
                withExtendedLifetime(subject) {}
            #endif
        }
        repeat {
            let end = observerList.roundEnd
            var index = 0
            while index < end {
                if let handler = observerList.handler(at: index) { handler(subject) }
                index += 1
            }
        } while observerList.endRound()
    }
}
