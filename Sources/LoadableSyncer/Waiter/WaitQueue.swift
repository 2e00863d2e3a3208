/// The pending waits of a ``LoadableWaiter`` in the order they began, each with its deadline and
/// what to call when it ends.
///
/// Every wait lasts the same timeout on a clock that does not go back, so the order in which waits
/// begin is also the order of their deadlines: the first wait is the one that expires first, and a
/// queue does what a heap keyed by deadline would, without sifting. Appending requires a deadline
/// no earlier than the last one's.
///
/// Identifiers are handed out in increasing order, so a wait is found by binary search. A wait
/// removed from the middle leaves a gap (its payload is released at once) until the gaps outnumber
/// the pending waits; the storage is then compacted, so memory stays O(n) for n pending waits.
struct WaitQueue<Payload> {
    /// One wait: its identifier, when it expires, and its payload; `nil` once the wait was removed.
    struct Entry {
        let id: Int
        let deadline: Duration
        var payload: Payload?
    }

    /// The waits in the order they began (identifiers increasing), gaps included.
    private var entries: [Entry] = []
    /// The index of the first wait still pending; the entries before it have ended.
    private var start = 0
    /// The identifier the next wait gets.
    private(set) var nextID = 0

    /// The number of pending waits.
    private(set) var count = 0

    /// Whether there are no pending waits.
    var isEmpty: Bool { count == 0 }

    /// The identifier and deadline of the wait that began first, which expires first.
    var first: (id: Int, deadline: Duration)? {
        guard start < entries.count else { return nil }
        return (entries[start].id, entries[start].deadline)
    }

    /// The deadline of the wait that began last, if any is pending.
    var lastDeadline: Duration? {
        isEmpty ? nil : entries.last?.deadline
    }

    /// Whether the wait `id` is pending.
    ///
    /// - Complexity: O(log n).
    func contains(_ id: Int) -> Bool {
        index(of: id) != nil
    }

    /// Adds a wait after the others and returns its identifier.
    ///
    /// - Parameters:
    ///   - deadline: When the wait expires; no earlier than the deadline of the last pending wait.
    ///   - payload: What the wait holds until it ends.
    /// - Complexity: Amortized O(1).
    mutating func append(deadline: Duration, payload: Payload) -> Int {
        precondition(lastDeadline.map { $0 <= deadline } ?? true, "WaitQueue: deadlines must not decrease")
        let id = nextID
        nextID += 1
        entries.append(Entry(id: id, deadline: deadline, payload: payload))
        count += 1
        return id
    }

    /// Removes the wait that began first and returns it.
    ///
    /// - Complexity: Amortized O(1).
    mutating func popFirst() -> (id: Int, deadline: Duration, payload: Payload)? {
        guard start < entries.count, let payload = entries[start].payload.take() else { return nil }
        let first = entries[start]
        count -= 1
        skipEnded()
        return (first.id, first.deadline, payload)
    }

    /// Removes the wait `id` and returns its payload; `nil` if it is not pending.
    ///
    /// - Complexity: O(log n), amortized.
    mutating func remove(_ id: Int) -> Payload? {
        guard let index = index(of: id), let payload = entries[index].payload.take() else { return nil }
        count -= 1
        if index == start {
            skipEnded()
        } else if entries.count - start - count > Swift.max(count, 16) {
            compact()
        }
        return payload
    }

    /// Removes every wait and returns their payloads in the order the waits began.
    ///
    /// - Complexity: O(n), gaps included.
    mutating func removeAll() -> [Payload] {
        var payloads: [Payload] = []
        payloads.reserveCapacity(count)
        for index in start..<entries.count {
            if let payload = entries[index].payload { payloads.append(payload) }
        }
        entries.removeAll()
        start = 0
        count = 0
        return payloads
    }

    /// The index of the pending wait `id`, found by binary search.
    private func index(of id: Int) -> Int? {
        var low = start
        var high = entries.count
        while low < high {
            let middle = low + (high - low) / 2
            if entries[middle].id < id { low = middle + 1 } else { high = middle }
        }
        guard low < entries.count, entries[low].id == id, entries[low].payload != nil else { return nil }
        return low
    }

    /// Moves `start` past the waits that ended, and drops them once they are half the storage.
    private mutating func skipEnded() {
        while start < entries.count, entries[start].payload == nil { start += 1 }
        if start == entries.count {
            entries.removeAll()
            start = 0
        } else if start > entries.count / 2 {
            compact()
        }
    }

    /// Drops the waits that ended.
    private mutating func compact() {
        entries.removeAll { $0.payload == nil }
        start = 0
    }
}
