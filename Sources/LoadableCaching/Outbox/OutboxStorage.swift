internal import Foundation

/// What an outbox's read of its entries found.
struct OutboxRestoreOutcome<Change: Codable & Sendable>: Sendable {
    /// The items to send, in order, with their records.
    var items: [(item: OutboxItem<Change>, record: OutboxRecord)] = []
    /// The changes sent that no loadable showed yet, with their records.
    var sent: [(change: Change, record: OutboxRecord)] = []
    /// The items set aside (now or earlier) whose change does not decode.
    var setAside: [OutboxRecord] = []
    /// One error per item set aside by this read.
    var newlySetAside: [LoadableCacheError] = []
    /// Whether an item set aside earlier decodes again (it is back, as failed).
    var hasRestoredSetAside = false
    /// How far each writer's journal was read.
    var journal = OutboxJournal()
    /// Why the entries could not be read or used.
    var error: LoadableCacheError?

    /// Whether the entries could not be read (for another reason than their bytes): nothing is
    /// known of the stored queue. Any other error is an entry that is not an outbox's, skipped:
    /// the items found are good.
    var isUnread: Bool {
        if case .loadFailed? = error { return true }
        return false
    }
}

/// An item whose change did not decode, set aside.
struct OutboxItemSetAside: Error, CustomStringConvertible {
    let id: String
    let underlying: any Error

    var description: String {
        "item \(id) was set aside (it stays in the cache and is not sent): its change does not decode: \(underlying)"
    }
}

/// How far the journals of the writer slots go: the last entry folded into the snapshot, and the
/// last entry read, per slot.
struct OutboxJournal: Sendable, Equatable {
    /// The number of writer slots: the processes that may write one outbox's entries at once.
    static let slots = 8

    var folded = [UInt64](repeating: 0, count: slots)
    var read = [UInt64](repeating: 0, count: slots)
}

/// The outbox's reads and writes of its entries, off the main actor.
///
/// The queue is kept as a snapshot under the outbox's key and a journal per writer (a process):
/// each save appends the changes made since the last one as one entry, `<key>#<slot>#<number>`,
/// so a save costs the same with 1,000 items pending as with none. Now and then the process that
/// sends (the only one that does) writes a new snapshot of the whole queue, which says how far
/// each writer's journal it covers, and removes the entries it covers. A read folds the snapshot
/// and every entry after it. A crash at any moment leaves whole entries (each is one save): a
/// snapshot written before the removal of the entries it covers leaves entries a read skips.
enum OutboxStorage {
    /// The key of entry `number` of `slot`'s journal.
    static func journalKey(_ key: String, slot: Int, number: UInt64) -> String {
        "\(key)#\(slot)#\(number)"
    }

    /// The name of the lock a process holds while it writes through `slot`.
    static func writerLock(_ key: String, slot: Int) -> String { "\(key)#writer\(slot)" }

    /// Takes the first free writer slot: returns it and its lock, or `nil` when every slot is taken
    /// (or the cache could not lock).
    static func claimSlot(in cache: any LoadableCache, key: String) async -> (slot: Int, lock: LoadableCacheLock)? {
        for slot in 0..<OutboxJournal.slots {
            if let lock = try? await cache.tryLock(key: writerLock(key, slot: slot)) { return (slot, lock) }
        }
        return nil
    }

    /// Appends `operations` as entry `number` of `slot`'s journal.
    static func append(
        _ operations: [OutboxOperation], slot: Int, number: UInt64, savedAt: Date, in cache: any LoadableCache,
        key: String
    ) async -> LoadableCacheError? {
        let entryKey = journalKey(key, slot: slot, number: number)
        // Unsent changes exist nowhere else: pinned, so that no cache limit evicts them and no
        // removal by date removes them.
        let entry = CachedEntry(
            data: OutboxFormat.encode(operations), savedAt: savedAt, version: OutboxFormat.version, isPinned: true)
        do {
            try CachedEntry.checkSavedAt(savedAt, key: key)
            try await cache.save(entry, key: entryKey)
            return nil
        } catch {
            return LoadableCacheError(error, in: .save, key: entryKey)
        }
    }

    /// Writes the snapshot of `records`, covering each slot's journal up to `journal.read`, then
    /// removes the entries it covers that the last snapshot did not.
    static func writeSnapshot(
        _ records: [OutboxRecord], journal: OutboxJournal, savedAt: Date, in cache: any LoadableCache,
        key: String
    ) async -> LoadableCacheError? {
        let entry = CachedEntry(
            data: OutboxFormat.encode(records, folded: journal.read), savedAt: savedAt, version: OutboxFormat.version,
            isPinned: !records.isEmpty)
        do {
            try CachedEntry.checkSavedAt(savedAt, key: key)
            try await cache.save(entry, key: key)
        } catch {
            return LoadableCacheError(error, in: .save, key: key)
        }
        for slot in 0..<OutboxJournal.slots where journal.read[slot] > journal.folded[slot] {
            for number in (journal.folded[slot] + 1)...journal.read[slot] {
                // Left behind on failure: a read skips covered entries.
                try? await cache.remove(key: journalKey(key, slot: slot, number: number))
            }
        }
        return nil
    }

