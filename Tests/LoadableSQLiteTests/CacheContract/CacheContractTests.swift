import Foundation
import LoadableCaching
import LoadableSQLite
import LoadableTesting
import Testing

// MARK: - Save, load, remove

/// The rules of `LoadableCache`, run over every cache kind (``CacheKind``): an entry comes back
/// exactly (data, `savedAt` to the bit, version, metadata), a save replaces, a remove deletes, a
/// missing key loads `nil` and removes without error, `removeAll()` removes every entry, and any
/// string is a key (the empty one, one of 10,000 characters, slashes, dots, NUL), compared as
/// Swift compares strings (`"café"` typed two ways is one entry). Another object on the same
/// storage (the next launch's) reads what one saved.
@Suite("Every LoadableCache: save, load, remove, removeAll")
@MainActor
struct CacheContractTests {
    nonisolated static let entries = [
        CachedEntry(data: Data(), savedAt: Date(timeIntervalSinceReferenceDate: 0), version: 0),
        CachedEntry(data: Data([0]), savedAt: Date(timeIntervalSinceReferenceDate: 123_456.789_012_345), version: -1),
        CachedEntry(data: Data("contents".utf8), savedAt: .distantPast, version: .min),
        CachedEntry(data: Data(repeating: 0xFF, count: 70_000), savedAt: .distantFuture, version: .max),
        CachedEntry(data: Data([1, 2, 3]), savedAt: Date(timeIntervalSinceReferenceDate: (-1e9).nextUp), version: 42),
        CachedEntry(data: Data([4]), savedAt: Date(timeIntervalSinceReferenceDate: .leastNonzeroMagnitude), version: 7),
        CachedEntry(data: Data([5]), savedAt: Date(timeIntervalSinceReferenceDate: -0.0), version: 8),
        CachedEntry(
            data: Data((0...255).map { UInt8($0) }), savedAt: Date(timeIntervalSinceReferenceDate: -5.5), version: -2),
    ]

