internal import Foundation

/// One outbox item as it is kept in the cache.
struct OutboxRecord: Sendable {
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

/// The bytes of an outbox entry: every item in order, in one ``CachedEntry``, so that each save is
/// one atomic replacement of the whole queue (a crash leaves the queue before or after a save,
/// never a part of either).
///
/// Layout 2 (integers little-endian, the entry's version 2): `"LOX2"`, the item count (`UInt32`),
/// then per item: flags (`UInt8`: 1 failed, 2 set aside, 4 conflict, 8 has a scope, 16 has a
/// remote, 32 sent, 64 has a not-before), attempts (`UInt32`), `enqueuedAt`, the not-before and
/// the sent time (each a `Double`'s bits, `UInt64`; 0 when absent), and seven byte strings, each a
/// `UInt32` length and its bytes: the id, the idempotency key, the last error's description, its
/// type's name, the scope, the change's JSON, the remote's JSON.
///
/// Layout 1 (version 1, read, never written): `"LOX1"`, the count, then per item: flags (1
/// failed, 2 set aside), attempts, `enqueuedAt`, and four byte strings: the id, the idempotency
/// key, the last error's description, the change's JSON.
enum OutboxFormat {
    /// The ``CachedEntry/version`` of the layout written.
    static let version = 2
    private static let magic: [UInt8] = Array("LOX2".utf8)
    private static let magic1: [UInt8] = Array("LOX1".utf8)

    /// Whether an entry of `version` can be read.
    static func reads(version: Int) -> Bool { version == 1 || version == 2 }

    static func encode(_ records: [OutboxRecord]) -> Data {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(
            8 + records.reduce(0) { $0 + 130 + $1.lastError.utf8.count + $1.change.count + ($1.remote?.count ?? 0) })
        bytes.append(contentsOf: magic)
        append(UInt32(clamping: records.count), to: &bytes)
        for record in records {
            var flags: UInt8 = record.isFailed ? 1 : 0
            if record.isSetAside { flags |= 2 }
            if record.isConflict { flags |= 4 }
            if record.scope != nil { flags |= 8 }
            if record.remote != nil { flags |= 16 }
            if record.isSent { flags |= 32 }
            if record.notBefore != nil { flags |= 64 }
            bytes.append(flags)
            append(UInt32(clamping: record.attempts), to: &bytes)
            append(record.enqueuedAt.bitPattern, to: &bytes)
            append((record.notBefore ?? 0).bitPattern, to: &bytes)
            append(record.sentAt.bitPattern, to: &bytes)
            appendField(record.id.utf8, to: &bytes)
            appendField(record.idempotencyKey.utf8, to: &bytes)
            appendField(record.lastError.utf8, to: &bytes)
            appendField(record.errorType.utf8, to: &bytes)
            appendField((record.scope ?? "").utf8, to: &bytes)
            appendField(record.change, to: &bytes)
            appendField(record.remote ?? Data(), to: &bytes)
        }
        return Data(bytes)
    }

    /// The records in `data` (layout 1 or 2); throws a reason when the bytes are not a whole
    /// outbox.
    static func decode(_ data: Data) throws(OutboxFormatError) -> [OutboxRecord] {
        var reader = Reader(bytes: [UInt8](data))
        let mark = try reader.bytes(4)
        let isLayout1 = mark == magic1[...]
        guard isLayout1 || mark == magic[...] else {
            throw OutboxFormatError(reason: "not an outbox (no LOX2 or LOX1 mark)")
        }
        let count = try reader.integer(UInt32.self)
        var records: [OutboxRecord] = []
        for _ in 0..<count {
            let flags = try reader.integer(UInt8.self)
            let attempts = try reader.integer(UInt32.self)
            let enqueuedAt = Double(bitPattern: try reader.integer(UInt64.self))
            let notBefore = isLayout1 ? 0 : Double(bitPattern: try reader.integer(UInt64.self))
            let sentAt = isLayout1 ? 0 : Double(bitPattern: try reader.integer(UInt64.self))
            let id = String(decoding: try reader.field(), as: UTF8.self)
            let idempotencyKey = String(decoding: try reader.field(), as: UTF8.self)
            let lastError = String(decoding: try reader.field(), as: UTF8.self)
            let errorType = isLayout1 ? "" : String(decoding: try reader.field(), as: UTF8.self)
            let scope = isLayout1 ? "" : String(decoding: try reader.field(), as: UTF8.self)
            let change = Data(try reader.field())
            let remote = isLayout1 ? Data() : Data(try reader.field())
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
            records.append(record)
        }
        guard reader.isAtEnd else { throw OutboxFormatError(reason: "\(reader.remaining) bytes after the last item") }
        return records
    }

    private static func append<I: FixedWidthInteger>(_ value: I, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    private static func appendField(_ field: some Collection<UInt8>, to bytes: inout [UInt8]) {
        append(UInt32(field.count), to: &bytes)
        bytes.append(contentsOf: field)
    }

    /// Reads the layout with every length checked against the bytes left.
    private struct Reader {
        let bytes: [UInt8]
        var offset = 0

        var remaining: Int { bytes.count - offset }
        var isAtEnd: Bool { offset == bytes.count }

        mutating func bytes(_ count: Int) throws(OutboxFormatError) -> ArraySlice<UInt8> {
            guard count <= remaining else {
                throw OutboxFormatError(
                    reason: "cut short: \(count) bytes wanted at offset \(offset), \(remaining) left")
            }
            defer { offset += count }
            return bytes[offset..<offset + count]
        }

        mutating func integer<I: FixedWidthInteger>(_: I.Type) throws(OutboxFormatError) -> I {
            var value = I.zero
            for (shift, byte) in try bytes(I.bitWidth / 8).enumerated() {
                value |= I(truncatingIfNeeded: byte) << (shift * 8)
            }
            return value
        }

        mutating func field() throws(OutboxFormatError) -> ArraySlice<UInt8> {
            try bytes(Int(try integer(UInt32.self)))
        }
    }
}

/// Why the bytes of an outbox entry are not a whole outbox.
struct OutboxFormatError: Error, CustomStringConvertible {
    let reason: String
    var description: String { reason }
}

/// The ids and idempotency keys of new items: version 4 UUID strings, as `UUID().uuidString`
/// spells them, drawn from the system's random number generator (which, unlike `UUID()` on
/// Linux, opens no file).
enum OutboxIdentifiers {
    /// A new id and a new idempotency key.
    static func pair() -> (id: String, idempotencyKey: String) {
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
