import Foundation
import LoadableCaching
import LoadableTestSupport
import LoadableTesting
import Testing

/// Model-based randomized tests of `FileLoadableCache` and `InMemoryLoadableCache`: 200 seeded
/// sequences of 40 steps (saves of entries of many sizes, versions and dates, loads, removes,
/// `removeAll()`, the `removeAll()` of a `scoped(_:)` view, a new cache object on the same
/// directory as the next launch would make, and the `v1` folder deleted from outside) run against a
/// reference `[String: CachedEntry]`.
///
/// With `maxBytes` (600, 2,000 or 8,000 bytes, by the seed), the reference also keeps the entry
/// files' sizes and their recency order (by load and save): a save past the limit evicts the
/// least recently used, an entry larger than the limit is not kept. Two cache objects on the
/// folder take turns (they share its usage and order); a reopen is a new process (the folder's
/// state forgotten, both objects made again), whose start must find the same order and total;
/// an outside clear is followed by one. After every step the usage the process counts (total and
/// order) must be the model's, and every entry file the bytes of the model's entry (checked on
/// the files, so that the check does not reorder the entries).
///
/// The keys come from a pool that holds the names' edge cases: the empty key and `-`, short and
/// unicode keys, a key with `/` and `..`, 127 and 128 bytes (the last key with a plain name and
/// the first cut one, also with a 2-byte character across the cut), long keys that share their
/// first 119 bytes (so the same 238-digit start of their names) and a 600-byte key (the
/// 10,000-character key has a test of its own in `FileLoadableCacheTests.swift`), keys under the
/// scopes' prefixes (one cut), and one key typed precomposed and decomposed (one entry).
///
/// Without a limit, after every step, `load(key:)` of every pool key must give the model's entry (data, date and
/// version), and the cache must hold exactly the model's keys: for files, one file per entry in
/// `v1/` and no temporary file; in memory, `keys`. A failing sequence is shrunk and reported with
/// its seed. The steps run off the main actor, so that each call to the cache is a cheap hop.
@Suite("FileLoadableCache and InMemoryLoadableCache against a reference model")
struct FileCacheModelTests {
    /// The keys of the sequences, with the edge cases of file names.
    static let keys: [String] = [
        "",
        "-",
        "a",
        "hello",
        "../x/ü",
        "日本語🙂",
        String(repeating: "k", count: 127),
        String(repeating: "k", count: 128),
        String(repeating: "k", count: 126) + "é",
        String(repeating: "k", count: 119) + String(repeating: "A", count: 20),
        String(repeating: "k", count: 119) + String(repeating: "B", count: 20),
        String(repeating: "k", count: 127) + "é",
        String((0..<600).map { Character(UnicodeScalar(UInt8(97 + $0 % 26))) }),
        "s/a",
        "s/\u{E9}/1",
        "s/e\u{301}/2",
        "t/a",
        "s/" + String(repeating: "x", count: 140),
        "cafe\u{301}",
        "caf\u{E9}",
    ]

    /// The prefixes of the scopes whose `removeAll()` the sequences call.
    static let scopes = ["s/", "t/", "s/\u{E9}/", "k"]

    /// A short name of the pool's key at `index`, for failure messages.
    static func label(_ index: Int) -> String {
        let key = keys[index]
        if key.utf8.count <= 20 { return "#\(index) \"\(key)\"" }
        return "#\(index) \"\(key.prefix(3))…\(key.suffix(3))\" (\(key.utf8.count) bytes)"
    }

    /// Which cache a sequence runs against.
    enum Kind: Equatable, CustomStringConvertible {
        case file
        case inMemory
        /// Two `FileLoadableCache` objects on one folder with this `maxBytes`.
        case fileWithLimit(Int)

        var description: String {
            switch self {
            case .file: "FileLoadableCache"
            case .inMemory: "InMemoryLoadableCache"
            case .fileWithLimit(let maxBytes): "FileLoadableCache(maxBytes: \(maxBytes)) × 2"
            }
        }

        var isFile: Bool { self != .inMemory }
    }

