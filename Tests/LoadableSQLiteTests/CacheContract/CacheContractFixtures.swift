import Foundation
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSQLite
import Testing

// MARK: - Every cache kind, for the contract tests

/// Every `LoadableCache` the package ships: the tests of `CacheContractTests.swift` and
/// `CacheContractIntegrationTests.swift` run over each one, so that a rule of the protocol is
/// checked once, the same way, for all of them.
enum CacheKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case memory
    case file
    case sqlite

    var testDescription: String {
        switch self {
        case .memory: "InMemoryLoadableCache"
        case .file: "FileLoadableCache"
        case .sqlite: "SQLiteLoadableCache"
        }
    }
}

/// The cache kinds that keep entries across objects and take `maxBytes` and
/// `removeEntries(savedBefore:)`.
enum BoundedCacheKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case file
    case sqlite

    var kind: CacheKind {
        switch self {
        case .file: .file
        case .sqlite: .sqlite
        }
    }

    var testDescription: String { kind.testDescription }
}

/// A cache of one kind in a temporary directory of its own, for one test; ``cleanUp()`` removes
/// the directory (a test calls it in a `defer`).
struct CacheSubject: Sendable {
    let kind: CacheKind
    /// The temporary directory: the file cache's directory, the folder of the SQLite file.
    let directory: URL
    let maxBytes: Int?
    /// The cache the test uses.
    let cache: any LoadableCache

    /// A fresh, empty cache of `kind` (with `maxBytes`, for the kinds that take it).
    init(_ kind: CacheKind, maxBytes: Int? = nil) throws {
        self.kind = kind
        self.maxBytes = maxBytes
        directory = FileCacheFixtures.temporaryDirectory("contract-\(kind.rawValue)")
        cache = try Self.make(kind, directory: directory, maxBytes: maxBytes)
    }

    /// A fresh, empty cache of a bounded kind.
    init(_ kind: BoundedCacheKind, maxBytes: Int? = nil) throws {
        try self.init(kind.kind, maxBytes: maxBytes)
    }

    /// Another object of a bounded kind on `directory` (another subject's): as the next launch
    /// opens it, with `maxBytes`. The first subject cleans up.
    init(_ kind: BoundedCacheKind, directory: URL, maxBytes: Int?) throws {
        self.kind = kind.kind
        self.maxBytes = maxBytes
        self.directory = directory
        cache = try Self.make(kind.kind, directory: directory, maxBytes: maxBytes)
    }

    /// The SQLite database file of a subject of kind `.sqlite`.
    var databaseFile: URL { directory.appendingPathComponent("cache.sqlite") }

    private static func make(_ kind: CacheKind, directory: URL, maxBytes: Int?) throws -> any LoadableCache {
        switch kind {
        case .memory:
            precondition(maxBytes == nil, "InMemoryLoadableCache has no maxBytes")
            return InMemoryLoadableCache()
        case .file: return FileLoadableCache(directory: directory, maxBytes: maxBytes)
        case .sqlite:
            return try SQLiteLoadableCache(path: directory.appendingPathComponent("cache.sqlite"), maxBytes: maxBytes)
        }
    }

    /// Another object on the same storage, as the next launch (or another part of the app) makes
    /// one: a new object on the directory or the database file (with this subject's `maxBytes`);
    /// for memory, whose storage is the object, the same object.
    func another() throws -> any LoadableCache {
        kind == .memory ? cache : try Self.make(kind, directory: directory, maxBytes: maxBytes)
    }

    /// Removes the temporary directory and everything in it.
    func cleanUp() {
        FileCacheFixtures.removeDirectory(directory)
    }

