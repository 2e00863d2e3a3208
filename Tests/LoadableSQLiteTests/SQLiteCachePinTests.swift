import Foundation
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSQLite
import LoadableTestSupport
import Testing

/// What `SQLiteLoadableCache` adds to the contract's rules of pinned entries and touches
/// (`CacheContractPinTests.swift`): the order `usage()` reports, what a touch past `maxBytes`
/// evicts, and how a touch that meets a damaged file fails.
@Suite("SQLiteLoadableCache: pinned entries and touches")
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

    @Test("a touch that grows the total past maxBytes evicts the least recently used unpinned entries, not itself")
    func touchPastTheLimit() async throws {
        let (folder, cache) = try Self.makeCache(maxBytes: 400)
        defer { FileCacheFixtures.removeDirectory(folder) }
        for (index, key) in ["a", "b", "c", "d"].enumerated() {
            try await cache.save(Self.entry(UInt8(index)), key: key)
        }
        let metadata = ["ETag": String(repeating: "e", count: 100)]
        let grown = 100 + CacheSubject.metadataSize(metadata)
        // "a" is the least recently used; touched, it is the most recently used, and "b" and "c"
        // make room for its metadata.
        #expect(try await cache.touch(key: "a", savedAt: Date(timeIntervalSinceReferenceDate: 5), metadata: metadata))
        #expect(try await cache.usage() == (100 + grown, ["d", "a"]))
        var touched = Self.entry(0)
        touched.savedAt = Date(timeIntervalSinceReferenceDate: 5)
        touched.metadata = metadata
        #expect(try await cache.load(key: "a") == touched)
        #expect(try await cache.integrityCheck() == ["ok"])
    }

    @Test("a touch keeps the rules of a save: an unpinned entry that no longer fits goes, a pinned one stays")
    func touchThatDoesNotFit() async throws {
        let (folder, cache) = try Self.makeCache(maxBytes: 300)
        defer { FileCacheFixtures.removeDirectory(folder) }
        try await cache.save(Self.entry(1), key: "a")
        try await cache.save(Self.entry(2, isPinned: true), key: "p")
        try await cache.save(Self.entry(3), key: "b")
        let large = ["ETag": String(repeating: "e", count: 250)]
        let date = Date(timeIntervalSinceReferenceDate: 9)

        // Larger than the limit on its own, unpinned: not kept, as its save would not be; the
        // others stay.
        #expect(try await cache.touch(key: "b", savedAt: date, metadata: large))
        #expect(try await cache.usage() == (200, ["a", "p"]))
        #expect(try await cache.load(key: "b") == nil)

        // Pinned: kept, and every unpinned entry goes.
        #expect(try await cache.touch(key: "p", savedAt: date, metadata: large))
        var pinned = Self.entry(2, isPinned: true)
        pinned.savedAt = date
        pinned.metadata = large
        let pinnedSize = 100 + CacheSubject.metadataSize(large)
        #expect(try await cache.usage() == (pinnedSize, ["p"]))
        #expect(try await cache.load(key: "p") == pinned)

        // An unpinned entry that fits the limit but not beside the pinned one: not kept, as a save
        // of it would not be.
        try await cache.save(Self.entry(4, counting: 10), key: "c")
        #expect(try await cache.usage() == (pinnedSize, ["p"]))
        #expect(try await cache.integrityCheck() == ["ok"])
    }

    @Test("a touch of a key without an entry is false and writes nothing; through another object it is the same row")
    func touchWithoutEntry() async throws {
        let (folder, cache) = try Self.makeCache()
        defer { FileCacheFixtures.removeDirectory(folder) }
        try await cache.save(Self.entry(1), key: "a")
        let date = Date(timeIntervalSinceReferenceDate: 3)
        #expect(try await cache.touch(key: "b", savedAt: date, metadata: ["x": "y"]) == false)
        #expect(try await cache.usage() == (100, ["a"]))
        #expect(try await cache.load(key: "b") == nil)
        // A key typed decomposed touches the precomposed row.
        try await cache.save(Self.entry(2), key: "caf\u{E9}")
        let other = try SQLiteLoadableCache(path: cache.path)
        #expect(try await other.touch(key: "cafe\u{301}", savedAt: date, metadata: [:]))
        #expect(try await cache.load(key: "caf\u{E9}")?.savedAt == date)
    }

    @Test("touches through one object never undo saves through another: a touch is one transaction that keeps the data")
    func touchDoesNotUndoASave() async throws {
        let (folder, cache) = try Self.makeCache()
        defer { FileCacheFixtures.removeDirectory(folder) }
        let other = try SQLiteLoadableCache(path: cache.path)
        try await cache.save(Self.entry(0), key: "k")
        // Touches in a loop through `other` while `cache` saves new data and reads it back: a
        // touch that loaded the entry and saved it back (the protocol's default) would now and
        // then put back the data of the save before.
        let touching = Task {
            var touches = 0
            repeat {
                _ = try await other.touch(
                    key: "k", savedAt: Date(timeIntervalSinceReferenceDate: Double(touches)),
                    metadata: ["n": "\(touches)"])
                touches += 1
            } while !Task.isCancelled
        }
        var undone: [Int] = []
        // A thousand rounds (a hundred under ThreadSanitizer): with the protocol's default, saves
        // were undone in each of four runs.
        for round in 1...StressScale.rounds(1_000) {
            let entry = Self.entry(UInt8(round % 256), counting: 50_000 + round)
            try await cache.save(entry, key: "k")
            if try await cache.load(key: "k")?.data != entry.data { undone.append(round) }
        }
        touching.cancel()
        try await touching.value
        #expect(undone.isEmpty, "the saves of rounds \(undone) were undone")
    }

    @Test("a touch that meets a damaged page fails as saveFailed with the SQLite error, moved aside")
    func touchMeetsDamage() async throws {
        let (folder, path) = SQLiteCacheRecoveryTests.makePath()
        defer { FileCacheFixtures.removeDirectory(folder) }
        try await SQLiteCacheRecoveryTests.fill(path, count: 400)
        let cache = try SQLiteLoadableCache(path: path)
        _ = try await cache.load(key: "k0")
        var bytes = try FileCacheFixtures.bytes(at: path)
        for index in (4 * 4_096)..<bytes.count { bytes[index] = 0xFF }
        try FileCacheFixtures.write(bytes, to: path)

        var failure: LoadableCacheError?
        for index in 0..<400 where failure == nil {
            failure = await FileCacheFixtures.caught {
                _ = try await cache.touch(
                    key: "k\(index)", savedAt: Date(timeIntervalSinceReferenceDate: 1), metadata: [:])
            }
        }
        guard case .saveFailed(_, let underlying)? = failure, let sqlite = underlying as? SQLiteCacheError else {
            Issue.record("expected saveFailed with a SQLiteCacheError, got \(String(describing: failure))")
            return
        }
        #expect(sqlite.path == path.path)
        #expect(sqlite.movedTo == path.path + ".bad")
        // The fresh database has no entry to touch.
        #expect(
            try await cache.touch(key: "k1", savedAt: Date(timeIntervalSinceReferenceDate: 1), metadata: [:]) == false)
    }
}
