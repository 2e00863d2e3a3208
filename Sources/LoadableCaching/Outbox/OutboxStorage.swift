internal import Foundation

/// What an outbox's restore found.
struct OutboxRestoreOutcome<Change: Codable & Sendable>: Sendable {
    /// The items to send, in order, with their records.
    var items: [(item: OutboxItem<Change>, record: OutboxRecord)] = []
    /// The changes sent that no loadable showed yet, with their records.
    var sent: [(change: Change, record: OutboxRecord)] = []
    /// The items set aside (now or earlier) whose change does not decode.
    var setAside: [OutboxRecord] = []
    /// One error per item set aside by this restore.
    var newlySetAside: [LoadableCacheError] = []
    /// Whether an item set aside earlier decodes again (it is back, as failed).
    var hasRestoredSetAside = false
    /// Why the entry could not be read or used.
    var error: LoadableCacheError?
}

/// An item whose change did not decode, set aside.
struct OutboxItemSetAside: Error, CustomStringConvertible {
    let id: String
    let underlying: any Error

    var description: String {
        "item \(id) was set aside (it stays in the cache and is not sent): its change does not decode: \(underlying)"
    }
}

/// How a save treats the queue already in the cache.
enum OutboxSaveMode: Sendable {
    /// Replaces it: the outbox knows every item.
    case whole
    /// Adds the items to those stored (whose ids it does not carry): while the restore runs.
    case addingToStored
    /// Adds the items to those stored, and hands the stored ones back: after a read of the queue
    /// failed for a reason other than its bytes, until a read succeeds.
    case adoptingStored
}

/// What a save did.
struct OutboxSaveOutcome<Change: Codable & Sendable>: Sendable {
    /// Why the queue could not be read or written, if it could not.
    var error: LoadableCacheError?
    /// For ``OutboxSaveMode/adoptingStored``, once the stored queue could be read: its items
    /// the save did not carry.
    var adopted: OutboxRestoreOutcome<Change>?
}

/// The outbox's reads and writes of its entry, off the main actor.
enum OutboxStorage {
    /// Saves `records`, as the whole queue or added to the stored one (see ``OutboxSaveMode``).
    ///
    /// A save that must add to the stored queue and cannot read it writes nothing: the stored
    /// items may be good, and replacing them would lose them.
    static func save<Change: Codable & Sendable>(
        _ records: [OutboxRecord], savedAt: Date, in cache: any LoadableCache, key: String, mode: OutboxSaveMode,
        as _: Change.Type
    ) async -> OutboxSaveOutcome<Change> {
        var records = records
        var outcome = OutboxSaveOutcome<Change>()
        if mode != .whole {
            let stored: [OutboxRecord]
            switch await read(from: cache, key: key) {
            case .success(let found):
                stored = found
            case .failure(let error):
                guard case .loadFailed = error else {
                    // Bytes that are not an outbox were reported by the restore: replaced.
                    stored = []
                    break
                }
                return OutboxSaveOutcome(error: error)
            }
            let ids = Set(records.map(\.id))
            let others = stored.filter { !ids.contains($0.id) }
            if mode == .adoptingStored { outcome.adopted = items(from: others, key: key) }
            records = others + records
        }
        // Unsent changes exist nowhere else: pinned, so that no cache limit evicts them and no
        // removal by date removes them.
        let entry = CachedEntry(
            data: OutboxFormat.encode(records), savedAt: savedAt, version: OutboxFormat.version,
            isPinned: !records.isEmpty)
        do {
            try CachedEntry.checkSavedAt(savedAt, key: key)
            try await cache.save(entry, key: key)
        } catch {
            outcome.error = error as? LoadableCacheError ?? .saveFailed(key: key, underlying: error)
        }
        return outcome
    }

    /// Reads the queue kept under `key`.
    static func restore<Change: Codable & Sendable>(
        _: Change.Type, from cache: any LoadableCache, key: String
    ) async -> OutboxRestoreOutcome<Change> {
        switch await read(from: cache, key: key) {
        case .success(let records):
            return items(from: records, key: key)
        case .failure(let error):
            var outcome = OutboxRestoreOutcome<Change>()
            outcome.error = error
            return outcome
        }
    }

    /// The records stored under `key` (none when there is no entry).
    private static func read(
        from cache: any LoadableCache, key: String
    ) async -> Result<
        [OutboxRecord], LoadableCacheError
    > {
        do {
            guard let entry = try await cache.load(key: key) else { return .success([]) }
            guard OutboxFormat.reads(version: entry.version) else {
                return .failure(.versionMismatch(key: key, found: entry.version, expected: OutboxFormat.version))
            }
            do {
                return .success(try OutboxFormat.decode(entry.data))
            } catch {
                return .failure(.corrupt(key: key, reason: error.reason))
            }
        } catch {
            return .failure(error as? LoadableCacheError ?? .loadFailed(key: key, underlying: error))
        }
    }

    /// The last error of an item set aside by an earlier launch that decodes again.
    private static let setAsideDescription = "set aside by an earlier launch: its change did not decode"

    /// Decodes the changes of `records`: the items, and those set aside.
    private static func items<Change: Codable & Sendable>(
        from records: [OutboxRecord], key: String
    ) -> OutboxRestoreOutcome<Change> {
        var outcome = OutboxRestoreOutcome<Change>()
        let decoder = JSONDecoder()
        for var record in records {
            do {
                let change = try decoder.decode(Change.self, from: record.change)
                if record.isSent {
                    outcome.sent.append((change, record))
                    continue
                }
                let remote = try record.remote.map { try decoder.decode(Change.self, from: $0) }
                let lastError =
                    record.lastError.isEmpty
                    ? nil : OutboxRestoredError(typeName: record.errorType, description: record.lastError)
                let state: OutboxItem<Change>.State =
                    record.isConflict ? .conflict : record.isFailed || record.isSetAside ? .failed : .pending
                let item = OutboxItem(
                    id: record.id, change: change, idempotencyKey: record.idempotencyKey, scope: record.scope,
                    enqueuedAt: Date(timeIntervalSinceReferenceDate: record.enqueuedAt), attempts: record.attempts,
                    lastError: record.isSetAside ? OutboxRestoredError(description: setAsideDescription) : lastError,
                    state: state, remote: remote)
                if record.isSetAside {
                    // Decodes again: back, failed, for the app to retry or discard.
                    outcome.hasRestoredSetAside = true
                    record.isSetAside = false
                    record.isFailed = true
                    record.lastError = setAsideDescription
                    record.errorType = ""
                }
                outcome.items.append((item, record))
            } catch {
                // A sent change that no longer decodes only served to show it: forgotten.
                if record.isSent { continue }
                if !record.isSetAside {
                    record.isSetAside = true
                    outcome.newlySetAside.append(
                        .decodingFailed(key: key, underlying: OutboxItemSetAside(id: record.id, underlying: error)))
                }
                outcome.setAside.append(record)
            }
        }
        return outcome
    }
}
