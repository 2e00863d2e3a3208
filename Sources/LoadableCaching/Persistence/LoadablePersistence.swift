public import Foundation
package import Loadable
import LoadableSupport

extension Loadable where Contents: Codable & Sendable {
    /// Keeps the contents in `cache` under `key`: restores them now, and saves them after every
    /// change, so that the next launch (or the next loadable made for `key`) shows them while it
    /// syncs.
    ///
    /// ```swift
    /// let feed = FeedLoadable(api: api)
    /// feed.persist(in: cache, key: "feed", maxRestoreAge: .seconds(7 * 24 * 3600))
    /// feed.syncIfNeeded()   // starts at once; the restored feed shows while it runs
    /// ```
    ///
    /// **Restore.** The entry of `key` is read and decoded off the main actor. An entry of the
    /// same `version`, saved no longer than `maxRestoreAge` ago, sets the contents without
    /// changing the state (idle stays idle, so ``syncIfNeeded()`` still syncs), with one
    /// notification; ``age`` then counts from the entry's `savedAt`, so ``maxAge`` judges the
    /// contents' real age. A restore never holds anything up: a sync asked for meanwhile starts at
    /// once, and a restore that arrives after the loadable's contents were confirmed (a successful
    /// sync, ``PushLoadable/setContents(_:)``) is dropped: contents never go backwards.
    ///
    /// **Save.** After each change of the contents: a successful sync,
    /// ``PushLoadable/setContents(_:)`` and ``PushLoadable/updateContents(_:)``; never after a
    /// failure or a cancel, and never the restored contents themselves. Encoding and writing run
    /// off the main actor. Saves go through the cache one at a time, in order; a save still
    /// waiting for its turn is replaced by a newer one.
    ///
    /// **Errors.** An entry proven unusable (its bytes are not a whole entry, it is of another
    /// version, or it does not decode) is removed, and the loadable starts without it; an entry
    /// that could not be read for another reason (permissions, too many open files) is left for a
    /// later launch. A save that fails leaves the previous entry. Each failure calls `onError`
    /// once, with a ``LoadableCacheError`` that names the key. A persistence error never changes
    /// the loadable's state.
    ///
    /// **Metadata.** The strings a load returned with the contents (a `LoadResult`'s metadata:
    /// an `HTTPLoadable`'s `ETag` and `Last-Modified`) are saved in the entry's
    /// ``CachedEntry/metadata`` and come back with the restored contents.
    ///
    /// **Inspector.** While a `LoadableInspector` is attached, the end of the restore is recorded
    /// (`cacheRestored`, `found` when it read contents it could use, set or dropped), and so is
    /// each write that ended without error: `cacheSaved`, `cacheTouched`, or `cacheEvicted` then
    /// `cacheSaved` for a touch that found the entry gone. Each is recorded on the main actor
    /// when its work is done, about the loadable (nothing when it is gone), whose default label
    /// is `Type[key]`.
    ///
    /// **Lifetime.** The loadable owns its persistence: it runs as long as the loadable lives
    /// (so calling this inside a store's `make` works) or until ``LoadablePersistence/stop()``.
    /// Calling `persist` again replaces the previous persistence (which stops).
    ///
    /// - Parameters:
    ///   - cache: Where the contents are kept.
    ///   - key: The contents' key in `cache`.
    ///   - version: The version of the contents' encoding; raise it when `Contents` changes so
    ///     that older entries are not decoded as the new type.
    ///   - maxRestoreAge: Entries saved longer ago than this are not restored; `nil` (the default)
    ///     restores any age, and any length up to `.seconds(Int64.max)` is valid. Negative stops
    ///     the program. An entry saved longer ago than `Duration` counts in nanoseconds (292
    ///     years; `Date.distantPast`) is restored with the largest `age`, never a negative one.
    ///   - encoder: Encodes the contents.
    ///   - decoder: Decodes the contents.
    ///   - now: The wall-clock time, for `savedAt` and the age of a restored entry; by default the
    ///     system's (the one place the package reads wall-clock time for a loadable; a file
    ///     cache's eviction order reads it too). Tests pass a fixed date.
    ///   - onError: Told of each failure; see ``LoadablePersistence/onError``.
    /// - Returns: The persistence, to stop it or to wait for its pending work.
    @discardableResult
    public func persist(
        in cache: any LoadableCache,
        key: String,
        version: Int = 1,
        maxRestoreAge: Duration? = nil,
        encoder: JSONEncoder = JSONEncoder(),
        decoder: JSONDecoder = JSONDecoder(),
        now: @escaping @Sendable () -> Date = { Date.now },
        onError: (@MainActor (any Error) -> Void)? = nil
    ) -> LoadablePersistence {
        requireValidMaxRestoreAge(maxRestoreAge, in: "\(type(of: self)).persist(in:key:)")
        core.subscriber(LoadablePersistence.self)?.stop()
        let persistence = LoadablePersistence(cache: cache, key: key, core: core, onError: onError)
        let settings = PersistenceSettings(
            cache: cache, key: key, version: version, maxRestoreAge: maxRestoreAge, encoder: encoder,
            decoder: decoder, now: now)
        persistence.saveContents = { [weak self, weak persistence] confirmedOnly in
            guard let self, let persistence,
                let contents = self.baseContents
            else { return }
            let savedAt = now()
            let metadata = self.baseMetadata
            // Whether an inspector is to hear how the write ended: decided now, on the main actor,
            // so that a write nobody inspects hands nothing more over than before (only its
            // error), and takes no weak reference to the loadable (its first one allocates).
            let recordEnd: (@MainActor @Sendable (CacheWriteEnd) -> Void)?
            if LoadableInspection.inspector != nil {
                recordEnd = { [weak self] end in
                    guard let self, let inspector = LoadableInspection.inspector else { return }
                    end.record(about: self, in: inspector)
                }
            } else {
                recordEnd = nil
            }
            // Holds the persistence weakly: a job waiting in the queue does not keep it alive.
            let report: @Sendable (LoadableCacheError?, CacheWriteEnd) -> (@MainActor () -> Void)? = {
                [weak persistence] error, end in
                if let error {
                    return { [weak persistence] in persistence?.report(error) }
                }
                guard let recordEnd else { return nil }
                return { recordEnd(end) }
            }
            let save: CacheQueue.Work = {
                report(await settings.save(contents, savedAt: savedAt, metadata: metadata), .saved)
            }
            // Repeatable: the work saves the contents it captured.
            guard confirmedOnly else {
                return CacheQueue.enqueueSave(in: cache, key: key, repeatable: true, work: save)
            }
            // Confirmed as they are (a 304): a new date and validators, not the contents again.
            CacheQueue.enqueueTouch(in: cache, key: key, save: save) {
                let (error, end) = await settings.touch(contents, savedAt: savedAt, metadata: metadata)
                return report(error, end)
            }
        }
        core.subscribe(persistence)
        CacheQueue.enqueueRead(in: cache, key: key) { [weak self, weak persistence] in
            let outcome: RestoreOutcome<Contents> = await settings.restore()
            return { [weak self, weak persistence] in
                guard let persistence else { return }
                persistence.restore.finish()
                if let inspector = LoadableInspection.inspector, let self {
                    inspector.record(self) { label, time in
                        if case .restored = outcome { return .cacheRestored(label: label, time: time, found: true) }
                        return .cacheRestored(label: label, time: time, found: false)
                    }
                }
                switch outcome {
                case .nothing:
                    break
                case .failed(let error):
                    persistence.report(error)
                case .restored(let contents, let age, let metadata):
                    // Dropped when stopped, or when the contents were confirmed meanwhile (or
                    // before): a restore never takes contents backwards.
                    guard let self, !persistence.isStopped, core.confirmedAt == nil else { return }
                    restoreContents(contents, age: age, metadata: metadata)
                    settings.cacheHoldsBase.withLock { $0 = true }
                }
            }
        }
        return persistence
    }
}

