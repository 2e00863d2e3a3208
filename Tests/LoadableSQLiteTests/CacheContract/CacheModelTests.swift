import Foundation
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSQLite
import LoadableTestSupport
import LoadableTesting
import Testing

/// Model-based randomized tests of `FileLoadableCache`, `InMemoryLoadableCache` and
/// `SQLiteLoadableCache`: 200 seeded sequences of 40 steps (saves of entries of many sizes,
/// versions, dates and metadata, some pinned, touches (`touch(key:savedAt:metadata:)`), loads,
/// removes, `removeAll()`, the `removeAll()` of a `scoped(_:)` view, a new cache object on the
/// same storage as the next launch would make, and the storage deleted from outside) run against
/// a reference `[String: CachedEntry]`. A touch is, in the model, a save of the entry with the new
/// date and metadata (what the protocol's default does).
///
/// With `maxBytes` (600, 2,000 or 8,000 bytes, by the seed), the reference also keeps the
/// entries' sizes and their recency order (by load, save and touch): a save past the limit evicts
/// the least recently used unpinned entries, an unpinned entry larger than the limit is not kept,
/// a pinned one always is. The usage lists the unpinned entries least recently used first, then
/// the pinned ones by use. An entry's size is the
/// kind's: for files the entry file's size, for SQLite the UTF-8 of the key's NFC form, the data
/// and the metadata's encoding (none when it is empty). Two cache objects on the folder or the
/// database file take turns (they share its usage and order); a reopen is a new process (for
/// files the folder's state forgotten; both objects made again), which must find the same order
/// and total; an outside clear is followed by one. After every step the usage (total and order)
/// must be the model's, and every entry the model's entry: for files checked on the files' bytes,
/// for SQLite by loads through a third object without a limit (whose loads do not reorder).
///
/// The SQLite caches mark every scope's removal (none is deleted at once) and hold their batches:
/// each load step then runs one batch of 2 rows, so the removed rows stay in the file across the
/// steps after the removal (saves and touches of their keys, evictions, other removals, reopens)
/// and must stay absent from every load, touch and usage the model checks.
///
/// The keys come from a pool that holds the names' edge cases: the empty key and `-`, short and
/// unicode keys, a key with `/` and `..`, 127 and 128 bytes (the last key with a plain name and
/// the first cut one, also with a 2-byte character across the cut), long keys that share their
/// first 119 bytes (so the same 238-digit start of their names) and a 600-byte key (the
/// 10,000-character key has a test of its own in `CacheContractTests.swift`), keys under the
/// scopes' prefixes (one cut), and one key typed precomposed and decomposed (one entry).
///
/// Without a limit, after every step, `load(key:)` of every pool key must give the model's entry (data, date and
/// version), and the cache must hold exactly the model's keys: for files, one file per entry in
/// `v1/` and no temporary file; in memory, `keys`; in SQLite, the keys of `usage()`, whose total
/// must be the model's too. A failing sequence is shrunk and reported with its seed. The steps
/// run off the main actor, so that each call to the cache is a cheap hop.
@Suite("Every cache kind against a reference model")
struct CacheModelTests {
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

    /// The metadata of the sequences' saves: none, one pair, and pairs with empty and unicode strings.
    static let metadata: [[String: String]] = [
        [:], ["ETag": "\"x\""], ["": "", "ü": "🙂", "Last-Modified": "Wed, 21 Oct 2026 07:28:00 GMT"],
    ]

    /// Which cache a sequence runs against.
    enum Kind: Equatable, CustomStringConvertible {
        case file
        case inMemory
        case sqlite
        /// Two `FileLoadableCache` objects on one folder with this `maxBytes`.
        case fileWithLimit(Int)
        /// Two `SQLiteLoadableCache` objects on one database file with this `maxBytes`.
        case sqliteWithLimit(Int)

        var description: String {
            switch self {
            case .file: "FileLoadableCache"
            case .inMemory: "InMemoryLoadableCache"
            case .sqlite: "SQLiteLoadableCache"
            case .fileWithLimit(let maxBytes): "FileLoadableCache(maxBytes: \(maxBytes)) × 2"
            case .sqliteWithLimit(let maxBytes): "SQLiteLoadableCache(maxBytes: \(maxBytes)) × 2"
            }
        }

