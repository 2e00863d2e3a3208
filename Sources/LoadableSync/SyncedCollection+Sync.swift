internal import Foundation
internal import Loadable
internal import LoadableCaching

/// Pulls, pushes and the cache.
extension SyncedCollection {
    // MARK: - Pulls

    /// Whether the pull `generation` is still the one running.
    private func isCurrent(_ generation: Int) -> Bool {
        generation == pullGeneration && core.state == .syncing
    }

    func pull(generation: Int) async {
        await restored()
        guard isCurrent(generation) else { return }
        var since = cursor
        var isFullPull = since == nil
        var seen: Set<Record.ID> = []
        var repeats = 0
        // Records and tombstones applied, for the inspector's `collectionPulled` event.
        var applied = 0
        tombstoneSkippedDuringPull = false
        do {
            while true {
                try Task.checkCancellation()
                let page: SyncPage<Record>
                do {
                    page = try await remote.pull(since: since)
                } catch SyncRemoteError.cursorExpired where !isFullPull {
                    guard isCurrent(generation) else { return }
                    isFullPull = true
                    since = nil
                    continue
                }
                guard isCurrent(generation) else { return }
                var deleted = page.deleted
                if isFullPull {
                    for record in page.changed { seen.insert(record.record.id) }
                    if !page.hasMore {
                        // What the server no longer has goes, unless a push of this pull's time made it.
                        deleted += server.keys.filter { !seen.contains($0) && pushedDuringPull[$0] == nil }
                    }
                }
                let isLast = !page.hasMore
                applied += apply(
                    page.changed, deleted: deleted,
                    cursor: isFullPull && !isLast ? nil : page.cursor, replacesCursor: isFullPull && isLast,
                    syncedAt: isLast ? now() : nil)
                since = page.cursor
                guard isLast else { continue }
                // A tombstone of a record a push of this pull's time wrote may be older than the
                // push: the cursor stayed, and the pull goes again from it, now that the pushes
                // answered (at most three times).
                guard tombstoneSkippedDuringPull, repeats < 3 else { break }
                repeats += 1
                tombstoneSkippedDuringPull = false
                pushedDuringPull.removeAll()
                since = cursor
                isFullPull = since == nil
                seen.removeAll()
            }
            pushedDuringPull.removeAll()
            changeRecords { contents, _ in
                guard contents == nil else { return false }
                contents = RecordSet()
                return true
            }
            if let inspector = LoadableInspection.inspector {
                inspector.record(self) { .collectionPulled(label: $0, time: $1, changes: applied) }
            }
            setDidSyncSuccessfully()
        } catch {
            guard isCurrent(generation) else { return }
            pushedDuringPull.removeAll()
            setDidFailToSync(error)
        }
    }

    /// Applies one page: the records without pending changes take the server's version, those with
    /// some go through the conflict rules; then the page is saved with its cursor. Returns the
    /// records and tombstones applied (those that changed something).
    @discardableResult
    func apply(
        _ changed: [RemoteRecord<Record>], deleted: [Record.ID], cursor newCursor: String?, replacesCursor: Bool,
        syncedAt: Date?
    ) -> Int {
        var shown: [Record.ID] = []
        var kept: [RemoteRecord<Record>] = []
        var gone: [Record.ID] = []
        kept.reserveCapacity(changed.count)
        for record in changed {
            let id = record.record.id
            if let superseded = pushedDuringPull[id], superseded.contains(record.version) { continue }
            if let current = server[id], current.version == record.version, current.record == record.record { continue }
            kept.append(record)
            receive(id, record, shown: &shown)
        }
        for id in deleted {
            if pushedDuringPull[id] != nil {
                tombstoneSkippedDuringPull = true
                continue
            }
            guard server[id] != nil || idsWithItems.contains(id) else { continue }
            gone.append(id)
            receive(id, nil, shown: &shown)
        }
        // After a skipped tombstone the cursor stays, so that the pull (or, after a crash, the
        // next one) goes again over it.
        let newCursor = tombstoneSkippedDuringPull ? nil : newCursor
        let replacesCursor = replacesCursor && !tombstoneSkippedDuringPull
        if newCursor != nil || replacesCursor { cursor = newCursor }
        if let syncedAt {
            storedHasSynced = true
            storedLastSyncedAt = syncedAt
        }
        var page = SyncJournalPage<Record>(changed: kept, deleted: gone, cursor: newCursor)
        page.replacesCursor = replacesCursor
        page.syncedAt = syncedAt
        save(page)
        if !shown.isEmpty { refresh(shown) }
        return kept.count + gone.count
    }