/// Stops the program with a message naming `maxRestoreAge` and `caller` when it is negative.
func requireValidMaxRestoreAge(_ maxRestoreAge: Duration?, in caller: @autoclosure () -> String) {
    guard let maxRestoreAge else { return }
    requireValid(
        maxRestoreAge >= .zero,
        "\(caller()): maxRestoreAge must be .zero or more, or nil (any age), got \(maxRestoreAge)")
}

/// A loadable's persistence: what ``Loadable/persist(in:key:version:maxRestoreAge:encoder:decoder:now:onError:)``
/// returns.
///
/// The loadable owns it: keeping this handle is needed only to stop it, to wait for its work, or
/// to set ``onError`` later.
@MainActor
public final class LoadablePersistence {
    /// The cache the contents are kept in.
    public let cache: any LoadableCache
    /// The contents' key in ``cache``.
    public let key: String
    /// Told of each failure to restore or save (once per failure), on the main actor, with a
    /// ``LoadableCacheError`` that names ``key``. `nil`: failures are not reported (the loadable
    /// carries on without the cache either way).
    public var onError: (@MainActor (any Error) -> Void)?
    /// Whether ``stop()`` was called (or the loadable was persisted again, which stops this one).
    public private(set) var isStopped = false
    /// Whether the restore is still to finish (read and decode the entry, then set it or drop it).
    public var isRestoring: Bool { restore.isRestoring }

