import Foundation
import LoadableCaching
import LoadableTestSupport
import LoadableTesting
import Testing

/// Model-based randomized tests of `FileLoadableCache` and `InMemoryLoadableCache`: 200 seeded
/// sequences of 40 steps (saves of entries of many sizes, versions and dates, removes,
/// `removeAll()`, a new cache object on the same directory as the next launch would make, and the
/// `v1` folder deleted from outside) run against a reference `[String: CachedEntry]`.
///
/// The keys come from a pool that holds the names' edge cases: the empty key and `-`, short and
/// unicode keys, a key with `/` and `..`, 127 and 128 bytes (the last key with a plain name and
/// the first cut one, also with a 2-byte character across the cut), long keys that share their
/// first 119 bytes (so the same 238-digit start of their names) and a 600-byte key (the
/// 10,000-character key has a test of its own in `FileLoadableCacheTests.swift`).
///
/// After every step, `load(key:)` of every pool key must give the model's entry (data, date and
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
    ]

    /// A short name of the pool's key at `index`, for failure messages.
    static func label(_ index: Int) -> String {
        let key = keys[index]
        if key.utf8.count <= 20 { return "#\(index) \"\(key)\"" }
        return "#\(index) \"\(key.prefix(3))…\(key.suffix(3))\" (\(key.utf8.count) bytes)"
    }

    /// Which cache a sequence runs against.
    enum Kind: CustomStringConvertible {
        case file
        case inMemory

        var description: String {
            switch self {
            case .file: "FileLoadableCache"
            case .inMemory: "InMemoryLoadableCache"
            }
        }
    }

    /// One step of a sequence. Keys are indices into ``keys``.
    enum Step: Equatable, CustomStringConvertible {
        case save(key: Int, size: Int, first: UInt8, version: Int, savedAt: Double)
        case remove(key: Int)
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

        mutating func add(_ other: Coverage) {
            overwrites += other.overwrites
            removalsOfEntries += other.removalsOfEntries
            clearsWithEntries += other.clearsWithEntries
            reopensWithEntries += other.reopensWithEntries
            savesAfterClear += other.savesAfterClear
            longKeysSharingAPrefixTogether += other.longKeysSharingAPrefixTogether
            emptyKeyHits += other.emptyKeyHits
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

    /// What is wrong after the steps of `steps` (the first difference from the model), or `nil`.
    static func mismatch(
        in steps: [Step], kind: Kind, coverage: inout Coverage, trace: ((String) -> Void)? = nil
    ) async -> String? {
        let directory = FileCacheFixtures.temporaryDirectory("file-cache-model")
        defer { FileCacheFixtures.removeDirectory(directory) }
        var cache: any LoadableCache
        switch kind {
        case .file: cache = FileLoadableCache(directory: directory)
        case .inMemory: cache = InMemoryLoadableCache()
        }
        var model: [String: CachedEntry] = [:]
        var cleared = false
        for (index, step) in steps.enumerated() {
            trace?("\(index): \(step)")
            do {
                switch step {
                case .save(let key, _, _, _, _):
                    if model[keys[key]] != nil { coverage.overwrites += 1 }
                    if cleared { coverage.savesAfterClear += 1 }
                    let entry = step.entry!
                    try await cache.save(entry, key: keys[key])
                    model[keys[key]] = entry
                case .remove(let key):
                    if model[keys[key]] != nil { coverage.removalsOfEntries += 1 }
                    try await cache.remove(key: keys[key])
                    model[keys[key]] = nil
                case .removeAll:
                    if !model.isEmpty { coverage.clearsWithEntries += 1 }
                    try await cache.removeAll()
                    model = [:]
                case .reopen:
                    if !model.isEmpty { coverage.reopensWithEntries += 1 }
                    if kind == .file { cache = FileLoadableCache(directory: directory) }
                case .clearFromOutside:
                    if !model.isEmpty { coverage.clearsWithEntries += 1 }
                    switch kind {
                    case .file:
                        let folder = directory.appendingPathComponent("v1")
                        if FileCacheFixtures.exists(folder) { try FileManager.default.removeItem(at: folder) }
                    case .inMemory:
                        try await cache.removeAll()
                    }
                    model = [:]
                }
            } catch {
                return "step \(index), \(step), threw: \(error)"
            }
            cleared = step == .removeAll || step == .clearFromOutside
            if keysSharingAPrefix.filter({ model[keys[$0]] != nil }).count >= 2 {
                coverage.longKeysSharingAPrefixTogether += 1
            }
            if model[""] != nil { coverage.emptyKeyHits += 1 }
            if let problem = await difference(cache: cache, kind: kind, directory: directory, model: model) {
                return "after step \(index), \(step): \(problem)"
            }
        }
        return nil
    }

    /// The first difference between `cache` and `model`, or `nil`.
    static func difference(
        cache: any LoadableCache, kind: Kind, directory: URL, model: [String: CachedEntry]
    ) async -> String? {
        for (index, key) in keys.enumerated() {
            let loaded: CachedEntry?
            do {
                loaded = try await cache.load(key: key)
            } catch {
                return "load(\(label(index))) threw: \(error)"
            }
            if loaded != model[key] {
                return "load(\(label(index))) is \(describe(loaded)), the model has \(describe(model[key]))"
            }
        }
        switch kind {
        case .file:
            let names = FileCacheFixtures.names(in: directory.appendingPathComponent("v1"))
            let expected = model.keys.map { FileLoadableCache.fileName(forKey: $0) }.sorted()
            if names != expected {
                return "the v1 folder holds \(names.count) files \(names.map { $0.prefix(12) }), "
                    + "the model \(expected.count) entries \(expected.map { $0.prefix(12) })"
            }
        case .inMemory:
            let keys = await (cache as! InMemoryLoadableCache).keys
            if keys != model.keys.sorted() {
                return
                    "keys are \(keys.map { $0.prefix(12) }), the model has \(model.keys.sorted().map { $0.prefix(12) })"
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
        switch number(below: 40) {
        case 0..<22:
            let sizes = [0, 1, 7, 40, number(below: 300), number(below: 300), 5_000]
            let versions = [0, 1, 1, 2, -1, .max, .min, number(below: 1_000) - 500]
            let dates = [0, -1.5, 1e9 + 0.25, Double(number(below: 1 << 30)) / 1_024 - 1e5, -63_114_076_800]
            return .save(
                key: number(below: keys.count), size: sizes[number(below: sizes.count)],
                first: UInt8(number(below: 256)), version: versions[number(below: versions.count)],
                savedAt: dates[number(below: dates.count)])
        case 22..<32: return .remove(key: number(below: keys.count))
        case 32..<34: return .removeAll
        case 34..<38: return .reopen
        default: return .clearFromOutside
        }
    }

    /// Runs 200 seeded sequences of 40 steps against `kind`; reports the first failure, shrunk
    /// (and returns `nil` then).
    @MainActor
    static func coverageOfRandomSequences(kind: Kind) async -> Coverage? {
        var total = Coverage()
        let matched = await checkRandomSequences(count: 200, baseSeed: 0xF11E_CAC4) { seed in
            var random = SeededRandomNumberGenerator(seed: seed)
            return (kind, (0..<40).map { _ in randomStep(&random) })
        } mismatch: { kind, steps in
            var coverage = Coverage()
            let failure = await mismatch(in: steps, kind: kind, coverage: &coverage)
            total.add(coverage)
            return failure
        }
        return matched ? total : nil
    }

    @Test("200 random sequences of saves, removes, removeAll, reopens and outside clears match the model on files")
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