    @Test(
        "an entry comes back exactly: data, savedAt to the bit, version; another object reads it too",
        arguments: CacheKind.allCases, entries)
    func roundTrip(kind: CacheKind, entry: CachedEntry) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        try await subject.cache.save(entry, key: "entry")
        let loaded = try #require(try await subject.cache.load(key: "entry"))
        #expect(loaded.data == entry.data)
        #expect(loaded.version == entry.version)
        #expect(
            loaded.savedAt.timeIntervalSinceReferenceDate.bitPattern
                == entry.savedAt.timeIntervalSinceReferenceDate.bitPattern)
        #expect(loaded.metadata.isEmpty)
        #expect(try await subject.another().load(key: "entry") == entry)
    }

    @Test(
        "metadata comes back, unicode and empty strings included; an entry without metadata has none",
        arguments: CacheKind.allCases)
    func metadataRoundTrip(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let metadata = [
            "ETag": "\"abc\"", "Last-Modified": "Wed, 21 Oct 2026 07:28:00 GMT", "": "", "ü": "🙂",
            "日本語": "e\u{301}", "empty": "",
        ]
        let entry = contractEntry(3, savedAt: 99.5, version: 4, metadata: metadata)
        try await subject.cache.save(entry, key: "k")
        #expect(try await subject.cache.load(key: "k") == entry)
        #expect(try await subject.another().load(key: "k")?.metadata == metadata)
        // A save without metadata replaces the metadata too.
        try await subject.cache.save(contractEntry(4), key: "k")
        #expect(try await subject.cache.load(key: "k")?.metadata == [:])
        #expect(try await subject.another().load(key: "k") == contractEntry(4))
    }

    @Test(
        "save replaces, remove deletes, a missing key loads nil and removes without error",
        arguments: CacheKind.allCases)
    func saveReplaceRemove(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let cache = subject.cache
        #expect(try await cache.load(key: "k") == nil)
        try await cache.remove(key: "k")
        try await cache.save(contractEntry(50, first: 1, savedAt: 10, version: 1), key: "k")
        try await cache.save(contractEntry(4, first: 2, savedAt: 20, version: 2, metadata: ["a": "b"]), key: "k")
        #expect(
            try await cache.load(key: "k") == contractEntry(4, first: 2, savedAt: 20, version: 2, metadata: ["a": "b"]))
        #expect(try await cache.load(key: "K") == nil)
        #expect(try await subject.storedCount() == 1)
        try await cache.remove(key: "k")
        #expect(try await cache.load(key: "k") == nil)
        #expect(try await subject.another().load(key: "k") == nil)
        #expect(try await subject.storedCount() == 0)
        try await cache.remove(key: "k")
    }

    @Test(
        "removeAll removes every entry, through every object; it can run twice; saves work after it",
        arguments: CacheKind.allCases)
    func removeAll(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let cache = subject.cache
        for index in 0..<5 { try await cache.save(contractEntry(index), key: "key \(index)") }
        try await cache.save(contractEntry(1), key: "")
        try await subject.another().removeAll()
        for index in 0..<5 { #expect(try await cache.load(key: "key \(index)") == nil) }
        #expect(try await cache.load(key: "") == nil)
        #expect(try await subject.storedCount() == 0)
        try await cache.removeAll()

        try await cache.save(contractEntry(3, first: 3), key: "after")
        #expect(try await cache.load(key: "after") == contractEntry(3, first: 3))
        #expect(try await cache.load(key: "key 0") == nil)
        #expect(try await subject.storedCount() == 1)
    }

    @Test("the empty key is a key: it round-trips and meets no other key", arguments: CacheKind.allCases)
    func emptyKey(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let cache = subject.cache
        let others = ["-", "2d", "\0", " ", String(repeating: "k", count: 128)]
        try await cache.save(contractEntry(2, first: 99), key: "")
        for (index, key) in others.enumerated() {
            try await cache.save(contractEntry(3, first: UInt8(index)), key: key)
        }
        #expect(try await cache.load(key: "") == contractEntry(2, first: 99))
        #expect(try await subject.storedCount() == others.count + 1)
        try await cache.remove(key: "")
        #expect(try await cache.load(key: "") == nil)
        for (index, key) in others.enumerated() {
            #expect(try await cache.load(key: key) == contractEntry(3, first: UInt8(index)), "\(key)")
        }
    }

    @Test(
        "a key of 10,000 characters round-trips, and a key that differs in its last character is another",
        arguments: CacheKind.allCases)
    func veryLongKey(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let cache = subject.cache
        let key = String((0..<10_000).map { Character(UnicodeScalar(UInt8(97 + $0 % 26))) })
        let entry = contractEntry(100, first: 7)
        try await cache.save(entry, key: key)
        #expect(try await cache.load(key: key) == entry)
        #expect(try await subject.another().load(key: key) == entry)
        #expect(try await cache.load(key: String(key.dropLast()) + "!") == nil)
        #expect(try await cache.load(key: String(key.dropLast())) == nil)
        try await cache.remove(key: key)
        #expect(try await cache.load(key: key) == nil)
    }

    @Test(
        "keys with slashes, dots, NUL, unicode and long shared starts keep their own entries",
        arguments: CacheKind.allCases)
    func unusualKeys(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let cache = subject.cache
        let shared = String(repeating: "p", count: 119)
        let keys = [
            "../../escape", "/abs/path", "a/b", "..", ".", "日本語/../ü", "C:\\windows", "~/x", "\0nul", "nul\0",
            "a", "A", "🙂", shared + String(repeating: "A", count: 40), shared + String(repeating: "B", count: 40),
        ]
        for (index, key) in keys.enumerated() {
            try await cache.save(contractEntry(4, first: UInt8(index)), key: key)
        }
        #expect(try await subject.storedCount() == keys.count)
        let other = try subject.another()
        for (index, key) in keys.enumerated() {
            #expect(try await other.load(key: key) == contractEntry(4, first: UInt8(index)), "\(key)")
        }
        try await cache.remove(key: keys[13])
        #expect(try await cache.load(key: keys[13]) == nil)
        #expect(try await cache.load(key: keys[14]) == contractEntry(4, first: 14))
    }

    @Test("a key typed precomposed or with a combining accent is one entry", arguments: CacheKind.allCases)
    func canonicallyEquivalentKeys(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let cache = subject.cache
        let composed = "caf\u{E9}/r\u{E9}sum\u{E9}"
        let decomposed = "cafe\u{301}/re\u{301}sume\u{301}"
        #expect(composed == decomposed)
        try await cache.save(contractEntry(5), key: decomposed)
        #expect(try await cache.load(key: composed) == contractEntry(5))
        try await cache.save(contractEntry(6), key: composed)
        #expect(try await cache.load(key: decomposed) == contractEntry(6))
        #expect(try await subject.another().load(key: decomposed) == contractEntry(6))
        #expect(try await subject.storedCount() == 1)
        try await cache.remove(key: decomposed)
        #expect(try await cache.load(key: composed) == nil)
        #expect(try await subject.storedCount() == 0)
    }

    @Test("every error's description names the key; a 10,000-character key is cut")
    func descriptions() {
        struct Underlying: Error, CustomStringConvertible {
            var description: String { "underlying reason" }
        }
        func errors(_ key: String) -> [LoadableCacheError] {
            [
                .corrupt(key: key, reason: "a reason"), .versionMismatch(key: key, found: 1, expected: 2),
                .decodingFailed(key: key, underlying: Underlying()),
                .encodingFailed(key: key, underlying: Underlying()),
                .loadFailed(key: key, underlying: Underlying()), .saveFailed(key: key, underlying: Underlying()),
                .removeFailed(key: key, underlying: Underlying()),
            ]
        }
        for error in errors("user/42") {
            #expect(error.key == "user/42")
            #expect(error.description.contains("\"user/42\""), "\(error)")
        }
        let long = String((0..<10_000).map { Character(UnicodeScalar(UInt8(97 + $0 % 26))) })
        for error in errors(long) {
            #expect(error.key == long)
            #expect(error.description.contains("\"\(long.prefix(100))…\" (10000 bytes)"), "\(error)")
            #expect(!error.description.contains(long.prefix(101)))
            #expect(error.description.count < 300)
        }
        let hundred = String(repeating: "h", count: 100)
        #expect(LoadableCacheError.corrupt(key: hundred, reason: "r").description.contains("\"\(hundred)\""))
        let all = LoadableCacheError.removeAllFailed(underlying: Underlying())
        #expect(all.key == nil)
        #expect(all.description.contains("underlying reason"))
    }
}

