// The body of `LoopbackHTTPServer.Response.stream(...)`: zero bytes made piece by piece, plain or
// as a gzip stream, so that a body of any size never sits whole in memory.

extension LoopbackHTTPServer {
    /// What ``Response/stream(byteCount:status:headers:contentLength:gzip:)`` sends.
    struct BodyStream: Sendable {
        /// The most bytes one piece of the body takes (before chunked framing).
        static let pieceSize = 256 * 1024

        var byteCount: Int
        var status: Int
        var headers: [Header]
        var contentLength: Bool
        var gzip: Bool

        /// The size of the body on the wire, before any chunked framing.
        var encodedSize: Int { gzip ? GzipZeros.encodedSize(of: byteCount) : byteCount }

        /// The header fields to send: the handler's, then `Content-Encoding` and
        /// `Transfer-Encoding` where they apply (`Content-Length` is added by the caller).
        var headerFields: [Header] {
            var fields = headers
            if gzip { fields.append(Header("Content-Encoding", "gzip")) }
            if !contentLength && allowsBody(status: status) { fields.append(Header("Transfer-Encoding", "chunked")) }
            return fields
        }

        /// A new maker of the body's bytes, from the first one.
        func makeBody() -> Body {
            gzip ? .gzip(GzipZeros(byteCount: byteCount)) : .zeros(remaining: byteCount)
        }
    }

    /// The bytes of a streamed body, made piece by piece.
    enum Body {
        case zeros(remaining: Int)
        case gzip(GzipZeros)

        /// One piece of zeros, copied from rather than made byte by byte.
        private static let zeros = [UInt8](repeating: 0, count: BodyStream.pieceSize)

        /// Appends the next bytes to `bytes`, about `BodyStream.pieceSize` of them (fewer only at
        /// the end); appends nothing once the body is complete.
        mutating func appendNextPiece(to bytes: inout [UInt8]) {
            switch self {
            case .zeros(let remaining):
                let count = min(remaining, BodyStream.pieceSize)
                bytes.append(contentsOf: Self.zeros[..<count])
                self = .zeros(remaining: remaining - count)
            case .gzip(var encoder):
                encoder.append(to: &bytes, upTo: bytes.count + BodyStream.pieceSize)
                self = .gzip(encoder)
            }
        }
    }
}

/// A gzip stream (RFC 1952) of `byteCount` zero bytes, made a piece at a time.
///
/// The DEFLATE data (RFC 1951) is one block with the fixed Huffman codes: a literal zero, then
/// matches of length 258 at distance 1 (each copies the 258 zeros before it), then what is left
/// as one shorter match or one or two literals, then the end of the block. Each 258-byte match
/// takes 13 bits, so the stream is about 1/159 of the data. Eight matches take 13 whole bytes, so
/// past the first eight, every eight matches are the same 13 bytes: those are copied, not made
/// bit by bit. The trailer's CRC-32 of the zeros is computed in O(log n), as zlib's
/// `crc32_combine` does.
struct GzipZeros {
    /// The header: magic, method 8 (DEFLATE), no flags, no time, no extra flags, unknown OS.
    private static let header: [UInt8] = [0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0xFF]
    /// The longest match DEFLATE has.
    private static let longestMatch = 258

    private enum Stage {
        case header, matches, tail, trailer, done
    }

    private let byteCount: Int
    private var stage = Stage.header
    /// How many 258-byte matches are still to write.
    private var matchesLeft: Int
    /// The bytes of eight matches, repeated: once known, what every group of eight writes.
    private var repeatedGroups: [UInt8] = []
    /// How many groups of eight matches ``repeatedGroups`` holds.
    private static let groupsPerCopy = 4096
    /// Bits not yet written out, the first in the lowest bit.
    private var bits = BitBuffer()

    init(byteCount: Int) {
        self.byteCount = byteCount
        matchesLeft = byteCount > 0 ? (byteCount - 1) / Self.longestMatch : 0
    }

    /// Whether the whole stream was written.
    var isComplete: Bool { stage == .done }