    /// The server's record `id` is now `record` (`nil`: deleted).
    private func receive(_ id: Record.ID, _ record: RemoteRecord<Record>?, shown: inout [Record.ID]) {
        let items = idsWithItems.contains(id) ? items(of: id) : []
        shown.append(id)
        guard let first = items.first, let last = items.last else {
            server[id] = record
            return
        }
        if items.contains(where: { $0.state == .sending }) {
            // The push's answer settles it: this may be the app's own write coming back.
            setServer(id, record)
            return
        }
        if let held = items.first(where: { $0.state == .conflict }) {
            setServer(id, record)
            outbox.holdAsConflict(held.id, remote: record?.asChange)
            return
        }
        if let record, first.change.base == record.version {
            server[id] = record
            return
        }
        if record == nil, first.change.base == nil {
            // A create, and the server has no record either: a tombstone of an earlier record of
            // this id (the app's own delete, or another device's record since deleted) is no conflict.
            server[id] = nil
            return
        }
        if items.count > 1, first.change.record == record?.record {
            // The server has the first change as made: it was applied and its answer lost (before a
            // relaunch, or a retry). The later changes go on on it, as after its answer.
            server[id] = record
            outbox.discard(first.id)
            let applied: RecordChange<Record> =
                record?.asChange ?? .delete(id, base: "")
            for item in items.dropFirst() {
                var change = item.change
                Self.rebase(&change, on: applied)
                outbox.replaceChange(of: item.id, with: change)
            }
            return
        }
        let base = conflictBase(of: id, version: first.change.base)
        if let inspector = LoadableInspection.inspector { inspectConflict(inspector, id) }
        let settlement = ConflictSettlement.settle(
            conflictPolicy, id: id, base: base, local: last.change.record, remote: record)
        setServer(id, record)
        switch settlement {
        case .acceptServer:
            for item in items { outbox.discard(item.id) }
        case .push(let change):
            for item in items { outbox.discard(item.id) }
            // Made on the server's record now: the base of the changes it replaces no longer is one.
            conflictBases[id] = nil
            outbox.enqueue(change, scope: scope(of: id))
        case .hold:
            conflictBases[id] = base
            for item in items.dropLast() { outbox.discard(item.id) }
            outbox.holdAsConflict(last.id, remote: record?.asChange)
        }
    }

    // MARK: - Pushes