    /// One step of a sequence. Keys are indices into ``keys``.
    enum Step: Equatable, CustomStringConvertible {
        case save(key: Int, size: Int, first: UInt8, version: Int, savedAt: Double)
        case remove(key: Int)
        case load(key: Int)
        /// The `removeAll()` of `cache.scoped(scopes[scope])`.
        case removeScope(Int)
        case removeAll
        /// A new cache object on the same directory (the next launch); nothing for memory.
        case reopen
        /// The `v1` folder deleted by someone else; `removeAll()` for memory.
        case clearFromOutside

        var entry: CachedEntry? {
            guard case .save(_, let size, let first, let version, let savedAt) = self else { return nil }
            return FileCacheFixtures.entry(count: size, first: first, savedAt: savedAt, version: version)
        }

        var description: String {
            switch self {
            case .save(let key, let size, let first, let version, let savedAt):
                "save(\(FileCacheModelTests.label(key)), \(size) bytes from \(first), v\(version), at \(savedAt))"
            case .remove(let key): "remove(\(FileCacheModelTests.label(key)))"
            case .load(let key): "load(\(FileCacheModelTests.label(key)))"
            case .removeScope(let scope): "scoped(\"\(FileCacheModelTests.scopes[scope])\").removeAll()"
            case .removeAll: "removeAll"
            case .reopen: "reopen"
            case .clearFromOutside: "clearFromOutside"
            }
        }
    }

    /// How often the sequences reached the situations that matter, to check that they do.
    struct Coverage {
        var overwrites = 0
        var removalsOfEntries = 0
        var clearsWithEntries = 0
        var reopensWithEntries = 0
        var savesAfterClear = 0
        var longKeysSharingAPrefixTogether = 0
        var emptyKeyHits = 0
        var evictingSaves = 0
        var oversizedSaves = 0
        var reorderingLoads = 0
        var scopeRemovalsWithEntries = 0

        mutating func add(_ other: Coverage) {
            overwrites += other.overwrites
            removalsOfEntries += other.removalsOfEntries
            clearsWithEntries += other.clearsWithEntries
            reopensWithEntries += other.reopensWithEntries
            savesAfterClear += other.savesAfterClear
            longKeysSharingAPrefixTogether += other.longKeysSharingAPrefixTogether
            emptyKeyHits += other.emptyKeyHits
            evictingSaves += other.evictingSaves
            oversizedSaves += other.oversizedSaves
            reorderingLoads += other.reorderingLoads
            scopeRemovalsWithEntries += other.scopeRemovalsWithEntries
        }

        /// What the sequences with a limit must reach.
        var limitCounters: [(String, Int)] {
            [
                ("saves that evict", evictingSaves),
                ("saves larger than the limit", oversizedSaves),
                ("loads that reorder", reorderingLoads),
                ("scope removals with entries", scopeRemovalsWithEntries),
                ("reopens with entries", reopensWithEntries),
                ("saves over an entry", overwrites),
            ]
        }

        var counters: [(String, Int)] {
            [
                ("saves over an entry", overwrites),
                ("removals of an entry", removalsOfEntries),
                ("removeAll or clears with entries", clearsWithEntries),
                ("reopens with entries", reopensWithEntries),
                ("saves right after a clear", savesAfterClear),
                ("steps with 2+ cut keys sharing a name's start", longKeysSharingAPrefixTogether),
                ("steps with an entry under the empty key", emptyKeyHits),
            ]
        }
    }

    /// The indices of the pool's keys longer than 127 bytes whose first 119 bytes are the same.
    static let keysSharingAPrefix = keys.indices.filter {
        keys[$0].utf8.count > 127 && keys[$0].hasPrefix(String(repeating: "k", count: 119))
    }

    static func describe(_ entry: CachedEntry?) -> String {
        guard let entry else { return "nil" }
        let first = entry.data.first.map { " from \($0)" } ?? ""
        return
            "\(entry.data.count) bytes\(first), v\(entry.version), at \(entry.savedAt.timeIntervalSinceReferenceDate)"
    }

    /// The reference model: the entries by key, and, for a limit, the entry files' names in
    /// recency order (least recent first).
    struct Model {
        var entries: [String: CachedEntry] = [:]
        var order: [String] = []
        let maxBytes: Int?