    /// The size of the stream of `byteCount` zeros, in bytes.
    static func encodedSize(of byteCount: Int) -> Int {
        var bitCount = 3 + 7  // the block header and the end of the block
        if byteCount > 0 {
            let afterFirst = byteCount - 1
            var tail = BitBuffer()
            writeTail(of: afterFirst % longestMatch, to: &tail)
            bitCount += 8 + 13 * (afterFirst / longestMatch) + tail.count
        }
        return header.count + (bitCount + 7) / 8 + 8
    }

    /// Appends the next bytes of the stream to `bytes`, stopping once `bytes` holds about `limit`
    /// bytes or the stream is complete.
    mutating func append(to bytes: inout [UInt8], upTo limit: Int) {
        // Each round moves to the next stage, or writes a match and so moves closer to it.
        for _ in 0..<Int.max {
            guard stage != .done && bytes.count < limit else { return }
            switch stage {
            case .header:
                bytes.append(contentsOf: Self.header)
                bits.write(1, count: 1)  // BFINAL: the last block
                bits.write(1, count: 2)  // BTYPE 01: fixed Huffman codes
                if byteCount > 0 { Self.writeLiteralZero(to: &bits) }
                stage = .matches
            case .matches:
                appendMatches(to: &bytes, upTo: limit)
                if matchesLeft == 0 { stage = .tail }
            case .tail:
                if byteCount > 0 { Self.writeTail(of: (byteCount - 1) % Self.longestMatch, to: &bits) }
                bits.writeHuffmanCode(0, length: 7)  // 256: the end of the block
                bits.flushAll(to: &bytes)
                stage = .trailer
            case .trailer:
                let crc = CRC32.ofZeros(count: byteCount)
                let size = UInt32(truncatingIfNeeded: byteCount)
                for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: crc >> shift)) }
                for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: size >> shift)) }
                stage = .done
            case .done:
                break
            }
        }
    }

    /// Appends some of the 258-byte matches left, about as many as fit before `limit`, at least one.
    private mutating func appendMatches(to bytes: inout [UInt8], upTo limit: Int) {
        let room = max(1, limit - bytes.count)
        if repeatedGroups.isEmpty && matchesLeft >= 16 {
            // Eight matches leave as many bits waiting as before, so after a first group the
            // bits waiting are the same after every group, and so are the 13 bytes of a group.
            writeMatches(8, to: &bytes)
            let groupStart = bytes.count
            writeMatches(8, to: &bytes)
            let group = Array(bytes[groupStart...])
            repeatedGroups = Array([[UInt8]](repeating: group, count: Self.groupsPerCopy).joined())
            matchesLeft -= 16
        } else if !repeatedGroups.isEmpty && matchesLeft >= 8 {
            let groups = min(matchesLeft / 8, Self.groupsPerCopy, max(1, room / 13))
            bytes.append(contentsOf: repeatedGroups[..<(groups * 13)])
            matchesLeft -= groups * 8
        } else {
            // Whole bytes only leave the buffer, so a few bits may wait for the next round.
            let matches = min(matchesLeft, max(1, room * 8 / 13))
            writeMatches(matches, to: &bytes)
            matchesLeft -= matches
        }
    }

    /// Writes `count` 258-byte matches bit by bit, moving the whole bytes to `bytes`.
    private mutating func writeMatches(_ count: Int, to bytes: inout [UInt8]) {
        for _ in 0..<count {
            Self.writeMatch(length: Self.longestMatch, to: &bits)
            bits.flushWholeBytes(to: &bytes)
        }
    }

    /// Writes the zeros left after the whole matches: none, one or two literals, or one match.
    private static func writeTail(of count: Int, to bits: inout BitBuffer) {
        if count >= 3 {
            writeMatch(length: count, to: &bits)
        } else {
            for _ in 0..<count { writeLiteralZero(to: &bits) }
        }
    }

    /// Literal 0: the 8-bit fixed code 0x30.
    private static func writeLiteralZero(to bits: inout BitBuffer) {
        bits.writeHuffmanCode(0x30, length: 8)
    }

    /// A match of `length` (3...258) at distance 1.
    private static func writeMatch(length: Int, to bits: inout BitBuffer) {
        let (code, base, extraBits) = lengthCode(for: length)
        if code < 280 {
            bits.writeHuffmanCode(UInt32(code - 256), length: 7)  // 256...279: 7 bits from 0
        } else {
            bits.writeHuffmanCode(UInt32(0xC0 + code - 280), length: 8)  // 280...287: 8 bits from 0xC0
        }
        bits.write(UInt64(length - base), count: extraBits)
        bits.writeHuffmanCode(0, length: 5)  // distance code 0: distance 1
    }

    /// The length code of `length` (3...258), the length it starts at and its extra bits
    /// (RFC 1951, 3.2.5).
    private static func lengthCode(for length: Int) -> (code: Int, base: Int, extraBits: Int) {
        if length == 258 { return (285, 258, 0) }
        if length <= 10 { return (257 + length - 3, length, 0) }
        // Codes 265...284 come in groups of four per number of extra bits, 1 to 5.
        var code = 265
        var base = 11
        for extraBits in 1...5 {
            for _ in 0..<4 {
                let span = 1 << extraBits
                if length < base + span { return (code, base, extraBits) }
                code += 1
                base += span
            }
        }
        return (285, 258, 0)  // not reached: length <= 257 falls in a group
    }
}

