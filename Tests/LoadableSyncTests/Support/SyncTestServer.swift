import Foundation
import LoadableSupport
import LoadableSync

/// An in-process sync server for tests: records with integer versions, a change log with
/// tombstones, pages, an expiring history, idempotency keys, an offline switch, and pushes that can
/// be held in flight.
final class SyncTestServer<Record: Identifiable & Codable & Sendable & Equatable>: Sendable
where Record.ID: Codable & Sendable & Comparable {
    struct State {
        var records: [Record.ID: (record: Record, version: Int)] = [:]
        /// The last change of each record: its sequence number, and whether it deleted it.
        var log: [Record.ID: (sequence: Int, deleted: Bool)] = [:]
        var sequence = 0
        var pageSize = 1_000
        /// Delta pulls from a cursor before this throw `cursorExpired`.
        var historyStartsAt = 0
        var isOffline = false
        /// Results by idempotency key: a repeated push gets the first answer.
        var answers: [String: PushResult<Record>] = [:]
        /// How many times each key's change was applied.
        var applications: [String: Int] = [:]
        var pushCount = 0
        var pullCount = 0
        var holdsPushes = false
        var heldPushes: [CheckedContinuation<Void, Never>] = []
        /// Pushes answered, then made to throw as if the answer was lost.
        var losesAnswers = false
        /// The next answers (of pushes applied or refused) lost as with ``losesAnswers``.
        var answersToLose = 0
        /// Whether the pages after a full pull's first carry a page cursor that never expires (a
        /// real server's page token), instead of a delta cursor.
        var continuesFullPulls = false
        /// Whether a push sent again with its key goes through the preconditions again instead of
        /// getting the first answer (Kinto: a repeated create or edit is a `412`).
        var ignoresIdempotencyKeys = false
        /// The keys of creates applied again (keys ignored, the record deleted meanwhile).
        var repeatedCreates: Set<String> = []
        var holdsPulls = false
        var heldPulls: [CheckedContinuation<Void, Never>] = []
    }

    let state = Locked(State())

    init(pageSize: Int = 1_000) {
        state.withLock { $0.pageSize = pageSize }
    }

    var remote: SyncTestRemote<Record> { SyncTestRemote(server: self) }

    var isOffline: Bool {
        get { state.withLock { $0.isOffline } }
        set { state.withLock { $0.isOffline = newValue } }
    }

    /// The records as the server has them, by id.
    var records: [Record.ID: Record] {
        state.withLock { $0.records.mapValues(\.record) }
    }

    func version(of id: Record.ID) -> String? {
        state.withLock { $0.records[id].map { String($0.version) } }
    }

    /// Another device's write, straight into the server.
    func put(_ record: Record) {
        state.withLock { state in
            state.sequence += 1
            state.records[record.id] = (record, state.sequence)
            state.log[record.id] = (state.sequence, false)
        }
    }

    /// Another device's delete.
    func remove(_ id: Record.ID) {
        state.withLock { state in
            guard state.records[id] != nil else { return }
            state.sequence += 1
            state.records[id] = nil
            state.log[id] = (state.sequence, true)
        }
    }

    /// Forgets the history before now: delta pulls from an older cursor expire.
    func expireHistory() {
        state.withLock { state in
            state.historyStartsAt = state.sequence
            state.log = state.log.filter { !$0.value.deleted }
        }
    }

    /// Holds every push after it reached the server and before it is applied, until
    /// ``releasePushes()``.
    func holdPushes() { state.withLock { $0.holdsPushes = true } }

    func releasePushes() {
        let held = state.withLock { state in
            state.holdsPushes = false
            defer { state.heldPushes.removeAll() }
            return state.heldPushes
        }
        for continuation in held { continuation.resume() }
    }

    var heldPushCount: Int { state.withLock { $0.heldPushes.count } }
    var pullCount: Int { state.withLock { $0.pullCount } }
    var pushCount: Int { state.withLock { $0.pushCount } }
    /// How many times a change was applied (changed the server), for each idempotency key (exactly
    /// once: each 1).
    var applications: [String: Int] { state.withLock { $0.applications } }
    var losesAnswers: Bool {
        get { state.withLock { $0.losesAnswers } }
        set { state.withLock { $0.losesAnswers = newValue } }
    }
    /// The next answers lost: the pushes are applied (or refused), then throw as if the answer
    /// never came back.
    var answersToLose: Int {
        get { state.withLock { $0.answersToLose } }
        set { state.withLock { $0.answersToLose = newValue } }
    }
    /// The keys of creates applied again: with keys ignored, a create sent again after its record
    /// was deleted creates it again, as a server without idempotency keys does.
    var repeatedCreates: Set<String> { state.withLock { $0.repeatedCreates } }
    /// Whether a push sent again with its key goes through the preconditions again (Kinto).
    var ignoresIdempotencyKeys: Bool {
        get { state.withLock { $0.ignoresIdempotencyKeys } }
        set { state.withLock { $0.ignoresIdempotencyKeys = newValue } }
    }
    /// Whether a full pull's later pages never expire (their cursor is a page token, `full:<n>`).
    var continuesFullPulls: Bool {
        get { state.withLock { $0.continuesFullPulls } }
        set { state.withLock { $0.continuesFullPulls = newValue } }
    }

    /// Holds every page after the server made it and before it is returned, until
    /// ``releasePulls()``: a page fetched before a push is applied arrives after its answer.
    func holdPulls() { state.withLock { $0.holdsPulls = true } }

    func releasePulls() {
        let held = state.withLock { state in
            state.holdsPulls = false
            defer { state.heldPulls.removeAll() }
            return state.heldPulls
        }
        for continuation in held { continuation.resume() }
    }

    var heldPullCount: Int { state.withLock { $0.heldPulls.count } }

    /// Returns once pulls are not held (at once when they are not).
    func passPullHold() async {
        guard state.withLock({ $0.holdsPulls }) else { return }
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state in
                guard state.holdsPulls else { return true }
                state.heldPulls.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    func pull(since cursor: String?) throws -> SyncPage<Record> {
        try state.withLock { state in
            state.pullCount += 1
            if state.isOffline { throw URLError(.notConnectedToInternet) }
            let since: Int
            var cursor = cursor
            if let token = cursor, token.hasPrefix("full:") {
                // A full pull's later page: no expiry, no tombstones.
                guard let value = Int(token.dropFirst(5)) else { throw SyncTestServerError.badCursor(token) }
                since = value
                cursor = nil
            } else if let cursor {
                guard let value = Int(cursor) else { throw SyncTestServerError.badCursor(cursor) }
                guard value >= state.historyStartsAt else { throw SyncRemoteError.cursorExpired }
                since = value
            } else {
                since = 0
            }
            let entries = state.log
                .filter { $0.value.sequence > since && (cursor != nil || !$0.value.deleted) }
                .sorted { $0.value.sequence < $1.value.sequence }
            let page = entries.prefix(state.pageSize)
            let hasMore = entries.count > page.count
            var changed: [RemoteRecord<Record>] = []
            var deleted: [Record.ID] = []
            for (id, entry) in page {
                if entry.deleted {
                    deleted.append(id)
                } else if let record = state.records[id] {
                    changed.append(RemoteRecord(record: record.record, version: String(record.version)))
                }
            }
            let next = hasMore ? page.last!.value.sequence : state.sequence
            let token = hasMore && cursor == nil && state.continuesFullPulls ? "full:\(next)" : String(next)
            return SyncPage(changed: changed, deleted: deleted, cursor: token, hasMore: hasMore)
        }
    }

    func push(_ change: RecordChange<Record>, idempotencyKey: String) async throws -> PushResult<Record> {
        let hold = try state.withLock { state in
            state.pushCount += 1
            if state.isOffline { throw URLError(.notConnectedToInternet) }
            return state.holdsPushes
        }
        if hold {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state in
                    guard state.holdsPushes else { return true }
                    state.heldPushes.append(continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
        return try state.withLock { state in
            if state.isOffline { throw URLError(.notConnectedToInternet) }
            if !state.ignoresIdempotencyKeys, let answer = state.answers[idempotencyKey] { return answer }
            let sequence = state.sequence
            let result = Self.apply(change, to: &state)
            if case .conflict = result {
            } else if !state.ignoresIdempotencyKeys {
                state.answers[idempotencyKey] = result
            }
            // A delete of a record already gone changes nothing.
            if state.sequence != sequence {
                if case .create = change, state.applications[idempotencyKey] != nil {
                    state.repeatedCreates.insert(idempotencyKey)
                }
                state.applications[idempotencyKey, default: 0] += 1
            }
            if state.losesAnswers { throw URLError(.networkConnectionLost) }
            if state.answersToLose > 0 {
                state.answersToLose -= 1
                throw URLError(.networkConnectionLost)
            }
            return result
        }
    }

    private static func apply(_ change: RecordChange<Record>, to state: inout State) -> PushResult<Record> {
        let id = change.id
        let current = state.records[id]
        let remote = current.map { RemoteRecord(record: $0.record, version: String($0.version)) }
        switch change {
        case .create(let record):
            guard current == nil else { return .conflict(remote: remote) }
            state.sequence += 1
            state.records[id] = (record, state.sequence)
            state.log[id] = (state.sequence, false)
            return .applied(RemoteRecord(record: record, version: String(state.sequence)))
        case .update(let record, let base):
            guard let current, String(current.version) == base else { return .conflict(remote: remote) }
            state.sequence += 1
            state.records[id] = (record, state.sequence)
            state.log[id] = (state.sequence, false)
            return .applied(RemoteRecord(record: record, version: String(state.sequence)))
        case .delete(_, let base):
            guard let current else { return .deleted }
            guard String(current.version) == base else { return .conflict(remote: remote) }
            state.sequence += 1
            state.records[id] = nil
            state.log[id] = (state.sequence, true)
            return .deleted
        }
    }
}

enum SyncTestServerError: Error {
    case badCursor(String)
}

struct SyncTestRemote<Record: Identifiable & Codable & Sendable & Equatable>: SyncRemote
where Record.ID: Codable & Sendable & Comparable {
    let server: SyncTestServer<Record>

    func pull(since cursor: String?) async throws -> SyncPage<Record> {
        let page = try server.pull(since: cursor)
        await server.passPullHold()
        return page
    }

    func push(_ change: RecordChange<Record>, idempotencyKey: String) async throws -> PushResult<Record> {
        try await server.push(change, idempotencyKey: idempotencyKey)
    }
}
