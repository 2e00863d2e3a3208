/// One record's change in a collection's contents, as live views and records are told of it.
struct RecordSetChange<Record: Identifiable & Sendable & Equatable>: Sendable where Record.ID: Sendable {
    /// The record's id.
    var id: Record.ID
    /// The record before the change (`nil`: it was not there).
    var old: Record?
    /// The record after the change (`nil`: it is gone).
    var new: Record?
    /// The number the record has in the set's order (``RecordSet``'s first-appearance order): the
    /// tie-breaker of views.
    var order: UInt64
}

/// What one change of a collection's contents did, written down while it runs: the changes of
/// single records, or that the contents were replaced as a whole (a restore, `removeAll()`, the
/// first contents).
///
/// Records changes only while the collection has live views or records (``isRecording``), so
/// that a collection nobody views pays one branch per record.
struct RecordChangeLog<Record: Identifiable & Sendable & Equatable> where Record.ID: Sendable {
    let isRecording: Bool
    private(set) var changes: [RecordSetChange<Record>] = []
    private(set) var isReplaced = false

    init(isRecording: Bool) {
        self.isRecording = isRecording
    }

    /// Puts `record` into `set` (replacing the record with its id); returns whether it changed.
    mutating func upsert(_ record: Record, in set: inout RecordSet<Record>) -> Bool {
        guard isRecording, !isReplaced else { return set.upsert(record) }
        let old = set[id: record.id]
        guard set.upsert(record), let order = set.order(of: record.id) else { return false }
        changes.append(RecordSetChange(id: record.id, old: old, new: record, order: order))
        return true
    }

    /// Removes record `id` from `set`; returns whether it was there.
    mutating func remove(_ id: Record.ID, in set: inout RecordSet<Record>) -> Bool {
        guard isRecording, !isReplaced else { return set.remove(id: id) }
        guard let old = set[id: id], let order = set.order(of: id) else { return false }
        set.remove(id: id)
        changes.append(RecordSetChange(id: id, old: old, new: nil, order: order))
        return true
    }

    /// The contents are replaced as a whole: views build themselves again from them.
    mutating func replaceAll() {
        isReplaced = true
        changes.removeAll()
    }
}

/// A collection's live views and records, held weakly: told of each change of its contents
/// before the collection's own observers are.
@MainActor
final class LiveRecords<Record: Identifiable & Sendable & Equatable> where Record.ID: Sendable {
    private var views: [WeakView] = []
    private var records: [Record.ID: WeakRecord] = [:]

    private struct WeakView {
        weak var view: RecordView<Record>?
    }

    private struct WeakRecord {
        weak var record: RecordLoadable<Record>?
    }

    /// Whether any view or record may still be alive (released ones are pruned as they are met).
    var isEmpty: Bool { views.isEmpty && records.isEmpty }

    /// The views and records alive now: what keeps the collection in use, for the inspector's
    /// snapshot.
    var liveCount: Int {
        views.count { $0.view != nil } + records.values.count { $0.record != nil }
    }

    func add(_ view: RecordView<Record>) {
        views.removeAll { $0.view == nil }
        views.append(WeakView(view: view))
    }

    /// The live record loadable of `id`, if one is alive.
    func record(_ id: Record.ID) -> RecordLoadable<Record>? {
        records[id]?.record
    }

    func add(_ record: RecordLoadable<Record>) {
        if records.count >= 64 { records = records.filter { $0.value.record != nil } }
        records[record.id] = WeakRecord(record: record)
    }

    /// Tells every view and record what `log` says changed; `contents` are the collection's now.
    func apply(_ log: RecordChangeLog<Record>, contents: RecordSet<Record>?) {
        if log.isReplaced {
            replaceAll(with: contents)
            return
        }
        guard !log.changes.isEmpty else { return }
        var released = false
        for entry in views {
            guard let view = entry.view else {
                released = true
                continue
            }
            view.apply(log.changes)
        }
        if released { views.removeAll { $0.view == nil } }
        guard !records.isEmpty else { return }
        for change in log.changes {
            guard let entry = records[change.id] else { continue }
            if let record = entry.record {
                record.show(change.new, collectionHasContents: contents != nil)
            } else {
                records[change.id] = nil
            }
        }
    }

    /// Tells every view and record that the contents were replaced by `contents`.
    func replaceAll(with contents: RecordSet<Record>?) {
        views.removeAll { $0.view == nil }
        for entry in views { entry.view?.rebuild(from: contents) }
        records = records.filter { $0.value.record != nil }
        for (id, entry) in records { entry.record?.show(contents?[id: id], collectionHasContents: contents != nil) }
    }

    /// Tells every view and record that the collection's state changed.
    func collectionStateDidChange(_ collection: any PureLoadable) {
        for entry in views { entry.view?.followState(of: collection) }
        for entry in records.values { entry.record?.followState(of: collection) }
    }
}

extension PushLoadable {
    /// What a live view or record shows while it has no contents: `.idle` when the collection has
    /// contents (what it would show is not among them), otherwise the collection's state (idle,
    /// syncing, failed with its error).
    func followState(of collection: any PureLoadable) {
        guard core.readUntracked({ contents == nil }) else { return }
        let (state, hasContents) = core.readUntracked { (collection.loadableState, collection.isContentsAvailable) }
        switch state {
        case _ where hasContents: if core.state != .idle { setIdle() }
        case .idle where core.state != .idle: setIdle()
        case .syncing where core.state != .syncing: setSyncing()
        case .didFailToSync: setDidFailToSync(core.readUntracked { collection.error })
        case .idle, .syncing, .didSyncSuccessfully: break
        }
    }
}
