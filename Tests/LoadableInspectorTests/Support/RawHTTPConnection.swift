import Foundation
import LoadableSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A client connection on a real socket to 127.0.0.1, for the server's tests: it sends a request
/// as written and reads what comes back, each read bounded by a deadline of real time.
///
/// Its reads block, so the tests call them through ``blocking(_:)`` (a thread of its own), never
/// on the main actor, which the server needs to answer.
final class RawHTTPConnection: Sendable {
    /// What a connection could not do.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// A response read whole (the server closes each connection after its response).
    struct Response: Sendable {
        let status: Int
        let headers: [String: String]
        let body: Data

        /// The body as text.
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    private let descriptor: Int32
    /// Bytes received so far.
    private let received = Locked(Data())

    /// Connects to 127.0.0.1:`port`.
    init(port: Int) throws {
        let descriptor = socket(AF_INET, streamSocket, 0)
        self.descriptor = descriptor
        guard descriptor >= 0 else { throw Failure(description: "socket failed: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr = in_addr(s_addr: UInt32(0x7F00_0001).bigEndian)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(descriptor)
            throw Failure(description: "connect to 127.0.0.1:\(port) failed: errno \(errno)")
        }
    }

    deinit { close(descriptor) }

    /// Sends `text` whole.
    func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        var offset = 0
        // Each round sends at least one byte or fails.
        for _ in 0...bytes.count where offset < bytes.count {
            let count = bytes.withUnsafeBytes {
                systemSend(descriptor, $0.baseAddress! + offset, bytes.count - offset)
            }
            guard count > 0 else { throw Failure(description: "send failed: errno \(errno)") }
            offset += count
        }
    }

    /// Reads until `isEnough` holds for what was received, the server closes the connection,
    /// or `seconds` pass; returns what was received and whether the server closed it.
    func read(seconds: Double = 20, until isEnough: (Data) -> Bool = { _ in false }) -> (data: Data, closed: Bool) {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        // Each round receives bytes, or ends at the close or the deadline.
        for _ in 0..<1_000_000 {
            let data = received.withLock { $0 }
            if isEnough(data) { return (data, false) }
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { return (data, false) }
            var waiting = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(
                left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000)
            guard poll(&waiting, 1, max(1, milliseconds)) > 0 else { continue }
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return (received.withLock { $0 }, true) }
            received.withLock { $0.append(contentsOf: chunk[..<count]) }
        }
        return (received.withLock { $0 }, false)
    }

    /// Sends `method path` with `Host: 127.0.0.1:<port>` (or `host`), and with a body `headers`
    /// (JSON by default), and reads the whole response.
    static func request(
        _ method: String, _ path: String, port: Int, host: String? = nil, body: String? = nil,
        headers: [String] = ["Content-Type: application/json"]
    ) async throws -> Response {
        try await blocking {
            let connection = try RawHTTPConnection(port: port)
            var text = "\(method) \(path) HTTP/1.1\r\nHost: \(host ?? "127.0.0.1:\(port)")\r\n"
            if let body {
                for header in headers { text += header + "\r\n" }
                text += "Content-Length: \(body.utf8.count)\r\n"
            }
            text += "\r\n" + (body ?? "")
            try connection.send(text)
            let (data, closed) = connection.read()
            guard closed else { throw Failure(description: "\(method) \(path): the server did not end the response") }
            return try parse(data)
        }
    }

    /// Splits a response into its status, headers (names lowercased) and body.
    static func parse(_ data: Data) throws -> Response {
        let bytes = [UInt8](data)
        guard let end = HTTPRequestHead.end(in: bytes) else {
            throw Failure(description: "no complete response head in \(String(decoding: data, as: UTF8.self))")
        }
        let lines = String(decoding: bytes[..<(end - 4)], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else {
            throw Failure(description: "bad status line \(lines[0])")
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        return Response(status: status, headers: headers, body: Data(bytes[end...]))
    }
}

#if canImport(Glibc)
    private let streamSocket = Int32(SOCK_STREAM.rawValue)
    /// A server that hung up makes `send` fail instead of raising `SIGPIPE`.
    private let sendFlags = Int32(MSG_NOSIGNAL)
#else
    private let streamSocket = SOCK_STREAM
    private let sendFlags: Int32 = 0
#endif

/// The C library's `send`, which ``RawHTTPConnection/send(_:)`` hides inside the class.
private func systemSend(_ socket: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    send(socket, bytes, count, sendFlags)
}

/// The `data:` lines of a response that is a stream of server-sent events, in order.
func serverSentEvents(in data: Data) -> [String] {
    let text = String(decoding: data, as: UTF8.self)
    guard let headEnd = text.range(of: "\r\n\r\n") else { return [] }
    // The text after the last empty line is an event not received whole yet.
    return text[headEnd.upperBound...].components(separatedBy: "\n\n").dropLast().compactMap { block in
        block.hasPrefix("data: ") ? String(block.dropFirst("data: ".count)) : nil
    }
}

/// `body`'s result, computed on a thread of its own: for blocking work (a socket's read, a
/// process's end) that must keep both the main actor and Swift's thread pool free.
func blocking<Result: Sendable>(_ body: @escaping @Sendable () throws -> Result) async throws -> Result {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            continuation.resume(with: Swift.Result { try body() })
        }
        thread.start()
    }
}
