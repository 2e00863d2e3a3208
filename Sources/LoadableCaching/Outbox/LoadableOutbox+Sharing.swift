internal import Foundation
internal import Loadable
import LoadableSupport

/// Two processes on one queue: the sender's lock, and the reads of what the other did.
extension LoadableOutbox {
    // MARK: - Two processes

    /// Takes the sender's lock when there is something to send and the app is active, lets it go
    /// when there is not (once no send runs), and keeps reading the queue while active.
    func updateSharing() {
        guard !machine.isRestoring else { return }
        let wantsLock = !storedIsPaused && !machine.isIdle
        if wantsLock, shared.senderLock == nil, !shared.isReading, !shared.isLockRefused {
            readShared()
        } else if !wantsLock, let lock = shared.senderLock, sends.isEmpty, discardedSends.isEmpty {
            shared.senderLock = nil
            stored.withLock { $0.writesSnapshots = false }
            perform(machine.senderChanged(false, now: clock.elapsed))
            // After the saves asked for so far: the next sender reads them.
            CacheQueue.enqueue(in: cache, key: key) {
                lock.release()
                return nil
            }
        }
        if !storedIsPaused, !shared.timer.isArmed {
            shared.timer.arm(after: Self.sharedReadInterval, on: clock) { [weak self] generation in
                guard let self, self.shared.timer.fired(generation) else { return }
                self.shared.isLockRefused = false
                self.readShared()
            }
        }
    }

    /// Reads the queue as the cache holds it (taking the sender's lock first, if this outbox has
    /// something to send and no other process holds it), and takes in what other processes did.
    func readShared() {
        guard !shared.isReading else { return }
        shared.isReading = true
        let tryLock = shared.senderLock == nil && !storedIsPaused && !machine.isIdle
        let stored = stored
        let cache = cache
        let key = key
        CacheQueue.enqueue(in: cache, key: key) { [weak self] in
            var lock: LoadableCacheLock?
            if tryLock { lock = try? await cache.tryLock(key: key + "#sender") }
            let before = stored.withLock { $0.savedOperationNumber }
            let outcome = await OutboxStorage.restore(Change.self, from: cache, key: key)
            return { [weak self] in
                self?.sharedReadDidFinish(outcome, changedAfter: before, lock: lock, triedLock: tryLock)
            }
        }
    }

    func sharedReadDidFinish(
        _ outcome: OutboxRestoreOutcome<Change>, changedAfter number: UInt64, lock: LoadableCacheLock?,
        triedLock: Bool
    ) {
        shared.isReading = false
        shared.isLockRefused = triedLock && lock == nil
        var actions: [OutboxStateMachine.Action] = []
        if outcome.isUnread, let error = outcome.error {
            report(error)
        } else {
            // A spoiled entry (reported by the restore) is skipped: the items found are good, and
            // the sender's next snapshot replaces it.
            actions = takeIn(outcome, keeping: stored.withLock { $0.changed(after: number) })
            // After the records: a snapshot must never cover entries whose records it lacks.
            stored.withLock {
                $0.didRead(outcome.journal)
                if outcome.error != nil { $0.snapshotFailed = true }
            }
        }
        if let lock {
            shared.senderLock = lock
            stored.withLock { $0.writesSnapshots = true }
            actions += machine.senderChanged(true, now: clock.elapsed)
        }
        perform(actions)
    }

    /// Takes in the queue another process left: its items, in the cache's order, except those
    /// changed here since the read began (`keeping`) and those sending here.
    func takeIn(_ outcome: OutboxRestoreOutcome<Change>, keeping: Set<String>) -> [OutboxStateMachine.Action] {
        let sendingHere = Set(sends.keys)
        let kept = keeping.union(sendingHere)
        let mine = Dictionary(storedItems.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var newItems: [OutboxItem<Change>] = []
        var newRecords: [OutboxRecord] = []
        var listed = Set<String>()
        let myRecords = stored.withLock { stored in
            Dictionary(stored.records.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        }
        for (item, record) in outcome.items {
            listed.insert(item.id)
            if kept.contains(item.id) {
                // Changed here since: this outbox's version (none when it removed the item).
                guard let own = mine[item.id], let ownRecord = myRecords[item.id] else { continue }
                newItems.append(own)
                newRecords.append(ownRecord)
            } else {
                var item = item
                if let own = mine[item.id], own.lastError != nil, item.lastError is OutboxRestoredError,
                    own.state == item.state
                {
                    item.lastError = own.lastError  // the error itself, not its description
                }
                newItems.append(item)
                newRecords.append(record)
            }
        }
        for item in storedItems where !listed.contains(item.id) && kept.contains(item.id) {
            guard let record = myRecords[item.id] else { continue }
            newItems.append(item)
            newRecords.append(record)
        }
        let newIDs = Set(newItems.map(\.id))
        let gone = storedItems.filter { !newIDs.contains($0.id) }
        let added = newItems.filter { mine[$0.id] == nil }
        // Changed by the other process (resolved, or rebased there): shown so here.
        let changed = zip(newItems, newRecords).filter { item, record in
            guard mine[item.id] != nil else { return false }
            return myRecords[item.id]?.change != record.change
        }.map(\.0)
        stored.withLock { stored in
            let knownSetAside = Set(stored.setAside.map(\.id))
            stored.setAside += outcome.setAside.filter { !knownSetAside.contains($0.id) }
        }
        let knownSent = Set(sentChanges.map(\.id))
        for (change, record) in outcome.sent where !knownSent.contains(record.id) {
            sentChanges.append((record.id, change))
            stored.withLock { $0.sent.append(record) }
        }
        // Nothing changed (the usual read, every few seconds): nothing to tell Observation.
        let currentRecords = stored.withLock { $0.records }
        if newRecords == currentRecords, newItems.map(\.state) == storedItems.map(\.state) { return [] }
        mutateItems { items, records in
            items = newItems
            records.records = newRecords
        }
        let queue = newItems.map { (id: $0.id, scope: $0.scope, state: OutboxStateMachine.SlotState($0.state)) }
        let actions = machine.replaceQueue(queue, keeping: kept, now: clock.elapsed)
        // Sent or discarded by the other process: sent, most likely, so the change joins.
        for item in gone { forEachDisplay { _ = $0.join(item.id) } }
        for item in changed { forEachDisplay { $0.replace(item.id, item.change) } }
        for item in added { forEachDisplay { addLayer(item.id, item.change, on: $0) } }
        return actions
    }
}

/// An outbox's side of a queue that other processes may share.
struct OutboxSharedQueue {
    /// The sender's lock, while the outbox holds it.
    var senderLock: LoadableCacheLock?
    /// A read of the queue (which may take the lock) is on its way.
    var isReading = false
    /// The last read found the lock held by another process: the next try waits for the timer.
    var isLockRefused = false
    /// Reads the queue every `LoadableOutbox.sharedReadInterval` while the app is active.
    var timer = ClockTimer()
}
