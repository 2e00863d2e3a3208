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
}

/// The bytes of an outbox entry: every item in order, in one ``CachedEntry``, so that each save is
/// one atomic replacement of the whole queue (a crash leaves the queue before or after a save,
/// never a part of either).
///
/// Layout (integers little-endian): `"LOX1"`, the item count (`UInt32`), then per item: flags
/// (`UInt8`: 1 failed, 2 set aside), attempts (`UInt32`), `enqueuedAt` (the `Double`'s bits,
/// `UInt64`), and four byte strings, each a `UInt32` length and its bytes: the id, the
/// idempotency key, the last error's description, the change's JSON.
enum OutboxFormat {
    /// The ``CachedEntry/version`` of the layout.
    static let version = 1
    private static let magic: [UInt8] = Array("LOX1".utf8)

    static func encode(_ records: [OutboxRecord]) -> Data {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(8 + records.reduce(0) { $0 + 90 + $1.lastError.utf8.count + $1.change.count })
        bytes.append(contentsOf: magic)
        append(UInt32(clamping: records.count), to: &bytes)
        for record in records {
            bytes.append((record.isFailed ? 1 : 0) | (record.isSetAside ? 2 : 0))
            append(UInt32(clamping: record.attempts), to: &bytes)
            append(record.enqueuedAt.bitPattern, to: &bytes)
            appendField(record.id.utf8, to: &bytes)
            appendField(record.idempotencyKey.utf8, to: &bytes)
            appendField(record.lastError.utf8, to: &bytes)
            appendField(record.change, to: &bytes)
        }
        return Data(bytes)
    }

    /// The records in `data`; throws a reason when the bytes are not a whole outbox.
    static func decode(_ data: Data) throws(OutboxFormatError) -> [OutboxRecord] {
        var reader = Reader(bytes: [UInt8](data))
        guard try reader.bytes(4) == magic[...] else { throw OutboxFormatError(reason: "not an outbox (no LOX1 mark)") }
        let count = try reader.integer(UInt32.self)
        var records: [OutboxRecord] = []
        for _ in 0..<count {
            let flags = try reader.integer(UInt8.self)
            let attempts = try reader.integer(UInt32.self)
            let enqueuedAt = Double(bitPattern: try reader.integer(UInt64.self))
            let id = String(decoding: try reader.field(), as: UTF8.self)
            let idempotencyKey = String(decoding: try reader.field(), as: UTF8.self)
            let lastError = String(decoding: try reader.field(), as: UTF8.self)
            let change = Data(try reader.field())
            guard flags & ~3 == 0 else { throw OutboxFormatError(reason: "unknown flags \(flags) in item \(id)") }
            records.append(
                OutboxRecord(
                    id: id, idempotencyKey: idempotencyKey, enqueuedAt: enqueuedAt, attempts: Int(attempts),
                    isFailed: flags & 1 != 0, isSetAside: flags & 2 != 0, lastError: lastError, change: change))
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