    /// Pushes one change (the outbox's `send`), settling a conflict by the policy; the record the
    /// server answered with is saved before the outbox saves the change's removal.
    func push(
        _ change: RecordChange<Record>, idempotencyKey: String
    ) async throws -> OutboxOutcome<RecordChange<Record>> {
        let id = change.id
        let itemID = outbox.items.first { $0.idempotencyKey == idempotencyKey && $0.state == .sending }?.id
        var change = change
        var key = idempotencyKey
        for round in 1...4 {
            let result: PushResult<Record>
            do {
                result = try await remote.push(change, idempotencyKey: key)
            } catch {
                // Refused for good: the change stays, failed, until `resolve`; the app is told.
                if !LoadableOutbox<RecordChange<Record>>.retriesByDefault(error) { report(error) }
                throw error
            }
            switch result {
            case .applied(let record):
                await keepPushed(id, record, base: change.base)
                showWithout(itemID, of: id)
                if let inspector = LoadableInspection.inspector { inspectPush(inspector, accepted: 1) }
                return .appliedAs(record.asChange)
            case .deleted:
                await keepPushed(id, nil, base: change.base)
                showWithout(itemID, of: id)
                if let inspector = LoadableInspection.inspector { inspectPush(inspector, accepted: 1) }
                return .appliedAs(.delete(id, base: ""))
            case .conflict(let record):
                if let record, record.record == change.record {
                    // The server has the change as sent: an earlier attempt was applied and its
                    // answer lost (a server that ignores idempotency keys refuses the repeat).
                    await keepPushed(id, record, base: change.base)
                    showWithout(itemID, of: id)
                    if let inspector = LoadableInspection.inspector { inspectPush(inspector, accepted: 1) }
                    return .appliedAs(record.asChange)
                }
                if let inspector = LoadableInspection.inspector { inspectConflict(inspector, id) }
                // The record as shown: the last of its changes (later ones made while this was sent).
                let later = items(of: id).filter { $0.id != itemID && $0.state == .pending }
                let local = later.last.map { $0.change.record } ?? change.record
                let base = conflictBase(of: id, version: change.base)
                let settlement = ConflictSettlement.settle(
                    conflictPolicy, id: id, base: base, local: local, remote: record)
                setServer(id, record)
                switch settlement {
                case .acceptServer:
                    for item in later { outbox.discard(item.id) }
                    await saveServer(id)
                    showWithout(itemID, of: id)
                    if let inspector = LoadableInspection.inspector { inspectPush(inspector, accepted: 0) }
                    return .dropped
                case .push(let settled):
                    for item in later { outbox.discard(item.id) }
                    conflictBases[id] = nil
                    change = settled
                    key = "\(idempotencyKey).\(round)"
                case .hold:
                    conflictBases[id] = base
                    if let itemID, let last = later.last {
                        outbox.replaceChange(of: itemID, with: Self.change(id, local, replacing: last.change))
                        for item in later { outbox.discard(item.id) }
                    }
                    await saveServer(id)
                    if let inspector = LoadableInspection.inspector { inspectPush(inspector, accepted: 0) }
                    return .conflict(remote: record?.asChange)
                }
            }
        }
        throw SyncPushConflictsRepeated()
    }

    /// Records the end of a push that the server answered: `accepted` records taken (none when it
    /// ended in a conflict).
    private func inspectPush(_ inspector: LoadableInspector, accepted: Int) {
        inspector.record(self) { .collectionPushed(label: $0, time: $1, changes: accepted) }
    }

    /// Records a conflict met on record `id`, on a pull or a push, before it is settled.
    private func inspectConflict(_ inspector: LoadableInspector, _ id: Record.ID) {
        inspector.record(self) { .collectionConflict(label: $0, time: $1, record: "\(id)") }
    }

    /// Shows record `id` as it stands once item `itemID` leaves the outbox, which it does as soon
    /// as the push returns: the records shown and ``status`` change in the same turn.
    private func showWithout(_ itemID: String?, of id: Record.ID) {
        refresh([id], items: outbox.items.filter { $0.id != itemID })
    }

    /// Keeps the server's answer to a push of the change made on `base`, and saves it.
    private func keepPushed(_ id: Record.ID, _ record: RemoteRecord<Record>?, base: String?) async {
        if core.state == .syncing {
            var superseded = pushedDuringPull[id] ?? []
            if let base { superseded.insert(base) }
            pushedDuringPull[id] = superseded
        }
        // Later changes are rebased on the server's answer: an earlier base no longer is theirs.
        conflictBases[id] = nil
        server[id] = record
        await saveServer(id)
    }

    /// Saves the server's record `id` as it is now, and returns once it is saved.
    private func saveServer(_ id: Record.ID) async {
        var page = SyncJournalPage<Record>()
        if let record = server[id] { page.changed = [record] } else { page.deleted = [id] }
        await withCheckedContinuation { continuation in save(page) { continuation.resume() } }
    }

    // MARK: - The cache

