import Foundation
import LoadableCaching
import LoadableSQLite
import LoadableTesting
import Testing

// MARK: - Pinned entries, touch, save dates

/// The rules of `CachedEntry.isPinned`, `LoadableCache.touch(key:savedAt:metadata:)` and of a
/// save date that is not finite, over every cache kind: a pinned entry (an outbox's queue, changes
/// the server does not have yet) is never evicted by `maxBytes`, never removed by
/// `removeEntries(savedBefore:)`, kept when it is larger than the limit on its own, and removed by
/// `remove(key:)`, `removeAll()` and a scope's removal. A touch changes the date and the
/// metadata and keeps the rest. A date that is not finite is refused, never stored as bytes a
/// later load finds corrupt.
@Suite("Every LoadableCache: pinned entries, touch, save dates")
struct CacheContractPinTests {
    /// An entry that counts `size` bytes under a one-letter key in `kind`.
    static func entry(
        _ first: UInt8, counting size: Int = 100, in kind: BoundedCacheKind, savedAt: Double = 1_000,
        isPinned: Bool = false
    ) -> CachedEntry {
        var entry = CacheContractLimitTests.entry(first, counting: size, in: kind, savedAt: savedAt)
        entry.isPinned = isPinned
        return entry
    }

    @Test(
        "isPinned comes back, through another object too; a later save sets it or clears it",
        arguments: CacheKind.allCases)
    func pinRoundTrip(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let cache = subject.cache
        var pinned = contractEntry(30, first: 1, savedAt: 5, metadata: ["ETag": "\"p\""])
        pinned.isPinned = true
        try await cache.save(pinned, key: "outbox")
        #expect(try await cache.load(key: "outbox") == pinned)
        #expect(try await subject.another().load(key: "outbox")?.isPinned == true)
        #expect(try await subject.storedCount() == 1)

        try await cache.save(contractEntry(3, first: 2), key: "outbox")
        #expect(try await cache.load(key: "outbox") == contractEntry(3, first: 2))
        #expect(try await subject.another().load(key: "outbox")?.isPinned == false)
        #expect(try await subject.storedCount() == 1)

        try await cache.save(pinned, key: "outbox")
        #expect(try await subject.another().load(key: "outbox") == pinned)
        #expect(try await subject.storedCount() == 1)
    }

    @Test(
        "no save past maxBytes evicts a pinned entry; it counts toward the limit", arguments: BoundedCacheKind.allCases)
    func evictionSkipsPinned(kind: BoundedCacheKind) async throws {
        let subject = try CacheSubject(kind, maxBytes: 300)
        defer { subject.cleanUp() }
        let cache = subject.cache
        let queue = Self.entry(9, in: kind, isPinned: true)
        try await cache.save(queue, key: "q")
        for index in 0..<20 {
            try await cache.save(Self.entry(UInt8(index), in: kind), key: index.isMultiple(of: 2) ? "a" : "b")
            try await cache.save(Self.entry(UInt8(index + 1), in: kind), key: "c")
        }
        // The pinned entry is the least recently used, and stays; the others share what is left.
        #expect(try await cache.load(key: "q") == queue)
        let usage = try await subject.usage(keys: ["a", "b", "c", "q"])
        #expect(usage.totalBytes == 300)
        #expect(usage.keysLeastRecentFirst.contains("q"))
        #expect(try await subject.another().load(key: "q") == queue)
    }

    @Test(
        "a pinned entry larger than maxBytes is kept, and every other entry goes",
        arguments: BoundedCacheKind.allCases)
    func pinnedLargerThanTheLimit(kind: BoundedCacheKind) async throws {
        let subject = try CacheSubject(kind, maxBytes: 300)
        defer { subject.cleanUp() }
        let cache = subject.cache
        try await cache.save(Self.entry(1, in: kind), key: "a")
        try await cache.save(Self.entry(2, in: kind), key: "b")
        let queue = Self.entry(3, counting: 500, in: kind, isPinned: true)
        try await cache.save(queue, key: "q")
        #expect(try await cache.load(key: "q") == queue)
        #expect(try await cache.load(key: "a") == nil)
        #expect(try await cache.load(key: "b") == nil)
        #expect(try await subject.usage(keys: ["a", "b", "q"]) == (500, ["q"]))

        // An unpinned save that follows is not kept while the pinned entry fills the limit; the
        // pinned entry stays.
        try await cache.save(Self.entry(4, in: kind), key: "a")
        #expect(try await cache.load(key: "q") == queue)
        #expect(try await cache.load(key: "a") == nil)

        // Unpinned (the queue was sent), it is evicted as any other entry.
        try await cache.save(Self.entry(5, counting: 200, in: kind), key: "q")
        try await cache.save(Self.entry(6, counting: 200, in: kind), key: "b")
        #expect(try await cache.load(key: "q") == nil)
        #expect(try await cache.load(key: "b") == Self.entry(6, counting: 200, in: kind))
    }

