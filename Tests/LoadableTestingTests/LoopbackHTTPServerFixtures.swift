import Foundation
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

typealias Header = LoopbackHTTPServer.Header

// MARK: - A raw POSIX client

/// What a raw client read, and whether the server closed the connection after it.
struct Reply: Sendable {
    var bytes: [UInt8]
    /// The server closed the connection (end of stream or reset), rather than the read timing out.
    var closed: Bool
    var string: String { String(decoding: bytes, as: UTF8.self) }
}

/// Runs the blocking `body` on a new thread, off Swift concurrency's threads, and returns its result.
func onThread<Result: Sendable>(_ body: @escaping @Sendable () -> Result) async -> Result {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: body()) }
    }
}

/// Connects to the server, sends `request`, reads until the server closes, and closes.
func exchange(port: Int, _ request: String) async -> Reply {
    await onThread {
        guard let connection = RawConnection(port: port) else { return Reply(bytes: [], closed: false) }
        connection.write(request)
        return connection.readToEnd()
    }
}

/// One blocking TCP connection to 127.0.0.1; every read and write gives up after 30 seconds.
final class RawConnection: Sendable {
    let descriptor: Int32

    #if canImport(Glibc)
        private static let streamSocket = Int32(SOCK_STREAM.rawValue)
        private static let sendFlags = Int32(MSG_NOSIGNAL)
    #elseif canImport(Musl)
        private static let streamSocket = SOCK_STREAM
        private static let sendFlags = MSG_NOSIGNAL
    #else
        private static let streamSocket = SOCK_STREAM
        private static let sendFlags: Int32 = 0
    #endif

    /// Connects, or returns `nil` if the connection fails.
    init?(port: Int) {
        guard let descriptor = Self.makeConnection(port: port).descriptor else { return nil }
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    private init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Whether an HTTP request to `port` goes unanswered: the connection is refused, or it ends
    /// without a byte.
    ///
    /// Once a server has closed its listening socket the port is free, yet in this test process,
    /// which runs other servers and spawns exit-test children in parallel, a connection can
    /// still land there: in a child that has not yet closed its inherited copy of the socket
    /// (the connection is then reset), or in another test's server as it stops. A listening
    /// socket that was never closed answers, or holds the request until the read gives up, and
    /// both count as answered.
    static func isUnanswered(port: Int) async -> Bool {
        await onThread {
            let result = makeConnection(port: port)
            guard let descriptor = result.descriptor else { return result.error == ECONNREFUSED }
            let connection = RawConnection(descriptor: descriptor)
            connection.write("GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
            let reply = connection.readToEnd()
            return reply.closed && reply.bytes.isEmpty
        }
    }

    private static func makeConnection(port: Int) -> (descriptor: Int32?, error: Int32) {
        let descriptor = socket(AF_INET, streamSocket, 0)
        guard descriptor >= 0 else { return (nil, errno) }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        #if canImport(Darwin)
            var one: Int32 = 1
            setsockopt(descriptor, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr = in_addr(s_addr: UInt32(0x7F00_0001).bigEndian)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let error = errno
            close(descriptor)
            return (nil, error)
        }
        return (descriptor, 0)
    }

    /// Sends all of `text`; stops early if the server closed the connection.
    func write(_ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        for _ in 0..<10_000 where offset < bytes.count {
            let count = bytes.withUnsafeBytes {
                send(descriptor, $0.baseAddress! + offset, $0.count - offset, Self.sendFlags)
            }
            guard count > 0 else { return }
            offset += count
        }
    }

    /// Reads `count` bytes, or fewer if the connection ends first.
    func read(count: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: count)
        for _ in 0..<count where bytes.count < count {
            let received = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, count - bytes.count, 0) }
            guard received > 0 else { break }
            bytes += chunk[..<received]
        }
        return bytes
    }

    /// Reads until the server closes the connection (or 30 seconds pass without a byte).
    func readToEnd() -> Reply {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        for _ in 0..<100_000 {
            let received = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if received > 0 {
                bytes += chunk[..<received]
            } else {
                return Reply(bytes: bytes, closed: received == 0 || errno == ECONNRESET)
            }
        }
        return Reply(bytes: bytes, closed: false)
    }

    /// Makes the close in `deinit` a reset (the server sees `ECONNRESET`), not an orderly close.
    func resetOnClose() {
        var option = linger(l_onoff: 1, l_linger: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
    }

    /// Ends the connection in both directions: the server reads the end of the stream.
    func hangUp() {
        shutdown(descriptor, Int32(SHUT_RDWR))
    }
}

extension RawConnection {
    /// Reads and drops bytes until the server closes the connection (or 30 seconds pass without a
    /// byte); returns how many it read.
    func drain() -> (count: Int, closed: Bool) {
        var count = 0
        var chunk = [UInt8](repeating: 0, count: 256 * 1024)
        // Bounded by the server's stop; a petabyte would take days.
        for _ in 0..<100_000_000 {
            let received = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            guard received > 0 else { return (count, received == 0 || errno == ECONNRESET) }
            count += received
        }
        return (count, false)
    }
}

// MARK: - Reading bodies back

/// A response's head as text, up to and including its empty line, and the bytes after it.
func split(_ bytes: [UInt8]) -> (head: String, body: [UInt8])? {
    let terminator: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A]
    guard bytes.count >= 4,
        let end = (0...(bytes.count - 4)).first(where: { bytes[$0..<($0 + 4)].elementsEqual(terminator) })
    else { return nil }
    return (String(decoding: bytes[..<(end + 4)], as: UTF8.self), Array(bytes[(end + 4)...]))
}