    /// Queues a save of the loadable's contents now, or, with `true` (the contents were confirmed
    /// as they are), a touch of their entry; set by `persist`.
    var saveContents: (@MainActor (_ confirmedOnly: Bool) -> Void)?
    private weak var core: LoadableCore?
    /// The restore, and the callers of ``restored()`` waiting for it.
    let restore = RestoreWaiter()

    init(cache: any LoadableCache, key: String, core: LoadableCore, onError: (@MainActor (any Error) -> Void)?) {
        self.cache = cache
        self.key = key
        self.core = core
        self.onError = onError
    }

    /// Stops persisting: later changes are not saved, and a restore not finished yet is dropped.
    /// Saves asked for before still run. Calling it again does nothing.
    public func stop() {
        guard !isStopped else { return }
        isStopped = true
        saveContents = nil
        core?.unsubscribe(self)
    }

    /// Removes the loadable's entry from the cache (a logout), after the work asked of the cache
    /// before; the loadable keeps its contents. Until ``stop()``, the next change of the contents
    /// is saved again, so stop first to keep the entry gone. A failure to remove it goes to
    /// ``onError``.
    public func removeAll() {
        let cache = cache
        let key = key
        CacheQueue.enqueue(in: cache, key: key) { [weak self] in
            do {
                try await cache.remove(key: key)
                return nil
            } catch {
                let failure = LoadableCacheError(error, in: .remove, key: key)
                return { [weak self] in self?.report(failure) }
            }
        }
    }

    /// Waits until the restore and every save asked of the cache so far are done (through any
    /// persistence that shares the cache object). A save that failed is done too (``onError`` was
    /// told of it).
    public func saved() async {
        await CacheQueue.flush(cache)
    }

    /// Waits until the restore and every save asked of the cache so far are done.
    @available(*, deprecated, renamed: "saved()")
    public func flush() async {
        await saved()
    }

    /// Waits until the restore has finished: its contents are on the loadable, or it found
    /// nothing (no entry, one too old, one that failed), or it was dropped (the contents were
    /// confirmed first, or the persistence stopped). Returns at once once it has.
    ///
    /// Unlike ``saved()``, it does not wait for saves or for other keys' work, so a screen can
    /// await it before its first frame and show the restored contents instead of a spinner:
    ///
    /// ```swift
    /// let persistence = feed.persist(in: cache, key: "feed")
    /// await persistence.restored()
    /// feed.syncIfNeeded()
    /// ```
    public func restored() async {
        await restore.restored()
    }

    func report(_ error: any Error) {
        onError?(error)
    }
}

extension LoadablePersistence: LoadableInspectorKeyed {
    /// The cache key: a persisted loadable's default inspector label is `Type[key]` (unless it is
    /// an entry of a store, whose key comes first).
    package var inspectorKey: String { key }
}

extension LoadablePersistence: LoadableCoreSubscriber {
    /// A persistence saves the base contents after each change of them, and touches their entry
    /// after a confirmation that changed nothing.
    package var coreEvents: LoadableCoreEvent.Kinds { [.baseContentsChanged, .contentsConfirmed] }

    /// Queues a save of the base contents, or a touch of their entry (the loadable owns its
    /// persistence through this subscription).
    package func loadableCoreDidEmit(_ event: LoadableCoreEvent) {
        saveContents?(event == .contentsConfirmed)
    }
}

/// How a save or a touch of a persisted loadable's entry ended, when it wrote: the events an
/// attached inspector records for it.
enum CacheWriteEnd: Sendable {
    /// The contents were saved whole (a change, or a touch that could not touch).
    case saved
    /// The entry got a new date and metadata, its contents unchanged.
    case touched
    /// A touch found the entry gone from the cache (evicted, removed), and saved the contents
    /// whole.
    case evictedThenSaved

    /// Records the events of this end about `loadable`: `cacheSaved`, `cacheTouched`, or
    /// `cacheEvicted` then `cacheSaved`.
    @MainActor
    func record(about loadable: any PureLoadable, in inspector: LoadableInspector) {
        switch self {
        case .saved:
            inspector.record(loadable) { .cacheSaved(label: $0, time: $1) }
        case .touched:
            inspector.record(loadable) { .cacheTouched(label: $0, time: $1) }
        case .evictedThenSaved:
            inspector.record(loadable) { .cacheEvicted(label: $0, time: $1) }
            inspector.record(loadable) { .cacheSaved(label: $0, time: $1) }
        }
    }
}