// MARK: - Prefixes and scopes

/// `removeEntries(keyPrefix:)` removes exactly the entries whose keys start with the prefix (as
/// Swift compares strings), entries an earlier object saved included, and an empty prefix removes
/// every entry; a `scoped(_:)` view saves under prefixed keys, a scope of a scope adds its prefix
/// after its parent's, and a scope's `removeAll()` removes its own entries only, earlier ones too.
@Suite("Every LoadableCache: removeEntries(keyPrefix:) and scoped views")
@MainActor
struct CacheContractScopeTests {
    @Test(
        "removeEntries(keyPrefix:) removes exactly the keys with the prefix, long and unicode ones too",
        arguments: CacheKind.allCases)
    func removeByPrefix(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let long = String(repeating: "l", count: 150)
        let removed = ["a/", "a/1", "a/é", "a/" + long, "a/" + long + "x", "a/日本/🙂"]
        let kept = ["a", "b/1", "A/1", "ab/1", "a\u{301}/1", "b/" + long, "", "a.", "a0", "\u{E0}/1"]
        for key in removed + kept { try await subject.another().save(contractEntry(3), key: key) }
        let cache = subject.cache
        try await cache.removeEntries(keyPrefix: "a/")
        for key in removed { #expect(try await cache.load(key: key) == nil, "\(key)") }
        for key in kept { #expect(try await cache.load(key: key) != nil, "\(key)") }
        #expect(try await subject.storedCount() == kept.count)

        // A prefix longer than 119 bytes (the kept part of a file cache's cut names).
        try await cache.save(contractEntry(3), key: "b/" + long + "yes")
        try await cache.removeEntries(keyPrefix: "b/" + long + "y")
        #expect(try await cache.load(key: "b/" + long + "yes") == nil)
        #expect(try await cache.load(key: "b/" + long) != nil)

        // A unicode prefix, typed the other way.
        for key in ["caf\u{E9}/1", "cafe\u{301}/2", "caf\u{E9}", "cafe/3"] {
            try await cache.save(contractEntry(2), key: key)
        }
        try await cache.removeEntries(keyPrefix: "cafe\u{301}/")
        #expect(try await cache.load(key: "caf\u{E9}/1") == nil)
        #expect(try await cache.load(key: "caf\u{E9}/2") == nil)
        #expect(try await cache.load(key: "caf\u{E9}") != nil)
        #expect(try await cache.load(key: "cafe/3") != nil)

        // A prefix no key has removes nothing; the empty prefix removes everything.
        let count = try await subject.storedCount()
        try await cache.removeEntries(keyPrefix: "zzz")
        #expect(try await subject.storedCount() == count)
        try await cache.removeEntries(keyPrefix: "")
        #expect(try await subject.storedCount() == 0)
        #expect(try await cache.load(key: "") == nil)
    }

    @Test(
        "a prefix that ends inside a character (a combining accent follows it in the key) is not its start",
        arguments: CacheKind.allCases)
    func prefixEndingInsideACharacter(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let cache = subject.cache
        // "q" and U+0301 have no precomposed form: the NFC key keeps both, and its UTF-8 starts
        // with the prefix's, yet as Swift compares strings "q\u{301}" does not start with "q".
        let key = "a/q\u{301}"
        #expect(!key.hasPrefix("a/q"))
        try await cache.save(contractEntry(1), key: key)
        try await cache.save(contractEntry(2), key: "a/q")
        try await cache.removeEntries(keyPrefix: "a/q")
        #expect(try await cache.load(key: "a/q") == nil)
        #expect(try await cache.load(key: key) == contractEntry(1))
    }

    @Test("a scope saves under prefix + key; its removeAll leaves the rest", arguments: CacheKind.allCases)
    func prefixedKeysAndScopedRemoval(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let cache = subject.cache
        let posts = cache.scoped("posts/")
        let users = cache.scoped("users/")
        try await posts.save(contractEntry(1), key: "1")
        try await users.save(contractEntry(2), key: "1")
        try await cache.save(contractEntry(3), key: "settings")
        #expect(try await cache.load(key: "posts/1") == contractEntry(1))
        #expect(try await cache.load(key: "users/1") == contractEntry(2))
        #expect(try await posts.load(key: "1") == contractEntry(1))
        #expect(try await users.load(key: "1") == contractEntry(2))
        #expect(try await posts.load(key: "2") == nil)
        #expect(try await posts.load(key: "settings") == nil)
        try await posts.removeAll()
        #expect(try await cache.load(key: "posts/1") == nil)
        #expect(try await cache.load(key: "settings") == contractEntry(3))
        #expect(try await users.load(key: "1") == contractEntry(2))
        // Called on the cache itself, it is the cache's own, not the protocol's failing default.
        try await cache.removeEntries(keyPrefix: "users/")
        #expect(try await users.load(key: "1") == nil)
        try await users.save(contractEntry(2), key: "1")
        try await users.remove(key: "1")
        #expect(try await cache.load(key: "users/1") == nil)
        #expect(try await subject.storedCount() == 1)
    }

    @Test("a scope of a scope adds its prefix after its parent's", arguments: CacheKind.allCases)
    func nestedScopes(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let cache = subject.cache
        let drafts = cache.scoped("posts/").scoped("drafts/")
        try await drafts.save(contractEntry(1), key: "7")
        try await cache.scoped("posts/").save(contractEntry(2), key: "7")
        #expect(try await cache.load(key: "posts/drafts/7") == contractEntry(1))
        #expect(try await cache.load(key: "posts/7") == contractEntry(2))
        try await drafts.removeAll()
        #expect(try await cache.load(key: "posts/drafts/7") == nil)
        #expect(try await cache.load(key: "posts/7") == contractEntry(2))
        #expect(try await subject.storedCount() == 1)
    }

    @Test(
        "a scope's removeAll removes the entries another object saved in it earlier, and only those",
        arguments: CacheKind.allCases)
    func scopeRemovesEarlierEntries(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let earlier = try subject.another()
        try await earlier.scoped("posts/").save(contractEntry(1), key: "old")
        try await earlier.scoped("postscript/").save(contractEntry(5), key: "old")
        let cache = subject.cache
        let posts = cache.scoped("posts/")
        let users = cache.scoped("users/")
        try await posts.save(contractEntry(2), key: "1")
        try await users.save(contractEntry(3), key: "1")
        try await posts.scoped("drafts/").save(contractEntry(4), key: "1")
        #expect(try await cache.load(key: "posts/1") == contractEntry(2))
        #expect(try await cache.load(key: "posts/drafts/1") == contractEntry(4))

        try await posts.removeAll()
        for key in ["posts/old", "posts/1", "posts/drafts/1"] { #expect(try await cache.load(key: key) == nil) }
        #expect(try await users.load(key: "1") == contractEntry(3))
        #expect(try await cache.load(key: "postscript/old") == contractEntry(5))
        #expect(try await subject.storedCount() == 2)
    }

    @Test(
        "keys compare as Swift compares strings in a scope too: café typed two ways is one scope and one key",
        arguments: CacheKind.allCases)
    func canonicallyEquivalentScopes(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let cache = subject.cache
        try await cache.scoped("caf\u{E9}/").save(contractEntry(1), key: "caf\u{E9}")
        #expect(try await cache.scoped("cafe\u{301}/").load(key: "cafe\u{301}") == contractEntry(1))
        #expect(try await cache.load(key: "cafe\u{301}/caf\u{E9}") == contractEntry(1))
        try await cache.save(contractEntry(2), key: "other")
        try await cache.scoped("cafe\u{301}/").removeAll()
        #expect(try await cache.load(key: "caf\u{E9}/caf\u{E9}") == nil)
        #expect(try await subject.storedCount() == 1)
    }
}

// MARK: - Saves started together

/// Saves started together on one cache all land: 200 keys at once each read back their entry, and
/// 100 saves of one key (through two objects on the storage, where there can be two) leave one of
/// them whole.
@Suite("Every LoadableCache: saves started together")
@MainActor
struct CacheContractConcurrencyTests {
    @Test("200 saves of different keys started together all land", arguments: CacheKind.allCases)
    func manyKeysAtOnce(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let cache = subject.cache
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<200 {
                group.addTask {
                    try await cache.save(
                        contractEntry(index, first: UInt8(index % 256), version: index), key: "key \(index)")
                }
            }
            try await group.waitForAll()
        }
        for index in 0..<200 {
            #expect(
                try await cache.load(key: "key \(index)")
                    == contractEntry(index, first: UInt8(index % 256), version: index))
        }
        #expect(try await subject.storedCount() == 200)
    }

    @Test("100 saves of one key started together leave one of them whole", arguments: CacheKind.allCases)
    func oneKeyAtOnce(kind: CacheKind) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let caches = [subject.cache, try subject.another()]
        let entries = (0..<100).map {
            contractEntry(
                ($0 % 2) * 20_000 + $0, first: UInt8($0), version: $0, metadata: $0 % 3 == 0 ? ["n": "\($0)"] : [:])
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, entry) in entries.enumerated() {
                group.addTask { try await caches[index % 2].save(entry, key: "same") }
            }
            try await group.waitForAll()
        }
        let loaded = try #require(try await caches[0].load(key: "same"))
        #expect(entries.contains(loaded))
        #expect(try await caches[1].load(key: "same") == loaded)
        #expect(try await subject.storedCount() == 1)
    }
}