        static func name(_ key: String) -> String { FileLoadableCache.fileName(forKey: key) }

        var totalBytes: Int {
            entries.reduce(0) { $0 + FileCacheFixtures.fileSize($1.value, key: $1.key) }
        }

        mutating func save(_ entry: CachedEntry, key: String, coverage: inout Coverage) {
            order.removeAll { $0 == Self.name(key) }
            guard let maxBytes else { return entries[key] = entry }
            if FileCacheFixtures.fileSize(entry, key: key) > maxBytes {
                coverage.oversizedSaves += 1
                return entries[key] = nil
            }
            entries[key] = entry
            order.append(Self.name(key))
            if totalBytes > maxBytes { coverage.evictingSaves += 1 }
            while totalBytes > maxBytes {
                let oldest = order.removeFirst()
                entries = entries.filter { Self.name($0.key) != oldest }
            }
        }

        mutating func load(_ key: String, coverage: inout Coverage) -> CachedEntry? {
            guard let entry = entries[key] else { return nil }
            if maxBytes != nil {
                if order.last != Self.name(key) { coverage.reorderingLoads += 1 }
                order.removeAll { $0 == Self.name(key) }
                order.append(Self.name(key))
            }
            return entry
        }

        mutating func remove(where shouldRemove: (String) -> Bool) {
            for key in entries.keys where shouldRemove(key) {
                entries[key] = nil
                order.removeAll { $0 == Self.name(key) }
            }
        }
    }

    /// The caches of a sequence: one object, or two on one folder that take turns.
    struct Caches {
        let kind: Kind
        let directory: URL
        var objects: [any LoadableCache]

        init(kind: Kind, directory: URL) {
            self.kind = kind
            self.directory = directory
            objects = []
            reopen()
        }

        /// A new process's objects (or, without a limit, a new object as the next launch's).
        mutating func reopen() {
            switch kind {
            case .file: objects = [FileLoadableCache(directory: directory)]
            case .inMemory: if objects.isEmpty { objects = [InMemoryLoadableCache()] }
            case .fileWithLimit(let maxBytes):
                objects = []
                FileLoadableCache.forgetFolder(directory: directory)
                objects = [
                    FileLoadableCache(directory: directory, maxBytes: maxBytes),
                    FileLoadableCache(directory: directory, maxBytes: maxBytes),
                ]
            }
        }

        /// The object for step `index`.
        func cache(_ index: Int) -> any LoadableCache { objects[index % objects.count] }
    }

    /// What is wrong after the steps of `steps` (the first difference from the model), or `nil`.
    static func mismatch(
        in steps: [Step], kind: Kind, coverage: inout Coverage, trace: ((String) -> Void)? = nil
    ) async -> String? {
        let directory = FileCacheFixtures.temporaryDirectory("file-cache-model")
        defer { FileCacheFixtures.removeDirectory(directory) }
        var caches = Caches(kind: kind, directory: directory)
        var maxBytes: Int?
        if case .fileWithLimit(let limit) = kind { maxBytes = limit }
        var model = Model(maxBytes: maxBytes)
        var cleared = false
        for (index, step) in steps.enumerated() {
            trace?("\(index): \(step)")
            let cache = caches.cache(index)
            do {
                switch step {
                case .save(let key, _, _, _, _):
                    if model.entries[keys[key]] != nil { coverage.overwrites += 1 }
                    if cleared { coverage.savesAfterClear += 1 }
                    let entry = step.entry!
                    try await cache.save(entry, key: keys[key])
                    model.save(entry, key: keys[key], coverage: &coverage)
                case .load(let key):
                    let loaded = try await cache.load(key: keys[key])
                    let expected = model.load(keys[key], coverage: &coverage)
                    if loaded != expected {
                        return "step \(index), \(step), loaded \(describe(loaded)), the model has \(describe(expected))"
                    }
                case .remove(let key):
                    if model.entries[keys[key]] != nil { coverage.removalsOfEntries += 1 }
                    try await cache.remove(key: keys[key])
                    model.remove { $0 == keys[key] }
                case .removeScope(let scope):
                    let prefix = scopes[scope]
                    if model.entries.keys.contains(where: { $0.hasPrefix(prefix) }) {
                        coverage.scopeRemovalsWithEntries += 1
                    }
                    try await cache.scoped(prefix).removeAll()
                    model.remove { $0.hasPrefix(prefix) }
                case .removeAll:
                    if !model.entries.isEmpty { coverage.clearsWithEntries += 1 }
                    try await cache.removeAll()
                    model.remove { _ in true }
                case .reopen:
                    if !model.entries.isEmpty { coverage.reopensWithEntries += 1 }
                    caches.reopen()
                case .clearFromOutside:
                    if !model.entries.isEmpty { coverage.clearsWithEntries += 1 }
                    switch kind {
                    case .file, .fileWithLimit:
                        let folder = directory.appendingPathComponent("v1")
                        if FileCacheFixtures.exists(folder) { try FileManager.default.removeItem(at: folder) }
                        // A process counts its usage itself: it sees an outside change when it
                        // starts.
                        if kind != .file { caches.reopen() }
                    case .inMemory:
                        try await cache.removeAll()
                    }
                    model.remove { _ in true }
                }
            } catch {
                return "step \(index), \(step), threw: \(error)"
            }
            cleared = step == .removeAll || step == .clearFromOutside
            if keysSharingAPrefix.filter({ model.entries[keys[$0]] != nil }).count >= 2 {
                coverage.longKeysSharingAPrefixTogether += 1
            }
            if model.entries[""] != nil { coverage.emptyKeyHits += 1 }
            if let problem = await difference(caches: caches, model: model) {
                return "after step \(index), \(step): \(problem)"
            }
        }
        return nil
    }

