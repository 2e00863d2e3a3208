/// The entry files of a folder with their sizes, least recently used first: O(1) to touch,
/// remove or take the least recently used one.
///
/// A doubly linked list threaded through arrays (no allocation per node), with an index from a
/// file's name to its slot.
struct RecencyList {
    private var names: [String] = []
    private var sizes: [Int] = []
    private var previous: [Int] = []
    private var next: [Int] = []
    private var free: [Int] = []
    private var slots: [String: Int] = [:]
    private var head = -1
    private var tail = -1
    /// The sum of the sizes.
    private(set) var totalBytes = 0

    var count: Int { slots.count }

    func contains(_ name: String) -> Bool { slots[name] != nil }

    /// Makes `name` (with `size` bytes) the most recently used.
    mutating func touch(_ name: String, size: Int) {
        if let slot = slots[name] {
            totalBytes += size - sizes[slot]
            sizes[slot] = size
            guard slot != tail else { return }
            unlink(slot)
            append(slot)
            return
        }
        let slot: Int
        if let reused = free.popLast() {
            slot = reused
            names[slot] = name
            sizes[slot] = size
        } else {
            slot = names.count
            names.append(name)
            sizes.append(size)
            previous.append(-1)
            next.append(-1)
        }
        slots[name] = slot
        totalBytes += size
        append(slot)
    }

    /// Forgets `name`; returns its size, or `nil` if it was not there.
    @discardableResult
    mutating func remove(_ name: String) -> Int? {
        guard let slot = slots.removeValue(forKey: name) else { return nil }
        unlink(slot)
        let size = sizes[slot]
        totalBytes -= size
        names[slot] = ""
        free.append(slot)
        return size
    }

    /// The least recently used name and its size, or `nil` when empty.
    var leastRecentlyUsed: (name: String, size: Int)? {
        head < 0 ? nil : (names[head], sizes[head])
    }

    /// Forgets every name.
    mutating func removeAll() {
        self = RecencyList()
    }

    /// The names, least recently used first.
    var namesInOrder: [String] {
        var result: [String] = []
        result.reserveCapacity(slots.count)
        var slot = head
        while slot >= 0 {
            result.append(names[slot])
            slot = next[slot]
        }
        return result
    }

    private mutating func unlink(_ slot: Int) {
        let before = previous[slot]
        let after = next[slot]
        if before >= 0 { next[before] = after } else { head = after }
        if after >= 0 { previous[after] = before } else { tail = before }
        previous[slot] = -1
        next[slot] = -1
    }

    private mutating func append(_ slot: Int) {
        previous[slot] = tail
        next[slot] = -1
        if tail >= 0 { next[tail] = slot } else { head = slot }
        tail = slot
    }
}
