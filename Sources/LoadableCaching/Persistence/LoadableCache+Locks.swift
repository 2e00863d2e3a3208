extension LoadableCache {
    /// `false`: the default lock and update hold within the process only.
    public var locksAcrossProcesses: Bool { false }

    /// Takes the lock named `key` of this cache object if no lock object of the process holds it:
    /// the lock of a cache that has none across processes.
    ///
    /// - Parameter key: The lock's name.
    /// - Returns: The held lock, or `nil` when another lock object of the process holds it.
    public func tryLock(key: String) async throws -> LoadableCacheLock? {
        InProcessCacheLocks.tryLock(key: key, of: self)
    }

    /// Loads the entry under `key`, passes it to `body`, and saves what `body` leaves (removes the
    /// entry when it leaves `nil`; writes nothing when it leaves the entry as it was): the update
    /// of a cache that has no atomic one.
    ///
    /// Two calls, a load and then a save or a removal, as the default ``touch(key:savedAt:metadata:)``
    /// is: a save of the key by another object or process between them is undone.
    ///
    /// - Parameters:
    ///   - key: The entry's key.
    ///   - body: Changes the entry.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws (nothing is written), and what ``load(key:)``,
    ///   ``save(_:key:)`` and ``remove(key:)`` throw.
    public func update<Result: Sendable>(
        key: String, _ body: @Sendable (inout CachedEntry?) throws -> Result
    ) async throws -> Result {
        let loaded = try await load(key: key)
        var entry = loaded
        let result = try body(&entry)
        guard entry != loaded else { return result }
        if let entry {
            try await save(entry, key: key)
        } else {
            try await remove(key: key)
        }
        return result
    }
}
