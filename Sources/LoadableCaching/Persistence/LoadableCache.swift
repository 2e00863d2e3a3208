public import Foundation

/// Where persisted loadables keep their contents between launches: a store of ``CachedEntry``
/// values by string key.
///
/// ``FileLoadableCache`` keeps them in files, ``InMemoryLoadableCache`` in memory (for tests, and
/// for apps that want restore-after-release without a disk), and `SQLiteLoadableCache` (module
/// `LoadableSQLite`) in one SQLite database, for many entries. Conform an actor of your own to
/// keep them elsewhere (a keychain, a server).
///
/// The requirements are `async` and not isolated to the caller, so their work runs off the main
/// actor. A cache is an object (an actor or a class): the persistences that share one cache object
/// run their reads and writes one at a time, in the order they asked for them, so a slow older
/// save of a key never lands after a newer one, and a restore reads the last save asked for.
public protocol LoadableCache: AnyObject, Sendable {
    /// The entry saved under `key`, or `nil` if there is none.
    ///
    /// Throw ``LoadableCacheError/corrupt(key:reason:)`` when an entry is there but its bytes are
    /// not a whole entry: the persistence then removes it and reports the error. Throw anything
    /// else when it could not be read (permissions, too many open files): the persistence reports
    /// it and leaves the entry for a later read.
    func load(key: String) async throws -> CachedEntry?

    /// Saves `entry` under `key`, replacing any entry there. A save that fails must leave the
    /// previous entry whole (or none), never a part of either.
    ///
    /// Keep the pin rule (see ``CachedEntry/isPinned``): a cache that bounds its size never
    /// evicts a pinned entry. Refuse an entry whose ``CachedEntry/savedAt`` is not a finite date
    /// (throw ``LoadableCacheError/saveFailed(key:underlying:)``) rather than keep bytes a later
    /// load would find corrupt.
    func save(_ entry: CachedEntry, key: String) async throws

    /// Sets the save date and the metadata of the entry under `key`, keeping its data, version and
    /// pin: what a persistence does when a sync confirmed the contents without changing them (an
    /// HTTP `304`), so that the contents are not written again.
    ///
    /// The default loads the entry and saves it back changed: two calls, so a save of the key by
    /// another object or process between them is undone (the package's own callers order their
    /// calls of one cache object, see ``scoped(_:)``). The file, SQLite and memory caches change
    /// it in place, in one step. A touch marks the entry used, as a load does.
    ///
    /// - Parameters:
    ///   - key: The entry's key.
    ///   - savedAt: The new save date: when the contents were confirmed.
    ///   - metadata: The new metadata (an HTTP loadable's validators, which a `304` may renew).
    /// - Returns: `false` when there is no entry under `key` (nothing was written): the caller
    ///   saves the whole entry instead.
    /// - Throws: What ``load(key:)`` and ``save(_:key:)`` throw; a `savedAt` that is not finite
    ///   is refused with ``LoadableCacheError/saveFailed(key:underlying:)``.
    func touch(key: String, savedAt: Date, metadata: [String: String]) async throws -> Bool

    /// Removes the entry under `key`; a key without one is not an error.
    func remove(key: String) async throws

    /// Removes every entry (logout: the next user must not see the last user's data).
    func removeAll() async throws

    /// Removes every entry whose key starts with `prefix`, entries of earlier launches included:
    /// what the `removeAll()` of a ``scoped(_:)`` view does. An empty prefix removes every entry.
    ///
    /// The file and memory caches implement it. A cache of your own that does not fails with
    /// ``LoadableCacheError/removeAllFailed(underlying:)`` naming it, and removes nothing.
    func removeEntries(keyPrefix prefix: String) async throws

    /// Whether ``tryLock(key:)`` and ``update(key:_:)`` hold across processes: `true` for the
    /// file and SQLite caches; `false` by default and for ``InMemoryLoadableCache``, whose locks
    /// and updates hold within the process.
    ///
    /// Two processes that share a cache (an app and its extension, one App Group folder) can
    /// share an entry through the lock and the update only when it is `true`.
    var locksAcrossProcesses: Bool { get }

