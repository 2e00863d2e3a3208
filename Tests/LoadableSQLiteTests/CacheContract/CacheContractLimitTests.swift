import Foundation
import LoadableCaching
import LoadableSQLite
import LoadableTesting
import Testing

// MARK: - maxBytes and removeEntries(savedBefore:)

/// The rules the file and SQLite caches share beyond the protocol, run over both
/// (``BoundedCacheKind``): with `maxBytes`, the entries' sizes add up to at most `maxBytes`, a save
/// past it removes the least recently used entries (by load or save), an entry larger than the
/// limit is not kept and removes its key's old entry without throwing, and two objects on the
/// storage share one usage and one order; without it nothing is evicted.
/// `removeEntries(savedBefore:)` removes the entries saved before the date.
///
/// An entry's size is the kind's own (``CacheSubject/size(of:key:)``): the tests pick data sizes
/// so that every entry under a one-letter key counts 100 bytes in either kind.
@Suite("File and SQLite caches: maxBytes, least recently used eviction, removeEntries(savedBefore:)")
struct CacheContractLimitTests {
    /// An entry that counts `size` bytes under a one-letter key in `kind`.
    static func entry(
        _ first: UInt8, counting size: Int = 100, in kind: BoundedCacheKind, savedAt: Double = 1_000
    ) -> CachedEntry {
        let overhead = CacheSubject.size(of: contractEntry(0), key: "a", kind: kind.kind)
        return contractEntry(size - overhead, first: first, savedAt: savedAt)
    }

    @Test(
        "a save past maxBytes removes the least recently used entries, by load or save, until under it",
        arguments: BoundedCacheKind.allCases)
    func evictsLeastRecentlyUsed(kind: BoundedCacheKind) async throws {
        let subject = try CacheSubject(kind, maxBytes: 300)
        defer { subject.cleanUp() }
        let cache = subject.cache
        let keys = ["a", "b", "c", "d", "e"]
        for (index, key) in ["a", "b", "c"].enumerated() {
            try await cache.save(Self.entry(UInt8(index), in: kind), key: key)
        }
        #expect(try await subject.usage(keys: keys) == (300, ["a", "b", "c"]))
        _ = try await cache.load(key: "a")
        #expect(try await subject.usage(keys: keys).keysLeastRecentFirst == ["b", "c", "a"])
        // A load of a missing key changes nothing.
        _ = try await cache.load(key: "e")
        #expect(try await subject.usage(keys: keys).keysLeastRecentFirst == ["b", "c", "a"])

        try await cache.save(Self.entry(3, in: kind), key: "d")
        #expect(try await subject.usage(keys: keys) == (300, ["c", "a", "d"]))
        #expect(try await cache.load(key: "b") == nil)

        // A save of a key that has an entry makes it the most recently used.
        try await cache.save(Self.entry(4, in: kind), key: "c")
        #expect(try await subject.usage(keys: keys).keysLeastRecentFirst == ["a", "d", "c"])

        // A bigger entry makes room by removing two.
        try await cache.save(Self.entry(5, counting: 200, in: kind), key: "e")
        #expect(try await subject.usage(keys: keys) == (300, ["c", "e"]))
        #expect(try await cache.load(key: "c") == Self.entry(4, in: kind))
        #expect(try await cache.load(key: "e") == Self.entry(5, counting: 200, in: kind))
        #expect(try await cache.load(key: "a") == nil)
        #expect(try await cache.load(key: "d") == nil)
        #expect(try await subject.storedCount() == 2)
    }

    @Test(
        "a limit lowered since the last launch evicts the least recently used at the first use",
        arguments: BoundedCacheKind.allCases)
    func loweredLimit(kind: BoundedCacheKind) async throws {
        let subject = try CacheSubject(kind, maxBytes: 400)
        defer { subject.cleanUp() }
        for (index, key) in ["a", "b", "c", "d"].enumerated() {
            try await subject.cache.save(Self.entry(UInt8(index), in: kind), key: key)
        }
        _ = try await subject.cache.load(key: "a")
        // The next launch, with a lower limit: its first call finds the total within it.
        let lowered = try CacheSubject(kind, directory: subject.directory, maxBytes: 250)
        #expect(try await lowered.cache.load(key: "zz") == nil)
        #expect(try await lowered.usage(keys: ["a", "b", "c", "d"]) == (200, ["d", "a"]))
    }

    @Test(
        "an entry larger than maxBytes is not kept, its key's old entry is removed, and the save does not throw",
        arguments: BoundedCacheKind.allCases)
    func oversizedEntry(kind: BoundedCacheKind) async throws {
        let subject = try CacheSubject(kind, maxBytes: 300)
        defer { subject.cleanUp() }
        let cache = subject.cache
        try await cache.save(Self.entry(1, in: kind), key: "a")
        try await cache.save(Self.entry(2, in: kind), key: "b")
        try await cache.save(Self.entry(3, counting: 301, in: kind), key: "a")
        #expect(try await cache.load(key: "a") == nil)
        #expect(try await cache.load(key: "b") == Self.entry(2, in: kind))
        #expect(try await subject.usage(keys: ["a", "b"]) == (100, ["b"]))
        // An oversized entry of a key without one removes nothing else.
        try await cache.save(Self.entry(4, counting: 1_000, in: kind), key: "c")
        #expect(try await subject.usage(keys: ["b"]) == (100, ["b"]))
        // Exactly the limit fits, and takes the place of every other entry.
        try await cache.save(Self.entry(5, counting: 300, in: kind), key: "d")
        #expect(try await subject.usage(keys: ["d"]) == (300, ["d"]))
        #expect(try await cache.load(key: "d") == Self.entry(5, counting: 300, in: kind))
    }

