internal import Foundation

/// One outbox item as it is kept in the cache.
struct OutboxRecord: Sendable, Equatable {
    var id: String
    var idempotencyKey: String
    /// Seconds since the reference date, kept bit for bit.
    var enqueuedAt: Double
    var attempts: Int
    var isFailed: Bool
    /// Set aside: its change did not decode when it was last restored (it is not sent).
    var isSetAside: Bool
    /// The description of the last error; empty for none.
    var lastError: String
    /// The change, encoded as JSON.
    var change: Data
    /// In memory only: the change could not be encoded, so the item is not saved.
    var isUnsaved = false
    /// The name of the last error's type (`String(reflecting:)`); empty for none.
    var errorType = ""
    /// The item's scope; `nil` for none.
    var scope: String?
    /// A conflict, waiting for the app's decision.
    var isConflict = false
    /// The server's side of a conflict, encoded as JSON.
    var remote: Data?
    /// Seconds since the reference date before which the item's scope sends nothing (a retry's
    /// deadline); `nil` for none.
    var notBefore: Double?
    /// Sent: the server has the change, which no loadable showed yet. Kept to be shown on the
    /// loadables that a later ``LoadableOutbox/show(on:_:)`` gives, until they sync.
    var isSent = false
    /// For a sent record: when it was sent, in seconds since the reference date.
    var sentAt: Double = 0
}

/// One change of the stored queue: what a journal entry carries.
enum OutboxOperation: Sendable {
    /// Adds the record at the end, or replaces the record of its id in its place.
    case put(OutboxRecord)
    /// Removes the record of this id, if there is one.
    case remove(String)
}

/// The bytes of an outbox's entries: a snapshot of the queue (every record in order, and how far
/// each writer's journal is folded into it), and journal entries (the changes one writer saved at
/// once, in order).
///
/// Snapshot, layout 3 (integers little-endian, the entry's version 3): `"LOX3"`, the record count
/// (`UInt32`), the records, then the writer count (`UInt8`) and, per writer slot, the number of
/// its last journal entry folded in (`UInt64`). A record: flags (`UInt8`: 1 failed, 2 set aside,
/// 4 conflict, 8 has a scope, 16 has a remote, 32 sent, 64 has a not-before), attempts (`UInt32`),
/// `enqueuedAt`, the not-before and the sent time (each a `Double`'s bits, `UInt64`; 0 when
/// absent), and seven byte strings, each a `UInt32` length and its bytes: the id, the idempotency
/// key, the last error's description, its type's name, the scope, the change's JSON, the remote's
/// JSON.
///
/// Layout 2 (version 2, read, never written) is layout 3 with the mark `"LOX2"` and no writers.
/// Layout 1 (version 1, read, never written): `"LOX1"`, the count, then per record: flags (1
/// failed, 2 set aside), attempts, `enqueuedAt`, and four byte strings: the id, the idempotency
/// key, the last error's description, the change's JSON.
///
/// Journal entry (version 3): `"LOJ1"`, the operation count (`UInt32`), then per operation its
/// kind (`UInt8`: 1 put, 2 remove) and a record (put) or an id as a byte string (remove).
enum OutboxFormat {
    /// The ``CachedEntry/version`` of the layout written.
    static let version = 3
    private static let magic: [UInt8] = Array("LOX3".utf8)
    private static let magic2: [UInt8] = Array("LOX2".utf8)
    private static let magic1: [UInt8] = Array("LOX1".utf8)
    private static let journalMagic: [UInt8] = Array("LOJ1".utf8)

    /// Whether an entry of `version` can be read.
    static func reads(version: Int) -> Bool { (1...3).contains(version) }