    /// Takes the lock named `key` if no one holds it: another process (when
    /// ``locksAcrossProcesses``), or another lock object of this process. Never waits.
    ///
    /// A lock is held until its ``LoadableCacheLock/release()``, until it is deinitialized, or
    /// until the process exits or dies (a kill included): a lock never outlives its holder. Locks
    /// are apart from entries: the lock `key` does not keep anyone from loading or saving the entry
    /// `key`; the holders agree on what it guards. A lock taken through a ``scoped(_:)`` view is
    /// the cache's lock of the prefixed name, so two views of one cache with the same prefix share
    /// it.
    ///
    /// The default holds the lock within the process: one lock object at a time per cache object
    /// and name. The file and SQLite caches lock a file (`flock`), which the system frees when the
    /// process ends.
    ///
    /// - Parameter key: The lock's name: any string, compared as Swift compares strings.
    /// - Returns: The held lock, or `nil` when someone holds it.
    /// - Throws: ``LoadableCacheError/loadFailed(key:underlying:)`` when the lock could not be
    ///   tried for another reason (the file and SQLite caches: the lock's file cannot be made).
    func tryLock(key: String) async throws -> LoadableCacheLock?

    /// Loads the entry under `key`, passes it to `body`, and saves what `body` leaves (removes the
    /// entry when it leaves `nil`), as one step: no ``update(key:_:)`` of the key through another
    /// object or process comes in between (across processes only when
    /// ``locksAcrossProcesses``).
    ///
    /// When `body` leaves the entry as it found it, nothing is written. When `body` throws,
    /// nothing is written and the error is rethrown. The load and the save keep the rules of
    /// ``load(key:)`` and ``save(_:key:)``: pins, limits and recency apply; an entry whose bytes
    /// are not a whole entry throws what ``load(key:)`` throws, and `body` does not run.
    ///
    /// A plain ``save(_:key:)`` or ``remove(key:)`` of the key is not held off: an entry that two
    /// processes change goes through ``update(key:_:)`` only.
    ///
    /// The default loads and then saves (or removes): two calls, so a save of the key by another
    /// object or process between them is undone (the memory cache does it in one step within the
    /// process; the file and SQLite caches in one step across processes).
    ///
    /// ```swift
    /// // Two processes count their launches in one entry: neither count is lost.
    /// let launches = try await cache.update(key: "launches") { entry in
    ///     let count = entry.flatMap { Int(String(decoding: $0.data, as: UTF8.self)) } ?? 0
    ///     entry = CachedEntry(data: Data("\(count + 1)".utf8), savedAt: .now, version: 1)
    ///     return count + 1
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - key: The entry's key.
    ///   - body: Changes the entry (`nil`: there is none; set it to `nil` to remove the entry).
    ///     Runs off the main actor while the update holds the key: it computes the change and
    ///     nothing else (a cache may run it again when it retries an update that wrote nothing).
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws (nothing is written); what ``load(key:)`` throws;
    ///   ``LoadableCacheError/saveFailed(key:underlying:)`` or
    ///   ``LoadableCacheError/removeFailed(key:underlying:)`` when the change could not be
    ///   written (the entry is left as it was), as a save or a removal would.
    func update<Result: Sendable>(
        key: String, _ body: @Sendable (inout CachedEntry?) throws -> Result
    ) async throws -> Result

    /// The entries this object reads and writes, as the package tells caches apart: the
    /// persistences, stores and outboxes of one set of entries run their reads and writes one at a
    /// time, in the order asked, and a store or an outbox claims its part of them (two stores on
    /// one unscoped cache stop the program with a message naming `scoped(_:)`).
    ///
    /// The default, the object's own entries, is right for a cache whose entries no other object
    /// reads or writes (an actor of your own that keeps them in memory, in a keychain, on a
    /// server): the package then orders and claims per object. The file and SQLite caches return
    /// the entries of their folder or file, which every object on it shares; a ``scoped(_:)`` view
    /// returns its cache's, with its prefix. Implement it only for a cache of your own whose
    /// objects share entries (two objects on one database), and return one
    /// ``LoadableCacheEntries/init(id:cacheName:)`` identity for all of them: otherwise two such
    /// objects would not be ordered, and a store on each would not be told apart from one.
    var sharedEntries: LoadableCacheEntries { get }
}

