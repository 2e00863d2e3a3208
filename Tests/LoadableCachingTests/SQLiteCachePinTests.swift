import Foundation
import LoadableCaching
import LoadableSQLite
import Testing

/// What `SQLiteLoadableCache` adds to the contract's rules of pinned entries
/// (`CacheContractPinTests.swift`): the order `usage()` reports, and eviction past pins.
@Suite("SQLiteLoadableCache: pinned entries")
struct SQLiteCachePinTests {
    /// An entry of `size` bytes under a one-letter key (the key's byte and the data).
    static func entry(_ first: UInt8, counting size: Int = 100, isPinned: Bool = false) -> CachedEntry {
        var entry = contractEntry(size - 1, first: first)
        entry.isPinned = isPinned
        return entry
    }

    static func makeCache(maxBytes: Int? = nil) throws -> (folder: URL, cache: SQLiteLoadableCache) {
        let (folder, path) = SQLiteCacheRecoveryTests.makePath()
        return (folder, try SQLiteLoadableCache(path: path, maxBytes: maxBytes))
    }

    @Test("usage() lists the unpinned keys least recently used first, then the pinned ones, by use")
    func usageOrder() async throws {
        let (folder, cache) = try Self.makeCache(maxBytes: 10_000)
        defer { FileCacheFixtures.removeDirectory(folder) }
        try await cache.save(Self.entry(1, isPinned: true), key: "p")
        try await cache.save(Self.entry(2), key: "a")
        try await cache.save(Self.entry(3, isPinned: true), key: "q")
        try await cache.save(Self.entry(4), key: "b")
        #expect(try await cache.usage() == (400, ["a", "b", "p", "q"]))
        _ = try await cache.load(key: "p")
        _ = try await cache.load(key: "a")
        #expect(try await cache.usage() == (400, ["b", "a", "q", "p"]))
        // Unpinned by a save, "q" joins the unpinned ones as the most recently used.
        try await cache.save(Self.entry(5), key: "q")
        #expect(try await cache.usage() == (400, ["b", "a", "q", "p"]))
        try await cache.save(Self.entry(6, isPinned: true), key: "b")
        #expect(try await cache.usage() == (400, ["a", "q", "p", "b"]))
    }

    @Test("a save past maxBytes evicts unpinned entries only, least recently used first, however old the pins")
    func evictionPassesOverPins() async throws {
        let (folder, cache) = try Self.makeCache(maxBytes: 400)
        defer { FileCacheFixtures.removeDirectory(folder) }
        try await cache.save(Self.entry(1, isPinned: true), key: "p")
        try await cache.save(Self.entry(2, isPinned: true), key: "q")
        try await cache.save(Self.entry(3), key: "a")
        try await cache.save(Self.entry(4), key: "b")
        try await cache.save(Self.entry(5), key: "c")
        #expect(try await cache.usage() == (400, ["b", "c", "p", "q"]))
        // A pinned save that passes the limit on its own: every unpinned entry goes, the pins stay.
        try await cache.save(Self.entry(6, counting: 350, isPinned: true), key: "r")
        #expect(try await cache.usage() == (550, ["p", "q", "r"]))
        #expect(try await cache.integrityCheck() == ["ok"])
    }
}