    static func encode(_ records: [OutboxRecord], folded: [UInt64]) -> Data {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16 + 8 * folded.count + records.reduce(0) { $0 + estimatedSize(of: $1) })
        bytes.append(contentsOf: magic)
        ByteCodec.append(UInt32(clamping: records.count), to: &bytes)
        for record in records { append(record, to: &bytes) }
        bytes.append(UInt8(clamping: folded.count))
        for number in folded { ByteCodec.append(number, to: &bytes) }
        return Data(bytes)
    }

    /// The records in `data` (layout 1, 2 or 3) and how far each writer's journal is folded in;
    /// throws a reason when the bytes are not a whole outbox.
    static func decode(_ data: Data) throws(OutboxFormatError) -> (records: [OutboxRecord], folded: [UInt64]) {
        var reader = ByteReader([UInt8](data)[...])
        let mark = try reader.bytes(4)
        let layout: Int
        if mark == magic[...] {
            layout = 3
        } else if mark == magic2[...] {
            layout = 2
        } else if mark == magic1[...] {
            layout = 1
        } else {
            throw OutboxFormatError(reason: "not an outbox (no LOX3, LOX2 or LOX1 mark)")
        }
        let count = try reader.integer(UInt32.self)
        var records: [OutboxRecord] = []
        for _ in 0..<count { records.append(try reader.record(layout: layout)) }
        var folded: [UInt64] = []
        if layout == 3 {
            let writers = try reader.integer(UInt8.self)
            for _ in 0..<writers { folded.append(try reader.integer(UInt64.self)) }
        }
        guard reader.isAtEnd else { throw OutboxFormatError(reason: "\(reader.remaining) bytes after the last item") }
        return (records, folded)
    }

    static func encode(_ operations: [OutboxOperation]) -> Data {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(
            8
                + operations.reduce(0) {
                    switch $1 {
                    case .put(let record): $0 + 1 + estimatedSize(of: record)
                    case .remove(let id): $0 + 5 + id.utf8.count
                    }
                })
        bytes.append(contentsOf: journalMagic)
        ByteCodec.append(UInt32(clamping: operations.count), to: &bytes)
        for operation in operations {
            switch operation {
            case .put(let record):
                bytes.append(1)
                append(record, to: &bytes)
            case .remove(let id):
                bytes.append(2)
                ByteCodec.appendField(id.utf8, to: &bytes)
            }
        }
        return Data(bytes)
    }

    /// The operations of a journal entry; throws a reason when the bytes are not a whole one.
    static func decodeOperations(_ data: Data) throws(OutboxFormatError) -> [OutboxOperation] {
        var reader = ByteReader([UInt8](data)[...])
        guard try reader.bytes(4) == journalMagic[...] else {
            throw OutboxFormatError(reason: "not an outbox journal entry (no LOJ1 mark)")
        }
        let count = try reader.integer(UInt32.self)
        var operations: [OutboxOperation] = []
        for _ in 0..<count {
            switch try reader.integer(UInt8.self) {
            case 1: operations.append(.put(try reader.record(layout: 3)))
            case 2: operations.append(.remove(String(decoding: try reader.field(), as: UTF8.self)))
            case let kind: throw OutboxFormatError(reason: "unknown operation \(kind)")
            }
        }
        guard reader.isAtEnd else {
            throw OutboxFormatError(reason: "\(reader.remaining) bytes after the last operation")
        }
        return operations
    }

    private static func estimatedSize(of record: OutboxRecord) -> Int {
        130 + record.lastError.utf8.count + record.change.count + (record.remote?.count ?? 0)
    }

    private static func append(_ record: OutboxRecord, to bytes: inout [UInt8]) {
        var flags: UInt8 = record.isFailed ? 1 : 0
        if record.isSetAside { flags |= 2 }
        if record.isConflict { flags |= 4 }
        if record.scope != nil { flags |= 8 }
        if record.remote != nil { flags |= 16 }
        if record.isSent { flags |= 32 }
        if record.notBefore != nil { flags |= 64 }
        bytes.append(flags)
        ByteCodec.append(UInt32(clamping: record.attempts), to: &bytes)
        ByteCodec.append(record.enqueuedAt.bitPattern, to: &bytes)
        ByteCodec.append((record.notBefore ?? 0).bitPattern, to: &bytes)
        ByteCodec.append(record.sentAt.bitPattern, to: &bytes)
        ByteCodec.appendField(record.id.utf8, to: &bytes)
        ByteCodec.appendField(record.idempotencyKey.utf8, to: &bytes)
        ByteCodec.appendField(record.lastError.utf8, to: &bytes)
        ByteCodec.appendField(record.errorType.utf8, to: &bytes)
        ByteCodec.appendField((record.scope ?? "").utf8, to: &bytes)
        ByteCodec.appendField(record.change, to: &bytes)
        ByteCodec.appendField(record.remote ?? Data(), to: &bytes)
    }
}