/// The entries a ``LoadableCache`` object reads and writes (see
/// ``LoadableCache/sharedEntries``): an identity the objects that share them have in common, the
/// cache's name for messages, and the prefix of the object's keys among them (a scope's).
public struct LoadableCacheEntries: Sendable, Hashable {
    /// Equal for every cache object that reads and writes the same entries.
    public let id: ObjectIdentifier
    /// The name of the cache that holds the entries, as messages name it: its type's name.
    public let cacheName: String
    /// What every key of the object starts with among the entries: empty for a cache, the prefix
    /// of a ``LoadableCache/scoped(_:)`` view.
    public let keyPrefix: String

    /// The entries of every object whose `id` is `id`, held by a cache named `cacheName`, keys as
    /// they are.
    ///
    /// - Parameters:
    ///   - id: The identity of the entries: an object that every cache object on them shares
    ///     (and that lives as long as they do).
    ///   - cacheName: The cache's name for messages: its type's name.
    public init(id: ObjectIdentifier, cacheName: String) {
        self.init(id: id, cacheName: cacheName, keyPrefix: "", groupWriter: nil)
    }

    /// The entries of a cache object that writes the saves the queue has waiting in groups
    /// (``CacheWriteGroup``): `groupWriter` is the object that takes them, which a ``scoped(_:)``
    /// view keeps.
    package init(id: ObjectIdentifier, cacheName: String, groupWriter: ObjectIdentifier) {
        self.init(id: id, cacheName: cacheName, keyPrefix: "", groupWriter: groupWriter)
    }

    private init(id: ObjectIdentifier, cacheName: String, keyPrefix: String, groupWriter: ObjectIdentifier?) {
        self.id = id
        self.cacheName = cacheName
        self.keyPrefix = keyPrefix
        self.groupWriter = groupWriter
    }

    /// The object that writes saves in groups for these entries (see ``CacheWriteGroup``), or
    /// `nil`: one save at a time. Not part of the entries' identity (`==`, `hash(into:)`): two
    /// objects on one file are the same entries and two writers.
    package let groupWriter: ObjectIdentifier?

    /// Whether `lhs` and `rhs` are the same entries seen with the same prefix (the writer aside).
    public static func == (lhs: LoadableCacheEntries, rhs: LoadableCacheEntries) -> Bool {
        lhs.id == rhs.id && lhs.cacheName == rhs.cacheName && lhs.keyPrefix == rhs.keyPrefix
    }

    /// Hashes what `==` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(cacheName)
        hasher.combine(keyPrefix)
    }

    /// The same entries, seen through a view whose keys all start with `prefix`.
    func scoped(_ prefix: String) -> LoadableCacheEntries {
        LoadableCacheEntries(id: id, cacheName: cacheName, keyPrefix: keyPrefix + prefix, groupWriter: groupWriter)
    }

    /// `key` of the object as the key among the entries.
    func key(_ key: String) -> String {
        keyPrefix.isEmpty ? key : keyPrefix + key
    }
}

extension LoadableCache {
    /// Loads the entry under `key` and saves it back with `savedAt` and `metadata`: the touch of
    /// a cache that has no cheaper way.
    ///
    /// - Parameters:
    ///   - key: The entry's key.
    ///   - savedAt: The new save date.
    ///   - metadata: The new metadata.
    /// - Returns: `false` when there is no entry under `key`.
    /// - Throws: What ``load(key:)`` and ``save(_:key:)`` throw.
    public func touch(key: String, savedAt: Date, metadata: [String: String]) async throws -> Bool {
        try CachedEntry.checkSavedAt(savedAt, key: key)
        guard var entry = try await load(key: key) else { return false }
        entry.savedAt = savedAt
        entry.metadata = metadata
        try await save(entry, key: key)
        return true
    }

    /// Fails: a cache that does not implement it cannot remove the entries of a scope.
    ///
    /// - Throws: ``LoadableCacheError/removeAllFailed(underlying:)`` naming the cache's type.
    public func removeEntries(keyPrefix prefix: String) async throws {
        throw LoadableCacheError.removeAllFailed(underlying: UnsupportedPrefixRemoval(cacheType: "\(type(of: self))"))
    }

