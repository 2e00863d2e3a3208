/// The little-endian binary codec of the package's formats: the entry files of
/// ``FileLoadableCache`` and the outbox's entries. Integers are least significant byte first; a
/// byte string (a "field") is its length as a `UInt32`, then its bytes.
enum ByteCodec {
    /// Appends `value`, least significant byte first.
    static func append<Integer: FixedWidthInteger>(_ value: Integer, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    /// Appends `field`'s length as a `UInt32`, then its bytes.
    static func appendField(_ field: some Collection<UInt8>, to bytes: inout [UInt8]) {
        append(UInt32(field.count), to: &bytes)
        bytes.append(contentsOf: field)
    }

    /// The integer stored least significant byte first at `offset` of `bytes`, which holds its
    /// size from there.
    static func integer<Integer: FixedWidthInteger, Bytes: RandomAccessCollection<UInt8>>(
        _: Integer.Type, in bytes: Bytes, at offset: Int
    ) -> Integer where Bytes.Index == Int {
        var value = Integer.zero
        for index in 0..<(Integer.bitWidth / 8) {
            value |= Integer(truncatingIfNeeded: bytes[offset + index]) << (index * 8)
        }
        return value
    }
}

/// Reads bytes in order, each length checked against the bytes left.
struct ByteReader {
    let bytes: ArraySlice<UInt8>
    /// Where the next read starts, an index of ``bytes``.
    private(set) var offset: Int

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        offset = bytes.startIndex
    }

    /// How many bytes are left.
    var remaining: Int { bytes.endIndex - offset }
    /// Whether every byte was read.
    var isAtEnd: Bool { offset == bytes.endIndex }

    /// The next `count` bytes.
    mutating func bytes(_ count: Int) throws(ByteFormatError) -> ArraySlice<UInt8> {
        guard count <= remaining else {
            throw ByteFormatError(reason: "cut short: \(count) bytes wanted at offset \(offset), \(remaining) left")
        }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    /// The next integer, least significant byte first.
    mutating func integer<Integer: FixedWidthInteger>(_: Integer.Type) throws(ByteFormatError) -> Integer {
        let slice = try bytes(Integer.bitWidth / 8)
        return ByteCodec.integer(Integer.self, in: slice, at: slice.startIndex)
    }

    /// The next field: a `UInt32` length, then that many bytes.
    mutating func field() throws(ByteFormatError) -> ArraySlice<UInt8> {
        try bytes(Int(try integer(UInt32.self)))
    }
}

/// Why bytes are not a whole entry of a format: the reason, as messages name it.
struct ByteFormatError: Error, CustomStringConvertible {
    let reason: String
    var description: String { reason }
}
