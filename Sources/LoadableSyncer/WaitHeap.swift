/// A binary min-heap of waits keyed by deadline, with each wait's position tracked so that any
/// wait can be removed in O(log n).
///
/// Ties on the deadline are broken by identifier, so waits added earlier come out first.
struct WaitHeap {
    /// One wait: its identifier and when it expires.
    struct Entry: Hashable {
        var id: Int
        var deadline: Duration

        func isBefore(_ other: Entry) -> Bool {
            (deadline, id) < (other.deadline, other.id)
        }
    }

    private var entries: [Entry] = []
    /// The index in `entries` of each wait, by identifier.
    private var positions: [Int: Int] = [:]

    /// The number of waits.
    var count: Int { entries.count }

    /// Whether there are no waits.
    var isEmpty: Bool { entries.isEmpty }

    /// The wait that expires first.
    var first: Entry? { entries.first }

    /// Whether the wait `id` is in the heap.
    func contains(_ id: Int) -> Bool { positions[id] != nil }

    /// Adds a wait.
    ///
    /// - Complexity: O(log n).
    mutating func insert(id: Int, deadline: Duration) {
        precondition(positions[id] == nil, "WaitHeap: wait \(id) inserted twice")
        entries.append(Entry(id: id, deadline: deadline))
        positions[id] = entries.count - 1
        siftUp(entries.count - 1)
    }

    /// Removes and returns the wait that expires first.
    ///
    /// - Complexity: O(log n).
    mutating func popFirst() -> Entry? {
        guard let first = entries.first else { return nil }
        remove(at: 0)
        return first
    }

    /// Removes the wait `id`; returns `false` if it is not in the heap.
    ///
    /// - Complexity: O(log n).
    @discardableResult
    mutating func remove(_ id: Int) -> Bool {
        guard let index = positions[id] else { return false }
        remove(at: index)
        return true
    }

    /// Removes every wait and returns their identifiers in the order they were added.
    ///
    /// - Complexity: O(n log n).
    mutating func removeAll() -> [Int] {
        let ids = entries.map(\.id).sorted()
        entries.removeAll()
        positions.removeAll()
        return ids
    }

    private mutating func remove(at index: Int) {
        let removed = entries[index]
        positions[removed.id] = nil
        let last = entries.removeLast()
        guard index < entries.count else { return }
        entries[index] = last
        positions[last.id] = index
        if index > 0, last.isBefore(entries[(index - 1) / 2]) {
            siftUp(index)
        } else {
            siftDown(index)
        }
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard entries[child].isBefore(entries[parent]) else { return }
            swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < entries.count, entries[left].isBefore(entries[smallest]) { smallest = left }
            if right < entries.count, entries[right].isBefore(entries[smallest]) { smallest = right }
            guard smallest != parent else { return }
            swapAt(parent, smallest)
            parent = smallest
        }
    }

    private mutating func swapAt(_ i: Int, _ j: Int) {
        entries.swapAt(i, j)
        positions[entries[i].id] = i
        positions[entries[j].id] = j
    }
}