    /// A view of this cache whose keys are `prefix` followed by the key asked for, and whose
    /// `removeAll()` removes only the entries whose keys start with `prefix`.
    ///
    /// Stores that share one cache each take a scope, so that one store's logout never wipes
    /// another's entries:
    ///
    /// ```swift
    /// let cache = FileLoadableCache(directory: caches.appendingPathComponent("loadables"))
    /// let posts = LoadableStore<Int, Post>(cache: cache.scoped("posts/"), cacheKey: { "\($0)" }) { … }
    /// let users = LoadableStore<String, User>(cache: cache.scoped("users/"), cacheKey: { $0 }) { … }
    /// ```
    ///
    /// End a prefix with a separator (`/`, `:`), so that no scope's prefix starts another's. A
    /// scope of a scope adds its prefix after its parent's. The view shares the cache's order:
    /// reads and writes through it and through the cache run one at a time, in the order asked.
    ///
    /// - Parameter prefix: What every key of the view starts with in this cache.
    /// - Returns: The view.
    public func scoped(_ prefix: String) -> any LoadableCache {
        ScopedLoadableCache(base: self, prefix: prefix)
    }

    /// The object's own entries, named by its type: those of a cache whose entries no other
    /// object shares.
    public var sharedEntries: LoadableCacheEntries {
        LoadableCacheEntries(id: ObjectIdentifier(self), cacheName: "\(type(of: self))")
    }
}

/// `key` in NFC form (pure-ASCII keys as they are): the form in which the file and SQLite caches
/// keep keys, so that keys Swift finds equal (`"café"` typed precomposed or with a combining
/// accent) are one entry.
package func canonicalCacheKey(_ key: String) -> String {
    key.utf8.allSatisfy { $0 < 0x80 } ? key : key.precomposedStringWithCanonicalMapping
}

/// What a cache that does not implement ``LoadableCache/removeEntries(keyPrefix:)`` fails with.
struct UnsupportedPrefixRemoval: Error, CustomStringConvertible {
    let cacheType: String

    var description: String {
        "\(cacheType) does not implement removeEntries(keyPrefix:), which the removeAll() of a scoped(_:) view needs"
    }
}

/// The view ``LoadableCache/scoped(_:)`` returns: every key prefixed, `removeAll()` of its own
/// entries only.
final class ScopedLoadableCache: LoadableCache {
    /// The cache the entries are in (a scope of a scope adds its prefix after its parent's).
    let base: any LoadableCache
    /// What every key of the view starts with in ``base``.
    let prefix: String

    init(base: any LoadableCache, prefix: String) {
        self.base = base
        self.prefix = prefix
    }

    func load(key: String) async throws -> CachedEntry? {
        try await base.load(key: prefix + key)
    }

    func save(_ entry: CachedEntry, key: String) async throws {
        try await base.save(entry, key: prefix + key)
    }

    func remove(key: String) async throws {
        try await base.remove(key: prefix + key)
    }

    func removeAll() async throws {
        try await base.removeEntries(keyPrefix: prefix)
    }

    func removeEntries(keyPrefix prefix: String) async throws {
        try await base.removeEntries(keyPrefix: self.prefix + prefix)
    }

    func touch(key: String, savedAt: Date, metadata: [String: String]) async throws -> Bool {
        try await base.touch(key: prefix + key, savedAt: savedAt, metadata: metadata)
    }

    var locksAcrossProcesses: Bool { base.locksAcrossProcesses }

    func tryLock(key: String) async throws -> LoadableCacheLock? {
        try await base.tryLock(key: prefix + key)
    }

    func update<Result: Sendable>(
        key: String, _ body: @Sendable (inout CachedEntry?) throws -> Result
    ) async throws -> Result {
        try await base.update(key: prefix + key, body)
    }

    /// The cache's entries, with the prefix added.
    var sharedEntries: LoadableCacheEntries { base.sharedEntries.scoped(prefix) }
}

