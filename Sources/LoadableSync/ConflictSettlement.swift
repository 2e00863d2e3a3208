internal import Foundation

/// What a ``ConflictPolicy`` decides for one conflict: a pure function of the three sides.
enum ConflictSettlement<Record: Identifiable & Codable & Sendable & Equatable>: Equatable
where Record.ID: Codable & Sendable {
    /// The server's side stays: the record's local changes go.
    case acceptServer
    /// This change replaces the record's local changes (made on the server's version).
    case push(RecordChange<Record>)
    /// Kept for the app (``ConflictPolicy/manual``).
    case hold

    /// Settles a conflict of record `id`.
    ///
    /// - Parameters:
    ///   - policy: The collection's policy.
    ///   - id: The record's id.
    ///   - base: The record at the local change's base version, if known.
    ///   - local: The record as shown locally (`nil`: deleted locally).
    ///   - remote: The server's record (`nil`: deleted on the server).
    @MainActor
    static func settle(
        _ policy: ConflictPolicy<Record>, id: Record.ID, base: Record?, local: Record?, remote: RemoteRecord<Record>?
    ) -> Self {
        // Both sides agree (both deleted, or the server has what is shown): nothing to push.
        if local == remote?.record { return .acceptServer }
        switch policy {
        case .serverWins:
            return .acceptServer
        case .clientWins:
            return change(id: id, to: local, on: remote)
        case .fieldwise:
            guard let local, let remote else { return .acceptServer }
            guard let merged = fieldwise(base: base, local: local, remote: remote.record) else { return .acceptServer }
            return change(id: id, to: merged, on: remote)
        case .merge(let merge):
            return change(id: id, to: merge(base, local, remote?.record), on: remote)
        case .manual:
            return .hold
        }
    }

    /// The change that makes the server's record (`remote`, `nil`: none) into `record` (`nil`:
    /// deleted); ``acceptServer`` when they are the same.
    static func change(id: Record.ID, to record: Record?, on remote: RemoteRecord<Record>?) -> Self {
        if record == remote?.record { return .acceptServer }
        switch (record, remote) {
        case (let record?, let remote?): return .push(.update(record, base: remote.version))
        case (let record?, nil): return .push(.create(record))
        case (nil, let remote?): return .push(.delete(id, base: remote.version))
        case (nil, nil): return .acceptServer
        }
    }

    /// Merges per top-level field of the records' JSON: a field only the local side changed since
    /// `base` takes the local value; every other field the server's. `nil` when a record is not a
    /// JSON object, or the merge does not decode.
    static func fieldwise(base: Record?, local: Record, remote: Record) -> Record? {
        let encoder = JSONEncoder()
        guard let localObject = object(local, encoder), var merged = object(remote, encoder) else { return nil }
        let baseObject = base.flatMap { object($0, encoder) }
        for (field, localValue) in localObject {
            guard let baseObject else { continue }
            let baseValue = baseObject[field]
            let localChanged = !same(localValue, baseValue)
            let remoteChanged = !same(merged[field], baseValue)
            if localChanged, !remoteChanged { merged[field] = localValue }
        }
        if let baseObject {
            // A field the local side removed (an optional set to nil) and the server left alone.
            for (field, baseValue) in baseObject where localObject[field] == nil && same(merged[field], baseValue) {
                merged[field] = nil
            }
        }
        guard let data = try? JSONSerialization.data(withJSONObject: merged),
            let record = try? JSONDecoder().decode(Record.self, from: data)
        else { return nil }
        return record
    }

    private static func object(_ record: Record, _ encoder: JSONEncoder) -> [String: Any]? {
        guard let data = try? encoder.encode(record) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }

    /// Whether two JSON values are the same (`nil`: absent).
    private static func same(_ lhs: Any?, _ rhs: Any?) -> Bool {
        switch (lhs, rhs) {
        case (nil, nil): return true
        case (let lhs?, let rhs?):
            // Both wrapped the same way, so a sorted-keys encoding compares them.
            let wrappedLHS = try? JSONSerialization.data(withJSONObject: [lhs], options: .sortedKeys)
            let wrappedRHS = try? JSONSerialization.data(withJSONObject: [rhs], options: .sortedKeys)
            return wrappedLHS != nil && wrappedLHS == wrappedRHS
        default: return false
        }
    }
}
