internal import CLoadableSQLite
public import Foundation
internal import Loadable
public import LoadableCaching
import LoadableSupport

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// A `LoadableCache` in one SQLite database file: for caches of many entries (every item of a
/// feed, every page of every list), where a file per key would cost an inode, a directory entry
/// and an `open` each.
///
/// ```swift
/// let caches = FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask)[0]
/// let cache = try SQLiteLoadableCache(path: caches.appendingPathComponent("loadables.sqlite"), maxBytes: 200_000_000)
/// let posts = LoadableStore<Int, PostLoadable>(cache: cache.scoped("posts/"), cacheKey: { "\($0)" }) { … }
/// ```
///
/// It keeps every rule of `LoadableCache`, as the file and memory caches do: `scoped(_:)` views,
/// `removeEntries(savedBefore:)`, keys compared as Swift compares strings (kept in NFC form),
/// metadata, and an optional limit in bytes.
///
/// **Crash safety.** Each save, remove and eviction is one SQLite transaction, in write-ahead-log
/// mode: a kill at any moment leaves the last committed save whole. Commits are synced to disk at
/// checkpoints (`synchronous = NORMAL`): a power cut may lose the last few saves, never the
/// database's consistency.
///
/// **A file it cannot use** (not a database, a damaged or truncated one, one the system lets it
/// only read, a folder in its place, another application's database) is moved aside, next to it,
/// as `<name>.bad` (or `<name>.bad-2`, …), and a fresh, empty database starts at the path. This is
/// reported once, never silently: by the call that found the problem, or, when opening found it,
/// by the first `load`, which throws `LoadableCacheError.corrupt(key:reason:)` whose reason names
/// the path, SQLite's message and where the file went (a persistence, store or outbox reports it
/// through its `onError`). Failures that moving the file would not fix (a full disk, a folder the
/// process may not write) throw the call's `LoadableCacheError` with a ``SQLiteCacheError`` as
/// the underlying error, and change nothing.
///
/// **Limit.** With `maxBytes`, the entries' sizes (the UTF-8 of the key, the data and the
/// metadata's bytes) add up to at most `maxBytes`: a save or touch that passes it removes the
/// least recently used unpinned entries (by load, save or touch) in the same transaction. An
/// unpinned entry larger than `maxBytes` on its own is not kept: its save removes the key's old
/// entry and does not throw. A pinned entry (`CachedEntry.isPinned`: an outbox's queue) is never
/// evicted and always kept; it counts toward the total, so when the pinned entries pass the limit
/// on their own, every other entry goes and the total stays above the limit until they are
/// unpinned or removed. The total is kept in the database, so every object and process on the
/// file agrees on it; an object opened with a limit lower than the total (lowered since the last
/// launch) evicts down to it at once. With a limit, each load also marks its entry used (a small
/// write). The file itself is larger than the entries by SQLite's pages and indexes. The space
/// ``removeAll()`` frees goes back to the system; what evictions and other removals free stays in
/// the file for later saves.
///
/// **Threads and objects.** An actor with one connection, its statements prepared once: its work
/// runs off the main actor, one call at a time. A second object (or process) on the same file
/// works through SQLite's locking; a write waits up to 10 seconds for another one to end. When one
/// object moves a damaged file aside, the others of the process open the fresh one at their next
/// call. The objects of one path in a process are one cache, as the file cache's objects of one
/// folder are: the persistences, stores and outboxes on any of them share one order of reads and
/// writes, and two stores (or outboxes) that would overwrite each other's entries through two
/// objects stop the program with the same message as through one.
///
/// **Groups of saves.** The saves and restores that the package's persistence queue has waiting
/// in a row for this object (`persist(in:key:)`, a store's entries; never an outbox's) run as a
/// group: one `BEGIN IMMEDIATE` transaction for up to 64 of them, each save in a savepoint of its
/// own, so that it fails alone, one commit. The queue reports each result after the commit; when
/// the commit fails, the group is rolled back and its saves and restores run again one by one.
/// Any other call while a group's transaction is open commits it first. Calls made directly on
/// the cache are never grouped.
///
/// **Two processes, one entry.** ``update(key:_:)`` loads an entry and writes its change in one
/// transaction, which no other process's write comes into. ``tryLock(key:)`` locks a file in a
/// folder beside the database, `<name>-locks/` (for `cache.sqlite`, `cache.sqlite-locks/`), whose
/// files are named as `FileLoadableCache.fileName(forKey:)` names entry files: `flock`, which the
/// system frees when the process exits or dies (SQLite has no lock that does). The folder stays
/// when a damaged file is moved aside, and lock files stay when released.
///
/// **Removed scopes.** The `removeAll()` of a `scoped(_:)` view of more than
/// 1,000 entries (``removeEntries(keyPrefix:)``) marks the scope's key range removed, in one short
/// transaction, and returns: every load, touch and update, through any object or process on the
/// file, finds its entries absent from then on, and an entry saved under the scope afterwards is
/// kept. The object that marked it then deletes the rows in batches of 1,000, each one
/// transaction, from a task of its own whose batches run on the actor between the other calls
/// (no timer). Until a batch deletes them, the removed rows' bytes count toward ``maxBytes``: a
/// save that needs room deletes removed rows first, and evicts no entry while they last. A kill
/// between the mark and the last batch leaves the mark in the file: the next object opened on it,
/// in this process or another, still finds the scope removed and finishes the batches.
///
/// **Files of earlier releases** (format 1, without pins; format 2, without removed scopes) are
/// migrated in place when opened, in one transaction: their entries stay, in their order.
public actor SQLiteLoadableCache: LoadableCache {
    /// The database file's URL, as given.
    public nonisolated let path: URL
    /// The most bytes the entries may take, or `nil` for no limit.
    public nonisolated let maxBytes: Int?
    /// The database file's path.
    private nonisolated let filePath: String
    /// The open database; `nil` after a failure to open a fresh one, tried again by the next call.
    private var database: SQLiteCacheDatabase?
    /// A problem opening found and fixed (the file moved aside), for the first load to report.
    private var unreported: SQLiteCacheError?
    /// What the objects of this path share in this process: the count of files moved aside, and
    /// the identity of the cache queue and of the claims.
    private nonisolated let file: SQLiteCacheFile
    /// The count of files moved aside when the open database was opened: a larger count means
    /// another object moved the file aside since, and the fresh database is at the path.
    private var openedAfter: Int
    /// The folder of the lock files: `<path>-locks`.
    private nonisolated let locksPath: String
    /// Whether a task of this object deletes the rows of removed ranges, batch after batch.
    private var isRemoving = false
    /// The group of saves whose transaction is open on ``database`` (see `CacheWriteGroup`), and
    /// that database: every call that is not a save of the group commits it first.
    private var openGroup: (group: CacheWriteGroup, database: SQLiteCacheDatabase)?

    /// Opens the database at `path`, creating it and its folder if needed.
    ///
    /// A file there that cannot be used is moved aside and a fresh database started; the first
    /// ``load(key:)`` reports it (see the type's documentation).
    ///
    /// - Parameters:
    ///   - path: A file URL of the app's own (for example in its caches directory).
    ///   - maxBytes: The most bytes the entries may take (`nil`, the default, for no limit); must
    ///     be greater than 0.
    /// - Throws: ``SQLiteCacheError`` when no database can be opened at `path`: its folder cannot
    ///   be made, or the file cannot be used and cannot be moved aside, or a fresh one cannot be
    ///   created.
    public init(path: URL, maxBytes: Int? = nil) throws {
        requireValid(path.isFileURL, "SQLiteLoadableCache: path must be a file URL, got \(path)")
        if let maxBytes {
            requireValid(maxBytes > 0, "SQLiteLoadableCache: maxBytes must be > 0 or nil, got \(maxBytes)")
        }
        self.path = path
        self.maxBytes = maxBytes
        filePath = path.standardizedFileURL.path
        locksPath = filePath + "-locks"
        let folder = path.standardizedFileURL.deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw SQLiteCacheError(
                path: filePath, code: 0,
                message: "its folder \(folder.path) could not be made: \(Self.reason(of: error))")
        }
        file = SQLiteCacheFile.file(atPath: filePath)
        openedAfter = file.recoveries.withLock { $0 }
        let (opened, problem) = try Self.open(filePath)
        if let maxBytes { try? opened.enforce(limit: maxBytes) }
        database = opened
        unreported = problem
        // A removal that a process (this one or another) left unfinished, killed between its mark
        // and its last batch: this object finishes it.
        if (try? opened.hasRemovedRanges()) == true {
            isRemoving = true
            Self.runRemovals(of: self)
        }
    }

    // MARK: - LoadableCache

    /// The entry saved under `key`, or `nil`; with ``maxBytes``, marks it the most recently used.
    ///
    /// - Throws: `LoadableCacheError.corrupt(key:reason:)` when the entry's row is not an entry,
    ///   or when the database could not be used (moved aside; see the type's documentation);
    ///   `LoadableCacheError.loadFailed(key:underlying:)` with a ``SQLiteCacheError`` otherwise.
    public func load(key: String) throws -> CachedEntry? {
        if let unreported {
            self.unreported = nil
            throw LoadableCacheError.corrupt(key: key, reason: unreported.description)
        }
        let canonical = canonicalCacheKey(key)
        let loaded: SQLiteCacheDatabase.Loaded
        let touching = maxBytes != nil
        do {
            if let group = CacheWriteGroup.current, group.includes(self) {
                // A restore the queue runs between the group's saves: read inside its transaction.
                loaded = try inGroup(group) { try $0.load(key: canonical, touching: touching) }
            } else {
                loaded = try perform { try $0.load(key: canonical, touching: touching) }
            }
        } catch let error where error.movedTo != nil {
            throw LoadableCacheError.corrupt(key: key, reason: error.description)
        } catch {
            throw LoadableCacheError.loadFailed(key: key, underlying: error)
        }
        switch loaded {
        case .entry(let entry): return entry
        case .none: return nil
        case .corrupt(let reason): throw LoadableCacheError.corrupt(key: key, reason: reason)
        }
    }

    /// Saves `entry` under `key` with its pin, in one transaction; with ``maxBytes``, removes the
    /// least recently used unpinned entries past it in the same transaction. An unpinned entry
    /// larger than ``maxBytes`` is not kept, and the key's old entry is removed; a pinned one is
    /// always kept.
    ///
    /// - Throws: `LoadableCacheError.saveFailed(key:underlying:)`: when `entry.savedAt` is not a
    ///   finite date (nothing is written), or with a ``SQLiteCacheError``; the old entry, if any,
    ///   is left whole (unless the database could not be used at all and was moved aside).
    public func save(_ entry: CachedEntry, key: String) throws {
        try CachedEntry.checkSavedAt(entry.savedAt, key: key)
        let canonical = canonicalCacheKey(key)
        let limit = maxBytes
        do {
            if let group = CacheWriteGroup.current, group.includes(self) {
                try inGroup(group) { try $0.saveInGroup(entry, key: canonical, limit: limit) }
            } else {
                try perform { try $0.save(entry, key: canonical, limit: limit) }
            }
        } catch {
            throw LoadableCacheError.saveFailed(key: key, underlying: error)
        }
    }

    // MARK: - Groups of saves

    /// Runs `body` (a save or a load) in the transaction of `group`, which its first save opens
    /// (a group's calls come from the cache queue, one after the other, in one task). The group
    /// learns when the transaction opens and when it is lost: rolled back by SQLite after a
    /// failure, or gone with a database the object had to open again.
    private func inGroup<Result>(
        _ group: CacheWriteGroup, _ body: (SQLiteCacheDatabase) throws -> Result
    ) throws(SQLiteCacheError) -> Result {
        if let open = openGroup, open.group !== group { closeOpenGroup() }
        defer {
            if let database, database.isInGroup {
                if let open = openGroup, open.database !== database {
                    open.group.closed(failed: true)
                    openGroup = nil
                }
                if openGroup == nil {
                    openGroup = (group, database)
                    group.opened { await self.endGroup(group) }
                }
            } else if let open = openGroup {
                openGroup = nil
                open.group.closed(failed: true)
            }
        }
        return try perform(inGroup: true, body)
    }

    /// Commits the transaction of `group` if it is still open (the queue ends the group).
    private func endGroup(_ group: CacheWriteGroup) {
        guard let open = openGroup, open.group === group else { return }
        closeOpenGroup()
    }

    /// Commits the open group's transaction and tells the group how it went.
    private func closeOpenGroup() {
        guard let open = openGroup else { return }
        openGroup = nil
        guard open.database === database, open.database.isInGroup else {
            open.group.closed(failed: true)
            return
        }
        do {
            try open.database.commitGroup()
            open.group.closed(failed: false)
        } catch {
            open.group.closed(failed: true)
        }
    }

    /// Sets the save date and the metadata of the entry under `key` in place, in one transaction,
    /// without reading or binding its data: its version and pin stay, its size and the total
    /// change by the metadata's, and it becomes the most recently used (as a load with
    /// ``maxBytes`` makes it). A save through another object meanwhile is never undone.
    ///
    /// SQLite writes only the pages of the row that change while the row keeps its length (a `304`
    /// with the same validators); new validators of another length make it write the whole row
    /// again, data included.
    ///
    /// With ``maxBytes``, the touch keeps the rules of a save of the changed entry: when the
    /// metadata grows the total past the limit, the least recently used unpinned entries are
    /// removed, the touched one last (it is the most recently used), so it goes only when it does
    /// not fit beside the pinned entries; unpinned and larger than the limit on its own, it is
    /// removed, as its save would not keep it. The call still returns `true` then, as the
    /// protocol's default (a load and a save) would.
    ///
    /// Returns `false` when there is no entry under `key` (nothing was written). Throws
    /// `LoadableCacheError.saveFailed(key:underlying:)` when `savedAt` (the new save date) is not
    /// a finite date (nothing is written), or with a ``SQLiteCacheError`` (the entry is left as it
    /// was). Not isolated to the actor (it hops onto it), so that a call on a
    /// `SQLiteLoadableCache` resolves to it rather than to the protocol's default.
    public nonisolated func touch(key: String, savedAt: Date, metadata: [String: String]) async throws -> Bool {
        try await touchHere(key: key, savedAt: savedAt, metadata: metadata)
    }

    private func touchHere(key: String, savedAt: Date, metadata: [String: String]) throws -> Bool {
        try CachedEntry.checkSavedAt(savedAt, key: key)
        let canonical = canonicalCacheKey(key)
        do {
            let limit = maxBytes
            return try perform { try $0.touch(key: canonical, savedAt: savedAt, metadata: metadata, limit: limit) }
        } catch {
            throw LoadableCacheError.saveFailed(key: key, underlying: error)
        }
    }

    /// Removes the entry under `key`, pinned or not; a key without one is not an error.
    ///
    /// - Throws: `LoadableCacheError.removeFailed(key:underlying:)` with a ``SQLiteCacheError``.
    public func remove(key: String) throws {
        let canonical = canonicalCacheKey(key)
        do {
            try perform { try $0.remove(key: canonical) }
        } catch {
            throw LoadableCacheError.removeFailed(key: key, underlying: error)
        }
    }

    /// Removes every entry, pinned ones too, and gives the freed space back to the system.
    ///
    /// - Throws: `LoadableCacheError.removeAllFailed(underlying:)` with a ``SQLiteCacheError``.
    public func removeAll() throws {
        do {
            try perform { try $0.removeAll() }
        } catch {
            throw LoadableCacheError.removeAllFailed(underlying: error)
        }
    }

    /// Removes every entry whose key starts with `prefix` (as Swift compares strings), pinned ones
    /// too, in one transaction over the keys' range (`key >= prefix AND key < prefix's
    /// successor`, on the NFC forms' UTF-8), which keeps the rare keys whose next character joins
    /// the prefix's last one (a combining accent, or any but a control character after a prefix
    /// that ends with a "Prepend" character such as U+0600), as Swift's `hasPrefix` does; an
    /// empty prefix removes every entry.
    ///
    /// A range of up to 1,000 rows is deleted in that transaction. A larger one is marked removed
    /// instead (a row in the database), and its rows are deleted afterwards by this object, in
    /// batches of 1,000 rows, one transaction each, between the calls made of it (see "Removed
    /// scopes" above): from the moment this returns, the entries are absent from every object and
    /// process on the file, and an entry saved under the prefix afterwards is kept.
    ///
    /// Not isolated to the actor (it hops onto it), so that a call on a `SQLiteLoadableCache`
    /// resolves to it rather than to the protocol's default.
    ///
    /// - Parameter prefix: The start of the keys to remove.
    /// - Throws: `LoadableCacheError.removeAllFailed(underlying:)` with a ``SQLiteCacheError``.
    public nonisolated func removeEntries(keyPrefix prefix: String) async throws {
        try await removeEntriesHere(keyPrefix: canonicalCacheKey(prefix))
    }

    private func removeEntriesHere(keyPrefix prefix: String) throws {
        let directRows = file.removals.withLock { $0.directRows }
        do {
            if try perform({ try $0.removeEntries(keyPrefix: prefix, directRows: directRows) }) { startRemovals() }
        } catch {
            throw LoadableCacheError.removeAllFailed(underlying: error)
        }
    }

    // MARK: - Removed ranges

    /// Starts deleting the rows of removed ranges, batch after batch, unless this object does
    /// already.
    private func startRemovals() {
        guard !isRemoving else { return }
        isRemoving = true
        Self.runRemovals(of: self)
    }

    /// Runs batches of the removed ranges' rows on `cache` until none is left, each batch one call
    /// on the actor (the calls asked for meanwhile run between two batches) and one transaction.
    /// The task holds the object weakly: an object released stops, and the next one opened on the
    /// file goes on.
    private nonisolated static func runRemovals(of cache: SQLiteLoadableCache) {
        Task(priority: .utility) { [weak cache] in
            while await cache?.removeNextBatch() == true {}
        }
    }

    /// Deletes one batch of the removed ranges' rows; returns whether more are left (and this
    /// object goes on). A failure stops the batches until the next removal or the next object
    /// opened on the file (the rows stay hidden meanwhile); a file found unusable is moved aside
    /// and reported by the next load, as one found at opening.
    private func removeNextBatch() -> Bool {
        let removals = file.removals.withLock { $0 }
        var more = false
        defer { isRemoving = more }
        guard !removals.isHeld else { return false }
        do {
            more = try perform { try $0.removeNextBatch(rows: removals.batchRows) }
        } catch {
            if error.movedTo != nil { unreported = error }
        }
        return more
    }

    /// Removes the entries saved (`CachedEntry.savedAt`) before `date`, except pinned ones.
    ///
    /// - Parameter date: The oldest save date kept.
    /// - Throws: `LoadableCacheError.removeAllFailed(underlying:)` with a ``SQLiteCacheError``.
    public func removeEntries(savedBefore date: Date) throws {
        do {
            try perform { try $0.removeEntries(savedBefore: date) }
        } catch {
            throw LoadableCacheError.removeAllFailed(underlying: error)
        }
    }

    // MARK: - Locks and updates

    /// Changes the entry under `key` in one `BEGIN IMMEDIATE` transaction, which no write of
    /// another object or process on the file comes into: loads it, passes it to `body` (which runs
    /// inside the transaction; `nil`: there is none), and saves what `body` leaves, removes the
    /// entry when it leaves `nil`, or writes nothing when it leaves the entry as it was. Returns
    /// what `body` returns.
    ///
    /// Pins, the limit's evictions (in the same transaction) and recency apply, as in
    /// ``load(key:)`` and ``save(_:key:)``. While another connection writes, the transaction waits
    /// for it as a save does (up to 10 seconds), blocking the actor's thread.
    ///
    /// Throws what `body` throws (nothing is written) and what ``load(key:)`` throws (`body` does
    /// not run); `LoadableCacheError.saveFailed(key:underlying:)` when `body` leaves a `savedAt`
    /// that is not a finite date (nothing is written); when the change cannot be written (the
    /// entry is left as it was), `saveFailed(key:underlying:)`, or `removeFailed(key:underlying:)`
    /// for a removal, with a ``SQLiteCacheError``.
    public func update<Result: Sendable>(
        key: String, _ body: @Sendable (inout CachedEntry?) throws -> Result
    ) async throws -> Result {
        if let unreported {
            self.unreported = nil
            throw LoadableCacheError.corrupt(key: key, reason: unreported.description)
        }
        let canonical = canonicalCacheKey(key)
        let touching = maxBytes != nil
        let limit = maxBytes
        var outcome: Swift.Result<Result, any Error>?
        var step = UpdateStep.loading
        do {
            try perform { database in
                step = .loading
                try database.update(key: canonical, touching: touching, limit: limit) { loaded in
                    let (change, result) = Self.change(loaded, key: key, body)
                    outcome = result
                    if case .save = change { step = .saving } else if case .remove = change { step = .removing }
                    return change
                }
            }
        } catch let error where error.movedTo != nil {
            throw LoadableCacheError.corrupt(key: key, reason: error.description)
        } catch {
            switch step {
            case .loading: throw LoadableCacheError.loadFailed(key: key, underlying: error)
            case .saving: throw LoadableCacheError.saveFailed(key: key, underlying: error)
            case .removing: throw LoadableCacheError.removeFailed(key: key, underlying: error)
            }
        }
        // The transaction ran its change, which set the outcome.
        return try outcome!.get()
    }

    /// Where an update was when it failed: what its error names.
    private enum UpdateStep {
        case loading, saving, removing
    }

    /// What `body` makes of the entry `loaded`: the change to write, and what `body` returned or
    /// threw (or why the entry cannot be changed: a row that is not an entry, a date that is not
    /// finite), in which case nothing is written.
    private static func change<Result>(
        _ loaded: SQLiteCacheDatabase.Loaded, key: String, _ body: (inout CachedEntry?) throws -> Result
    ) -> (SQLiteCacheDatabase.Change, Swift.Result<Result, any Error>) {
        var entry: CachedEntry?
        switch loaded {
        case .entry(let found): entry = found
        case .none: entry = nil
        case .corrupt(let reason): return (.none, .failure(LoadableCacheError.corrupt(key: key, reason: reason)))
        }
        let before = entry
        let result: Result
        do {
            result = try body(&entry)
        } catch {
            return (.none, .failure(error))
        }
        guard entry != before else { return (.none, .success(result)) }
        guard let entry else { return (.remove, .success(result)) }
        do {
            try CachedEntry.checkSavedAt(entry.savedAt, key: key)
        } catch {
            return (.none, .failure(error))
        }
        return (.save(entry), .success(result))
    }

    // MARK: - Shared entries

    /// The path's entries: every object on the path reads and writes them (one queue, one set of
    /// claims).
    public nonisolated var sharedEntries: LoadableCacheEntries {
        LoadableCacheEntries(
            id: ObjectIdentifier(file), cacheName: "SQLiteLoadableCache", groupWriter: ObjectIdentifier(self))
    }

    // MARK: - Locks

    /// `true`: the locks and updates of the objects of one file hold across processes (see "Two
    /// processes, one entry" above).
    public nonisolated var locksAcrossProcesses: Bool { true }

    /// Takes the lock named `key` if no lock object of this process or of another on the file
    /// holds it; never waits. The lock is `flock` on `<path>-locks/<name>`, as the type's
    /// documentation tells; keys that Swift finds equal are one lock. Returns the held lock, or
    /// `nil` when someone holds it; throws `LoadableCacheError.loadFailed(key:underlying:)`,
    /// naming the lock's path and the system's reason, when its file cannot be made or opened.
    public nonisolated func tryLock(key: String) async throws -> LoadableCacheLock? {
        try FileLock.tryLock(key: key, inFolder: locksPath)
    }

    // MARK: - For tests

    /// The transactions the open database committed: one per call that writes, one per group of
    /// saves (see `CacheWriteGroup`).
    package func commitCount() -> Int {
        database?.commits ?? 0
    }

    /// Makes the next save of `key` in a group fail after its savepoint (the group goes on), and,
    /// with `commit`, the next commit of a group fail (the group is rolled back); each once.
    package func failInGroups(saveOf key: String?, commit: Bool) {
        database?.failingGroupSave = key.map(canonicalCacheKey)
        database?.failsNextGroupCommit = commit
    }

    /// The bytes ``maxBytes`` counts, and the NFC keys in the order eviction would take them: the
    /// unpinned ones from least to most recently used, then the pinned ones (never evicted), from
    /// least to most recently used.
    package func usage() throws -> (totalBytes: Int, keysLeastRecentFirst: [String]) {
        try perform { try $0.usage() }
    }

    /// What `PRAGMA integrity_check` says (`["ok"]` for a sound file), and a line more when the
    /// kept total is not the sum of the rows' sizes.
    package func integrityCheck() throws -> [String] {
        try perform { try $0.integrityCheck() }
    }

    /// The rows of removed ranges not deleted yet, the bytes they take (which ``maxBytes`` still
    /// counts), and the removed ranges left.
    package func pendingRemovals() throws -> (rows: Int, bytes: Int, ranges: Int) {
        let removed = try perform { try $0.removedBytes() }
        return (removed.rows, Int(removed.bytes), removed.marks)
    }

    /// Deletes every row of the removed ranges now, batch after batch, even while batches are
    /// held; returns the batches run.
    @discardableResult
    package func finishRemovals() throws -> Int {
        let rows = file.removals.withLock { $0.batchRows }
        var batches = 0
        var more = try perform { try $0.hasRemovedRanges() }
        while more {
            more = try perform { try $0.removeNextBatch(rows: rows) }
            batches += 1
        }
        return batches
    }

    /// Deletes one batch of the removed ranges' rows now, even while batches are held; returns
    /// whether more are left.
    package func removeNextBatchNow() throws -> Bool {
        let rows = file.removals.withLock { $0.batchRows }
        return try perform { try $0.removeNextBatch(rows: rows) }
    }

    /// Sets how the objects of this file in this process delete removed ranges: the rows of a
    /// batch, the most rows a scope's removal deletes at once (0: it always marks), and whether
    /// batches wait (``finishRemovals()`` and ``removeNextBatchNow()`` still run them). Letting
    /// them go does not start them: the next removal or object opened does, or
    /// ``finishRemovals()``.
    package nonisolated func setRemovals(batchRows: Int? = nil, directRows: Int? = nil, isHeld: Bool? = nil) {
        Self.setRemovals(atPath: path, batchRows: batchRows, directRows: directRows, isHeld: isHeld)
    }

    /// Sets how the objects of the file at `path` in this process delete removed ranges, before
    /// any is made (see ``setRemovals(batchRows:directRows:isHeld:)``).
    package static func setRemovals(
        atPath path: URL, batchRows: Int? = nil, directRows: Int? = nil, isHeld: Bool? = nil
    ) {
        SQLiteCacheFile.file(atPath: path.standardizedFileURL.path).removals.withLock { removals in
            if let batchRows { removals.batchRows = batchRows }
            if let directRows { removals.directRows = directRows }
            if let isHeld { removals.isHeld = isHeld }
        }
    }

    // MARK: - The database

    /// Runs `body` on the database, opening it if the last call left none, or if another object
    /// moved the file aside since (the fresh database is at the path). A file found unusable is
    /// moved aside and a fresh database opened; the error then says where the file went.
    ///
    /// A connection is closed before its own file moves (no reference to it is kept here). One
    /// whose file another object moved is closed after the move: SQLite then skips the checkpoint
    /// and leaves the logs at the path, which are the fresh file's, alone.
    private func perform<Result>(
        inGroup: Bool = false, _ body: (SQLiteCacheDatabase) throws -> Result
    ) throws(SQLiteCacheError) -> Result {
        if !inGroup, openGroup != nil { closeOpenGroup() }
        let failure: SQLiteFailure
        do {
            return try body(try opened())
        } catch let error as SQLiteCacheError {
            throw error
        } catch let error as SQLiteFailure {
            failure = error
        } catch {
            throw Self.error(error, path: filePath)
        }
        if failure.meansFileMoved || database?.hasMoved == true {
            database = nil
            do {
                return try body(try opened())
            } catch let error as SQLiteCacheError {
                throw error
            } catch {
                throw Self.error(error, path: filePath)
            }
        }
        guard failure.meansUnusableFile else { throw Self.error(failure, path: filePath) }
        database = nil
        let movedTo = try Self.moveAside(filePath, because: failure)
        _ = try opened()
        throw SQLiteCacheError(path: filePath, code: failure.code, message: failure.message, movedTo: movedTo)
    }

    /// The open database at the path, opened again when another object of this process moved
    /// the file aside since it was opened. (An object of another process finds the fresh file
    /// when a call of its own meets the damage, or at its next launch.)
    private func opened() throws(SQLiteCacheError) -> SQLiteCacheDatabase {
        let recovered = file.recoveries.withLock { $0 }
        if let database, recovered == openedAfter { return database }
        database = nil
        openedAfter = recovered
        let (opened, problem) = try Self.open(filePath)
        if let maxBytes { try? opened.enforce(limit: maxBytes) }
        database = opened
        if let problem { throw problem }
        return opened
    }

    private static func error(_ error: any Error, path: String) -> SQLiteCacheError {
        guard let failure = error as? SQLiteFailure else {
            return SQLiteCacheError(path: path, code: 0, message: "\(error)")
        }
        return SQLiteCacheError(path: path, code: failure.code, message: failure.message)
    }

    /// Opens the database at `path`; a file there that cannot be used is moved aside and a fresh
    /// one opened, and the problem returned.
    private static func open(_ path: String) throws(SQLiteCacheError) -> (SQLiteCacheDatabase, SQLiteCacheError?) {
        var isDirectory: ObjCBool = false
        let failure: SQLiteFailure
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            failure = SQLiteFailure(code: SQLITE_CANTOPEN, message: "a folder is in the database file's place")
        } else {
            do {
                return (try SQLiteCacheDatabase(path: path), nil)
            } catch let error where isUnusableAtOpen(error, path: path) {
                failure = error
            } catch {
                throw SQLiteCacheError(path: path, code: error.code, message: error.message)
            }
        }
        let movedTo = try moveAside(path, because: failure)
        do {
            return (
                try SQLiteCacheDatabase(path: path),
                SQLiteCacheError(path: path, code: failure.code, message: failure.message, movedTo: movedTo)
            )
        } catch {
            throw SQLiteCacheError(
                path: path, code: error.code,
                message:
                    "\(error.message), in a fresh database after moving the unusable file to \(movedTo) (\(failure.text))"
            )
        }
    }

    /// Whether `failure`, on opening `path`, is the file's own fault: what moving it aside fixes.
    private static func isUnusableAtOpen(_ failure: SQLiteFailure, path: String) -> Bool {
        switch failure.primaryCode {
        case SQLITE_CORRUPT, SQLITE_NOTADB, SQLITE_READONLY: true
        case SQLITE_CANTOPEN, SQLITE_PERM, SQLITE_AUTH: FileManager.default.fileExists(atPath: path)
        default: false
        }
    }

    /// Moves the file at `path` (with its write-ahead log and journal) to the first free name of
    /// `<path>.bad`, `<path>.bad-2`, …, and removes its shared-memory index; returns the new path.
    private static func moveAside(_ path: String, because failure: SQLiteFailure) throws(SQLiteCacheError) -> String {
        var number = 1
        var destination = path + ".bad"
        while FileManager.default.fileExists(atPath: destination)
            || FileManager.default.fileExists(atPath: destination + "-wal")
        {
            number += 1
            destination = path + ".bad-\(number)"
        }
        guard rename(path, destination) == 0 else {
            let reason = String(cString: strerror(errno))
            throw SQLiteCacheError(
                path: path, code: failure.code,
                message: "\(failure.message); it could not be moved aside to \(destination): \(reason)")
        }
        for suffix in ["-wal", "-journal"] where FileManager.default.fileExists(atPath: path + suffix) {
            _ = rename(path + suffix, destination + suffix)
        }
        _ = unlink(path + "-shm")
        SQLiteCacheFile.file(atPath: path).recoveries.withLock { $0 += 1 }
        return destination
    }

    private static func reason(of error: any Error) -> String {
        guard let underlying = (error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError,
            underlying.domain == NSPOSIXErrorDomain,
            let code = POSIXErrorCode(rawValue: Int32(underlying.code))
        else { return error.localizedDescription }
        return String(cString: strerror(code.rawValue))
    }
}