    @Test(
        "a limit lowered since the last launch evicts down to it when the cache opens, pinned entries kept",
        arguments: BoundedCacheKind.allCases)
    func loweredLimitKeepsPinned(kind: BoundedCacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let queue = Self.entry(7, in: kind, isPinned: true)
        try await subject.cache.save(queue, key: "q")
        for (index, key) in ["a", "b", "c"].enumerated() {
            try await subject.cache.save(Self.entry(UInt8(index), in: kind), key: key)
        }
        if kind == .file { FileLoadableCache.forgetFolder(directory: subject.directory) }
        let next = try CacheSubject(kind, directory: subject.directory, maxBytes: 150)
        #expect(try await next.cache.load(key: "q") == queue)
        #expect(try await next.usage(keys: ["a", "b", "c", "q"]) == (100, ["q"]))
    }

    @Test("removeEntries(savedBefore:) keeps pinned entries, however old", arguments: CacheKind.allCases)
    func removeBySaveDateKeepsPinned(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let cache = subject.cache
        var queue = contractEntry(10, first: 1, savedAt: 0)
        queue.isPinned = true
        try await cache.save(queue, key: "outbox/queue")
        try await cache.save(contractEntry(10, first: 2, savedAt: 0), key: "old")
        try await cache.save(contractEntry(10, first: 3, savedAt: 2_000), key: "new")
        try await subject.removeEntries(savedBefore: Date(timeIntervalSinceReferenceDate: 1_000))
        #expect(try await cache.load(key: "outbox/queue") == queue)
        #expect(try await cache.load(key: "old") == nil)
        #expect(try await cache.load(key: "new") == contractEntry(10, first: 3, savedAt: 2_000))
        #expect(try await subject.storedCount() == 2)
    }

    @Test("remove(key:), removeAll() and a scope's removeAll() remove pinned entries", arguments: CacheKind.allCases)
    func explicitRemovalsRemovePinned(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let cache = subject.cache
        var queue = contractEntry(10, first: 1)
        queue.isPinned = true
        try await cache.save(queue, key: "one")
        try await cache.remove(key: "one")
        #expect(try await cache.load(key: "one") == nil)
        #expect(try await subject.storedCount() == 0)

        try await cache.scoped("outbox/").save(queue, key: "queue")
        try await cache.save(queue, key: "other/queue")
        try await cache.scoped("outbox/").removeAll()
        #expect(try await cache.load(key: "outbox/queue") == nil)
        #expect(try await cache.load(key: "other/queue") == queue)

        try await cache.removeAll()
        #expect(try await cache.load(key: "other/queue") == nil)
        #expect(try await subject.another().load(key: "other/queue") == nil)
        #expect(try await subject.storedCount() == 0)
    }

    @Test(
        "touch sets savedAt and metadata and keeps data, version and pin; a missing key is false",
        arguments: CacheKind.allCases)
    func touch(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let cache = subject.cache
        #expect(
            try await cache.touch(key: "k", savedAt: Date(timeIntervalSinceReferenceDate: 1), metadata: [:]) == false)
        #expect(try await cache.load(key: "k") == nil)

        var entry = contractEntry(2_000, first: 4, savedAt: 10, version: 3, metadata: ["ETag": "\"a\""])
        entry.isPinned = true
        try await cache.save(entry, key: "k")
        let later = Date(timeIntervalSinceReferenceDate: 123_456.5)
        #expect(try await cache.touch(key: "k", savedAt: later, metadata: ["ETag": "\"a\""]))
        var expected = entry
        expected.savedAt = later
        #expect(try await cache.load(key: "k") == expected)
        #expect(try await subject.another().load(key: "k") == expected)

        // New validators, none, and some again: the metadata is replaced each time.
        for metadata in [["ETag": "\"b\"", "Last-Modified": "Sat, 28 Nov 2026 01:00:00 GMT"], [:], ["ETag": "\"c\""]] {
            #expect(try await cache.touch(key: "k", savedAt: later, metadata: metadata))
            expected.metadata = metadata
            #expect(try await subject.another().load(key: "k") == expected)
        }
        #expect(try await subject.storedCount() == 1)

