import LoadableSupport
internal import Observation

/// Observation of the items and flags, and the changes of the items with their records.
extension LoadableOutbox {
    // MARK: - Observation

    // The key paths are rooted at a non-generic type (``OutboxObservationKey``) and built once:
    // a key path literal rooted at this generic class would be built again at every read and
    // change.

    func access<Value>(_ keyPath: KeyPath<OutboxObservationKey, Value>) {
        ObservationState.made(in: &observation).registrar.access(OutboxObservationKey(), keyPath: keyPath)
    }

    func mutateIsPaused(_ body: () -> Void) {
        mutate(OutboxObservationKey.isPaused, body)
    }

    func mutateIsSending(_ body: () -> Void) {
        mutate(OutboxObservationKey.isSending, body)
    }

    /// Changes the items and their records together.
    func mutateItems(_ body: (inout [OutboxItem<Change>], inout OutboxRecords) -> Void) {
        mutate(OutboxObservationKey.items) {
            stored.withLock { body(&storedItems, &$0) }
        }
    }

    func mutate<Value>(_ keyPath: KeyPath<OutboxObservationKey, Value>, _ body: () -> Void) {
        defer { if let hook = storedItemsDidChange, keyPath != OutboxObservationKey.isPaused { hook() } }
        guard let registrar = observation?.registrar else { return body() }
        registrar.willSet(OutboxObservationKey(), keyPath: keyPath)
        body()
        registrar.didSet(OutboxObservationKey(), keyPath: keyPath)
    }

    /// Changes the item `id` and its record, and returns the item as changed; `nil` when it is
    /// not in the outbox (it is looked up inside the mutation: Observation's handlers, told before
    /// it, may change the items).
    @discardableResult
    func updateItem(
        _ id: String, _ body: (inout OutboxItem<Change>, inout OutboxRecord) -> Void
    ) -> OutboxItem<Change>? {
        var updated: OutboxItem<Change>?
        mutateItems { items, records in
            guard let index = items.firstIndex(where: { $0.id == id }) else { return }
            var item = items[index]
            records.update(id) { body(&item, &$0) }
            items[index] = item
            updated = item
        }
        return updated
    }

    /// Removes the item `id`; returns whether it was there (looked up inside the mutation).
    @discardableResult
    func removeItem(_ id: String) -> Bool {
        var removed = false
        mutateItems { items, records in
            guard let index = items.firstIndex(where: { $0.id == id }) else { return }
            items.remove(at: index)
            records.remove(at: index)
            removed = true
        }
        return removed
    }
}