/// What a ``LoadableCache`` keeps for one key: the encoded contents, when they were confirmed, the
/// version of their encoding, and a few strings about them (an HTTP loadable's validators).
public struct CachedEntry: Sendable, Codable, Hashable {
    /// The encoded contents.
    public var data: Data
    /// When the contents were confirmed (by a sync, or written), in wall-clock time: a restore
    /// sets the loadable's `age` from it.
    public var savedAt: Date
    /// The version of the encoding; a restore takes only entries of its own version.
    public var version: Int
    /// Strings kept with the contents, given back on restore: an `HTTPLoadable` keeps its `ETag`
    /// and `Last-Modified` here, so that its first sync after a launch can be answered by a 304.
    /// Empty by default, and for entries saved before it existed.
    public var metadata: [String: String]
    /// Whether the entry holds changes the user made that the server does not have yet (a
    /// ``LoadableOutbox``'s queue): data that exists nowhere else.
    ///
    /// A cache never evicts a pinned entry to stay under its limit, and
    /// `removeEntries(savedBefore:)` never removes one; ``LoadableCache/remove(key:)``,
    /// ``LoadableCache/removeAll()`` and a scope's `removeAll()` do (logout). Pinned entries count
    /// toward a limit: when they pass it on their own, every other entry goes and they stay, so
    /// the cache is over its limit until they are unpinned or removed. `false` by default.
    public var isPinned: Bool

    /// Creates an entry.
    ///
    /// - Parameters:
    ///   - data: The encoded contents.
    ///   - savedAt: When the contents were confirmed; a finite date (caches refuse others).
    ///   - version: The version of the encoding.
    ///   - metadata: Strings kept with the contents; empty by default.
    ///   - isPinned: Whether the entry holds changes not sent yet, which no limit may evict;
    ///     `false` by default.
    public init(
        data: Data, savedAt: Date, version: Int, metadata: [String: String] = [:], isPinned: Bool = false
    ) {
        self.data = data
        self.savedAt = savedAt
        self.version = version
        self.metadata = metadata
        self.isPinned = isPinned
    }

    private enum CodingKeys: String, CodingKey {
        case data, savedAt, version, metadata, isPinned
    }

    /// Decodes an entry; one encoded before ``metadata`` or ``isPinned`` existed has no metadata
    /// and is not pinned.
    ///
    /// - Parameter decoder: The decoder to read from.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        data = try container.decode(Data.self, forKey: .data)
        savedAt = try container.decode(Date.self, forKey: .savedAt)
        version = try container.decode(Int.self, forKey: .version)
        metadata = try container.decodeIfPresent([String: String].self, forKey: .metadata) ?? [:]
        isPinned = try container.decodeIfPresent(Bool.self, forKey: .isPinned) ?? false
    }

    /// Encodes the entry; ``isPinned`` only when it is set, so that unpinned entries encode as
    /// before it existed.
    ///
    /// - Parameter encoder: The encoder to write to.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(data, forKey: .data)
        try container.encode(savedAt, forKey: .savedAt)
        try container.encode(version, forKey: .version)
        try container.encode(metadata, forKey: .metadata)
        if isPinned { try container.encode(isPinned, forKey: .isPinned) }
    }

    /// Throws ``LoadableCacheError/saveFailed(key:underlying:)`` when `savedAt` is not a finite
    /// date: what every cache of the package refuses to save.
    package static func checkSavedAt(_ savedAt: Date, key: String) throws(LoadableCacheError) {
        guard !savedAt.timeIntervalSinceReferenceDate.isFinite else { return }
        throw .saveFailed(key: key, underlying: NonFiniteSaveDate(savedAt: savedAt.timeIntervalSinceReferenceDate))
    }
}

/// Why a cache refused an entry: its save date is not a finite date.
struct NonFiniteSaveDate: Error, CustomStringConvertible {
    /// The date's seconds since 2001-01-01: infinite or not a number.
    let savedAt: Double

    var description: String {
        "its savedAt is not a finite date (\(savedAt) seconds since 2001-01-01); an entry's date must be finite"
    }
}