/// Bits waiting to be written as bytes, the first bit in the lowest place (RFC 1951, 3.1.1).
struct BitBuffer {
    private var value: UInt64 = 0
    /// How many bits wait.
    private(set) var count = 0

    /// Appends the `count` low bits of `bits`, lowest first; at most 32 bits between flushes.
    mutating func write(_ bits: UInt64, count: Int) {
        value |= (bits & ((1 << count) - 1)) << self.count
        self.count += count
    }

    /// Appends a Huffman code, which DEFLATE packs from its highest bit.
    mutating func writeHuffmanCode(_ code: UInt32, length: Int) {
        var reversed: UInt64 = 0
        for index in 0..<length where code & (1 << index) != 0 {
            reversed |= 1 << (length - 1 - index)
        }
        write(reversed, count: length)
    }

    /// Moves the whole bytes to `bytes`, keeping fewer than 8 bits.
    mutating func flushWholeBytes(to bytes: inout [UInt8]) {
        while count >= 8 {
            bytes.append(UInt8(truncatingIfNeeded: value))
            value >>= 8
            count -= 8
        }
    }

    /// Moves every bit to `bytes`, the last byte padded with zero bits.
    mutating func flushAll(to bytes: inout [UInt8]) {
        flushWholeBytes(to: &bytes)
        if count > 0 {
            bytes.append(UInt8(truncatingIfNeeded: value))
            value = 0
            count = 0
        }
    }
}

/// The CRC-32 of gzip and zlib (reflected, polynomial 0xEDB88320).
enum CRC32 {
    /// The CRC-32 of `count` zero bytes, in O(log count).
    ///
    /// Feeding a zero byte to the CRC register is a linear map over GF(2): a 32×32 bit matrix,
    /// kept as the images of the 32 bits. The register after `count` zero bytes is that matrix to
    /// the power `count` applied to the initial register, computed by squaring, as zlib's
    /// `crc32_combine` does.
    static func ofZeros(count: Int) -> UInt32 {
        // One zero bit: the register shifts right, and a 1 shifted out adds the polynomial.
        var operator1 = [UInt32](repeating: 0, count: 32)
        operator1[0] = 0xEDB8_8320
        for bit in 1..<32 { operator1[bit] = 1 << (bit - 1) }
        var power = square(square(square(operator1)))  // one zero byte: eight zero bits
        var register: UInt32 = 0xFFFF_FFFF
        var remaining = count
        // One round per bit of `count`.
        for _ in 0..<Int.bitWidth where remaining > 0 {
            if remaining & 1 != 0 { register = apply(power, to: register) }
            remaining >>= 1
            if remaining > 0 { power = square(power) }
        }
        return register ^ 0xFFFF_FFFF
    }

    /// `matrix` applied to `vector`: the sum of the images of its set bits.
    private static func apply(_ matrix: [UInt32], to vector: UInt32) -> UInt32 {
        var sum: UInt32 = 0
        for bit in 0..<32 where vector & (1 << bit) != 0 { sum ^= matrix[bit] }
        return sum
    }

    /// `matrix` applied twice.
    private static func square(_ matrix: [UInt32]) -> [UInt32] {
        matrix.map { apply(matrix, to: $0) }
    }
}