    /// The first difference between `caches` and `model`, or `nil`.
    static func difference(caches: Caches, model: Model) async -> String? {
        let folder = caches.directory.appendingPathComponent("v1")
        switch caches.kind {
        case .fileWithLimit:
            // On the files and the usage: a load would reorder the entries.
            let usage: (totalBytes: Int, namesLeastRecentFirst: [String])
            do {
                usage = try await (caches.cache(0) as! FileLoadableCache).usage()
            } catch {
                return "usage() threw: \(error)"
            }
            if usage.namesLeastRecentFirst != model.order {
                return "the recency order is \(usage.namesLeastRecentFirst.map { $0.prefix(12) }), "
                    + "the model's \(model.order.map { $0.prefix(12) })"
            }
            if usage.totalBytes != model.totalBytes {
                return "the usage is \(usage.totalBytes) bytes, the model's \(model.totalBytes)"
            }
            for (key, entry) in model.entries {
                let file = folder.appendingPathComponent(Model.name(key))
                let expected = FileCacheFixtures.encoded(entry, key: key.precomposedStringWithCanonicalMapping)
                if (try? FileCacheFixtures.bytes(at: file)) != expected {
                    return "the file of \"\(key.prefix(12))\" does not hold \(describe(entry))"
                }
            }
        case .file, .inMemory:
            for (index, key) in keys.enumerated() {
                let loaded: CachedEntry?
                do {
                    loaded = try await caches.cache(0).load(key: key)
                } catch {
                    return "load(\(label(index))) threw: \(error)"
                }
                if loaded != model.entries[key] {
                    return "load(\(label(index))) is \(describe(loaded)), the model has \(describe(model.entries[key]))"
                }
            }
        }
        switch caches.kind {
        case .file, .fileWithLimit:
            let names = FileCacheFixtures.names(in: folder)
            let expected = model.entries.keys.map { Model.name($0) }.sorted()
            if names != expected {
                return "the v1 folder holds \(names.count) files \(names.map { $0.prefix(12) }), "
                    + "the model \(expected.count) entries \(expected.map { $0.prefix(12) })"
            }
        case .inMemory:
            let keys = await (caches.cache(0) as! InMemoryLoadableCache).keys
            if keys != model.entries.keys.sorted() {
                return
                    "keys are \(keys.map { $0.prefix(12) }), the model has \(model.entries.keys.sorted().map { $0.prefix(12) })"
            }
        }
        return nil
    }

    static func mismatch(in steps: [Step], kind: Kind) async -> String? {
        var coverage = Coverage()
        return await mismatch(in: steps, kind: kind, coverage: &coverage)
    }