/// Why persisting a loadable (or an outbox's queue) failed; every case names the cache key.
///
/// A persistence reports these through its `onError` and carries on without the cache: the
/// loadable's state never changes because of one. What is said below of "the entry" is what a
/// persistence does; a ``LoadableOutbox`` keeps its queue in one entry and says what it does in
/// its own documentation (an item that does not decode is set aside, not removed).
public enum LoadableCacheError: Error, CustomStringConvertible {
    /// The stored bytes of `key` are not a complete entry (a file cut short, or not written by
    /// this cache); `reason` says what is wrong. The entry is removed.
    case corrupt(key: String, reason: String)
    /// The entry of `key` was saved with another version of the encoding. The entry is removed.
    case versionMismatch(key: String, found: Int, expected: Int)
    /// The entry of `key` could not be decoded as the loadable's contents (for an outbox: one
    /// item's change, named in `underlying`). The entry is removed (the outbox sets the item
    /// aside instead).
    case decodingFailed(key: String, underlying: any Error)
    /// The contents could not be encoded for `key`; nothing was saved.
    case encodingFailed(key: String, underlying: any Error)
    /// Reading the entry of `key` failed for a reason other than its bytes (for example, the
    /// cache's directory is unreadable, or the process has too many open files). The entry is
    /// left alone.
    case loadFailed(key: String, underlying: any Error)
    /// Saving the entry of `key` failed (for example, the directory is not writable); the
    /// previous entry, if any, is left whole.
    case saveFailed(key: String, underlying: any Error)
    /// Removing the entry of `key` failed.
    case removeFailed(key: String, underlying: any Error)
    /// Removing every entry failed.
    case removeAllFailed(underlying: any Error)

    /// The cache key the error is about; `nil` for ``removeAllFailed(underlying:)``.
    public var key: String? {
        switch self {
        case .corrupt(let key, _), .versionMismatch(let key, _, _), .decodingFailed(let key, _),
            .encodingFailed(let key, _), .loadFailed(let key, _), .saveFailed(let key, _),
            .removeFailed(let key, _):
            key
        case .removeAllFailed: nil
        }
    }

    /// A sentence naming the key (cut to 100 characters) and what went wrong.
    public var description: String {
        switch self {
        case .corrupt(let key, let reason):
            "cached entry \(Self.quoted(key)) is corrupt: \(reason)"
        case .versionMismatch(let key, let found, let expected):
            "cached entry \(Self.quoted(key)) has version \(found), expected \(expected)"
        case .decodingFailed(let key, let underlying):
            "cached entry \(Self.quoted(key)) could not be decoded: \(underlying)"
        case .encodingFailed(let key, let underlying):
            "contents for cache key \(Self.quoted(key)) could not be encoded: \(underlying)"
        case .loadFailed(let key, let underlying):
            "cached entry \(Self.quoted(key)) could not be read: \(underlying)"
        case .saveFailed(let key, let underlying):
            "cached entry \(Self.quoted(key)) could not be saved: \(underlying)"
        case .removeFailed(let key, let underlying):
            "cached entry \(Self.quoted(key)) could not be removed: \(underlying)"
        case .removeAllFailed(let underlying):
            "the cache could not be cleared: \(underlying)"
        }
    }

    private static func quoted(_ key: String) -> String {
        key.count <= 100 ? "\"\(key)\"" : "\"\(key.prefix(100))…\" (\(key.utf8.count) bytes)"
    }
}

