import Foundation
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSQLite
import Testing

/// The database's format across releases: a file of the first release (format 1, without pins)
/// or of the second (format 2, without removed ranges) is migrated in place when opened, whatever
/// opens it at the same time, and never moved aside; a file of a later release is moved aside and
/// reported, never changed; a row this release would never write is reported as corrupt.
@Suite("SQLiteLoadableCache: files of earlier and later formats")
struct SQLiteCacheFormatTests {
    /// The entries of the format-1 files, least recently used first.
    static let formatOneEntries: [(key: String, entry: CachedEntry)] = [
        ("posts/1", contractEntry(300, first: 1, savedAt: 10, version: 2)),
        ("posts/2", contractEntry(40, first: 2, savedAt: -5.5, metadata: ["ETag": "\"a\"", "ü": "🙂"])),
        ("users/me", contractEntry(0, savedAt: 1e9 + 0.25, version: -1)),
        ("outbox", contractEntry(500, first: 3, savedAt: 20)),
    ]

    /// What SQLite itself says of the file: its format and its indexes (not SQLite's own).
    static func format(of path: URL) throws -> (version: String?, indexes: [String]) {
        let database = try RawSQLiteDatabase(path)
        return (
            try database.text("PRAGMA user_version"),
            try database.texts(
                "SELECT name FROM sqlite_schema WHERE type = 'index' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        )
    }

    @Test("a format-1 file is migrated in place when opened: its entries, order and total stay, unpinned")
    func formatOneIsMigrated() async throws {
        let (folder, path) = SQLiteCacheRecoveryTests.makePath()
        defer { FileCacheFixtures.removeDirectory(folder) }
        let total = try SQLiteCacheFixtures.writeFormatOne(Self.formatOneEntries, to: path)
        #expect(try Self.format(of: path).version == "1")

        let cache = try SQLiteLoadableCache(path: path)
        #expect(try Self.format(of: path) == ("3", ["entries_by_pin_and_use"]))
        // Nothing was reported, nothing moved aside.
        for (key, entry) in Self.formatOneEntries {
            let loaded = try await cache.load(key: key)
            #expect(loaded == entry, "\(key)")
            #expect(loaded?.isPinned == false, "\(key)")
        }
        #expect(FileCacheFixtures.names(in: folder).allSatisfy { !$0.contains(".bad") })
        #expect(try await cache.usage() == (total, Self.formatOneEntries.map(\.key)))
        #expect(try await cache.integrityCheck() == ["ok"])

        // The migrated file takes pins, and the next launch opens it as it is.
        var queue = contractEntry(20, first: 9)
        queue.isPinned = true
        try await cache.save(queue, key: "outbox")
        // With a limit below the total, the next launch evicts every unpinned entry (the pinned
        // one takes 26 of its 30 bytes, and users/me's 8 do not fit beside it).
        let next = try SQLiteLoadableCache(path: path, maxBytes: 30)
        #expect(try await next.load(key: "outbox") == queue)
        #expect(try await next.usage() == (26, ["outbox"]))
        #expect(try await next.load(key: "users/me") == nil)
        #expect(try Self.format(of: path) == ("3", ["entries_by_pin_and_use"]))
        #expect(try await next.integrityCheck() == ["ok"])
    }

    @Test("a format-1 file opened with a limit below its total is migrated, then evicts down to the limit")
    func formatOneWithLowerLimit() async throws {
        let (folder, path) = SQLiteCacheRecoveryTests.makePath()
        defer { FileCacheFixtures.removeDirectory(folder) }
        try SQLiteCacheFixtures.writeFormatOne(Self.formatOneEntries, to: path)
        // 901 bytes: posts/1 (307), posts/2 (80 with its metadata), users/me (8), outbox (506).
        let cache = try SQLiteLoadableCache(path: path, maxBytes: 600)
        #expect(try await cache.usage() == (594, ["posts/2", "users/me", "outbox"]))
        #expect(try await cache.load(key: "posts/1") == nil)
        #expect(try await cache.integrityCheck() == ["ok"])
    }

    @Test(
        "objects opening one format-1 file at the same time: one migrates, the others find it done",
        arguments: 0..<10)
    func formatOneOpenedTogether(round: Int) async throws {
        let (folder, path) = SQLiteCacheRecoveryTests.makePath()
        defer { FileCacheFixtures.removeDirectory(folder) }
        try SQLiteCacheFixtures.writeFormatOne(Self.formatOneEntries, to: path)
        let caches = try await withThrowingTaskGroup(of: SQLiteLoadableCache.self) { group in
            for _ in 0..<4 { group.addTask { try SQLiteLoadableCache(path: path) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(caches.count == 4)
        for cache in caches {
            #expect(try await cache.load(key: "posts/2") == Self.formatOneEntries[1].entry)
        }
        #expect(FileCacheFixtures.names(in: folder).allSatisfy { !$0.contains(".bad") })
        #expect(try Self.format(of: path) == ("3", ["entries_by_pin_and_use"]))
        #expect(try await caches[0].integrityCheck() == ["ok"])
    }

    /// The tables of the file at `path`, by name.
    static func tables(of path: URL) throws -> [String] {
        try RawSQLiteDatabase(path).texts(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
    }

    @Test("a format-2 file is migrated in place when opened: its entries, pins, order and total stay; marks work")
    func formatTwoIsMigrated() async throws {
        let (folder, path) = SQLiteCacheRecoveryTests.makePath()
        defer { FileCacheFixtures.removeDirectory(folder) }
        var entries = Self.formatOneEntries
        entries[3].entry.isPinned = true
        let total = try SQLiteCacheFixtures.writeFormatTwo(entries, to: path)
        #expect(try Self.format(of: path).version == "2")
        #expect(try Self.tables(of: path) == ["entries", "usage"])

        SQLiteLoadableCache.setRemovals(atPath: path, directRows: 0, isHeld: true)
        defer { SQLiteLoadableCache.setRemovals(atPath: path, directRows: 1_000, isHeld: false) }
        let cache = try SQLiteLoadableCache(path: path)
        #expect(try Self.format(of: path) == ("3", ["entries_by_pin_and_use"]))
        #expect(try Self.tables(of: path) == ["entries", "removed_ranges", "usage"])
        for (key, entry) in entries {
            #expect(try await cache.load(key: key) == entry, "\(key)")
        }
        #expect(FileCacheFixtures.names(in: folder).allSatisfy { !$0.contains(".bad") })
        // The pinned entry last, then the rest by use, as format 2 kept them.
        #expect(try await cache.usage() == (total, ["posts/1", "posts/2", "users/me", "outbox"]))
        #expect(try await cache.integrityCheck() == ["ok"])

        // A scope's removal marks it in the migrated file; a save after the mark is seen.
        try await cache.scoped("posts/").removeAll()
        #expect(try await cache.pendingRemovals() == (2, 307 + 80, 1))
        #expect(try await cache.load(key: "posts/1") == nil)
        try await cache.save(contractEntry(3), key: "posts/3")
        #expect(try await cache.load(key: "posts/3") == contractEntry(3))
        #expect(try await cache.finishRemovals() == 1)
        #expect(try await cache.usage() == (8 + 506 + 10, ["users/me", "posts/3", "outbox"]))
        #expect(try await cache.integrityCheck() == ["ok"])
    }

    @Test(
        "a removed range whose columns are of other types is reported by the first load, the file moved aside",
        arguments: [
            "x'00', 'a0', 5", "'a/', NULL, 5", "'a/', 'a0', 'five'", "'a/', 'a0', 1.5",
        ])
    func badRemovedRange(values: String) async throws {
        let (folder, path) = SQLiteCacheRecoveryTests.makePath()
        defer { FileCacheFixtures.removeDirectory(folder) }
        do {
            let cache = try SQLiteLoadableCache(path: path)
            try await cache.save(contractEntry(5), key: "a/1")
        }
        // `NOT NULL` would refuse a NULL: the table is made again without it, as a damaged or
        // hand-edited file could have it.
        try RawSQLiteDatabase(path).execute(
            """
            DROP TABLE removed_ranges;
            CREATE TABLE removed_ranges (start_key, end_key, used_before);
            INSERT INTO removed_ranges VALUES (\(values));
            PRAGMA wal_checkpoint(TRUNCATE);
            """)
        let bytes = try FileCacheFixtures.bytes(at: path)
        let cache = try SQLiteLoadableCache(path: path)
        try await SQLiteCacheRecoveryTests.expectRecovered(
            cache, path: path, movedBytes: bytes, message: "are not removed ranges")
    }

    @Test("a file of a later format is reported by the first load and moved aside unchanged; a fresh database")
    func laterFormat() async throws {
        let (folder, path) = SQLiteCacheRecoveryTests.makePath()
        defer { FileCacheFixtures.removeDirectory(folder) }
        try SQLiteCacheFixtures.writeFormatOne(Self.formatOneEntries, to: path)
        do {
            let database = try RawSQLiteDatabase(path)
            try database.execute("PRAGMA user_version = 4; PRAGMA wal_checkpoint(TRUNCATE)")
        }
        let bytes = try FileCacheFixtures.bytes(at: path)

        let cache = try SQLiteLoadableCache(path: path)
        try await SQLiteCacheRecoveryTests.expectRecovered(
            cache, path: path, movedBytes: bytes, message: "format 4 of a later release; this release reads format 3")
    }

    @Test("a row whose pinned column is not a number is reported as corrupt; removing it works")
    func pinnedNotANumber() async throws {
        let (folder, path) = SQLiteCacheRecoveryTests.makePath()
        defer { FileCacheFixtures.removeDirectory(folder) }
        let cache = try SQLiteLoadableCache(path: path)
        try await cache.save(contractEntry(5), key: "k")
        try RawSQLiteDatabase(path).execute("UPDATE entries SET pinned = 'yes' WHERE key = 'k'")
        let error = await FileCacheFixtures.caught { _ = try await cache.load(key: "k") }
        guard case .corrupt(let key, let reason)? = error else {
            Issue.record("expected corrupt, got \(String(describing: error))")
            return
        }
        #expect(key == "k")
        #expect(reason.contains("pinned is not a number"), "\(reason)")
        try await cache.remove(key: "k")
        #expect(try await cache.usage() == (0, []))
    }
}