    static func randomStep(_ random: inout SeededRandomNumberGenerator) -> Step {
        func number(below limit: Int) -> Int { Int(random.next() % UInt64(limit)) }
        switch number(below: 50) {
        case 0..<22:
            let sizes = [0, 1, 7, 40, number(below: 300), number(below: 300), 5_000]
            let versions = [0, 1, 1, 2, -1, .max, .min, number(below: 1_000) - 500]
            let dates = [0, -1.5, 1e9 + 0.25, Double(number(below: 1 << 30)) / 1_024 - 1e5, -63_114_076_800]
            return .save(
                key: number(below: keys.count), size: sizes[number(below: sizes.count)],
                first: UInt8(number(below: 256)), version: versions[number(below: versions.count)],
                savedAt: dates[number(below: dates.count)])
        case 22..<29: return .remove(key: number(below: keys.count))
        case 29..<36: return .load(key: number(below: keys.count))
        case 36..<39: return .removeScope(number(below: scopes.count))
        case 39..<41: return .removeAll
        case 41..<47: return .reopen
        default: return .clearFromOutside
        }
    }

    /// Runs 200 seeded sequences of 40 steps against `kind` (for `nil`, a file cache with a limit
    /// chosen by the seed); reports the first failure, shrunk (and returns `nil` then).
    @MainActor
    static func coverageOfRandomSequences(kind: Kind?) async -> Coverage? {
        var total = Coverage()
        let matched = await checkRandomSequences(count: 200, baseSeed: 0xF11E_CAC4) { seed in
            var random = SeededRandomNumberGenerator(seed: seed)
            let limits = [600, 2_000, 8_000]
            let kind = kind ?? .fileWithLimit(limits[Int(random.next() % UInt64(limits.count))])
            return (kind, (0..<40).map { _ in randomStep(&random) })
        } mismatch: { kind, steps in
            var coverage = Coverage()
            let failure = await mismatch(in: steps, kind: kind, coverage: &coverage)
            total.add(coverage)
            return failure
        }
        return matched ? total : nil
    }

    @Test("200 random sequences of saves, loads, removes, scope and full removals, reopens and outside clears on files")
    func fileCache() async {
        guard let coverage = await Self.coverageOfRandomSequences(kind: .file) else { return }
        for (name, count) in coverage.counters {
            #expect(count >= 10, "\(name): \(count)")
        }
    }

    @Test("the same sequences match the model in memory")
    func inMemoryCache() async {
        guard let coverage = await Self.coverageOfRandomSequences(kind: .inMemory) else { return }
        for (name, count) in coverage.counters {
            #expect(count >= 10, "\(name): \(count)")
        }
    }

    @Test("the same sequences with maxBytes and two objects on the folder match the model's LRU order and usage")
    func fileCacheWithLimit() async {
        guard let coverage = await Self.coverageOfRandomSequences(kind: nil) else { return }
        for (name, count) in coverage.limitCounters {
            #expect(count >= 10, "\(name): \(count)")
        }
    }
}

/// `InMemoryLoadableCache` starts from the entries it is given, lists its keys sorted, and keeps
/// entries of different keys apart (the empty key included).
@Suite("InMemoryLoadableCache: starting entries and keys")
@MainActor
struct InMemoryLoadableCacheTests {
    @Test("starts from the given entries; keys are sorted; removeAll leaves none")
    func startingEntries() async {
        let first = FileCacheFixtures.entry(count: 3, first: 1)
        let second = FileCacheFixtures.entry(count: 4, first: 2, version: 2)
        let cache = InMemoryLoadableCache(entries: ["b": first, "": second])
        #expect(await cache.keys == ["", "b"])
        #expect(await cache.load(key: "b") == first)
        #expect(await cache.load(key: "") == second)
        #expect(await cache.load(key: "a") == nil)
        await cache.save(second, key: "a")
        await cache.remove(key: "b")
        await cache.remove(key: "missing")
        #expect(await cache.keys == ["", "a"])
        await cache.removeAll()
        #expect(await cache.keys.isEmpty)
        #expect(await cache.load(key: "a") == nil)
        #expect(await InMemoryLoadableCache().keys.isEmpty)
    }
}
