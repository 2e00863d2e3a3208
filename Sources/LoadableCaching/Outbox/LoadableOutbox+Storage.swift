internal import Foundation
import LoadableSupport

/// Saving the changes (the journal, snapshots) and restoring the queue.
extension LoadableOutbox {
    // MARK: - Saving and restoring

    /// Queues a save of the changes made so far (replacing a save that waits for its turn): one
    /// entry of the outbox's journal, and now and then a snapshot of the whole queue instead.
    func save(covering covered: UInt64) {
        let stored = stored
        if !unsavedAttempts.isEmpty {
            stored.withLock { stored in
                for (id, attempts) in unsavedAttempts { stored.update(id) { $0.attempts = attempts } }
            }
            unsavedAttempts.removeAll(keepingCapacity: true)
        }
        let cache = cache
        let key = key
        // After a read of the stored queue failed, each save tries to read it again, and hands
        // over its items once it can.
        let readsStored = storedIsUnread
        let savedAt = now()
        CacheQueue.enqueueSave(in: cache, key: key) { [weak self] in
            var errors: [LoadableCacheError] = []
            var adopted: OutboxRestoreOutcome<Change>?
            if readsStored {
                // Until the stored queue is read, this outbox does not know where its journal
                // ends: nothing is written.
                let outcome = await OutboxStorage.restore(Change.self, from: cache, key: key)
                if outcome.isUnread, let error = outcome.error {
                    return { [weak self] in self?.saveDidFinish(covering: covered, errors: [error]) }
                }
                // A spoiled entry is skipped, reported, and replaced by the next snapshot.
                if let error = outcome.error { errors.append(error) }
                stored.withLock {
                    $0.didRead(outcome.journal)
                    if outcome.error != nil { $0.snapshotFailed = true }
                }
                adopted = outcome
            }
            // The changes as they are when the save runs (this save's, and any made since).
            if let save = stored.withLock({ $0.takeOperations() }) {
                let error: LoadableCacheError?
                if let slot = save.slot {
                    error = await OutboxStorage.append(
                        save.operations, slot: slot, number: save.number, savedAt: savedAt, in: cache, key: key)
                } else {
                    error = .saveFailed(key: key, underlying: OutboxWithoutWriterSlot())
                }
                stored.withLock { $0.didAppend(save, error: error) }
                if let error { errors.append(error) }
            }
            if let snapshot = stored.withLock({ $0.snapshotIfDue() }) {
                let error = await OutboxStorage.writeSnapshot(
                    snapshot.records, journal: snapshot.journal, savedAt: savedAt, in: cache, key: key)
                stored.withLock { $0.didWriteSnapshot(covering: snapshot.journal, error: error) }
                if let error { errors.append(error) }
            }
            return { [weak self] in self?.saveDidFinish(covering: covered, errors: errors, adopted: adopted) }
        }
    }

    func saveDidFinish(
        covering sequence: UInt64, errors: [LoadableCacheError], adopted: OutboxRestoreOutcome<Change>? = nil
    ) {
        if let adopted, storedIsUnread {
            storedIsUnread = false
            perform(putFirst(adopted))
            stored.withLock { $0.hasStoredItems = true }
            for error in adopted.newlySetAside { report(error) }
        }
        for error in errors { report(error) }
        guard sequence > machine.savedSequence else { return }
        let actions = machine.saveFinished(sequence, now: clock.elapsed)
        if !saveWaiters.isEmpty {
            let done = saveWaiters.filter { $0.sequence <= sequence }
            saveWaiters.removeAll { $0.sequence <= sequence }
            for waiter in done { waiter.continuation.resume() }
        }
        perform(actions)
    }