/// The chunks of a chunked body (RFC 9112, 7.1), without extensions or trailers; `nil` if the
/// framing is broken or does not end with the last chunk.
func dechunk(_ body: [UInt8]) -> [[UInt8]]? {
    var chunks: [[UInt8]] = []
    var index = 0
    for _ in 0...body.count {
        guard
            let lineEnd = (index..<max(index, body.count - 1)).first(where: { body[$0] == 0x0D && body[$0 + 1] == 0x0A }
            ),
            let size = Int(String(decoding: body[index..<lineEnd], as: UTF8.self), radix: 16)
        else { return nil }
        let dataStart = lineEnd + 2
        guard dataStart + size + 2 <= body.count, body[dataStart + size] == 0x0D, body[dataStart + size + 1] == 0x0A
        else { return nil }
        if size == 0 { return dataStart + 2 == body.count ? chunks : nil }
        chunks.append(Array(body[dataStart..<(dataStart + size)]))
        index = dataStart + size + 2
    }
    return nil
}

func littleEndianBytes(_ value: UInt32) -> [UInt8] {
    (0..<4).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) }
}

/// The CRC-32 of gzip, bit by bit: slow and plain, to check the server's fast one.
func crc32(_ bytes: [UInt8]) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
    }
    return crc ^ 0xFFFF_FFFF
}

/// One gzip member (RFC 1952) whose DEFLATE blocks use the fixed Huffman codes, decoded: a
/// decoder written apart from the server's encoder, for the codes the server uses.
struct GzipMember {
    var data: [UInt8] = []
    var crc: UInt32 = 0
    var size: UInt32 = 0

    /// Decodes `bytes`; `nil` if they are not such a member, or if bytes follow it.
    init?(_ bytes: [UInt8]) {
        guard bytes.count >= 18, bytes[0] == 0x1F, bytes[1] == 0x8B, bytes[2] == 8, bytes[3] == 0 else { return nil }
        var reader = BitReader(bytes: bytes, position: 10 * 8)
        var isLast = false
        for _ in 0..<1_000 where !isLast {
            guard let final = reader.bits(1), let type = reader.bits(2), type == 1 else { return nil }
            isLast = final == 1
            guard decodeFixedBlock(&reader) else { return nil }
        }
        guard isLast else { return nil }
        let trailerStart = (reader.position + 7) / 8
        guard trailerStart + 8 == bytes.count else { return nil }
        func word(at offset: Int) -> UInt32 {
            (0..<4).reduce(0) { $0 | UInt32(bytes[offset + $1]) << ($1 * 8) }
        }
        crc = word(at: trailerStart)
        size = word(at: trailerStart + 4)
    }

    private static let lengthBases = [
        3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227,
        258,
    ]
    private static let lengthExtraBits = [
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
    ]
    private static let distanceBases = [
        1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097,
        6145, 8193, 12289, 16385, 24577,
    ]

    /// Decodes one block with the fixed codes (RFC 1951, 3.2.6) into ``data``.
    private mutating func decodeFixedBlock(_ reader: inout BitReader) -> Bool {
        for _ in 0..<100_000_000 {
            guard let symbol = reader.fixedLiteralOrLength() else { return false }
            if symbol < 256 {
                data.append(UInt8(symbol))
                continue
            }
            if symbol == 256 { return true }
            let lengthIndex = symbol - 257
            guard lengthIndex < 29, let lengthExtra = reader.bits(Self.lengthExtraBits[lengthIndex]),
                let distanceCode = reader.huffmanCode(length: 5), distanceCode < 30,
                let distanceExtra = reader.bits(max(0, distanceCode / 2 - 1))
            else { return false }
            let length = Self.lengthBases[lengthIndex] + lengthExtra
            let distance = Self.distanceBases[distanceCode] + distanceExtra
            guard distance <= data.count else { return false }
            for _ in 0..<length { data.append(data[data.count - distance]) }
        }
        return false
    }
}

/// Reads bits from the lowest of each byte up, as DEFLATE packs them.
struct BitReader {
    let bytes: [UInt8]
    var position: Int

    /// The next `count` bits as a number, the first bit lowest.
    mutating func bits(_ count: Int) -> Int? {
        guard position + count <= bytes.count * 8 else { return nil }
        var value = 0
        for index in 0..<count {
            let bit = Int(bytes[(position + index) / 8] >> ((position + index) % 8)) & 1
            value |= bit << index
        }
        position += count
        return value
    }

    /// The next Huffman code of `length` bits, its first bit highest.
    mutating func huffmanCode(length: Int) -> Int? {
        var code = 0
        for _ in 0..<length {
            guard let bit = bits(1) else { return nil }
            code = code << 1 | bit
        }
        return code
    }

    /// The next literal/length symbol in the fixed code: 7, 8 or 9 bits.
    mutating func fixedLiteralOrLength() -> Int? {
        guard var code = huffmanCode(length: 7) else { return nil }
        if code <= 0b001_0111 { return 256 + code }  // 256...279
        guard let eighth = bits(1) else { return nil }
        code = code << 1 | eighth
        if (0x30...0xBF).contains(code) { return code - 0x30 }  // 0...143
        if (0xC0...0xC7).contains(code) { return 280 + code - 0xC0 }  // 280...287
        guard let ninth = bits(1) else { return nil }
        code = code << 1 | ninth
        return (0x190...0x1FF).contains(code) ? 144 + code - 0x190 : nil  // 144...255
    }
}
