/// A live view of a ``SyncedCollection``: the records that match a filter, in a sort order, kept
/// current as records change, pending local changes included. Made by
/// ``SyncedCollection/view(where:sortedBy:)``.
///
/// ```swift
/// let open = tasks.view(where: { !$0.done }, sortedBy: { $0.updatedAt > $1.updatedAt })
/// List(open.contents ?? []) { TaskRow(task: $0) }
/// ```
///
/// It is a `PushLoadable<[Record]>`: it can be observed, mapped, grouped and kept like every
/// loadable; only its collection changes it.
///
/// - **Contents.** The matching records in order. Records the sort ranks equal keep the
///   collection's order (the order in which they first appeared). `nil` until the collection has
///   contents.
/// - **Updates.** A changed record is found and moved by binary search, with no sort: O(log n)
///   comparisons and one shift of the array between its old and new places (a move across a
///   100,000-record view shifts 100,000 elements, a few tens of microseconds; see
///   `Docs/Performance.md`). Many changes at once (a pulled page) are merged in one pass.
/// - **Notifications.** Observers and Observation are told only when the contents changed: a
///   change to a record the view does not show, before or after, notifies nothing; so does a
///   change that leaves every shown record equal (the collection tells views only of records
///   that changed).
/// - **State.** While the collection has no contents, the view's state is the collection's
///   (idle, syncing, failed with its error); once it has, the view is
///   `.didSyncSuccessfully` and stays so: the collection's later pulls and errors are the
///   collection's (``SyncedCollection/status``), so the view notifies only when its records
///   change.
/// - **Lifetime.** The view keeps its collection alive; the collection holds its views weakly.
///   Release a view to stop its work.
///
/// Reading `contents` gives the view's array; an array kept across a change is copied by that
/// change (copy-on-write), so read it, use it, and let it go.
///
/// Isolated to the main actor.
@MainActor
public final class RecordView<Record: Identifiable & Sendable & Equatable>: PushLoadable<[Record]>
where Record.ID: Sendable {
    private let isIncluded: (Record) -> Bool
    private let areInIncreasingOrder: (Record, Record) -> Bool
    /// Beside each record of the contents, its number in the collection's order: ties are broken
    /// by it, so that every record has one place.
    private var orders: [UInt64] = []
    /// The collection's contents now (the closure keeps the collection alive).
    private let recordsNow: @MainActor () -> RecordSet<Record>?

    init(
        recordsNow: @escaping @MainActor () -> RecordSet<Record>?, state: any PureLoadable,
        where isIncluded: @escaping (Record) -> Bool, sortedBy areInIncreasingOrder: @escaping (Record, Record) -> Bool
    ) {
        self.recordsNow = recordsNow
        self.isIncluded = isIncluded
        self.areInIncreasingOrder = areInIncreasingOrder
        super.init()
        rebuild(from: recordsNow())
        followState(of: state)
    }

    /// The number of records shown. Observable.
    public var count: Int { contents?.count ?? 0 }

    // MARK: - Following the collection

    /// Shows the records of `set` that match, sorted: on creation, and when the collection's
    /// contents were replaced as a whole. Notifies only when the result differs.
    func rebuild(from set: RecordSet<Record>?) {
        guard let set else {
            orders = []
            modifyContents { contents in
                guard contents != nil else { return false }
                contents = nil
                // Back to following the collection's state (its observer tells the rest).
                if core.state != .idle { core.store(state: .idle, error: nil) }
                return true
            }
            return
        }
        var positions: [Int] = []
        positions.reserveCapacity(set.count)
        var records: [Record] = []
        // Records read in place and loops, not `map`: this generic code would copy each compared
        // record through its type's value witnesses, and `map` reads through a witness call that
        // allocates (one allocation per record).
        set.withUnsafeRecords { all in
            for position in all.indices where isIncluded(all[position]) { positions.append(position) }
            // `sort` is stable (documented): the positions, in the set's order, keep ties in it,
            // as the orders would; one call of the sort per comparison.
            positions.sort { areInIncreasingOrder(all[$0], all[$1]) }
            records.reserveCapacity(positions.count)
            for position in positions { records.append(all[position]) }
        }
        var orders: [UInt64] = []
        orders.reserveCapacity(positions.count)
        for position in positions { orders.append(set.order(at: position)) }
        self.orders = orders
        guard core.state == .didSyncSuccessfully else {
            update(state: .didSyncSuccessfully, error: nil, contents: records)
            return
        }
        modifyContents { contents in
            guard contents != records else { return false }
            contents = records
            return true
        }
    }

    /// Applies changes of single records; notifies once if any changed what the view shows.
    func apply(_ changes: [RecordSetChange<Record>]) {
        guard core.readUntracked({ contents != nil }) else { return }
        var isLost = false
        modifyContents { contents in
            guard var records = contents.take() else { return false }
            var orders = [UInt64]()
            swap(&orders, &self.orders)
            defer {
                contents = records
                swap(&orders, &self.orders)
            }
            // Many changes at once (a pulled page): one merge pass, not one shift each (a shift of a
            // large view costs about what a merge pass does).
            if changes.count > 8 {
                return merge(changes, into: &records, orders: &orders, isLost: &isLost)
            }
            var changed = false
            for change in changes {
                changed = apply(change, to: &records, orders: &orders, isLost: &isLost) || changed
            }
            return changed
        }
        if isLost {
            // A record was not where its sort said (a sort that is not a strict weak order, or
            // one that reads something besides the records): shown again from the collection.
            rebuild(from: recordsNow())
        }
    }

    // MARK: - The sorted array

    /// Whether `a` (with order `aOrder`) comes before `b`: the sort, then the collection's order.
    @inline(__always)
    private func precedes(_ a: Record, _ aOrder: UInt64, _ b: Record, _ bOrder: UInt64) -> Bool {
        if areInIncreasingOrder(a, b) { return true }
        if areInIncreasingOrder(b, a) { return false }
        return aOrder < bOrder
    }

    /// The first position in `range` whose record does not come before `record`.
    private func lowerBound(
        of record: Record, _ order: UInt64, in records: [Record], _ orders: [UInt64], range: Range<Int>
    ) -> Int {
        var low = range.lowerBound
        var high = range.upperBound
        while low < high {
            let middle = low + (high - low) / 2
            if precedes(records[middle], orders[middle], record, order) {
                low = middle + 1
            } else {
                high = middle
            }
        }
        return low
    }

    /// The position of the record `old` with `order`, or `nil` (with `isLost` set) if not there.
    private func position(
        of old: Record, _ order: UInt64, in records: [Record], _ orders: [UInt64], isLost: inout Bool
    ) -> Int? {
        let position = lowerBound(of: old, order, in: records, orders, range: 0..<records.count)
        guard position < records.count, orders[position] == order else {
            isLost = true
            return nil
        }
        return position
    }

    private func apply(
        _ change: RecordSetChange<Record>, to records: inout [Record], orders: inout [UInt64], isLost: inout Bool
    ) -> Bool {
        let order = change.order
        let wasShown = change.old.map(isIncluded) ?? false
        let new = change.new.flatMap { isIncluded($0) ? $0 : nil }
        guard wasShown || new != nil else { return false }
        guard wasShown, let old = change.old else {
            // Comes into the view.
            guard let new else { return false }
            let position = lowerBound(of: new, order, in: records, orders, range: 0..<records.count)
            records.insert(new, at: position)
            orders.insert(order, at: position)
            return true
        }
        guard let from = position(of: old, order, in: records, orders, isLost: &isLost) else { return true }
        guard let new else {
            // Leaves the view.
            records.remove(at: from)
            orders.remove(at: from)
            return true
        }
        let count = records.count
        if from > 0, precedes(new, order, records[from - 1], orders[from - 1]) {
            let to = lowerBound(of: new, order, in: records, orders, range: 0..<from)
            move(&records, &orders, from: from, to: to)
            records[to] = new
        } else if from < count - 1, precedes(records[from + 1], orders[from + 1], new, order) {
            let to = lowerBound(of: new, order, in: records, orders, range: (from + 1)..<count) - 1
            move(&records, &orders, from: from, to: to)
            records[to] = new
        } else {
            guard records[from] != new else { return false }
            records[from] = new
        }
        return true
    }

    /// Moves the element at `from` to `to`, shifting those between by one: one move of the
    /// elements between (a remove and an insert would shift the array's tail twice).
    private func move(_ records: inout [Record], _ orders: inout [UInt64], from: Int, to: Int) {
        guard from != to else { return }
        records.withUnsafeMutableBufferPointer { Self.rotate($0, from: from, to: to) }
        orders.withUnsafeMutableBufferPointer { Self.rotate($0, from: from, to: to) }
    }

    /// Moves `buffer[from]` to `to`, the elements between taken one place towards `from`.
    private static func rotate<Element>(_ buffer: UnsafeMutableBufferPointer<Element>, from: Int, to: Int) {
        precondition(buffer.indices.contains(from) && buffer.indices.contains(to), "a move out of the view")
        guard let base = buffer.baseAddress else { return }
        let moved = (base + from).move()
        if to < from {
            (base + to + 1).moveInitialize(from: base + to, count: from - to)
        } else {
            (base + from).moveInitialize(from: base + from + 1, count: to - from)
        }
        (base + to).initialize(to: moved)
    }

    /// Applies many changes in one pass: the old places of changed records go, then the new
    /// records are merged in. Returns whether anything shown changed.
    private func merge(
        _ changes: [RecordSetChange<Record>], into records: inout [Record], orders: inout [UInt64],
        isLost: inout Bool
    ) -> Bool {
        var removed: [Int] = []
        var added: [(record: Record, order: UInt64)] = []
        for change in changes {
            let wasShown = change.old.map(isIncluded) ?? false
            if wasShown, let old = change.old,
                let position = position(of: old, change.order, in: records, orders, isLost: &isLost)
            {
                removed.append(position)
            }
            if let new = change.new, isIncluded(new) { added.append((new, change.order)) }
        }
        guard !removed.isEmpty || !added.isEmpty else { return false }
        if !removed.isEmpty {
            removed.sort()
            // Each record has one number, so its place is found once; kept distinct all the same,
            // since the block moves below rely on it.
            var distinct: [Int] = []
            distinct.reserveCapacity(removed.count)
            for position in removed where distinct.last != position { distinct.append(position) }
            Self.remove(at: distinct, from: &records)
            Self.remove(at: distinct, from: &orders)
        }
        guard !added.isEmpty else { return true }
        // Sorted, then placed by binary search: every comparison is made before any element moves.
        added.sort { precedes($0.record, $0.order, $1.record, $1.order) }
        var positions: [Int] = []
        positions.reserveCapacity(added.count)
        var addedRecords: [Record] = []
        addedRecords.reserveCapacity(added.count)
        var addedOrders: [UInt64] = []
        addedOrders.reserveCapacity(added.count)
        var low = 0
        for item in added {
            low = lowerBound(of: item.record, item.order, in: records, orders, range: low..<records.count)
            positions.append(low)
            addedRecords.append(item.record)
            addedOrders.append(item.order)
        }
        Self.insert(addedRecords, at: positions, into: &records)
        Self.insert(addedOrders, at: positions, into: &orders)
        return true
    }

    /// Removes the elements at `positions` (ascending, distinct) with one move of each block
    /// between them: the removed ones are set aside, the blocks moved down, and the removed ones
    /// put back at the end to be dropped, so that the array is whole whenever its own code runs.
    private static func remove<Element>(at positions: [Int], from array: inout [Element]) {
        guard let first = positions.first else { return }
        array.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            let count = buffer.count
            let aside = UnsafeMutablePointer<Element>.allocate(capacity: positions.count)
            defer { aside.deallocate() }
            var write = first
            for (index, position) in positions.enumerated() {
                (aside + index).moveInitialize(from: base + position, count: 1)
                let end = index + 1 < positions.count ? positions[index + 1] : count
                let length = end - position - 1
                if length > 0 { (base + write).moveInitialize(from: base + position + 1, count: length) }
                write += length
            }
            (base + write).moveInitialize(from: aside, count: positions.count)
        }
        array.removeLast(positions.count)
    }

    /// Inserts `elements`, in order, at `positions` (ascending places in the array as it is, equal
    /// ones in the order of `elements`) with one move of each block between them, from the back.
    private static func insert<Element>(_ elements: [Element], at positions: [Int], into array: inout [Element]) {
        guard !elements.isEmpty else { return }
        let existing = array.count
        array.append(contentsOf: elements)
        array.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            let added = elements.count
            let aside = UnsafeMutablePointer<Element>.allocate(capacity: added)
            defer { aside.deallocate() }
            aside.moveInitialize(from: base + existing, count: added)
            // Free slots: `[end, end + index + 1)`; the block from the next insertion place to
            // `end` moves right by `index + 1`, and the element goes just before it.
            var end = existing
            for index in stride(from: added - 1, through: 0, by: -1) {
                let start = positions[index]
                if end > start { (base + start + index + 1).moveInitialize(from: base + start, count: end - start) }
                (base + start + index).moveInitialize(from: aside + index, count: 1)
                end = start
            }
        }
    }
}
