/// The records of a ``SyncedCollection``, in a stable order: the order in which they first
/// appeared (the first pull's order, then new records at the end); an update never moves a record.
/// Views sort.
///
/// A value: reading it costs nothing, and it changes only when the collection gives a new one.
public struct RecordSet<Record: Identifiable & Sendable & Equatable>: Sendable, Equatable, RandomAccessCollection
where Record.ID: Sendable {
    private var records: [Record]
    private var positions: [Record.ID: Int]
    /// Beside each record, the number it got when it first appeared: increasing in the set's
    /// order, never reused. Views order ties by it, so that they match the set's order.
    private var orders: [UInt64]
    private var nextOrder: UInt64

    /// An empty set.
    public init() {
        records = []
        positions = [:]
        orders = []
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

    /// The record with `id`, or `nil`.
    public subscript(id id: Record.ID) -> Record? {
        positions[id].map { records[$0] }
    }

    /// The ids, in order.
    public var ids: [Record.ID] { records.map { $0.id } }

    /// Whether a record has `id`.
    public func contains(id: Record.ID) -> Bool { positions[id] != nil }

    /// The number record `id` got when it first appeared (increasing in the set's order), or `nil`.
    func order(of id: Record.ID) -> UInt64? {
        positions[id].map { orders[$0] }
    }

    /// The number of the record at `position`.
    func order(at position: Int) -> UInt64 { orders[position] }

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
        if let position = positions[record.id] {
            guard records[position] != record else { return false }
            records[position] = record
        } else {
            positions[record.id] = records.count
            records.append(record)
            orders.append(nextOrder)
            nextOrder += 1
        }
        return true
    }

    /// Removes the record with `id`. Returns whether it was there.
    @discardableResult
    mutating func remove(id: Record.ID) -> Bool {
        guard let position = positions.removeValue(forKey: id) else { return false }
        records.remove(at: position)
        orders.remove(at: position)
        for index in position..<records.count { positions[records[index].id] = index }
        return true
    }

    /// Removes the records with the ids of `ids`, in one pass.
    mutating func remove(ids: Set<Record.ID>) {
        guard !ids.isEmpty else { return }
        guard ids.count > 1 else {
            if let id = ids.first { remove(id: id) }
            return
        }
        let firstPosition = ids.compactMap { positions[$0] }.min()
        guard let firstPosition else { return }
        for id in ids { positions[id] = nil }
        var kept = firstPosition
        for index in firstPosition..<records.count where !ids.contains(records[index].id) {
            records[kept] = records[index]
            orders[kept] = orders[index]
            positions[records[kept].id] = kept
            kept += 1
        }
        records.removeSubrange(kept...)
        orders.removeSubrange(kept...)
    }
}
