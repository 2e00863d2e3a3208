extension SyncedCollection {
    /// A live view of the records that match `isIncluded`, sorted by `areInIncreasingOrder`,
    /// pending local changes included: kept current as records change (a changed record moves by
    /// binary search, with no sort), and telling observers only when what it shows changed.
    ///
    /// ```swift
    /// let open = tasks.view(where: { !$0.done }, sortedBy: { $0.updatedAt > $1.updatedAt })
    /// ```
    ///
    /// Built at once from the records now (one filter and one sort). Records the sort ranks equal
    /// keep the collection's order. `isIncluded` and `areInIncreasingOrder` must read only the
    /// records they are given, and `areInIncreasingOrder` must be a strict weak order; a view
    /// that finds a record out of place shows itself again from the collection.
    ///
    /// - Parameters:
    ///   - isIncluded: Whether a record is shown; every record by default.
    ///   - areInIncreasingOrder: Whether the first record comes before the second.
    /// - Returns: A new view; it keeps the collection alive.
    public func view(
        where isIncluded: @escaping (Record) -> Bool = { _ in true },
        sortedBy areInIncreasingOrder: @escaping (Record, Record) -> Bool
    ) -> RecordView<Record> {
        let view = RecordView(
            recordsNow: { [self] in baseContents }, state: self, where: isIncluded, sortedBy: areInIncreasingOrder)
        liveRecords.add(view)
        return view
    }

    /// The record `id` as a loadable: the collection's own copy, pending local changes included,
    /// for a detail screen that never disagrees with a list and fetches nothing.
    ///
    /// - Parameter id: The record's id; it need not exist yet.
    /// - Returns: The record's loadable: the same one while one is alive.
    public func record(_ id: Record.ID) -> RecordLoadable<Record> {
        if let record = liveRecords.record(id) { return record }
        let record = RecordLoadable(id: id, record: baseContents?[id: id], collection: self, state: self)
        liveRecords.add(record)
        return record
    }

    /// The live views and records, made with the first.
    var liveRecords: LiveRecords<Record> {
        if let live { return live }
        let live = LiveRecords<Record>()
        self.live = live
        liveObservation = addObserver { [weak self] collection in
            self?.live?.collectionStateDidChange(collection)
        }
        return live
    }

    /// Changes the contents through `body`, which writes what it changed in the log; views and
    /// records are told before the collection's observers. Returns whether anything changed.
    @discardableResult
    func changeRecords(_ body: (inout RecordSet<Record>?, inout RecordChangeLog<Record>) -> Bool) -> Bool {
        var log = RecordChangeLog<Record>(isRecording: live.map { !$0.isEmpty } ?? false)
        var changed = false
        modifyContents { contents in
            let hadContents = contents != nil
            changed = body(&contents, &log)
            if changed, hadContents != (contents != nil) { log.replaceAll() }
            return changed
        } beforeNotifying: {
            guard log.isRecording, let live else { return }
            live.apply(log, contents: baseContents)
        }
        return changed
    }
}