    /// How many entries the storage holds (the keys in memory, the files in `v1/`, the rows),
    /// counted without a load, which would make an entry the most recently used.
    func storedCount() async throws -> Int {
        switch cache {
        case let memory as InMemoryLoadableCache: return await memory.keys.count
        case let file as FileLoadableCache:
            // Entry files, and pinned ones in `pinned/`; not the folder itself.
            let pinned = file.entriesDirectory.appendingPathComponent("pinned", isDirectory: true)
            return FileCacheFixtures.names(in: file.entriesDirectory).filter { $0 != "pinned" }.count
                + FileCacheFixtures.names(in: pinned).count
        case let sqlite as SQLiteLoadableCache: return try await sqlite.usage().keysLeastRecentFirst.count
        default: preconditionFailure("not a cache of a CacheKind")
        }
    }

    /// Calls the cache's `removeEntries(savedBefore:)`.
    func removeEntries(savedBefore date: Date) async throws {
        switch cache {
        case let memory as InMemoryLoadableCache: await memory.removeEntries(savedBefore: date)
        case let file as FileLoadableCache: try await file.removeEntries(savedBefore: date)
        case let sqlite as SQLiteLoadableCache: try await sqlite.removeEntries(savedBefore: date)
        default: preconditionFailure("\(kind) has no removeEntries(savedBefore:)")
        }
    }

    /// The bytes the cache counts against `maxBytes`, and its entries' keys, least recently used
    /// first, spelled as in `keys` (each stored key must be one of them, in any spelling).
    func usage(
        keys: [String], sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> (totalBytes: Int, keysLeastRecentFirst: [String]) {
        let total: Int
        let stored: [String]
        var byStoredName: [String: String] = [:]
        switch cache {
        case let file as FileLoadableCache:
            (total, stored) = try await file.usage()
            for key in keys { byStoredName[FileLoadableCache.fileName(forKey: key)] = key }
        case let sqlite as SQLiteLoadableCache:
            (total, stored) = try await sqlite.usage()
            for key in keys { byStoredName[key.precomposedStringWithCanonicalMapping] = key }
        default: preconditionFailure("\(kind) has no usage")
        }
        return (
            total,
            stored.map { name in
                guard let key = byStoredName[name] else {
                    Issue.record("an entry of a key the test did not save: \(name)", sourceLocation: sourceLocation)
                    return name
                }
                return key
            }
        )
    }

    /// The bytes `entry` under `key` counts against `maxBytes` in this kind, from the documentation:
    /// for files, the file's size (a 40-byte header, or 44 with metadata, the key's NFC UTF-8, the
    /// metadata's bytes and the data); for SQLite, the key's NFC UTF-8, the data and the metadata's
    /// bytes (none when it is empty).
    func size(of entry: CachedEntry, key: String) -> Int {
        Self.size(of: entry, key: key, kind: kind)
    }

    static func size(of entry: CachedEntry, key: String, kind: CacheKind) -> Int {
        let metadata = entry.metadata.isEmpty ? 0 : metadataSize(entry.metadata)
        let keyBytes = key.precomposedStringWithCanonicalMapping.utf8.count
        switch kind {
        case .file: return (entry.metadata.isEmpty ? 40 : 44) + keyBytes + metadata + entry.data.count
        case .sqlite: return keyBytes + entry.data.count + metadata
        case .memory: preconditionFailure("InMemoryLoadableCache counts no bytes")
        }
    }

    /// The length of the metadata's documented encoding: a 4-byte count, then each name and
    /// value as a 4-byte length and its UTF-8.
    static func metadataSize(_ metadata: [String: String]) -> Int {
        4 + metadata.reduce(0) { $0 + 8 + $1.key.utf8.count + $1.value.utf8.count }
    }
}

/// An entry of `count` bytes counting up from `first`, saved at `savedAt`, with `metadata`.
func contractEntry(
    _ count: Int, first: UInt8 = 0, savedAt: Double = 1_000, version: Int = 1, metadata: [String: String] = [:]
) -> CachedEntry {
    var entry = FileCacheFixtures.entry(count: count, first: first, savedAt: savedAt, version: version)
    entry.metadata = metadata
    return entry
}