/// A ``LoadableCache`` in memory: for tests (no files, nothing left behind), and for apps that
/// want a loadable made again after its release to start from its last contents.
///
/// It has no limit, so nothing is ever evicted; ``removeEntries(savedBefore:)`` keeps pinned
/// entries (``CachedEntry/isPinned``), as the file and SQLite caches do. Its ``save(_:key:)``
/// keeps an entry as given (its date too: nothing it holds is read back from bytes), while the
/// package's persistences and outboxes refuse a date that is not finite before they save.
public actor InMemoryLoadableCache: LoadableCache {
    private var entries: [String: CachedEntry]

    /// Creates a cache holding `entries`.
    ///
    /// - Parameter entries: The entries to start with, by key (for a test's "last launch").
    public init(entries: [String: CachedEntry] = [:]) {
        self.entries = entries
    }

    /// The cache's own entries (no other object shares them), named by its type.
    public nonisolated var sharedEntries: LoadableCacheEntries {
        LoadableCacheEntries(id: ObjectIdentifier(self), cacheName: "InMemoryLoadableCache")
    }

    /// The entry saved under `key`, or `nil`.
    public func load(key: String) -> CachedEntry? {
        entries[key]
    }

    /// Saves `entry` under `key`.
    public func save(_ entry: CachedEntry, key: String) {
        entries[key] = entry
    }

    /// Removes the entry under `key`.
    public func remove(key: String) {
        entries[key] = nil
    }

    /// Removes every entry.
    public func removeAll() {
        entries.removeAll()
    }

    /// Removes every entry whose key starts with `prefix` (compared as Swift compares strings).
    ///
    /// Not isolated (it hops onto the actor), so that a call on an `InMemoryLoadableCache` itself
    /// reaches it rather than the protocol extension's default.
    ///
    /// - Parameter prefix: The start of the keys to remove; empty removes every entry.
    public nonisolated func removeEntries(keyPrefix prefix: String) async {
        await removeEntriesHere(keyPrefix: prefix)
    }

    private func removeEntriesHere(keyPrefix prefix: String) {
        guard !prefix.isEmpty else { return entries.removeAll() }
        entries = entries.filter { !$0.key.hasPrefix(prefix) }
    }

    /// Sets the save date and the metadata of the entry under `key` in place.
    ///
    /// Not isolated (it hops onto the actor), so that a call on an `InMemoryLoadableCache` itself
    /// reaches it rather than the protocol extension's default.
    ///
    /// - Parameters:
    ///   - key: The entry's key.
    ///   - savedAt: The new save date; a finite one.
    ///   - metadata: The new metadata.
    /// - Returns: `false` when there is no entry under `key`.
    /// - Throws: ``LoadableCacheError/saveFailed(key:underlying:)`` when `savedAt` is not finite.
    public nonisolated func touch(key: String, savedAt: Date, metadata: [String: String]) async throws -> Bool {
        try CachedEntry.checkSavedAt(savedAt, key: key)
        return await touchHere(key: key, savedAt: savedAt, metadata: metadata)
    }

    private func touchHere(key: String, savedAt: Date, metadata: [String: String]) -> Bool {
        guard entries[key] != nil else { return false }
        entries[key]?.savedAt = savedAt
        entries[key]?.metadata = metadata
        return true
    }

    /// Loads the entry under `key`, passes it to `body`, and keeps what `body` leaves (removes the
    /// entry when it leaves `nil`), in one step on the actor: no other call of the cache comes in
    /// between. Within the process only (``LoadableCache/locksAcrossProcesses`` is `false`).
    ///
    /// - Parameters:
    ///   - key: The entry's key.
    ///   - body: Changes the entry (`nil`: there is none).
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws; nothing is changed then.
    public func update<Result: Sendable>(
        key: String, _ body: @Sendable (inout CachedEntry?) throws -> Result
    ) async throws -> Result {
        var entry = entries[key]
        let result = try body(&entry)
        entries[key] = entry
        return result
    }

    /// Removes the entries saved (``CachedEntry/savedAt``) before `date`, except pinned ones.
    ///
    /// - Parameter date: The oldest save date kept.
    public func removeEntries(savedBefore date: Date) {
        entries = entries.filter { $0.value.isPinned || !($0.value.savedAt < date) }
    }

    /// The keys that have an entry, sorted: what a test checks after a logout.
    public var keys: [String] {
        entries.keys.sorted()
    }
}

extension LoadableCacheError {
    /// The call of a cache that failed, for ``init(_:in:key:)``.
    package enum Call {
        case load, save, remove, removeAll
    }

    /// What the persistence, the store and the outbox report for a `call` of a cache on `key` that
    /// threw `error`: `error` itself when it is a `LoadableCacheError` (the cache named the key
    /// and the reason), otherwise the failure of the call, with `error` underlying (`key` is not
    /// used for ``Call/removeAll``).
    package init(_ error: any Error, in call: Call, key: String) {
        if let error = error as? LoadableCacheError {
            self = error
            return
        }
        switch call {
        case .load: self = .loadFailed(key: key, underlying: error)
        case .save: self = .saveFailed(key: key, underlying: error)
        case .remove: self = .removeFailed(key: key, underlying: error)
        case .removeAll: self = .removeAllFailed(underlying: error)
        }
    }
}
