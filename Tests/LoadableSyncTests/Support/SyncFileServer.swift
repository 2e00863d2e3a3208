import Foundation
import LoadableSync

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A sync server kept in a folder, for tests with processes: its state survives the death of the
/// process that used it. The same rules as `SyncTestServer` (integer versions, the last change of
/// each record in a log with tombstones, pages, answers kept by idempotency key), without its
/// switches. Each operation reads the state file, changes it and writes it whole (written aside,
/// then renamed), under an exclusive `flock` of a lock file that the system releases when a
/// process dies: a process killed at any moment leaves the state as it was before or after an
/// operation. Nothing here waits on Swift concurrency, so the parent of an exit test can read it
/// while its cooperative threads are blocked.
final class SyncFileServer: Sendable {
    /// A record as the server keeps it.
    struct Stored: Codable, Equatable {
        var record: TaskRecord
        var version: Int
    }

    /// The last change of a record.
    struct LogEntry: Codable {
        var sequence: Int
        var deleted: Bool
    }

    /// A push's answer, kept for its idempotency key.
    enum Answer: Codable {
        case applied(TaskRecord, version: Int)
        case deleted
    }

    /// A change the server applied: the history shows each once.
    struct Application: Codable, Equatable {
        var key: String
        var id: String
        /// The record's title as the change left it; `nil` for a delete.
        var title: String?
    }

    /// Everything the server keeps.
    struct State: Codable {
        var records: [String: Stored] = [:]
        var log: [String: LogEntry] = [:]
        var sequence = 0
        var answers: [String: Answer] = [:]
        var history: [Application] = []
    }

    let folder: String
    let pageSize: Int
    /// An operation of the server.
    enum Operation: Sendable, Equatable {
        case pull
        /// A push of the record with this id.
        case push(String)
    }

    /// Awaited by the remote after each page made and each push answered, before the answer goes
    /// back: it may hold the answer back.
    let onOperation: (@Sendable (Operation) async -> Void)?

    init(folder: String, pageSize: Int = 2, onOperation: (@Sendable (Operation) async -> Void)? = nil) {
        self.folder = folder
        self.pageSize = pageSize
        self.onOperation = onOperation
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }

    var remote: SyncFileRemote { SyncFileRemote(server: self) }

    private var statePath: String { folder + "/state.json" }

