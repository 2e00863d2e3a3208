import Foundation
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSQLite
import Testing

/// A scope's removal past `directRows` rows: its ranges marked removed in one transaction, the
/// rows deleted by batches afterwards. Until a batch deletes them, the removed rows are absent from
/// every read, touch, update and list; a save after the mark is seen; the bytes count toward the
/// limit, and a save that needs room deletes removed rows before it evicts any entry. Each test
/// holds the batches of its file and runs them itself (`removeNextBatchNow()`,
/// `finishRemovals()`), except the one that lets the object's own task run them.
@Suite("SQLiteLoadableCache: a scope's removal marked at once, its rows deleted in batches")
struct SQLiteCacheRemovalTests {
    /// A cache on a fresh file whose scope removals always mark, batches of `batchRows` rows,
    /// held; the settings go back to the defaults when `body` returns.
    static func withMarkingCache(
        maxBytes: Int? = nil, batchRows: Int = 7,
        _ body: (SQLiteLoadableCache, URL) async throws -> Void
    ) async throws {
        let (folder, path) = SQLiteCacheRecoveryTests.makePath()
        defer { FileCacheFixtures.removeDirectory(folder) }
        SQLiteLoadableCache.setRemovals(atPath: path, batchRows: batchRows, directRows: 0, isHeld: true)
        defer { SQLiteLoadableCache.setRemovals(atPath: path, batchRows: 1_000, directRows: 1_000, isHeld: false) }
        try await body(try SQLiteLoadableCache(path: path, maxBytes: maxBytes), path)
    }

    /// The entry saved under `a/<index>` and `b/<index>`: `index % 50 + 10` bytes.
    static func entry(_ index: Int) -> CachedEntry {
        contractEntry(index % 50 + 10, first: UInt8(index % 256), savedAt: Double(index))
    }

    /// The bytes `maxBytes` counts for `entry(index)` under `key`.
    static func size(_ index: Int, key: String) -> Int { key.utf8.count + index % 50 + 10 }

    /// Saves `a/0` … `a/<count - 1>`, then `b/0` … `b/<outside - 1>`.
    static func fill(_ cache: SQLiteLoadableCache, count: Int, outside: Int = 5) async throws {
        for index in 0..<count { try await cache.save(entry(index), key: "a/\(index)") }
        for index in 0..<outside { try await cache.save(entry(index), key: "b/\(index)") }
    }

    @Test("marked entries are absent from loads, touches, updates and the usage; the others stay")
    func marksHideEntries() async throws {
        try await Self.withMarkingCache { cache, _ in
            try await Self.fill(cache, count: 50)
            let scopeBytes = (0..<50).reduce(0) { $0 + Self.size($1, key: "a/\($1)") }
            let outsideBytes = (0..<5).reduce(0) { $0 + Self.size($1, key: "b/\($1)") }
            try await cache.scoped("a/").removeAll()

            #expect(try await cache.pendingRemovals() == (50, scopeBytes, 1))
            for index in [0, 17, 49] {
                #expect(try await cache.load(key: "a/\(index)") == nil)
                #expect(try await cache.scoped("a/").load(key: "\(index)") == nil)
            }
            #expect(
                try await cache.touch(key: "a/3", savedAt: Date(timeIntervalSinceReferenceDate: 9), metadata: [:])
                    == false)
            let seen = try await cache.update(key: "a/4") { entry in entry == nil }
            #expect(seen)
            for index in 0..<5 { #expect(try await cache.load(key: "b/\(index)") == Self.entry(index)) }
            #expect(try await cache.usage() == (outsideBytes, (0..<5).map { "b/\($0)" }))
            // The file's total still counts the removed rows: they are in the file.
            #expect(try await cache.integrityCheck() == ["ok"])
            // Removing a removed key changes nothing that shows.
            try await cache.remove(key: "a/5")
            #expect(try await cache.usage() == (outsideBytes, (0..<5).map { "b/\($0)" }))
            #expect(try await cache.integrityCheck() == ["ok"])
        }
    }