/// What a restore found.
enum RestoreOutcome<Contents: Sendable>: Sendable {
    /// No entry, or one too old to restore.
    case nothing
    /// An entry that could not be used (it was removed).
    case failed(LoadableCacheError)
    /// Contents saved `age` ago, and the strings kept with them.
    case restored(Contents, age: Duration, metadata: [String: String])
}

/// A persistence's settings, and the work it does with them off the main actor.
struct PersistenceSettings: Sendable {
    let cache: any LoadableCache
    let key: String
    let version: Int
    let maxRestoreAge: Duration?
    let encoder: JSONEncoder
    let decoder: JSONDecoder
    let now: @Sendable () -> Date
    /// Whether the cache's entry holds the loadable's base contents (restored from it, or saved
    /// since): only then may a confirmation touch the entry instead of saving the contents. Set
    /// by the queue's jobs (one at a time) and by the restore's step on the main actor.
    let cacheHoldsBase = Locked(false)

    /// Encodes `contents` and saves them; returns the error, if any.
    nonisolated func save<Contents: Encodable & Sendable>(
        _ contents: Contents, savedAt: Date, metadata: [String: String]
    ) async
        -> LoadableCacheError?
    {
        let error = await write(contents, savedAt: savedAt, metadata: metadata)
        cacheHoldsBase.withLock { $0 = error == nil }
        return error
    }

    /// Encodes `contents` and saves them; returns the error, if any.
    private nonisolated func write<Contents: Encodable & Sendable>(
        _ contents: Contents, savedAt: Date, metadata: [String: String]
    ) async -> LoadableCacheError? {
        do {
            try CachedEntry.checkSavedAt(savedAt, key: key)
        } catch {
            return error
        }
        let data: Data
        do {
            data = try encoder.encode(contents)
        } catch {
            return .encodingFailed(key: key, underlying: error)
        }
        do {
            try await cache.save(
                CachedEntry(data: data, savedAt: savedAt, version: version, metadata: metadata), key: key)
            return nil
        } catch {
            return LoadableCacheError(error, in: .save, key: key)
        }
    }

    /// Sets the save date and metadata of the entry, or saves `contents` whole when the entry
    /// may hold other contents (none restored or saved yet, a save that failed) or is gone
    /// (evicted, removed); returns the error, if any, and what was done.
    nonisolated func touch<Contents: Encodable & Sendable>(
        _ contents: Contents, savedAt: Date, metadata: [String: String]
    ) async -> (LoadableCacheError?, CacheWriteEnd) {
        var end = CacheWriteEnd.saved
        if cacheHoldsBase.withLock({ $0 }) {
            do {
                if try await cache.touch(key: key, savedAt: savedAt, metadata: metadata) { return (nil, .touched) }
                end = .evictedThenSaved
            } catch {
                cacheHoldsBase.withLock { $0 = false }
                return (LoadableCacheError(error, in: .save, key: key), .saved)
            }
        }
        return (await save(contents, savedAt: savedAt, metadata: metadata), end)
    }

    /// Loads and decodes the entry; removes it when it cannot be used.
    nonisolated func restore<Contents: Decodable & Sendable>() async -> RestoreOutcome<Contents> {
        let failure: LoadableCacheError
        do {
            guard let entry = try await cache.load(key: key) else { return .nothing }
            guard entry.version == version else {
                throw LoadableCacheError.versionMismatch(key: key, found: entry.version, expected: version)
            }
            let seconds = Swift.max(0, now().timeIntervalSince(entry.savedAt))
            let age = Duration.seconds(seconds.isFinite ? Swift.min(seconds, 1e12) : 1e12)
            if let maxRestoreAge, age > maxRestoreAge { return .nothing }
            do {
                let contents = try decoder.decode(Contents.self, from: entry.data)
                return .restored(contents, age: age, metadata: entry.metadata)
            } catch {
                throw LoadableCacheError.decodingFailed(key: key, underlying: error)
            }
        } catch {
            failure = LoadableCacheError(error, in: .load, key: key)
        }
        // An entry proven useless (its bytes, its version, its decoding) is removed, so that it is
        // not read again; a failure to remove it is not reported apart (the next save replaces
        // it). A read that failed for another reason (permissions, too many open files) leaves
        // the entry alone: it may be good, and the next restore may read it.
        switch failure {
        case .corrupt, .versionMismatch, .decodingFailed: try? await cache.remove(key: key)
        default: break
        }
        return .failed(failure)
    }
}