    /// Runs `body` on the state, under the lock, and writes the state back when `body` returns.
    func update<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        let descriptor = open(folder + "/lock", O_RDWR | O_CREAT, 0o644)
        precondition(descriptor >= 0, "SyncFileServer: cannot open its lock file (errno \(errno))")
        defer { close(descriptor) }
        while flock(descriptor, LOCK_EX) != 0 {
            precondition(errno == EINTR, "SyncFileServer: cannot lock (errno \(errno))")
        }
        defer { flock(descriptor, LOCK_UN) }
        var state = readState()
        let result = try body(&state)
        do {
            let data = try JSONEncoder().encode(state)
            try data.write(to: URL(fileURLWithPath: statePath), options: .atomic)
        } catch {
            preconditionFailure("SyncFileServer: cannot write its state: \(error)")
        }
        return result
    }

    /// The state as the file holds it.
    var state: State { update { $0 } }

    private func readState() -> State {
        guard let data = FileManager.default.contents(atPath: statePath) else { return State() }
        do {
            return try JSONDecoder().decode(State.self, from: data)
        } catch {
            preconditionFailure("SyncFileServer: its state file does not decode (a torn write?): \(error)")
        }
    }

    /// The records, by id.
    var records: [String: TaskRecord] { state.records.mapValues(\.record) }

    /// Another device's write, straight into the server.
    func put(_ record: TaskRecord) {
        update { state in
            state.sequence += 1
            state.records[record.id] = Stored(record: record, version: state.sequence)
            state.log[record.id] = LogEntry(sequence: state.sequence, deleted: false)
        }
    }

    /// Another device's delete.
    func remove(_ id: String) {
        update { state in
            guard state.records[id] != nil else { return }
            state.sequence += 1
            state.records[id] = nil
            state.log[id] = LogEntry(sequence: state.sequence, deleted: true)
        }
    }

    func pull(since cursor: String?) throws -> SyncPage<TaskRecord> {
        let page = try update { state in
            var since = 0
            var isFull = cursor == nil
            if let cursor {
                isFull = cursor.hasPrefix("full:")
                guard let value = Int(isFull ? String(cursor.dropFirst(5)) : cursor) else {
                    throw SyncTestServerError.badCursor(cursor)
                }
                since = value
            }
            let entries = state.log
                .filter { $0.value.sequence > since && (!isFull || !$0.value.deleted) }
                .sorted { $0.value.sequence < $1.value.sequence }
            let page = entries.prefix(pageSize)
            let hasMore = entries.count > page.count
            var changed: [RemoteRecord<TaskRecord>] = []
            var deleted: [String] = []
            for (id, entry) in page {
                if entry.deleted {
                    deleted.append(id)
                } else if let stored = state.records[id] {
                    changed.append(RemoteRecord(record: stored.record, version: String(stored.version)))
                }
            }
            let next = hasMore ? page.last!.value.sequence : state.sequence
            // A full pull's later pages carry a page token.
            let token = hasMore && isFull ? "full:\(next)" : String(next)
            return SyncPage(changed: changed, deleted: deleted, cursor: token, hasMore: hasMore)
        }
        return page
    }

    func push(_ change: RecordChange<TaskRecord>, idempotencyKey: String) -> PushResult<TaskRecord> {
        let result = update { state -> PushResult<TaskRecord> in
            if let answer = state.answers[idempotencyKey] {
                switch answer {
                case .applied(let record, let version):
                    return .applied(RemoteRecord(record: record, version: String(version)))
                case .deleted: return .deleted
                }
            }
            let id = change.id
            let current = state.records[id]
            let remote = current.map { RemoteRecord(record: $0.record, version: String($0.version)) }
            switch change {
            case .create(let record):
                guard current == nil else { return .conflict(remote: remote) }
                return Self.store(record, key: idempotencyKey, in: &state)
            case .update(let record, let base):
                guard let current, String(current.version) == base else { return .conflict(remote: remote) }
                return Self.store(record, key: idempotencyKey, in: &state)
            case .delete(_, let base):
                guard let current else {
                    state.answers[idempotencyKey] = .deleted
                    return .deleted
                }
                guard String(current.version) == base else { return .conflict(remote: remote) }
                state.sequence += 1
                state.records[id] = nil
                state.log[id] = LogEntry(sequence: state.sequence, deleted: true)
                state.answers[idempotencyKey] = .deleted
                state.history.append(Application(key: idempotencyKey, id: id, title: nil))
                return .deleted
            }
        }
        return result
    }

    private static func store(_ record: TaskRecord, key: String, in state: inout State) -> PushResult<TaskRecord> {
        state.sequence += 1
        state.records[record.id] = Stored(record: record, version: state.sequence)
        state.log[record.id] = LogEntry(sequence: state.sequence, deleted: false)
        state.answers[key] = .applied(record, version: state.sequence)
        state.history.append(Application(key: key, id: record.id, title: record.title))
        return .applied(RemoteRecord(record: record, version: String(state.sequence)))
    }
}

/// The remote of a ``SyncFileServer``.
struct SyncFileRemote: SyncRemote {
    let server: SyncFileServer

    func pull(since cursor: String?) async throws -> SyncPage<TaskRecord> {
        let page = try server.pull(since: cursor)
        await server.onOperation?(.pull)
        return page
    }

    func push(_ change: RecordChange<TaskRecord>, idempotencyKey: String) async throws -> PushResult<TaskRecord> {
        let result = server.push(change, idempotencyKey: idempotencyKey)
        await server.onOperation?(.push(change.id))
        return result
    }
}
