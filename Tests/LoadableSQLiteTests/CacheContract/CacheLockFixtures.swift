import Foundation
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSQLite
import Testing

// MARK: - The caches whose locks and updates the tests check

/// Every cache whose `tryLock(key:)` and `update(key:_:)` the tests of `CacheLockTests.swift` and
/// `CacheUpdateTests.swift` check: each kind of the package's, a cache of the test's own that
/// takes the protocol's defaults, and a scope of each.
enum LockCacheKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case memory
    case file
    case sqlite
    case own
    case scopedMemory
    case scopedFile
    case scopedSQLite
    case scopedOwn

    /// The kind of the cache under the scope (the kind itself when it is not a scope).
    var base: LockCacheKind {
        switch self {
        case .memory, .scopedMemory: .memory
        case .file, .scopedFile: .file
        case .sqlite, .scopedSQLite: .sqlite
        case .own, .scopedOwn: .own
        }
    }

    /// Whether the test uses a scope of the cache.
    var isScoped: Bool { self != base }

    /// Whether its locks and updates hold across processes (and across objects on one storage).
    var locksAcrossProcesses: Bool { base == .file || base == .sqlite }

    /// Whether its update is one step (every kind but the defaults' load and save).
    var hasAtomicUpdate: Bool { base != .own }

    /// The kinds without a scope.
    static let unscoped: [LockCacheKind] = [.memory, .file, .sqlite, .own]

    var testDescription: String {
        let name =
            switch base {
            case .file: "FileLoadableCache"
            case .sqlite: "SQLiteLoadableCache"
            case .memory: "InMemoryLoadableCache"
            default: "a cache with the defaults"
            }
        return isScoped ? "a scope of \(name)" : name
    }
}

/// A cache of one ``LockCacheKind`` in a temporary directory of its own, for one test;
/// ``cleanUp()`` removes the directory (a test calls it in a `defer`).
struct LockSubject: Sendable {
    let kind: LockCacheKind
    /// The temporary directory: the file cache's directory, the folder of the SQLite file.
    let directory: URL
    /// The cache itself, never a scope.
    let base: any LoadableCache
    /// What the test uses: ``base``, or its scope `"scope/"`.
    let cache: any LoadableCache

    static let prefix = "scope/"

    init(_ kind: LockCacheKind, maxBytes: Int? = nil) throws {
        self.kind = kind
        directory = FileCacheFixtures.temporaryDirectory("lock-\(kind.rawValue)")
        base = try Self.make(kind.base, directory: directory, maxBytes: maxBytes)
        cache = kind.isScoped ? base.scoped(Self.prefix) : base
    }

    /// The SQLite database file of a subject of an SQLite kind.
    var databaseFile: URL { directory.appendingPathComponent("cache.sqlite") }

    /// The key in ``base`` of `key` in ``cache``.
    func baseKey(_ key: String) -> String {
        kind.isScoped ? Self.prefix + key : key
    }

    /// Another object on the same storage, scoped as ``cache`` is: a new object on the directory
    /// or the database file; for memory and the test's own cache, whose storage is the object, a
    /// new view of the same object (a new scope, or the object itself).
    func another() throws -> any LoadableCache {
        let other: any LoadableCache =
            switch kind.base {
            case .file, .sqlite: try Self.make(kind.base, directory: directory, maxBytes: nil)
            default: base
            }
        return kind.isScoped ? other.scoped(Self.prefix) : other
    }

    /// Removes the temporary directory and everything in it.
    func cleanUp() {
        FileCacheFixtures.removeDirectory(directory)
    }

    static func make(_ kind: LockCacheKind, directory: URL, maxBytes: Int?) throws -> any LoadableCache {
        switch kind.base {
        case .file: return FileLoadableCache(directory: directory, maxBytes: maxBytes)
        case .sqlite:
            return try SQLiteLoadableCache(path: directory.appendingPathComponent("cache.sqlite"), maxBytes: maxBytes)
        case .memory: return InMemoryLoadableCache()
        default: return DefaultsCache()
        }
    }
}

/// A cache of the test's own that implements only what it must (load, save, remove, removeAll):
/// its locks, updates and touches are the protocol's defaults.
actor DefaultsCache: LoadableCache {
    private var entries: [String: CachedEntry] = [:]

    func load(key: String) -> CachedEntry? { entries[key] }

    func save(_ entry: CachedEntry, key: String) { entries[key] = entry }

    func remove(key: String) { entries[key] = nil }

    func removeAll() { entries.removeAll() }
}

/// Appends `byte` to the data of `entry` (makes it an entry of `[byte]` when there is none): what
/// the tests of concurrent updates do.
func append(_ byte: UInt8, to entry: inout CachedEntry?) {
    var data = entry?.data ?? Data()
    data.append(byte)
    entry = CachedEntry(data: data, savedAt: Date(timeIntervalSinceReferenceDate: 0), version: 1)
}
