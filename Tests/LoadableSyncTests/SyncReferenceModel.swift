import LoadableSync
import Testing

/// What two synced collections on one server should show, as a plain value: the reference of
/// `SyncModelTests`.
///
/// The test runs one step at a time and lets each end quiet: a device that can push (online, the
/// server up) has pushed every pending change (its clock moved past any backoff), one device after
/// the other (device 0 first); a device whose pushes fail (the server down) has tried the first
/// change of each record once. So every change reaches the server at a known step, and the model
/// needs no time.
///
/// The model keeps, for each device, the server's records as the device last heard of them
/// (``Device/known``) and at most one pending change per record (``Pending``): what the record
/// should become, and the server's version it was made on. The collection's outbox may hold several
/// items for one record (a change made after a failed push is an item of its own); they reach the
/// server one after the other with nothing in between, so their effect is one change's. Versions
/// are the model's own (one counter): only whether two are equal matters.
///
/// Conflicts follow the table of ``ConflictPolicy``: a pending change meets a server record at
/// another version than its base (on a pull, or when pushed), and ``settle(base:local:remote:)``
/// decides.
struct SyncReferenceModel {
    typealias Record = TaskRecord

    /// The policies, by name.
    enum Policy: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case serverWins, clientWins, fieldwise, merge, manual

        var testDescription: String { rawValue }

