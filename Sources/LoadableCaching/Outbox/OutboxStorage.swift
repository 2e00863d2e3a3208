internal import Foundation

/// What an outbox's restore found.
struct OutboxRestoreOutcome<Change: Codable & Sendable>: Sendable {
    /// The items to send, in order, with their encoded changes.
    var items: [(item: OutboxItem<Change>, change: Data)] = []
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

/// The outbox's reads and writes of its entry, off the main actor.
enum OutboxStorage {
    /// Saves `records` as the whole queue, or, when `addingToStored`, after the stored records
    /// whose ids are not among them (a stored entry that cannot be read is replaced); returns the
    /// error, if any.
    static func save(
        _ records: [OutboxRecord], in cache: any LoadableCache, key: String, addingToStored: Bool = false
    ) async -> LoadableCacheError? {
        var records = records
        if addingToStored, let entry = try? await cache.load(key: key), entry.version == OutboxFormat.version,
            let stored = try? OutboxFormat.decode(entry.data)
        {
            let ids = Set(records.map(\.id))
            records = stored.filter { !ids.contains($0.id) } + records
        }
        let entry = CachedEntry(data: OutboxFormat.encode(records), savedAt: Date(), version: OutboxFormat.version)
        do {
            try await cache.save(entry, key: key)
            return nil
        } catch {
            return error as? LoadableCacheError ?? .saveFailed(key: key, underlying: error)
        }
    }

    /// Reads the queue kept under `key`.
    static func restore<Change: Codable & Sendable>(
        _: Change.Type, from cache: any LoadableCache, key: String
    ) async -> OutboxRestoreOutcome<Change> {
        var outcome = OutboxRestoreOutcome<Change>()
        let records: [OutboxRecord]
        do {
            guard let entry = try await cache.load(key: key) else { return outcome }
            guard entry.version == OutboxFormat.version else {
                throw LoadableCacheError.versionMismatch(
                    key: key, found: entry.version, expected: OutboxFormat.version)
            }
            do {
                records = try OutboxFormat.decode(entry.data)
            } catch {
                throw LoadableCacheError.corrupt(key: key, reason: error.reason)
            }
        } catch {
            outcome.error = error as? LoadableCacheError ?? .loadFailed(key: key, underlying: error)
            return outcome
        }
        let decoder = JSONDecoder()
        for var record in records {
            do {
                let change = try decoder.decode(Change.self, from: record.change)
                let lastError = record.lastError.isEmpty ? nil : OutboxRestoredError(description: record.lastError)
                let item = OutboxItem(
                    id: record.id, change: change, idempotencyKey: record.idempotencyKey,
                    enqueuedAt: Date(timeIntervalSinceReferenceDate: record.enqueuedAt), attempts: record.attempts,
                    lastError: record.isSetAside
                        ? OutboxRestoredError(description: "set aside by an earlier launch: its change did not decode")
                        : lastError,
                    state: record.isFailed || record.isSetAside ? .failed : .pending)
                if record.isSetAside { outcome.hasRestoredSetAside = true }
                outcome.items.append((item, record.change))
            } catch {
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
