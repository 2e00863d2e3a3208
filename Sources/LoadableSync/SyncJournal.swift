internal import Foundation
internal import LoadableCaching

/// What a ``SyncedCollection`` keeps of the server's side in its cache: a snapshot of every record
/// with its version, and the pages applied since, each one entry written whole (its records, its
/// deletions and the cursor they bring the collection to). A page is applied and saved together, so
/// a crash leaves the collection at the end of a page: the cursor is never ahead of the records.
///
/// Keys: `<key>/records` (the snapshot) and `<key>/records/<n>` (page `n`, from 1 after the
/// snapshot's last). When the pages hold more records than the collection has (at least 512:
/// then at least half of what they hold was replaced or deleted since), a new snapshot replaces
/// them; a first pull, whose pages hold each record once, writes none. A crash between the snapshot
/// and the removal of the pages leaves pages the next restore skips (their numbers are the
/// snapshot's or lower).
struct SyncJournalPage<Record: Identifiable & Codable & Sendable>: Codable, Sendable
where Record.ID: Codable & Sendable {
    var changed: [RemoteRecord<Record>] = []
    var deleted: [Record.ID] = []
    /// The cursor after this page; `nil`: unchanged (a push's answer, a page of an unfinished
    /// full pull).
    var cursor: String?
    /// Set by a full pull's last page: the cursor replaces the one before even if it is `nil`.
    var replacesCursor = false
    /// Set by a pull's last page.
    var syncedAt: Date?
}

struct SyncJournalSnapshot<Record: Identifiable & Codable & Sendable>: Codable, Sendable
where Record.ID: Codable & Sendable {
    /// The layout; 1.
    var format = 1
    /// The last page it covers.
    var lastPage: Int
    var records: [RemoteRecord<Record>]
    var cursor: String?
    var hasSynced: Bool
    var syncedAt: Date?
}

/// The server's side as read back from the cache.
struct SyncJournalRestore<Record: Identifiable & Codable & Sendable>: Sendable where Record.ID: Codable & Sendable {
    var records: [RemoteRecord<Record>] = []
    var cursor: String?
    var hasSynced = false
    var syncedAt: Date?
    /// The number of the last page read (0: none).
    var lastPage = 0
    /// The records the pages read hold.
    var pageRecords = 0
    /// What went wrong reading, reported once restored.
    var errors: [any Error] = []
}

enum SyncJournal {
    static func snapshotKey(_ key: String) -> String { "\(key)/records" }
    static func pageKey(_ key: String, _ number: Int) -> String { "\(key)/records/\(number)" }

    /// The most pages a restore reads: far more than a compaction ever leaves.
    static let maxPages = 1_000_000

    /// Reads the snapshot and the pages after it (off the main actor). A snapshot or page that
    /// does not decode ends the read there: the pages after it are removed, so that later pages
    /// never apply on the wrong records, and the error is reported.
    static func restore<Record>(
        _ type: Record.Type, from cache: any LoadableCache, key: String
    ) async -> SyncJournalRestore<Record> {
        var restore = SyncJournalRestore<Record>()
        var order: [Record.ID] = []
        var records: [Record.ID: RemoteRecord<Record>] = [:]
        let decoder = JSONDecoder()
        var firstPage = 1
        var loading = snapshotKey(key)
        do {
            if let entry = try await cache.load(key: loading) {
                do {
                    let snapshot = try decoder.decode(SyncJournalSnapshot<Record>.self, from: entry.data)
                    for record in snapshot.records {
                        if records.updateValue(record, forKey: record.record.id) == nil {
                            order.append(record.record.id)
                        }
                    }
                    restore.cursor = snapshot.cursor
                    restore.hasSynced = snapshot.hasSynced
                    restore.syncedAt = snapshot.syncedAt
                    firstPage = snapshot.lastPage + 1
                    restore.lastPage = snapshot.lastPage
                } catch {
                    restore.errors.append(
                        LoadableCacheError.decodingFailed(key: snapshotKey(key), underlying: error))
                    await removeAll(from: cache, key: key, errors: &restore.errors)
                    return restore
                }
            }
            var number = firstPage
            loading = pageKey(key, number)
            while number < firstPage + maxPages, let entry = try await cache.load(key: loading) {
                let page: SyncJournalPage<Record>
                do {
                    page = try decoder.decode(SyncJournalPage<Record>.self, from: entry.data)
                } catch {
                    restore.errors.append(
                        LoadableCacheError.decodingFailed(key: pageKey(key, number), underlying: error))
                    await removePages(from: number, in: cache, key: key, errors: &restore.errors)
                    break
                }
                for record in page.changed {
                    if records.updateValue(record, forKey: record.record.id) == nil { order.append(record.record.id) }
                }
                for id in page.deleted { records[id] = nil }
                if page.cursor != nil || page.replacesCursor { restore.cursor = page.cursor }
                if let syncedAt = page.syncedAt {
                    restore.hasSynced = true
                    restore.syncedAt = syncedAt
                }
                restore.pageRecords += page.changed.count + page.deleted.count
                restore.lastPage = number
                number += 1
                loading = pageKey(key, number)
            }
        } catch {
            restore.errors.append(LoadableCacheError(error, in: .load, key: loading))
        }
        restore.records = order.compactMap { records[$0] }
        return restore
    }

    /// Removes pages `number`, `number + 1`, … while they exist.
    static func removePages(from number: Int, in cache: any LoadableCache, key: String, errors: inout [any Error]) async
    {
        var number = number
        do {
            while number < Int.max, try await cache.load(key: pageKey(key, number)) != nil {
                try await cache.remove(key: pageKey(key, number))
                number += 1
            }
        } catch {
            errors.append(LoadableCacheError(error, in: .remove, key: pageKey(key, number)))
        }
    }

    /// Removes pages `number`, `number - 1`, … down to 1, while they exist.
    static func removePages(downFrom number: Int, in cache: any LoadableCache, key: String) async throws {
        var number = number
        while number >= 1, try await cache.load(key: pageKey(key, number)) != nil {
            try await cache.remove(key: pageKey(key, number))
            number -= 1
        }
    }

    /// Removes the snapshot and every page.
    static func removeAll(from cache: any LoadableCache, key: String, errors: inout [any Error]) async {
        do {
            try await cache.removeEntries(keyPrefix: snapshotKey(key))
        } catch {
            errors.append(LoadableCacheError(error, in: .removeAll, key: snapshotKey(key)))
        }
    }
}
