/// The records of a ``SyncedCollection``, in a stable order: the order in which they first
/// appeared (the first pull's order, then new records at the end); an update never moves a record.
/// Views sort.
///
/// A value: reading it costs nothing, and it changes only when the collection gives a new one.
public struct RecordSet<Record: Identifiable & Sendable & Equatable>: Sendable, Equatable, RandomAccessCollection
where Record.ID: Sendable {
    // A record is found by id in two steps: its number (`orderByID`), then its position by binary
    // search of `orders`, which increase along the set. Removing a record then shifts the arrays
    // and changes no other record's entry (positions in the dictionary would all move).
    private var records: [Record]
    /// Beside each record, the number it got when it first appeared: increasing in the set's
    /// order, never reused. Views order ties by it, so that they match the set's order.
    private var orders: [UInt64]
    private var orderByID: [Record.ID: UInt64]
    private var nextOrder: UInt64

    /// An empty set.
    public init() {
        records = []
        orders = []
        orderByID = [:]
        nextOrder = 0
    }

    /// The records, in order; of two records with one id, the last is kept (at the first one's
    /// place).
    ///
    /// - Parameter records: The records.
    public init(_ records: some Sequence<Record>) {
        self.init()
        for record in records { upsert(record) }
    }

    /// The position of the first record.
    public var startIndex: Int { 0 }
    /// The position after the last record.
    public var endIndex: Int { records.count }

    /// The record at `position`.
    public subscript(position: Int) -> Record { records[position] }

    /// The record with `id`, or `nil`. O(log n).
    public subscript(id id: Record.ID) -> Record? {
        position(of: id).map { records[$0] }
    }

    /// The ids, in order.
    public var ids: [Record.ID] { records.map { $0.id } }

    /// Whether a record has `id`.
    public func contains(id: Record.ID) -> Bool { orderByID[id] != nil }

    /// The number record `id` got when it first appeared (increasing in the set's order), or `nil`.
    func order(of id: Record.ID) -> UInt64? { orderByID[id] }

    /// The number of the record at `position`.
    func order(at position: Int) -> UInt64 { orders[position] }

    /// The position of record `id`, or `nil`.
    private func position(of id: Record.ID) -> Int? {
        guard let order = orderByID[id] else { return nil }
        return position(ofOrder: order)
    }

    /// The position of the record numbered `order` (one the set has).
    private func position(ofOrder order: UInt64) -> Int {
        var low = 0
        var high = orders.count
        while low < high {
            let middle = low + (high - low) / 2
            if orders[middle] < order { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Calls `body` with the records, in order, in place.
    func withUnsafeRecords<Result>(_ body: (UnsafeBufferPointer<Record>) throws -> Result) rethrows -> Result {
        try records.withUnsafeBufferPointer(body)
    }

    /// Whether two sets hold equal records in the same order.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.records == rhs.records }

    // MARK: - Changing (the collection's)

    /// Replaces the record with its id in place, or adds it at the end. Returns whether it changed.
    @discardableResult
    mutating func upsert(_ record: Record) -> Bool {
        if let position = position(of: record.id) {
            guard records[position] != record else { return false }
            records[position] = record
        } else {
            orderByID[record.id] = nextOrder
            records.append(record)
            orders.append(nextOrder)
            nextOrder += 1
        }
        return true
    }

    /// Removes the record with `id`. Returns whether it was there.
    @discardableResult
    mutating func remove(id: Record.ID) -> Bool {
        guard let order = orderByID.removeValue(forKey: id) else { return false }
        let position = position(ofOrder: order)
        records.remove(at: position)
        orders.remove(at: position)
        return true
    }

    /// Removes the records with the ids of `ids`, in one pass.
    mutating func remove(ids: Set<Record.ID>) {
        guard !ids.isEmpty else { return }
        guard ids.count > 1 else {
            if let id = ids.first { remove(id: id) }
            return
        }
        var removed: [Int] = []
        for id in ids {
            guard let order = orderByID.removeValue(forKey: id) else { continue }
            removed.append(position(ofOrder: order))
        }
        guard !removed.isEmpty else { return }
        removed.sort()
        var kept = removed[0]
        var next = 0
        for index in removed[0]..<records.count {
            if next < removed.count, removed[next] == index {
                next += 1
                continue
            }
            records.swapAt(kept, index)
            orders.swapAt(kept, index)
            kept += 1
        }
        records.removeSubrange(kept...)
        orders.removeSubrange(kept...)
    }
}