        // Through a scope.
        try await cache.scoped("s/").save(contractEntry(5), key: "k")
        #expect(try await cache.scoped("s/").touch(key: "k", savedAt: later, metadata: ["a": "b"]))
        var scoped = contractEntry(5)
        scoped.savedAt = later
        scoped.metadata = ["a": "b"]
        #expect(try await cache.load(key: "s/k") == scoped)
    }

    @Test("a touch marks the entry used, as a load does", arguments: BoundedCacheKind.allCases)
    func touchIsAUse(kind: BoundedCacheKind) async throws {
        let subject = try CacheSubject(kind, maxBytes: 300)
        defer { subject.cleanUp() }
        let cache = subject.cache
        for (index, key) in ["a", "b", "c"].enumerated() {
            try await cache.save(Self.entry(UInt8(index), in: kind), key: key)
        }
        #expect(try await cache.touch(key: "a", savedAt: Date(timeIntervalSinceReferenceDate: 7), metadata: [:]))
        #expect(try await subject.usage(keys: ["a", "b", "c"]) == (300, ["b", "c", "a"]))
        try await cache.save(Self.entry(3, in: kind), key: "d")
        #expect(try await cache.load(key: "b") == nil)
        #expect(try await cache.load(key: "a") == Self.entry(0, in: kind, savedAt: 7))
    }

    @Test(
        "a touch that changes the metadata's size keeps the usage right",
        arguments: BoundedCacheKind.allCases)
    func touchKeepsUsage(kind: BoundedCacheKind) async throws {
        let subject = try CacheSubject(kind, maxBytes: 10_000)
        defer { subject.cleanUp() }
        let cache = subject.cache
        let entry = contractEntry(50, first: 1)
        try await cache.save(entry, key: "a")
        let metadata = ["ETag": String(repeating: "e", count: 300)]
        #expect(try await cache.touch(key: "a", savedAt: Date(timeIntervalSinceReferenceDate: 2), metadata: metadata))
        var touched = entry
        touched.savedAt = Date(timeIntervalSinceReferenceDate: 2)
        touched.metadata = metadata
        #expect(try await subject.usage(keys: ["a"]).totalBytes == subject.size(of: touched, key: "a"))
        #expect(try await cache.touch(key: "a", savedAt: Date(timeIntervalSinceReferenceDate: 3), metadata: [:]))
        touched.savedAt = Date(timeIntervalSinceReferenceDate: 3)
        touched.metadata = [:]
        #expect(try await subject.usage(keys: ["a"]).totalBytes == subject.size(of: touched, key: "a"))
        #expect(try await subject.another().load(key: "a") == touched)
    }

    static let nonFiniteDates: [Double] = [.nan, .infinity, -.infinity]

    @Test(
        "a save whose savedAt is not finite is refused with saveFailed, and the old entry stays",
        arguments: BoundedCacheKind.allCases, nonFiniteDates)
    func nonFiniteSaveDateIsRefused(kind: BoundedCacheKind, seconds: Double) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let cache = subject.cache
        try await cache.save(contractEntry(5), key: "k")
        let bad = CachedEntry(data: Data([1]), savedAt: Date(timeIntervalSinceReferenceDate: seconds), version: 1)
        await #expect {
            try await cache.save(bad, key: "k")
        } throws: { error in
            guard case .saveFailed(let key, let underlying) = error as? LoadableCacheError else { return false }
            return key == "k" && "\(underlying)".contains("not a finite date")
        }
        await #expect(throws: LoadableCacheError.self) {
            try await cache.save(bad, key: "new")
        }
        #expect(try await cache.load(key: "k") == contractEntry(5))
        #expect(try await subject.another().load(key: "k") == contractEntry(5))
        #expect(try await cache.load(key: "new") == nil)
    }

    @Test(
        "a touch whose savedAt is not finite is refused, by every cache", arguments: CacheKind.allCases, nonFiniteDates)
    func nonFiniteTouchIsRefused(kind: CacheKind, seconds: Double) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let cache = subject.cache
        try await cache.save(contractEntry(5), key: "k")
        await #expect(throws: LoadableCacheError.self) {
            _ = try await cache.touch(key: "k", savedAt: Date(timeIntervalSinceReferenceDate: seconds), metadata: [:])
        }
        #expect(try await subject.another().load(key: "k") == contractEntry(5))
    }
}
