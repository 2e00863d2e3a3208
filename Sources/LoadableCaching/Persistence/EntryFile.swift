import Foundation

/// The bytes of one entry's file: format `LDC1` (no metadata) or `LDC2` (with metadata).
///
/// A save writes `LDC1` when the entry has no metadata, so that the files of apps that keep none
/// stay readable by earlier releases, and `LDC2` otherwise. A load reads both. Integers are
/// little-endian; the date is seconds since 2001-01-01 as a Float64 bit pattern.
///
/// ```
/// LDC1 (40-byte header)                     LDC2 (44-byte header)
/// offset size                               offset size
///      0    4  magic "LDC1"                      0    4  magic "LDC2"
///      4    8  version, Int64                    4    8  version, Int64
///     12    8  savedAt, Float64 bits            12    8  savedAt, Float64 bits
///     20    4  key length, UInt32               20    4  key length, UInt32
///     24    8  data length, UInt64              24    8  data length, UInt64
///     32    8  FNV-1a 64 of bytes 0..<32,       32    4  metadata length, UInt32
///              the key, the data                36    8  FNV-1a 64 of bytes 0..<36, the key,
///     40       the key (UTF-8), the data                 the metadata, the data
///                                               44       the key (UTF-8), the metadata, the data
/// ```
///
/// The metadata is a UInt32 count of pairs, then each pair, sorted by name (as Swift sorts
/// strings), as a UInt32 length and the UTF-8 of the name, then the same for the value: the same
/// metadata always makes the same bytes. The key in the file is the key's NFC form; a load
/// compares it with the key asked for as Swift compares strings.
package enum EntryFile {
    static let magic: [UInt8] = Array("LDC1".utf8)
    static let metadataMagic: [UInt8] = Array("LDC2".utf8)
    static let headerSize = 40
    static let metadataHeaderSize = 44
    /// Where the save date is, in both formats.
    static let savedAtOffset = 12

    static func encode(_ entry: CachedEntry, key: String) -> [UInt8] {
        let keyBytes = Array(key.utf8)
        let metadata = entry.metadata.isEmpty ? [] : encodedMetadata(entry.metadata)
        let hasMetadata = !entry.metadata.isEmpty
        var out = [UInt8]()
        out.reserveCapacity(metadataHeaderSize + keyBytes.count + metadata.count + entry.data.count)
        out.append(contentsOf: hasMetadata ? metadataMagic : magic)
        ByteCodec.append(UInt64(bitPattern: Int64(entry.version)), to: &out)
        ByteCodec.append(entry.savedAt.timeIntervalSinceReferenceDate.bitPattern, to: &out)
        ByteCodec.append(UInt32(keyBytes.count), to: &out)
        ByteCodec.append(UInt64(entry.data.count), to: &out)
        if hasMetadata { ByteCodec.append(UInt32(metadata.count), to: &out) }
        var hash = FNV1a()
        hash.add(out[...])
        hash.add(keyBytes[...])
        hash.add(metadata[...])
        entry.data.withUnsafeBytes { hash.add($0) }
        ByteCodec.append(hash.value, to: &out)
        out.append(contentsOf: keyBytes)
        out.append(contentsOf: metadata)
        out.append(contentsOf: entry.data)
        return out
    }

    /// The metadata's bytes: the count, then each pair sorted by name, each string as its length
    /// and its UTF-8.
    package static func encodedMetadata(_ metadata: [String: String]) -> [UInt8] {
        var out: [UInt8] = []
        ByteCodec.append(UInt32(metadata.count), to: &out)
        for (name, value) in metadata.sorted(by: { $0.key < $1.key }) {
            ByteCodec.appendField(name.utf8, to: &out)
            ByteCodec.appendField(value.utf8, to: &out)
        }
        return out
    }

    /// The entry in `bytes`, or `nil` when the file is another key's (a long key sharing its
    /// name).
    ///
    /// - Throws: ``LoadableCacheError/corrupt(key:reason:)`` when the bytes are not a whole entry.
    static func decode(_ bytes: [UInt8], key: String) throws -> CachedEntry? {
        func corrupt(_ reason: String) -> LoadableCacheError { .corrupt(key: key, reason: reason) }
        guard bytes.count >= 4 else {
            throw corrupt("the file has \(bytes.count) bytes, shorter than the \(headerSize)-byte header")
        }
        let hasMetadata: Bool
        switch Array(bytes[0..<4]) {
        case magic: hasMetadata = false
        case metadataMagic: hasMetadata = true
        default: throw corrupt("the file does not start with \"LDC1\" or \"LDC2\"")
        }
        let header = hasMetadata ? metadataHeaderSize : headerSize
        guard bytes.count >= header else {
            throw corrupt("the file has \(bytes.count) bytes, shorter than the \(header)-byte header")
        }
        let version = Int64(bitPattern: ByteCodec.integer(UInt64.self, in: bytes, at: 4))
        let savedAt = Double(bitPattern: ByteCodec.integer(UInt64.self, in: bytes, at: savedAtOffset))
        let keyCount = UInt64(ByteCodec.integer(UInt32.self, in: bytes, at: 20))
        let dataCount = ByteCodec.integer(UInt64.self, in: bytes, at: 24)
        let metadataCount = hasMetadata ? UInt64(ByteCodec.integer(UInt32.self, in: bytes, at: 32)) : 0
        let checksum = ByteCodec.integer(UInt64.self, in: bytes, at: header - 8)
        let available = UInt64(bytes.count - header)
        guard keyCount + metadataCount <= available, dataCount == available - keyCount - metadataCount else {
            throw corrupt(
                "the header announces \(keyCount) key bytes, \(metadataCount) metadata bytes and \(dataCount) data bytes, the file has \(available) after the header"
            )
        }
        var hash = FNV1a()
        hash.add(bytes[0..<(header - 8)])
        hash.add(bytes[header...])
        guard hash.value == checksum else { throw corrupt("the checksum does not match the contents") }
        guard savedAt.isFinite, let version = Int(exactly: version) else {
            throw corrupt("the header's date or version is not a number")
        }
        let keyEnd = header + Int(keyCount)
        guard keyMatches(bytes[header..<keyEnd], key) else { return nil }
        let metadataEnd = keyEnd + Int(metadataCount)
        let metadata: [String: String]
        if hasMetadata {
            guard let decoded = decodedMetadata(bytes[keyEnd..<metadataEnd]) else {
                throw corrupt("the metadata's lengths do not add up")
            }
            metadata = decoded
        } else {
            metadata = [:]
        }
        return CachedEntry(
            data: Data(bytes[metadataEnd...]), savedAt: Date(timeIntervalSinceReferenceDate: savedAt),
            version: version, metadata: metadata)
    }

    /// The bytes that give the entry file `bytes` (a whole, valid one) the save date `savedAt`:
    /// the header from the date to the checksum (the date, the lengths, the new checksum), to
    /// write at `offset` in one write. The key, the metadata and the data stay as they are.
    static func savedAtPatch(_ bytes: [UInt8], savedAt: Date) -> (offset: Int, bytes: [UInt8]) {
        let header = Array(bytes[0..<4]) == metadataMagic ? metadataHeaderSize : headerSize
        var patched = Array(bytes[0..<header])
        patched.replaceSubrange(
            savedAtOffset..<(savedAtOffset + 8),
            with: Self.bytes(savedAt.timeIntervalSinceReferenceDate.bitPattern))
        var hash = FNV1a()
        hash.add(patched[0..<(header - 8)])
        hash.add(bytes[header...])
        patched.replaceSubrange((header - 8)..<header, with: Self.bytes(hash.value))
        return (savedAtOffset, Array(patched[savedAtOffset...]))
    }

    /// The metadata in `bytes`, or `nil` when its lengths do not add up.
    package static func decodedMetadata(_ bytes: ArraySlice<UInt8>) -> [String: String]? {
        var reader = ByteReader(bytes)
        var metadata: [String: String] = [:]
        do {
            for _ in 0..<(try reader.integer(UInt32.self)) {
                let name = String(decoding: try reader.field(), as: UTF8.self)
                let value = String(decoding: try reader.field(), as: UTF8.self)
                guard metadata[name] == nil else { return nil }
                metadata[name] = value
            }
        } catch {
            return nil
        }
        return reader.isAtEnd ? metadata : nil
    }

    /// Whether the key bytes of a file are `key`, as Swift compares strings.
    static func keyMatches(_ bytes: ArraySlice<UInt8>, _ key: String) -> Bool {
        if bytes.elementsEqual(key.utf8) { return true }
        if bytes.allSatisfy({ $0 < 0x80 }) && key.utf8.allSatisfy({ $0 < 0x80 }) { return false }
        return String(decoding: bytes, as: UTF8.self) == key
    }

    /// What the start of a file says: when it was saved and its key; `nil` when the bytes are not
    /// the start of an entry.
    static func head(_ bytes: [UInt8]) -> (savedAt: Date, key: String)? {
        guard bytes.count >= 4 else { return nil }
        let header: Int
        switch Array(bytes[0..<4]) {
        case magic: header = headerSize
        case metadataMagic: header = metadataHeaderSize
        default: return nil
        }
        guard bytes.count >= header else { return nil }
        let savedAt = Double(bitPattern: ByteCodec.integer(UInt64.self, in: bytes, at: savedAtOffset))
        let keyCount = Int(ByteCodec.integer(UInt32.self, in: bytes, at: 20))
        guard savedAt.isFinite, bytes.count >= header + keyCount else { return nil }
        return (
            Date(timeIntervalSinceReferenceDate: savedAt),
            String(decoding: bytes[header..<(header + keyCount)], as: UTF8.self)
        )
    }

    /// How many bytes of a file ``head(_:)`` needs, given its first ``metadataHeaderSize`` bytes
    /// (or fewer).
    static func headLength(_ start: [UInt8]) -> Int {
        guard start.count >= 24 else { return metadataHeaderSize }
        let header = Array(start[0..<4]) == metadataMagic ? metadataHeaderSize : headerSize
        return header + Int(ByteCodec.integer(UInt32.self, in: start, at: 20))
    }

    /// `value`'s bytes, least significant first.
    private static func bytes<Integer: FixedWidthInteger>(_ value: Integer) -> [UInt8] {
        var bytes: [UInt8] = []
        ByteCodec.append(value, to: &bytes)
        return bytes
    }
}

/// The 64-bit FNV-1a hash: a file's checksum and a long key's name suffix.
struct FNV1a {
    private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    static func hash(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        var hash = FNV1a()
        hash.add(bytes)
        return hash.value
    }

    mutating func add(_ bytes: ArraySlice<UInt8>) {
        bytes.withUnsafeBytes { add($0) }
    }

    mutating func add(_ bytes: UnsafeRawBufferPointer) {
        var hash = value
        for byte in bytes {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        value = hash
    }
}
