import Foundation
import LoadableSync

/// An in-process remote for the `sync` and `views` scenarios: every record with its version, full
/// pulls sliced from an array page by page, delta pulls of what changed since the last pull, and
/// pushes applied at once. Its own cost is an array slice, or an index read from the id: a record's
/// id is one letter followed by its index in the array (`r12`, `t12`).
final class PagedRemote<Record: Identifiable & Codable & Sendable & Equatable>: SyncRemote, @unchecked Sendable
where Record.ID == String {
    private let lock = NSLock()
    private var records: [RemoteRecord<Record>]
    private var changedSince: [RemoteRecord<Record>] = []
    private var version = 1
    let pageSize: Int
    /// The records the last ``change(_:_:)`` changed.
    private(set) var lastChanged: [RemoteRecord<Record>] = []

    init(_ records: [Record], pageSize: Int) {
        self.records = records.map { RemoteRecord(record: $0, version: "1") }
        self.pageSize = pageSize
    }

    var all: [RemoteRecord<Record>] { lock.withLock { records } }

    /// Changes the records at `indices` with `body` under one new version: the next delta pull
    /// brings them.
    func change(_ indices: Range<Int>, _ body: (inout Record, Int) -> Void) {
        lock.withLock {
            version += 1
            var changed: [RemoteRecord<Record>] = []
            for index in indices {
                body(&records[index].record, index)
                records[index].version = String(version)
                changed.append(records[index])
            }
            changedSince += changed
            lastChanged = changed
        }
    }

    /// Gives record `index` a new version with the same contents: the next delta pull brings it.
    func touch(_ index: Int) {
        change(index..<index + 1) { _, _ in }
    }

    func pull(since cursor: String?) async throws -> SyncPage<Record> {
        lock.withLock {
            let start = cursor.flatMap { $0.hasPrefix("full:") ? Int($0.dropFirst(5)) : nil }
            if cursor == nil || start != nil {
                let start = start ?? 0
                let end = min(start + pageSize, records.count)
                let hasMore = end < records.count
                return SyncPage(
                    changed: Array(records[start..<end]), deleted: [], cursor: hasMore ? "full:\(end)" : "v\(version)",
                    hasMore: hasMore)
            }
            defer { changedSince = [] }
            return SyncPage(changed: changedSince, deleted: [], cursor: "v\(version)", hasMore: false)
        }
    }

    func push(_ change: RecordChange<Record>, idempotencyKey: String) async throws -> PushResult<Record> {
        lock.withLock {
            version += 1
            guard let record = change.record, let index = Int(record.id.dropFirst()) else { return .deleted }
            let remote = RemoteRecord(record: record, version: String(version))
            records[index] = remote
            return .applied(remote)
        }
    }
}
