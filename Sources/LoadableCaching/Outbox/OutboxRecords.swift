internal import Foundation

/// An outbox's records as they are saved, and what is not saved yet: the state its saves read and
/// write, behind the outbox's lock, off the main actor.
///
/// Every change of a record is also kept as an operation; a save appends the operations gathered
/// since the last one to the outbox's journal (one entry), and now and then writes a snapshot of
/// every record instead (see ``OutboxStorage``). Records change only with a save asked for, so
/// after the saves asked for, the cache holds the same queue however the saves ran.
struct OutboxRecords {
    /// The items' records, in the order of the outbox's items.
    var records: [OutboxRecord] = []
    /// The records of items set aside (their change does not decode).
    var setAside: [OutboxRecord] = []
    /// The records of changes sent that no loadable showed yet.
    var sent: [OutboxRecord] = []
    /// The operations not saved yet, in order.
    var operations: [OutboxOperation] = []
    /// The writer slot this outbox appends through, and the lock that holds it; `nil` before the
    /// restore claimed one, or when none was free.
    var slot: Int?
    var slotLock: LoadableCacheLock?
    /// How far the snapshot in the cache covers each slot's journal, and how far it was read (or,
    /// for this outbox's slot, written).
    var journal = OutboxJournal()
    /// Journal entries written or read since the snapshot: when they pass ``snapshotThreshold``, the
    /// next save writes a snapshot.
    var entriesSinceSnapshot = 0
    /// Whether the outbox has the items of earlier launches (its restore finished, and the stored
    /// queue could be read): only then may a snapshot be written from the records here.
    var hasStoredItems = false
    /// Whether this outbox may write snapshots (the one that sends).
    var writesSnapshots = true
    /// A snapshot failed: the next save tries again.
    var snapshotFailed = false
    /// Whether another process may write the queue too: then each operation is numbered, so that
    /// a read of the cache can tell which records changed here since it began.
    var tracksChanges = false
    /// The number of the last operation, and of the last one known to be in the cache.
    private(set) var operationNumber: UInt64 = 0
    private(set) var savedOperationNumber: UInt64 = 0
    /// The number of the last operation on each record, while ``tracksChanges``.
    private(set) var changed: [String: UInt64] = [:]

    /// Journal entries after which a save writes a snapshot: half the records, at least 16, so that
    /// a snapshot's cost spread over the entries stays the same for any queue, and a read finds at
    /// most that many entries.
    var snapshotThreshold: Int { Swift.max(16, (records.count + setAside.count + sent.count) / 2) }

    // MARK: - Changes

    mutating func append(_ record: OutboxRecord) {
        records.append(record)
        if !record.isUnsaved { self.record(.put(record)) }
    }

    /// Changes the record `id` with `body`; returns its index, or `nil` when there is none.
    @discardableResult
    mutating func update(_ id: String, _ body: (inout OutboxRecord) -> Void) -> Int? {
        guard let index = records.firstIndex(where: { $0.id == id }) else { return nil }
        let before = records[index]
        body(&records[index])
        let after = records[index]
        if !after.isUnsaved, after != before { record(.put(after)) }
        return index
    }

    mutating func remove(at index: Int) {
        let record = records.remove(at: index)
        if !record.isUnsaved { self.record(.remove(record.id)) }
    }

    mutating func addSent(_ record: OutboxRecord) {
        sent.append(record)
        self.record(.put(record))
    }

    mutating func removeSent(where shouldRemove: (OutboxRecord) -> Bool) {
        for record in sent where shouldRemove(record) { self.record(.remove(record.id)) }
        sent.removeAll(where: shouldRemove)
    }

    /// Keeps `operation` for the next save.
    mutating func record(_ operation: OutboxOperation) {
        operations.append(operation)
        guard tracksChanges else { return }
        operationNumber += 1
        switch operation {
        case .put(let record): changed[record.id] = operationNumber
        case .remove(let id): changed[id] = operationNumber
        }
    }

    /// The records changed here by operations after number `number` (those a read that began when
    /// `number` was the last saved one may not have found); forgets the changes before, which every
    /// later read finds.
    mutating func changed(after number: UInt64) -> Set<String> {
        changed = changed.filter { $0.value > number }
        return Set(changed.keys)
    }

    /// Every record goes (logout): nothing of them is saved any more.
    mutating func removeAll() {
        records.removeAll()
        setAside.removeAll()
        sent.removeAll()
        operations.removeAll()
    }

    /// A read of the stored queue found the journals this far.
    mutating func didRead(_ read: OutboxJournal) {
        for slot in 0..<OutboxJournal.slots {
            journal.folded[slot] = Swift.max(journal.folded[slot], read.folded[slot])
            let before = journal.read[slot]
            journal.read[slot] = Swift.max(before, read.read[slot])
            entriesSinceSnapshot += Int(journal.read[slot] - before)
        }
    }

    // MARK: - Saving

    /// What one save writes.
    struct Save {
        var operations: [OutboxOperation]
        var slot: Int?
        var number: UInt64
        /// The number of the last operation it carries.
        var lastOperation: UInt64 = 0
    }

    /// The operations to append, as the next entry of this outbox's journal.
    mutating func takeOperations() -> Save? {
        guard !operations.isEmpty else { return nil }
        let save = Save(
            operations: operations, slot: slot, number: slot.map { journal.read[$0] + 1 } ?? 0,
            lastOperation: operationNumber)
        operations.removeAll(keepingCapacity: true)
        return save
    }

    /// The save's entry was written, or failed (its operations then go first in the next save).
    mutating func didAppend(_ save: Save, error: LoadableCacheError?) {
        guard error == nil, let slot = save.slot, slot == self.slot else {
            operations.insert(contentsOf: save.operations, at: 0)
            return
        }
        journal.read[slot] = save.number
        entriesSinceSnapshot += 1
        savedOperationNumber = Swift.max(savedOperationNumber, save.lastOperation)
    }

    /// The snapshot to write now, if one is due.
    func snapshotIfDue() -> (records: [OutboxRecord], journal: OutboxJournal)? {
        guard writesSnapshots, hasStoredItems, operations.isEmpty,
            snapshotFailed || entriesSinceSnapshot >= snapshotThreshold
        else { return nil }
        return (records.filter { !$0.isUnsaved } + setAside + sent, journal)
    }

    mutating func didWriteSnapshot(covering journal: OutboxJournal, error: LoadableCacheError?) {
        guard error == nil else {
            snapshotFailed = true
            return
        }
        snapshotFailed = false
        entriesSinceSnapshot = 0
        for slot in 0..<OutboxJournal.slots {
            self.journal.folded[slot] = Swift.max(self.journal.folded[slot], journal.read[slot])
        }
    }
}

/// What a save fails with when the outbox could not claim one of the cache's writer slots (every
/// one is held by a live process).
struct OutboxWithoutWriterSlot: Error, CustomStringConvertible {
    var description: String {
        "no writer slot of the outbox is free: \(OutboxJournal.slots) processes already write it"
    }
}