        var maxBytes: Int? {
            switch self {
            case .file, .inMemory, .sqlite: nil
            case .fileWithLimit(let maxBytes), .sqliteWithLimit(let maxBytes): maxBytes
            }
        }

        /// The cache kind, for the sizes of its entries.
        var cacheKind: CacheKind {
            switch self {
            case .inMemory: .memory
            case .file, .fileWithLimit: .file
            case .sqlite, .sqliteWithLimit: .sqlite
            }
        }
    }

    /// One step of a sequence. Keys are indices into ``keys``.
    enum Step: Equatable, CustomStringConvertible {
        case save(key: Int, size: Int, first: UInt8, version: Int, savedAt: Double, metadata: Int, pinned: Bool)
        /// `touch(key:savedAt:metadata:)`.
        case touch(key: Int, savedAt: Double, metadata: Int)
        case remove(key: Int)
        case load(key: Int)
        /// The `removeAll()` of `cache.scoped(scopes[scope])`.
        case removeScope(Int)
        case removeAll
        /// A new cache object on the same storage (the next launch); nothing for memory.
        case reopen
        /// The `v1` folder or the database file deleted by someone else (for SQLite between two
        /// launches); `removeAll()` for memory.
        case clearFromOutside

        var entry: CachedEntry? {
            guard case .save(_, let size, let first, let version, let savedAt, let metadata, let pinned) = self else {
                return nil
            }
            var entry = contractEntry(
                size, first: first, savedAt: savedAt, version: version, metadata: CacheModelTests.metadata[metadata])
            entry.isPinned = pinned
            return entry
        }