extension ByteReader {
    /// An outbox record of `layout` (1, or 2 and 3, which share it).
    mutating func record(layout: Int) throws(OutboxFormatError) -> OutboxRecord {
        let isLayout1 = layout == 1
        let flags = try integer(UInt8.self)
        let attempts = try integer(UInt32.self)
        let enqueuedAt = Double(bitPattern: try integer(UInt64.self))
        let notBefore = isLayout1 ? 0 : Double(bitPattern: try integer(UInt64.self))
        let sentAt = isLayout1 ? 0 : Double(bitPattern: try integer(UInt64.self))
        let id = String(decoding: try field(), as: UTF8.self)
        let idempotencyKey = String(decoding: try field(), as: UTF8.self)
        let lastError = String(decoding: try field(), as: UTF8.self)
        let errorType = isLayout1 ? "" : String(decoding: try field(), as: UTF8.self)
        let scope = isLayout1 ? "" : String(decoding: try field(), as: UTF8.self)
        let change = Data(try field())
        let remote = isLayout1 ? Data() : Data(try field())
        let known: UInt8 = isLayout1 ? 3 : 127
        guard flags & ~known == 0 else { throw OutboxFormatError(reason: "unknown flags \(flags) in item \(id)") }
        var record = OutboxRecord(
            id: id, idempotencyKey: idempotencyKey, enqueuedAt: enqueuedAt, attempts: Int(attempts),
            isFailed: flags & 1 != 0, isSetAside: flags & 2 != 0, lastError: lastError, change: change)
        record.errorType = errorType
        record.isConflict = flags & 4 != 0
        record.scope = flags & 8 != 0 ? scope : nil
        record.remote = flags & 16 != 0 ? remote : nil
        record.isSent = flags & 32 != 0
        record.notBefore = flags & 64 != 0 ? notBefore : nil
        record.sentAt = sentAt
        return record
    }
}

/// Why the bytes of an outbox entry are not a whole outbox.
typealias OutboxFormatError = ByteFormatError

/// The ids and idempotency keys of new items: version 4 UUID strings, as `UUID().uuidString`
/// spells them, drawn from the system's random number generator (which, unlike `UUID()` on
/// Linux, opens no file).
package enum OutboxIdentifiers {
    /// A generator that replaces the system's, for a program that must replay the same ids from a
    /// seed (the demo's inspector timeline, which names items by id); `nil`, the system's, in an
    /// app.
    @MainActor package static var replayableSource: (any RandomNumberGenerator)?

    /// A new id and a new idempotency key.
    @MainActor
    static func pair() -> (id: String, idempotencyKey: String) {
        if var source = replayableSource {
            defer { replayableSource = source }
            return (string(source.next(), source.next()), string(source.next(), source.next()))
        }
        var random = SystemRandomNumberGenerator()
        return (string(random.next(), random.next()), string(random.next(), random.next()))
    }

    private static let digits = Array("0123456789ABCDEF".utf8)

    /// The UUID string of 128 random bits, with the version (4) and variant (10) bits set.
    static func string(_ high: UInt64, _ low: UInt64) -> String {
        let high = (high & ~0xF000) | 0x4000
        let low = (low & ~(0xC000_0000_0000_0000 as UInt64)) | 0x8000_0000_0000_0000
        var bytes: [UInt8] = []
        bytes.reserveCapacity(36)
        for (index, word) in [high, low].enumerated() {
            for nibble in 0..<16 {
                let position = index * 16 + nibble
                if position == 8 || position == 12 || position == 16 || position == 20 {
                    bytes.append(UInt8(ascii: "-"))
                }
                bytes.append(digits[Int((word >> UInt64(60 - nibble * 4)) & 0xF)])
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