    /// Removes the snapshot and every journal entry read: logout.
    static func removeAll(journal: OutboxJournal, in cache: any LoadableCache, key: String) async -> LoadableCacheError?
    {
        var failure: LoadableCacheError?
        do {
            try await cache.remove(key: key)
        } catch {
            failure = LoadableCacheError(error, in: .remove, key: key)
        }
        for slot in 0..<OutboxJournal.slots where journal.read[slot] > 0 {
            for number in 1...journal.read[slot] {
                try? await cache.remove(key: journalKey(key, slot: slot, number: number))
            }
        }
        return failure
    }

    /// Reads the queue: the snapshot, and each slot's journal entries after it, folded.
    static func restore<Change: Codable & Sendable>(
        _: Change.Type, from cache: any LoadableCache, key: String
    ) async -> OutboxRestoreOutcome<Change> {
        switch await read(from: cache, key: key) {
        case .success(let (records, journal, damage)):
            var outcome: OutboxRestoreOutcome<Change> = items(from: records, key: key)
            outcome.journal = journal
            outcome.error = damage
            return outcome
        case .failure(let error):
            var outcome = OutboxRestoreOutcome<Change>()
            outcome.error = error
            return outcome
        }
    }

    /// The records as the snapshot and the journals after it make them, and the first entry that
    /// is not an outbox's (skipped: a snapshot's items are lost, an entry's changes too); fails when
    /// an entry could not be read (for another reason than its bytes).
    static func read(
        from cache: any LoadableCache, key: String
    ) async -> Result<([OutboxRecord], OutboxJournal, LoadableCacheError?), LoadableCacheError> {
        var records: [OutboxRecord] = []
        var journal = OutboxJournal()
        var damage: LoadableCacheError?
        do {
            if let entry = try await cache.load(key: key) {
                if !OutboxFormat.reads(version: entry.version) {
                    damage = .versionMismatch(key: key, found: entry.version, expected: OutboxFormat.version)
                } else {
                    do {
                        let snapshot = try OutboxFormat.decode(entry.data)
                        records = snapshot.records
                        for (slot, number) in snapshot.folded.prefix(OutboxJournal.slots).enumerated() {
                            journal.folded[slot] = number
                        }
                    } catch {
                        damage = .corrupt(key: key, reason: error.reason)
                    }
                }
            }
            journal.read = journal.folded
            // Each slot's entries after the snapshot, merged in the order they were saved.
            var batches: [(savedAt: Date, slot: Int, operations: [OutboxOperation])] = []
            for slot in 0..<OutboxJournal.slots {
                while let entry = try await cache.load(
                    key: journalKey(key, slot: slot, number: journal.read[slot] + 1))
                {
                    let entryKey = journalKey(key, slot: slot, number: journal.read[slot] + 1)
                    journal.read[slot] += 1
                    guard entry.version == OutboxFormat.version else {
                        damage =
                            damage
                            ?? .versionMismatch(key: entryKey, found: entry.version, expected: OutboxFormat.version)
                        continue
                    }
                    do {
                        batches.append((entry.savedAt, slot, try OutboxFormat.decodeOperations(entry.data)))
                    } catch {
                        damage = damage ?? .corrupt(key: entryKey, reason: error.reason)
                    }
                }
            }
            if !batches.isEmpty {
                // Stable: a slot's entries keep their order when their dates tie or go back.
                let ordered = mergedBySavedAt(batches)
                records = fold(records, ordered.flatMap(\.operations))
            }
            return .success((records, journal, damage))
        } catch {
            return .failure(LoadableCacheError(error, in: .load, key: key))
        }
    }

    /// The batches of every slot in the order they were saved: each slot's own in its order, the
    /// slots merged by date.
    private static func mergedBySavedAt(
        _ batches: [(savedAt: Date, slot: Int, operations: [OutboxOperation])]
    ) -> [(savedAt: Date, slot: Int, operations: [OutboxOperation])] {
        var bySlot = [[(savedAt: Date, slot: Int, operations: [OutboxOperation])]](
            repeating: [], count: OutboxJournal.slots)
        for batch in batches { bySlot[batch.slot].append(batch) }
        var heads = [Int](repeating: 0, count: OutboxJournal.slots)
        var merged: [(savedAt: Date, slot: Int, operations: [OutboxOperation])] = []
        merged.reserveCapacity(batches.count)
        while merged.count < batches.count {
            var next: Int?
            for slot in 0..<OutboxJournal.slots where heads[slot] < bySlot[slot].count {
                if let best = next, bySlot[best][heads[best]].savedAt <= bySlot[slot][heads[slot]].savedAt { continue }
                next = slot
            }
            guard let slot = next else { break }
            merged.append(bySlot[slot][heads[slot]])
            heads[slot] += 1
        }
        return merged
    }

    /// `records` with `operations` applied in order.
    static func fold(_ records: [OutboxRecord], _ operations: [OutboxOperation]) -> [OutboxRecord] {
        var slots: [OutboxRecord?] = records
        var index: [String: Int] = [:]
        for (position, record) in records.enumerated() { index[record.id] = position }
        for operation in operations {
            switch operation {
            case .put(let record):
                if let position = index[record.id] {
                    slots[position] = record
                } else {
                    index[record.id] = slots.count
                    slots.append(record)
                }
            case .remove(let id):
                if let position = index.removeValue(forKey: id) { slots[position] = nil }
            }
        }
        return slots.compactMap { $0 }
    }

    /// The last error of an item set aside by an earlier launch that decodes again.
    private static let setAsideDescription = "set aside by an earlier launch: its change did not decode"

    /// Decodes the changes of `records`: the items, the sent changes, and those set aside.
    static func items<Change: Codable & Sendable>(
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