    /// Removes every entry of the queue (logout); a writer of another process that is still alive
    /// finds a snapshot that covers what it wrote so far.
    func removeEntries(covering covered: UInt64) {
        let stored = stored
        let cache = cache
        let key = key
        let savedAt = now()
        CacheQueue.enqueue(in: cache, key: key) { [weak self] in
            let (journal, slot) = stored.withLock { ($0.journal, $0.slot) }
            let othersWrote = (0..<OutboxJournal.slots).contains { $0 != slot && journal.read[$0] > 0 }
            var error = await OutboxStorage.removeAll(journal: journal, in: cache, key: key)
            var kept = OutboxJournal()
            if othersWrote {
                // Their next entries must still be found after this snapshot; this outbox starts
                // its journal over.
                kept.read = journal.read
                if let slot { kept.read[slot] = 0 }
                kept.folded = kept.read
                error =
                    await OutboxStorage.writeSnapshot([], journal: kept, savedAt: savedAt, in: cache, key: key)
                    ?? error
            }
            stored.withLock {
                $0.journal = kept
                $0.entriesSinceSnapshot = 0
            }
            let errors = error.map { [$0] } ?? []
            return { [weak self] in self?.saveDidFinish(covering: covered, errors: errors) }
        }
    }

    func restoreDidFinish(_ outcome: OutboxRestoreOutcome<Change>) {
        machine.finishRestoring()
        var actions: [OutboxStateMachine.Action] = []
        if !dropsRestored {
            actions = putFirst(outcome)
            // Not read for another reason than its bytes: the stored queue may be good. Saves add
            // to it (the journal keeps it) until a read succeeds.
            if outcome.isUnread { storedIsUnread = true }
        } else {
            actions = machine.adopt([], now: clock.elapsed)
        }
        // An entry that is not an outbox's is replaced by the next save's snapshot.
        let isDamaged = outcome.error != nil && !storedIsUnread
        stored.withLock { stored in
            stored.hasStoredItems = !storedIsUnread
            if isDamaged { stored.snapshotFailed = true }
        }
        if let error = outcome.error { report(error) }
        if !dropsRestored {
            for error in outcome.newlySetAside { report(error) }
        }
        dropsRestored = false
        // Changes this restore made to records (items set aside or back) are saved, by the save
        // already asked for if one waits.
        if machine.requestedSave == machine.savedSequence, stored.withLock({ !$0.operations.isEmpty }) {
            actions.insert(machine.requestSave(), at: 0)
        }
        restore.finish()
        perform(actions)
    }

    /// Puts the items of earlier launches (older than those enqueued since) before the others,
    /// on the loadables too, and keeps those set aside and the sent changes; returns what the
    /// machine decided.
    func putFirst(_ outcome: OutboxRestoreOutcome<Change>) -> [OutboxStateMachine.Action] {
        let wallNow = now().timeIntervalSinceReferenceDate
        let elapsed = clock.elapsed
        let knownSent = Set(sentChanges.map(\.id))
        let sent = outcome.sent.filter { !knownSent.contains($0.record.id) }
        let found = outcome.items.filter { machine.state(of: $0.item.id) == nil }
        // Records this read changed (set aside now, or back from being set aside) are saved so.
        let changesRecords = !outcome.newlySetAside.isEmpty || outcome.hasRestoredSetAside
        stored.withLock { stored in
            let knownSetAside = Set(stored.setAside.map(\.id))
            let setAside = outcome.setAside.filter { !knownSetAside.contains($0.id) }
            stored.setAside.append(contentsOf: setAside)
            stored.sent.insert(contentsOf: sent.map(\.record), at: 0)
            if changesRecords {
                for record in setAside { stored.record(.put(record)) }
                for (_, record) in found { stored.record(.put(record)) }
            }
        }
        sentChanges.insert(contentsOf: sent.map { ($0.record.id, $0.change) }, at: 0)
        let restored = found.map { item, record in
            let notBefore = record.notBefore.map { elapsed + .seconds($0 - wallNow) }
            return (
                id: item.id, scope: item.scope, state: OutboxStateMachine.SlotState(item.state), notBefore: notBefore
            )
        }
        guard !found.isEmpty else { return machine.adopt([], now: elapsed) }
        let newer = storedItems
        for item in newer { forEachDisplay { $0.drop(item.id) } }
        mutateItems { items, records in
            items.insert(contentsOf: found.map { $0.item }, at: 0)
            records.records.insert(contentsOf: found.map { $0.record }, at: 0)
        }
        // Known to the machine first (layers are shown for known items), sent only once the
        // layers are back.
        let actions = machine.adopt(restored, now: elapsed)
        for item in storedItems { forEachDisplay { addLayer(item.id, item.change, on: $0) } }
        return actions
    }

    func report(_ error: any Error) {
        onError?(error)
    }
}