        var description: String {
            switch self {
            case .save(let key, let size, let first, let version, let savedAt, let metadata, let pinned):
                "save(\(CacheModelTests.label(key)), \(size) bytes from \(first), v\(version), at \(savedAt), "
                    + "metadata #\(metadata)\(pinned ? ", pinned" : ""))"
            case .touch(let key, let savedAt, let metadata):
                "touch(\(CacheModelTests.label(key)), at \(savedAt), metadata #\(metadata))"
            case .remove(let key): "remove(\(CacheModelTests.label(key)))"
            case .load(let key): "load(\(CacheModelTests.label(key)))"
            case .removeScope(let scope): "scoped(\"\(CacheModelTests.scopes[scope])\").removeAll()"
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
        var entriesWithMetadata = 0
        var touchesOfEntries = 0
        var stepsWithPinnedEntries = 0
        /// SQLite: steps after which removed rows were left for the batches.
        var stepsWithRemovedRows = 0

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
            entriesWithMetadata += other.entriesWithMetadata
            touchesOfEntries += other.touchesOfEntries
            stepsWithPinnedEntries += other.stepsWithPinnedEntries
            stepsWithRemovedRows += other.stepsWithRemovedRows
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
                ("steps with an entry with metadata", entriesWithMetadata),
                ("touches of an entry", touchesOfEntries),
                ("steps with a pinned entry", stepsWithPinnedEntries),
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
                ("steps with an entry with metadata", entriesWithMetadata),
                ("touches of an entry", touchesOfEntries),
                ("steps with a pinned entry", stepsWithPinnedEntries),
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
        let metadata = entry.metadata.isEmpty ? "" : ", \(entry.metadata.count) metadata pairs"
        return
            "\(entry.data.count) bytes\(first), v\(entry.version), at \(entry.savedAt.timeIntervalSinceReferenceDate)"
            + metadata + (entry.isPinned ? ", pinned" : "")
    }

    /// The reference model: the entries by key, and, for a limit, the entries in recency order
    /// (least recent first, pinned or not), by the names the cache reports them by (``id(_:)``).
    struct Model {
        var entries: [String: CachedEntry] = [:]
        var order: [String] = []
        let kind: Kind

        var maxBytes: Int? { kind.maxBytes }

        /// How the cache names the entry of `key` in its usage: the file's name, or the NFC key.
        func id(_ key: String) -> String {
            kind.cacheKind == .file
                ? FileLoadableCache.fileName(forKey: key) : key.precomposedStringWithCanonicalMapping
        }

        /// The bytes `entry` under `key` counts against the limit.
        func size(_ entry: CachedEntry, key: String) -> Int {
            CacheSubject.size(of: entry, key: key, kind: kind.cacheKind)
        }

        var totalBytes: Int {
            entries.reduce(0) { $0 + size($1.value, key: $1.key) }
        }

        /// Whether the entry the cache names `name` is pinned.
        func isPinned(_ name: String) -> Bool {
            entries.contains { id($0.key) == name && $0.value.isPinned }
        }

        /// The names in the order the usage lists them: the order eviction takes them in (the
        /// unpinned ones, least recent first), then the pinned ones, least recent first.
        var evictionOrder: [String] {
            order.filter { !isPinned($0) } + order.filter { isPinned($0) }
        }

        mutating func save(_ entry: CachedEntry, key: String, coverage: inout Coverage) {
            let name = id(key)
            order.removeAll { $0 == name }
            guard let maxBytes else { return entries[key] = entry }
            if size(entry, key: key) > maxBytes && !entry.isPinned {
                coverage.oversizedSaves += 1
                return entries[key] = nil
            }
            entries[key] = entry
            order.append(name)
            if totalBytes > maxBytes { coverage.evictingSaves += 1 }
            while totalBytes > maxBytes, let oldest = order.first(where: { !isPinned($0) }) {
                order.removeAll { $0 == oldest }
                entries = entries.filter { id($0.key) != oldest }
            }
        }

        /// A touch: a save of the entry with the new date and metadata, its data, version and pin
        /// kept; `false` when there is no entry.
        mutating func touch(
            _ key: String, savedAt: Double, metadata: [String: String], coverage: inout Coverage
        ) -> Bool {
            guard var entry = entries[key] else { return false }
            coverage.touchesOfEntries += 1
            entry.savedAt = Date(timeIntervalSinceReferenceDate: savedAt)
            entry.metadata = metadata
            save(entry, key: key, coverage: &coverage)
            return true
        }

        mutating func load(_ key: String, coverage: inout Coverage) -> CachedEntry? {
            guard let entry = entries[key] else { return nil }
            if maxBytes != nil {
                let name = id(key)
                if order.last != name { coverage.reorderingLoads += 1 }
                order.removeAll { $0 == name }
                order.append(name)
            }
            return entry
        }

        mutating func remove(where shouldRemove: (String) -> Bool) {
            for key in entries.keys where shouldRemove(key) {
                entries[key] = nil
                let name = id(key)
                order.removeAll { $0 == name }
            }
        }
    }

    /// The caches of a sequence: one object, or two on one folder or database file that take
    /// turns; for SQLite, a third object without a limit, whose loads check the entries without
    /// reordering them.
    struct Caches {
        let kind: Kind
        let directory: URL
        var objects: [any LoadableCache]
        var checker: SQLiteLoadableCache?

        var databaseFile: URL { directory.appendingPathComponent("cache.sqlite") }

        init(kind: Kind, directory: URL) throws {
            self.kind = kind
            self.directory = directory
            objects = []
            try reopen()
        }

        /// A new process's objects (or, without a limit, a new object as the next launch's).
        mutating func reopen() throws {
            if kind.cacheKind == .sqlite {
                SQLiteLoadableCache.setRemovals(atPath: databaseFile, batchRows: 2, directRows: 0, isHeld: true)
            }
            switch kind {
            case .file: objects = [FileLoadableCache(directory: directory)]
            case .inMemory: if objects.isEmpty { objects = [InMemoryLoadableCache()] }
            case .sqlite:
                objects = []
                checker = try SQLiteLoadableCache(path: databaseFile)
                objects = [checker!]
            case .fileWithLimit(let maxBytes):
                objects = []
                FileLoadableCache.forgetFolder(directory: directory)
                objects = [
                    FileLoadableCache(directory: directory, maxBytes: maxBytes),
                    FileLoadableCache(directory: directory, maxBytes: maxBytes),
                ]
            case .sqliteWithLimit(let maxBytes):
                objects = []
                checker = nil
                objects = [
                    try SQLiteLoadableCache(path: databaseFile, maxBytes: maxBytes),
                    try SQLiteLoadableCache(path: databaseFile, maxBytes: maxBytes),
                ]
                checker = try SQLiteLoadableCache(path: databaseFile)
            }
        }

        /// Deletes the storage from outside: the `v1` folder (for a limit, a new process then
        /// sees it), the database file between two launches, every entry in memory.
        mutating func clearFromOutside() async throws {
            switch kind {
            case .file, .fileWithLimit:
                let folder = directory.appendingPathComponent("v1")
                if FileCacheFixtures.exists(folder) { try FileManager.default.removeItem(at: folder) }
                // A process counts its usage itself: it sees an outside change when it starts.
                if kind != .file { try reopen() }
            case .sqlite, .sqliteWithLimit:
                objects = []
                checker = nil
                FileCacheFixtures.removeDirectory(directory)
                try reopen()
            case .inMemory:
                try await objects[0].removeAll()
            }
        }

        /// The object for step `index`.
        func cache(_ index: Int) -> any LoadableCache { objects[index % objects.count] }
    }

    /// What is wrong after the steps of `steps` (the first difference from the model), or `nil`.
    static func mismatch(
        in steps: [Step], kind: Kind, coverage: inout Coverage, trace: ((String) -> Void)? = nil
    ) async -> String? {
        let directory = FileCacheFixtures.temporaryDirectory("cache-model")
        defer { FileCacheFixtures.removeDirectory(directory) }
        var caches: Caches
        do {
            caches = try Caches(kind: kind, directory: directory)
        } catch {
            return "the caches could not be made: \(error)"
        }
        var model = Model(kind: kind)
        var cleared = false
        for (index, step) in steps.enumerated() {
            trace?("\(index): \(step)")
            let cache = caches.cache(index)
            do {
                switch step {
                case .save(let key, _, _, _, _, _, _):
                    if model.entries[keys[key]] != nil { coverage.overwrites += 1 }
                    if cleared { coverage.savesAfterClear += 1 }
                    let entry = step.entry!
                    try await cache.save(entry, key: keys[key])
                    model.save(entry, key: keys[key], coverage: &coverage)
                case .touch(let key, let savedAt, let metadata):
                    let touched = try await cache.touch(
                        key: keys[key], savedAt: Date(timeIntervalSinceReferenceDate: savedAt),
                        metadata: Self.metadata[metadata])
                    let expected = model.touch(
                        keys[key], savedAt: savedAt, metadata: Self.metadata[metadata], coverage: &coverage)
                    if touched != expected {
                        return "step \(index), \(step), returned \(touched), the model has \(expected)"
                    }
                case .load(let key):
                    let loaded = try await cache.load(key: keys[key])
                    let expected = model.load(keys[key], coverage: &coverage)
                    if loaded != expected {
                        return "step \(index), \(step), loaded \(describe(loaded)), the model has \(describe(expected))"
                    }
                    // SQLite: one batch of the removed rows (see the type's documentation).
                    if let checker = caches.checker { _ = try await checker.removeNextBatchNow() }
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
                    try caches.reopen()
                case .clearFromOutside:
                    if !model.entries.isEmpty { coverage.clearsWithEntries += 1 }
                    try await caches.clearFromOutside()
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
            if model.entries.values.contains(where: { !$0.metadata.isEmpty }) { coverage.entriesWithMetadata += 1 }
            if model.entries.values.contains(where: \.isPinned) { coverage.stepsWithPinnedEntries += 1 }
            if let checker = caches.checker, let pending = try? await checker.pendingRemovals(), pending.rows > 0 {
                coverage.stepsWithRemovedRows += 1
            }
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
            if let problem = usageDifference(usage.totalBytes, usage.namesLeastRecentFirst, model: model) {
                return problem
            }
            // The bytes of the unpinned entries' files (the pinned ones are the folder's own).
            for (key, entry) in model.entries where !entry.isPinned {
                let file = folder.appendingPathComponent(FileLoadableCache.fileName(forKey: key))
                let canonical = key.precomposedStringWithCanonicalMapping
                let expected =
                    entry.metadata.isEmpty
                    ? FileCacheFixtures.encoded(entry, key: canonical)
                    : FileCacheFixtures.encodedWithMetadata(entry, key: canonical)
                if (try? FileCacheFixtures.bytes(at: file)) != expected {
                    return "the file of \"\(key.prefix(12))\" does not hold \(describe(entry))"
                }
            }
        case .sqlite, .sqliteWithLimit:
            // The usage (for a limit, its order too), then the entries, through the object without
            // a limit, whose loads do not reorder them.
            let usage: (totalBytes: Int, keysLeastRecentFirst: [String])
            do {
                usage = try await (caches.cache(0) as! SQLiteLoadableCache).usage()
            } catch {
                return "usage() threw: \(error)"
            }
            if model.maxBytes != nil {
                if let problem = usageDifference(usage.totalBytes, usage.keysLeastRecentFirst, model: model) {
                    return problem
                }
            } else {
                let stored = usage.keysLeastRecentFirst.sorted()
                let expected = model.entries.keys.map { model.id($0) }.sorted()
                if stored != expected {
                    return "the database holds the keys \(stored.map { $0.prefix(12) }), "
                        + "the model \(expected.map { $0.prefix(12) })"
                }
                if usage.totalBytes != model.totalBytes {
                    return "the usage is \(usage.totalBytes) bytes, the model's \(model.totalBytes)"
                }
            }
            if let problem = await loadDifference(caches.checker!, model: model) { return problem }
        case .file, .inMemory:
            if let problem = await loadDifference(caches.cache(0), model: model) { return problem }
        }
        switch caches.kind {
        case .file, .fileWithLimit:
            // One file per entry: an unpinned one in `v1/`, a pinned one in `v1/pinned/`.
            let pinned = folder.appendingPathComponent("pinned")
            for (names, isPinned) in [
                (FileCacheFixtures.names(in: folder).filter { $0 != "pinned" }, false),
                (FileCacheFixtures.names(in: pinned), true),
            ] {
                let expected = model.entries.filter { $0.value.isPinned == isPinned }.keys.map { model.id($0) }.sorted()
                if names != expected {
                    return "the \(isPinned ? "v1/pinned" : "v1") folder holds \(names.count) files "
                        + "\(names.map { $0.prefix(12) }), the model \(expected.count) entries "
                        + "\(expected.map { $0.prefix(12) })"
                }
            }
        case .inMemory:
            let keys = await (caches.cache(0) as! InMemoryLoadableCache).keys
            if keys != model.entries.keys.sorted() {
                return
                    "keys are \(keys.map { $0.prefix(12) }), the model has \(model.entries.keys.sorted().map { $0.prefix(12) })"
            }
        case .sqlite, .sqliteWithLimit:
            break
        }
        return nil
    }

    /// The difference between a cache's usage (total, and names least recently used first) and
    /// the model's, or `nil`.
    static func usageDifference(_ totalBytes: Int, _ order: [String], model: Model) -> String? {
        let expected = model.evictionOrder
        if order != expected {
            return "the recency order is \(order.map { $0.prefix(12) }), the model's \(expected.map { $0.prefix(12) })"
        }
        if totalBytes != model.totalBytes {
            return "the usage is \(totalBytes) bytes, the model's \(model.totalBytes)"
        }
        return nil
    }

    /// The first pool key whose load through `cache` is not the model's entry, described, or `nil`.
    static func loadDifference(_ cache: any LoadableCache, model: Model) async -> String? {
        for (index, key) in keys.enumerated() {
            let loaded: CachedEntry?
            do {
                loaded = try await cache.load(key: key)
            } catch {
                return "load(\(label(index))) threw: \(error)"
            }
            if loaded != model.entries[key] {
                return "load(\(label(index))) is \(describe(loaded)), the model has \(describe(model.entries[key]))"
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
        let dates = [0, -1.5, 1e9 + 0.25, Double(number(below: 1 << 30)) / 1_024 - 1e5, -63_114_076_800]
        let metadata = [0, 0, 0, 1, 2]
        switch number(below: 54) {
        case 0..<22:
            let sizes = [0, 1, 7, 40, number(below: 300), number(below: 300), 5_000]
            let versions = [0, 1, 1, 2, -1, .max, .min, number(below: 1_000) - 500]
            return .save(
                key: number(below: keys.count), size: sizes[number(below: sizes.count)],
                first: UInt8(number(below: 256)), version: versions[number(below: versions.count)],
                savedAt: dates[number(below: dates.count)], metadata: metadata[number(below: metadata.count)],
                pinned: number(below: 6) == 0)
        case 50..<54:
            return .touch(
                key: number(below: keys.count), savedAt: dates[number(below: dates.count)],
                metadata: metadata[number(below: metadata.count)])
        case 22..<29: return .remove(key: number(below: keys.count))
        case 29..<36: return .load(key: number(below: keys.count))
        case 36..<39: return .removeScope(number(below: scopes.count))
        case 39..<41: return .removeAll
        case 41..<47: return .reopen
        default: return .clearFromOutside
        }
    }

    /// Runs 200 seeded sequences of 40 steps against the kind `kind` makes of a limit the seed
    /// chooses (600, 2,000 or 8,000 bytes; a kind without a limit ignores it); reports the first
    /// failure, shrunk (and returns `nil` then).
    @MainActor
    static func coverageOfRandomSequences(count: Int = 200, kind: @escaping (Int) -> Kind) async -> Coverage? {
        var total = Coverage()
        let matched = await checkRandomSequences(count: count, baseSeed: 0xF11E_CAC4) { seed in
            var random = SeededRandomNumberGenerator(seed: seed)
            let limits = [600, 2_000, 8_000]
            let kind = kind(limits[Int(random.next() % UInt64(limits.count))])
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
        guard let coverage = await Self.coverageOfRandomSequences(kind: { _ in .file }) else { return }
        for (name, count) in coverage.counters {
            #expect(count >= 10, "\(name): \(count)")
        }
    }

    @Test("the same sequences match the model in memory")
    func inMemoryCache() async {
        guard let coverage = await Self.coverageOfRandomSequences(kind: { _ in .inMemory }) else { return }
        for (name, count) in coverage.counters {
            #expect(count >= 10, "\(name): \(count)")
        }
    }

    /// The sequences of the SQLite kinds: all 200, or under ThreadSanitizer (where each takes many
    /// times longer and races, not coverage, are the point) the first 40, their coverage not
    /// counted.
    static let sqliteSequences = StressScale.isThreadSanitizerActive ? 40 : 200

    @Test("the same sequences match the model in SQLite, with the usage's keys and total")
    func sqliteCache() async {
        let sequences = Self.sqliteSequences
        guard let coverage = await Self.coverageOfRandomSequences(count: sequences, kind: { _ in .sqlite }) else {
            return
        }
        for (name, count) in coverage.counters + [("steps with removed rows left", coverage.stepsWithRemovedRows)]
        where sequences == 200 {
            #expect(count >= 10, "\(name): \(count)")
        }
    }

    @Test("the same sequences with maxBytes and two objects on the folder match the model's LRU order and usage")
    func fileCacheWithLimit() async {
        guard let coverage = await Self.coverageOfRandomSequences(kind: { .fileWithLimit($0) }) else { return }
        for (name, count) in coverage.limitCounters {
            #expect(count >= 10, "\(name): \(count)")
        }
    }

    @Test("the same sequences with maxBytes and two objects on the database match the model's LRU order and usage")
    func sqliteCacheWithLimit() async {
        let sequences = Self.sqliteSequences
        guard let coverage = await Self.coverageOfRandomSequences(count: sequences, kind: { .sqliteWithLimit($0) })
        else { return }
        for (name, count) in coverage.limitCounters
            + [("steps with removed rows left", coverage.stepsWithRemovedRows)] where sequences == 200
        {
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