    @Test("the size of an entry counts its key's NFC UTF-8 and its metadata", arguments: BoundedCacheKind.allCases)
    func sizeCountsKeyAndMetadata(kind: BoundedCacheKind) async throws {
        let subject = try CacheSubject(kind, maxBytes: 10_000)
        defer { subject.cleanUp() }
        let cache = subject.cache
        let withMetadata = contractEntry(
            10, metadata: ["ETag": "\"abc\"", "": "", "ü": "🙂", "Last-Modified": "Wed, 21 Oct 2026 07:28:00 GMT"])
        let keys = ["cafe\u{301}", "日本語", "k"]
        try await cache.save(withMetadata, key: keys[0])
        try await cache.save(contractEntry(20), key: keys[1])
        try await cache.save(withMetadata, key: keys[2])
        let expected = zip(keys, [withMetadata, contractEntry(20), withMetadata]).reduce(0) {
            $0 + subject.size(of: $1.1, key: $1.0)
        }
        #expect(try await subject.usage(keys: keys) == (expected, keys))
        // "café" is 5 bytes in NFC, 6 as typed.
        #expect(subject.size(of: contractEntry(0), key: keys[0]) == subject.size(of: contractEntry(0), key: "k") + 4)
        try await cache.save(contractEntry(1), key: keys[2])
        let afterReplace =
            expected - subject.size(of: withMetadata, key: "k") + subject.size(of: contractEntry(1), key: "k")
        #expect(try await subject.usage(keys: keys).totalBytes == afterReplace)
        try await cache.remove(key: "caf\u{E9}")
        #expect(
            try await subject.usage(keys: keys).totalBytes == afterReplace
                - subject.size(of: withMetadata, key: keys[0]))
    }

    @Test(
        "without maxBytes nothing is evicted, and the usage still counts every entry",
        arguments: BoundedCacheKind.allCases)
    func unbounded(kind: BoundedCacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        for index in 0..<50 { try await subject.cache.save(Self.entry(UInt8(index), in: kind), key: "\(index % 10)") }
        try await subject.cache.save(Self.entry(99, counting: 100_000, in: kind), key: "x")
        let keys = (0..<10).map { "\($0)" } + ["x"]
        #expect(try await subject.usage(keys: keys).totalBytes == 101_000)
        #expect(try await subject.storedCount() == 11)
        for key in keys { #expect(try await subject.cache.load(key: key) != nil) }
    }

    @Test(
        "a save through one object and a load through another on the same storage share one order and one usage",
        arguments: BoundedCacheKind.allCases)
    func objectsShareTheStorage(kind: BoundedCacheKind) async throws {
        let subject = try CacheSubject(kind, maxBytes: 200)
        defer { subject.cleanUp() }
        let first = subject.cache
        let second = try subject.another()
        try await first.save(Self.entry(1, in: kind), key: "a")
        try await second.save(Self.entry(2, in: kind), key: "b")
        _ = try await second.load(key: "a")
        try await first.save(Self.entry(3, in: kind), key: "c")
        #expect(try await first.load(key: "b") == nil)
        #expect(try await second.load(key: "b") == nil)
        #expect(try await subject.usage(keys: ["a", "c"]) == (200, ["a", "c"]))
    }

    @Test(
        "removeEntries(savedBefore:) removes the entries saved before the date, and only those",
        arguments: BoundedCacheKind.allCases, [nil, 100_000])
    func savedBefore(kind: BoundedCacheKind, maxBytes: Int?) async throws {
        let subject = try CacheSubject(kind, maxBytes: maxBytes)
        defer { subject.cleanUp() }
        let cache = subject.cache
        let long = String(repeating: "n", count: 200)
        let removed: [(String, CachedEntry)] = [
            ("old", Self.entry(1, in: kind, savedAt: 10)),
            ("older", contractEntry(5, savedAt: 19.5, metadata: ["ETag": "\"x\""])),
            ("ancient", contractEntry(5, savedAt: Date.distantPast.timeIntervalSinceReferenceDate)),
            ("negative", contractEntry(5, savedAt: -1e9)),
            ("just before", contractEntry(5, savedAt: 20.0.nextDown)),
        ]
        let kept: [(String, CachedEntry)] = [
            ("kept", Self.entry(3, in: kind, savedAt: 20)),
            (long, contractEntry(5, savedAt: 30)),
            ("future", contractEntry(5, savedAt: Date.distantFuture.timeIntervalSinceReferenceDate)),
            ("", contractEntry(0, savedAt: 21)),
        ]
        for (key, entry) in removed + kept { try await cache.save(entry, key: key) }
        try await cache.save(contractEntry(5, savedAt: 5), key: "replaced")
        try await cache.save(contractEntry(6, savedAt: 25), key: "replaced")

        try await subject.removeEntries(savedBefore: Date(timeIntervalSinceReferenceDate: 20))
        for (key, _) in removed { #expect(try await cache.load(key: key) == nil, "\(key)") }
        for (key, entry) in kept { #expect(try await cache.load(key: key) == entry, "\(key.prefix(10))") }
        #expect(try await cache.load(key: "replaced") == contractEntry(6, savedAt: 25))
        #expect(try await subject.storedCount() == kept.count + 1)
        let sizes = (kept + [("replaced", contractEntry(6, savedAt: 25))]).reduce(0) {
            $0 + subject.size(of: $1.1, key: $1.0)
        }
        #expect(try await subject.usage(keys: kept.map(\.0) + ["replaced"]).totalBytes == sizes)
        // A date before every entry removes none.
        try await subject.removeEntries(savedBefore: .distantPast)
        #expect(try await subject.storedCount() == kept.count + 1)
    }
}