    @Test("a save, touch or update after the mark is seen, before and after the batches")
    func savesAfterTheMarkAreSeen() async throws {
        try await Self.withMarkingCache(maxBytes: 1_000_000) { cache, _ in
            try await Self.fill(cache, count: 30)
            try await cache.scoped("a/").removeAll()
            let saved = contractEntry(99, first: 7, savedAt: 5)
            try await cache.save(saved, key: "a/12")
            try await cache.save(saved, key: "a/new")
            #expect(try await cache.load(key: "a/12") == saved)
            #expect(
                try await cache.touch(
                    key: "a/new", savedAt: Date(timeIntervalSinceReferenceDate: 6), metadata: ["E": "1"]))
            var touched = saved
            touched.savedAt = Date(timeIntervalSinceReferenceDate: 6)
            touched.metadata = ["E": "1"]
            _ = try await cache.update(key: "a/20") { entry in entry = saved }
            // A second removal of an overlapping scope, then saves again.
            try await cache.scoped("a/1").removeAll()
            #expect(try await cache.load(key: "a/12") == nil)
            try await cache.save(saved, key: "a/13")
            #expect(try await cache.pendingRemovals().ranges == 2)

            for _ in 0..<2 {
                #expect(try await cache.load(key: "a/new") == touched)
                #expect(try await cache.load(key: "a/20") == saved)
                #expect(try await cache.load(key: "a/13") == saved)
                for index in [0, 1, 12, 19, 29] {
                    #expect(try await cache.load(key: "a/\(index)") == nil, "a/\(index)")
                }
                #expect(
                    try await cache.usage().keysLeastRecentFirst.filter { $0.hasPrefix("a/") }.sorted() == [
                        "a/13", "a/20", "a/new",
                    ])
                #expect(try await cache.integrityCheck() == ["ok"])
                try await cache.finishRemovals()
            }
            #expect(try await cache.pendingRemovals() == (0, 0, 0))
        }
    }

    @Test("batches delete a bounded number of rows each, move the mark on, and finish; the total follows")
    func batchesFinish() async throws {
        try await Self.withMarkingCache(batchRows: 7) { cache, _ in
            try await Self.fill(cache, count: 50)
            let outsideBytes = (0..<5).reduce(0) { $0 + Self.size($1, key: "b/\($1)") }
            try await cache.scoped("a/").removeAll()
            var left = 50
            var batches = 0
            while try await cache.removeNextBatchNow() {
                batches += 1
                left -= 7
                #expect(try await cache.pendingRemovals().rows == left)
                #expect(try await cache.integrityCheck() == ["ok"])
            }
            #expect(batches == 7)
            #expect(try await cache.pendingRemovals() == (0, 0, 0))
            #expect(try await cache.usage() == (outsideBytes, (0..<5).map { "b/\($0)" }))
            #expect(try await cache.integrityCheck() == ["ok"])
            #expect(try await cache.removeNextBatchNow() == false)
        }
    }

    @Test("with a limit, a save that needs room deletes removed rows first, and evicts no entry while they last")
    func limitTakesRemovedRowsFirst() async throws {
        let limit = 2_000
        try await Self.withMarkingCache(maxBytes: limit) { cache, _ in
            // b/ first (the least recently used), then 40 entries under a/.
            for index in 0..<5 { try await cache.save(Self.entry(index), key: "b/\(index)") }
            for index in 0..<40 { try await cache.save(Self.entry(index), key: "a/\(index)") }
            let before = try await cache.usage()
            let outsideKeys = (0..<5).map { "b/\($0)" }
            try await cache.scoped("a/").removeAll()
            let removed = try await cache.pendingRemovals()
            #expect(removed.rows == 40)
            #expect(before.totalBytes - removed.bytes == (0..<5).reduce(0) { $0 + Self.size($1, key: "b/\($1)") })

            // 600 bytes: room for it only by deleting removed rows; no entry goes.
            try await cache.save(contractEntry(594), key: "c/big")
            let after = try await cache.pendingRemovals()
            #expect(after.rows < 40)
            #expect(try await cache.usage().keysLeastRecentFirst == outsideKeys + ["c/big"])
            #expect(try await cache.integrityCheck() == ["ok"])
            // Everything the removed rows held, and more: then entries go, least recently used
            // first (b/ and c/big: 674 bytes beside the 1,906 of c/huge).
            try await cache.save(contractEntry(1_900), key: "c/huge")
            #expect(try await cache.pendingRemovals() == (0, 0, 1))
            #expect(try await cache.usage() == (1_906, ["c/huge"]))
            #expect(try await cache.integrityCheck() == ["ok"])
            try await cache.finishRemovals()
            #expect(try await cache.pendingRemovals() == (0, 0, 0))
        }
    }

    @Test("keys whose next character joins the prefix's last one stay through the mark and the batches")
    func joinedKeysStay() async throws {
        try await Self.withMarkingCache(batchRows: 2) { cache, _ in
            let kept = ["a/q\u{301}x", "a/q\u{301}", "a/\r\n", "b"]
            let removed = ["a/q", "a/qz", "a/q/1", "a/\r", "a/\rx"]
            for (index, key) in (kept + removed).enumerated() { try await cache.save(Self.entry(index), key: key) }
            try await cache.scoped("a/q").removeAll()
            try await cache.scoped("a/\r").removeAll()
            #expect(try await cache.pendingRemovals().rows == removed.count)
            for (index, key) in kept.enumerated() {
                #expect(try await cache.load(key: key) == Self.entry(index), "\(key)")
            }
            for key in removed { #expect(try await cache.load(key: key) == nil, "\(key)") }
            try await cache.finishRemovals()
            for (index, key) in kept.enumerated() {
                #expect(try await cache.load(key: key) == Self.entry(index), "\(key)")
            }
            #expect(
                try await cache.usage().keysLeastRecentFirst.sorted()
                    == kept.map(\.precomposedStringWithCanonicalMapping).sorted())
            #expect(try await cache.integrityCheck() == ["ok"])
        }
    }

    @Test("the next object opened on the file sees the marks, and its own task finishes the batches")
    func nextObjectFinishes() async throws {
        try await Self.withMarkingCache { cache, path in
            try await Self.fill(cache, count: 40)
            try await cache.scoped("a/").removeAll()
            SQLiteLoadableCache.setRemovals(atPath: path, isHeld: false)
            let next = try SQLiteLoadableCache(path: path)
            #expect(try await next.load(key: "a/3") == nil)
            // The object's task runs a batch between two calls: ask until none is left (each
            // call hops onto the actor, where the batches run).
            var calls = 0
            while try await next.pendingRemovals().ranges > 0 {
                calls += 1
                if calls > 100_000 {
                    Issue.record("the batches did not finish")
                    return
                }
                await Task.yield()
            }
            #expect(try await next.pendingRemovals() == (0, 0, 0))
            #expect(try await cache.usage().keysLeastRecentFirst == (0..<5).map { "b/\($0)" })
            #expect(try await next.integrityCheck() == ["ok"])
        }
    }

    @Test("a small scope is deleted at once, without a mark; removeAll() drops the marks too")
    func smallScopeAndRemoveAll() async throws {
        try await Self.withMarkingCache { cache, path in
            try await Self.fill(cache, count: 20)
            try await cache.scoped("a/1").removeAll()
            #expect(
                try await cache.pendingRemovals() == (
                    11, (0..<20).filter { "\($0)".hasPrefix("1") }.reduce(0) { $0 + Self.size($1, key: "a/\($1)") }, 1
                ))
            // 20 rows in the range (the 11 removed ones not deleted yet): deleted at once, and the
            // mark inside the range goes with them.
            SQLiteLoadableCache.setRemovals(atPath: path, directRows: 20)
            try await cache.scoped("a/").removeAll()
            #expect(try await cache.pendingRemovals() == (0, 0, 0))
            #expect(try await cache.usage().keysLeastRecentFirst == (0..<5).map { "b/\($0)" })
            SQLiteLoadableCache.setRemovals(atPath: path, directRows: 0)
            try await cache.scoped("b/").removeAll()
            #expect(try await cache.pendingRemovals().ranges == 1)
            try await cache.removeAll()
            #expect(try await cache.pendingRemovals() == (0, 0, 0))
            #expect(try await cache.usage() == (0, []))
            #expect(try await cache.integrityCheck() == ["ok"])
        }
    }
}