    /// Saves `page` as the next entry of the journal, and a snapshot in its place when the pages
    /// hold more records than the collection (at least half of them stale).
    func save(_ page: SyncJournalPage<Record>, then done: (@MainActor () -> Void)? = nil) {
        journalPage += 1
        journalPageRecords += page.changed.count + page.deleted.count
        let number = journalPage
        let cache = cache
        let key = key
        let savedAt = now()
        CacheQueue.enqueue(in: cache, key: SyncJournal.snapshotKey(key)) { [weak self] in
            var failure: (any Error)?
            do {
                let data = try JSONEncoder().encode(page)
                try await cache.save(
                    CachedEntry(data: data, savedAt: savedAt, version: 1, isPinned: true),
                    key: SyncJournal.pageKey(key, number))
            } catch {
                failure = LoadableCacheError(error, in: .save, key: SyncJournal.pageKey(key, number))
            }
            return { [weak self] in
                if let failure { self?.report(failure) }
                done?()
            }
        }
        if journalPageRecords > Swift.max(512, server.count) { saveSnapshot() }
    }

    /// Replaces the snapshot and the pages after it with one snapshot, off the main actor: what a
    /// restore would read is written back as one entry (so the main actor copies nothing), then
    /// the pages it covers are removed. A journal that does not read back whole is left as it is.
    func saveSnapshot() {
        journalPageRecords = 0
        let cache = cache
        let key = key
        let savedAt = now()
        CacheQueue.enqueue(in: cache, key: SyncJournal.snapshotKey(key)) { [weak self] in
            let restore = await SyncJournal.restore(Record.self, from: cache, key: key)
            let errors = restore.errors
            if !errors.isEmpty {
                return { [weak self] in
                    for error in errors { self?.report(error) }
                }
            }
            guard restore.lastPage > 0 else { return nil }
            let snapshot = SyncJournalSnapshot(
                lastPage: restore.lastPage, records: restore.records, cursor: restore.cursor,
                hasSynced: restore.hasSynced, syncedAt: restore.syncedAt)
            var failure: (any Error)?
            do {
                let data = try JSONEncoder().encode(snapshot)
                try await cache.save(
                    CachedEntry(data: data, savedAt: savedAt, version: 1, isPinned: true),
                    key: SyncJournal.snapshotKey(key))
                try await SyncJournal.removePages(downFrom: snapshot.lastPage, in: cache, key: key)
            } catch {
                failure = LoadableCacheError(error, in: .save, key: SyncJournal.snapshotKey(key))
            }
            guard let failure else { return nil }
            return { [weak self] in self?.report(failure) }
        }
    }

    /// Reads what the cache keeps (off the main actor), then shows it.
    func startRestore() {
        let cache = cache
        let key = key
        CacheQueue.enqueue(in: cache, key: SyncJournal.snapshotKey(key)) { [weak self] in
            let restore = await SyncJournal.restore(Record.self, from: cache, key: key)
            return { [weak self] in self?.restoreDidFinish(restore) }
        }
    }

    private func restoreDidFinish(_ restore: SyncJournalRestore<Record>) {
        for error in restore.errors { report(error) }
        journalPage = restore.lastPage
        journalPageRecords = restore.pageRecords
        if !restore.records.isEmpty || restore.hasSynced {
            // Pulls and pushes of this launch (none before the restore ends) are newer.
            for record in restore.records where server[record.record.id] == nil {
                server[record.record.id] = record
            }
            if cursor == nil { cursor = restore.cursor }
            if !storedHasSynced {
                storedHasSynced = restore.hasSynced
                storedLastSyncedAt = restore.syncedAt
            }
            let local = contents
            var set = RecordSet(restore.records.compactMap { server[$0.record.id]?.record })
            for record in local ?? RecordSet() where !set.contains(id: record.id) { set.upsert(record) }
            if let syncedAt = restore.syncedAt, local == nil {
                let age = Swift.max(0, now().timeIntervalSince(syncedAt))
                restoreContents(set, age: .seconds(age))
                live?.replaceAll(with: set)
            } else {
                changeRecords { contents, log in
                    contents = set
                    log.replaceAll()
                    return true
                }
            }
        }
        refreshPending()
        recordsRestore.finish()
    }
}

extension RemoteRecord where Record: Identifiable & Codable, Record.ID: Codable & Sendable {
    /// The server's record as the collection's outbox carries it (an applied change's answer, the
    /// server's side of a conflict): an update made on the server's version. Later changes of the
    /// record are rebased on its version.
    var asChange: RecordChange<Record> { .update(record, base: version) }
}