        /// The collection's policy.
        var conflictPolicy: ConflictPolicy<Record> {
            switch self {
            case .serverWins: .serverWins
            case .clientWins: .clientWins
            case .fieldwise: .fieldwise
            case .merge:
                .merge { base, local, remote in SyncReferenceModel.merge(base: base, local: local, remote: remote) }
            case .manual: .manual
            }
        }
    }

    /// A server record and its version.
    struct Versioned: Equatable {
        var record: Record
        var version: Int
    }

    /// A conflict held for the app (`.manual`).
    struct Conflict: Equatable {
        /// The record at the base version, as ``SyncConflict/base`` shows it (`nil` after a relaunch:
        /// the collection no longer has it).
        var base: Record?
        /// The server's record, as last heard of.
        var remote: Record?
    }

    /// A device's pending change of one record.
    struct Pending: Equatable {
        /// The server's record the change was made on; `nil`: none (a create).
        var base: Versioned?
        /// What the record becomes; `nil`: deleted.
        var local: Record?
        /// Whether the change's first item was sent (and failed): a later change is an item of its
        /// own, so a delete after an insert no longer cancels it.
        var attempted = false
        /// Whether a later item follows the first (made after it was attempted).
        var hasLaterItem = false
        /// What the first item makes of the record (`nil`: deletes it), when a later item follows.
        var first: Record?
        /// Whether a policy made it, settling a conflict of an earlier change.
        var isSettlement = false
        /// Whether the server applied the first item but its answer was lost: the device sends it
        /// again (and gets the first answer), or hears of it on a pull.
        var answerLost = false
        /// What the server made of the first item (`nil`: deleted), when its answer was lost.
        var applied: Versioned?
        /// Held for the app.
        var conflict: Conflict?
    }

    /// One device.
    struct Device {
        var known: [String: Versioned] = [:]
        var pending: [String: Pending] = [:]
        var isOffline = false

        /// The record `id` as shown.
        func shown(_ id: String) -> Record? {
            if let pending = pending[id] { return pending.local }
            return known[id]?.record
        }

        /// Every record shown, by id.
        var contents: [String: Record] {
            var records = known.mapValues(\.record)
            for (id, pending) in pending { records[id] = pending.local }
            return records
        }

        /// The conflicts held, by id.
        var conflicts: [String: (conflict: Conflict, local: Record?)] {
            pending.compactMapValues { pending in pending.conflict.map { ($0, pending.local) } }
        }

        /// Whether a change waits to be pushed (conflicts excluded).
        var hasPendingChanges: Bool { pending.values.contains { $0.conflict == nil } }
    }

    /// What a policy decides for one conflict.
    enum Decision: Equatable {
        /// The server's record stays; the local change goes.
        case acceptServer
        /// This record (`nil`: deleted) is pushed on the server's version.
        case push(Record?)
        /// Kept for the app.
        case hold
    }

    /// Cases worth reaching: the test checks that its sequences reach each (under the policies
    /// where it can happen).
    enum Reached: String, CaseIterable, Comparable {
        case pullConflict, pushConflict, held, resolved, insertCancelled, laterItem, pushedAfterFailure,
            createMetRecord, relaunchWithPending, conflictOfSettlement, pushedDuringPull, writtenDuringPush,
            answerLostAtRelaunch, answerLostOffline

        static func < (lhs: Reached, rhs: Reached) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// Set when a step meets a known bug of the collection, where its outcome differs from the
    /// model's: the test reports the sequence as a known issue.
    var knownIssue: String?

    let policy: Policy
    /// Whether the server ignores idempotency keys: a change sent again meets the preconditions.
    let ignoresIdempotencyKeys: Bool
    private(set) var reached: [Reached: Int] = [:]
    var server: [String: Versioned] = [:]
    var isServerOffline = false
    var devices = [Device(), Device()]
    private var nextVersion = 0

    init(policy: Policy, ignoresIdempotencyKeys: Bool = false) {
        self.policy = policy
        self.ignoresIdempotencyKeys = ignoresIdempotencyKeys
    }

    /// Counts a case the test reached.
    mutating func note(_ case: Reached) {
        reached[`case`, default: 0] += 1
    }

    // MARK: - The policies

    /// The `.merge` closure of the test: the local title, the server's note, and `done` from the
    /// side that changed it since the base (the local side when both did); a local record meets a
    /// deleted one again, a local delete wins.
    static func merge(base: Record?, local: Record?, remote: Record?) -> Record? {
        guard let local else { return nil }
        guard let remote else { return local }
        var merged = local
        merged.note = remote.note
        if let base, local.done == base.done { merged.done = remote.done }
        return merged
    }

    /// Field by field: a field only one side changed since `base` takes that side's value; any
    /// other, the server's (every field, without a base).
    static func fieldwise(base: Record?, local: Record, remote: Record) -> Record {
        guard let base else { return remote }
        var merged = remote
        if local.title != base.title, remote.title == base.title { merged.title = local.title }
        if local.done != base.done, remote.done == base.done { merged.done = local.done }
        if local.note != base.note, remote.note == base.note { merged.note = local.note }
        return merged
    }

    /// The decision of the policy (`ConflictPolicy`'s table).
    func settle(base: Record?, local: Record?, remote: Record?) -> Decision {
        // Both sides agree: nothing to push.
        if local == remote { return .acceptServer }
        let kept: Record?
        switch policy {
        case .serverWins: return .acceptServer
        case .clientWins: kept = local
        case .fieldwise:
            guard let local, let remote else { return .acceptServer }
            kept = Self.fieldwise(base: base, local: local, remote: remote)
        case .merge: kept = Self.merge(base: base, local: local, remote: remote)
        case .manual: return .hold
        }
        return kept == remote ? .acceptServer : .push(kept)
    }

    // MARK: - The server

    /// Makes the server's record `id` `record` (`nil`: deleted), with a new version.
    private mutating func store(_ id: String, _ record: Record?) {
        if let record {
            nextVersion += 1
            server[id] = Versioned(record: record, version: nextVersion)
        } else {
            server[id] = nil
        }
    }

    /// A third party's write (`nil`: a delete of a record the server has).
    mutating func remoteWrite(_ id: String, _ record: Record?) {
        guard record != nil || server[id] != nil else { return }
        store(id, record)
    }

    // MARK: - A device's steps

    /// A local insert, update or delete: `record` is the record as the app leaves it.
    mutating func write(device index: Int, _ id: String, _ record: Record?) {
        var device = devices[index]
        defer { devices[index] = device }
        guard record != device.shown(id) else { return }
        guard var pending = device.pending[id] else {
            device.pending[id] = Pending(base: device.known[id], local: record)
            return
        }
        if pending.conflict == nil, record == nil, pending.base == nil, !pending.attempted {
            // Inserted and deleted before it was sent: nothing goes.
            note(.insertCancelled)
            device.pending[id] = nil
            return
        }
        if pending.conflict == nil, pending.attempted, !pending.hasLaterItem {
            pending.first = pending.local
            pending.hasLaterItem = true
            note(.laterItem)
        }
        pending.local = record
        device.pending[id] = pending
    }

    /// The app settles the conflict of `id` with `record`: pushed on the version last heard of.
    mutating func resolve(device index: Int, _ id: String, with record: Record?) {
        guard let pending = devices[index].pending[id], pending.conflict != nil else { return }
        note(.resolved)
        let known = devices[index].known[id]
        devices[index].pending[id] =
            record == known?.record ? nil : Pending(base: known, local: record, attempted: pending.attempted)
    }

    /// A pull: the device hears of every record that changed on the server.
    mutating func pull(device index: Int) {
        guard !isServerOffline else { return }
        var device = devices[index]
        defer { devices[index] = device }
        let ids = Set(server.keys).union(device.known.keys).union(device.pending.keys)
        for id in ids.sorted() where server[id] != device.known[id] {
            let remote = server[id]
            device.known[id] = remote
            guard var pending = device.pending[id] else { continue }
            if pending.conflict != nil {
                pending.conflict?.remote = remote?.record
                device.pending[id] = pending
                continue
            }
            // Made on the version the server has (or on none, and the server has none): no conflict.
            if remote?.version == pending.base?.version { continue }
            if pending.hasLaterItem, remote?.record == pending.first {
                // The server has the first change as made (its answer was lost): the later ones go on
                // on the server's record.
                device.pending[id] = Pending(base: remote, local: pending.local)
                continue
            }
            note(.pullConflict)
            if pending.base == nil { note(.createMetRecord) }
            if pending.isSettlement { note(.conflictOfSettlement) }
            switch settle(base: pending.base?.record, local: pending.local, remote: remote?.record) {
            case .acceptServer:
                device.pending[id] = nil
            case .push(let record):
                device.pending[id] = Pending(base: remote, local: record, isSettlement: true)
            case .hold:
                note(.held)
                pending.conflict = Conflict(base: pending.base?.record, remote: remote?.record)
                // The collection holds the last item: its sends are the first item's only when it is the first.
                pending.attempted = pending.attempted && !pending.hasLaterItem
                pending.hasLaterItem = false
                device.pending[id] = pending
            }
        }
    }

    /// Whether device `index` pushes its changes at once (online, the server up).
    func canPush(device index: Int) -> Bool {
        !devices[index].isOffline && !isServerOffline
    }

    /// Whether device `index` has a change of `id` to push (not held).
    func hasChangeToPush(device index: Int, _ id: String) -> Bool {
        devices[index].pending[id].map { $0.conflict == nil } ?? false
    }

    /// Device `index` sends the first change of each record: a change made meanwhile is an item of
    /// its own.
    mutating func markAttempted(device index: Int) {
        for id in devices[index].pending.keys where devices[index].pending[id]?.conflict == nil {
            devices[index].pending[id]?.attempted = true
        }
    }

    /// The end of a step: each device that can push pushes its pending changes; one whose pushes
    /// fail has tried them.
    mutating func settlePushes() {
        for index in devices.indices where !devices[index].isOffline {
            if isServerOffline {
                markAttempted(device: index)
                continue
            }
            for id in devices[index].pending.keys.sorted() where devices[index].pending[id]?.conflict == nil {
                push(device: index, id)
            }
        }
    }

    /// Pushes device `index`'s pending change of `id`, with the answer lost: the server applies it
    /// (unless it conflicts), the device does not know.
    mutating func pushLosingItsAnswer(device index: Int, _ id: String) {
        guard var pending = devices[index].pending[id], pending.conflict == nil, !pending.answerLost else { return }
        pending.attempted = true
        if server[id]?.version == pending.base?.version {
            store(id, pending.local)
            pending.answerLost = true
            pending.applied = server[id]
        }
        devices[index].pending[id] = pending
    }

    /// Pushes device `index`'s pending change of `id`.
    private mutating func push(device index: Int, _ id: String) {
        guard var pending = devices[index].pending[id] else { return }
        if pending.answerLost, !ignoresIdempotencyKeys {
            // Sent again: the server gives the first answer, and the later changes go on on it.
            devices[index].known[id] = pending.applied
            guard pending.local != pending.applied?.record else {
                devices[index].pending[id] = nil
                return
            }
            pending = Pending(base: pending.applied, local: pending.local)
            devices[index].pending[id] = pending
        }
        let current = server[id]
        if pending.attempted { note(.pushedAfterFailure) }
        if pending.hasLaterItem, current?.record == pending.first {
            // The server has the first change as made (applied, or deleted already): the later ones
            // go on on the server's record.
            devices[index].known[id] = current
            pending = Pending(base: current, local: pending.local)
        }
        if current?.version == pending.base?.version {
            store(id, pending.local)
            devices[index].known[id] = server[id]
            devices[index].pending[id] = nil
            return
        }
        devices[index].known[id] = current
        note(.pushConflict)
        if pending.base == nil { note(.createMetRecord) }
        if pending.isSettlement { note(.conflictOfSettlement) }
        let decision = settle(base: pending.base?.record, local: pending.local, remote: current?.record)
        switch decision {
        case .acceptServer:
            devices[index].pending[id] = nil
        case .push(let record):
            store(id, record)
            devices[index].known[id] = server[id]
            devices[index].pending[id] = nil
        case .hold:
            note(.held)
            var held = pending
            held.conflict = Conflict(base: pending.base?.record, remote: current?.record)
            held.attempted = true
            held.hasLaterItem = false
            devices[index].pending[id] = held
        }
    }

    /// The app quits and starts again: everything is restored but the bases of held conflicts.
    mutating func relaunch(device index: Int) {
        if !devices[index].pending.isEmpty { note(.relaunchWithPending) }
        for id in devices[index].pending.keys where devices[index].pending[id]?.conflict != nil {
            devices[index].pending[id]?.conflict?.base = nil
        }
    }
}
