import Foundation
import LoadableSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One accepted connection, on its own thread: reads one request, answers it, and closes.
///
/// Every wait is bounded: the request must come within ``InspectorServerCore/idleTimeout``, and
/// an event stream ends when the client leaves or the server stops.
struct InspectorConnection {
    /// The most bytes a request head may take.
    static let maximumHeadSize = 16 * 1024
    /// The largest request body read (an action is a few dozen bytes).
    static let maximumBodySize = 64 * 1024
    /// How often an idle event stream sends a comment: a client that left unseen is noticed when
    /// the write fails.
    static let heartbeat = Duration.seconds(15)

    let socket: Int32
    let core: InspectorServerCore
    /// Bytes received and not yet parsed.
    private var buffer: [UInt8] = []
    private var chunk = [UInt8](repeating: 0, count: 16 * 1024)

    init(socket: Int32, core: InspectorServerCore) {
        self.socket = socket
        self.core = core
    }

    mutating func run() {
        defer { close(socket) }
        let deadline = ContinuousClock.now + InspectorServerCore.idleTimeout
        var headEnd: Int?
        // Each round receives at least one byte or ends the read.
        for _ in 0...Self.maximumHeadSize + 1 {
            headEnd = HTTPRequestHead.end(in: buffer, searchingFrom: 0)
            if headEnd != nil || buffer.count > Self.maximumHeadSize { break }
            guard receive(until: deadline) else { return }
        }
        guard let headEnd, headEnd <= Self.maximumHeadSize else {
            return finish(InspectorRoutes.error(431, "the request head is over \(Self.maximumHeadSize) bytes"))
        }
        let head: HTTPRequestHead
        switch HTTPRequestHead.parse(buffer[..<(headEnd - 4)], maximumBodySize: Self.maximumBodySize) {
        case .success(let parsed): head = parsed
        case .failure(let refusal): return finish(InspectorRoutes.error(refusal.status, refusal.reason))
        }
        let bodyEnd = headEnd + head.contentLength
        if head.expectsContinue && buffer.count < bodyEnd {
            guard sendAll(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)) else { return }
        }
        // Each round receives at least one byte or ends the read.
        for _ in 0...Self.maximumBodySize + 1 where buffer.count < bodyEnd {
            guard receive(until: deadline) else { return }
        }
        let body = Data(buffer[headEnd..<bodyEnd])
        buffer.removeSubrange(..<bodyEnd)
        finish(core.routes.answer(to: head, body: body, port: core.port))
    }

    /// Sends `answer` and closes.
    private mutating func finish(_ answer: InspectorRoutes.Answer) {
        switch answer {
        case .complete(let status, let contentType, let body):
            var bytes = Self.head(
                status: status,
                headers: [
                    ("Content-Type", contentType), ("Content-Length", "\(body.count)"), ("Cache-Control", "no-store"),
                ])
            bytes.append(contentsOf: body)
            if sendAll(bytes) { lingerAndClose() }
        case .events(let replay, let feed, let task):
            core.countEventStream(1)
            streamEvents(replay: replay, feed: feed)
            task.cancel()
            core.countEventStream(-1)
        }
    }

    /// Sends `replay`, then what `feed` receives, as server-sent events, until the client leaves
    /// or the server stops.
    private mutating func streamEvents(replay: [String], feed: EventFeed) {
        var bytes = Self.head(
            status: 200,
            headers: [("Content-Type", "text/event-stream; charset=utf-8"), ("Cache-Control", "no-store")])
        bytes.append(contentsOf: Self.events(replay))
        guard sendAll(bytes) else { return }
        // Each round sends what arrived or a heartbeat, or ends: the client's close and the
        // server's stop end the wait.
        for _ in 0..<Int.max {
            switch core.wait(
                for: socket, events: Int16(POLLIN), orFor: feed.receiver, until: .now + Self.heartbeat)
            {
            case .stopped:
                return
            case .ready:
                // A client of an event stream sends nothing more: readable means it left.
                guard receiveAvailable() else { return }
                buffer = []
            case .signalled:
                guard sendAll(Self.events(feed.take())) else { return }
            case .timedOut:
                guard sendAll(Array(": still here\n\n".utf8)) else { return }
            }
        }
    }

    /// `lines` as server-sent events: `data: <line>` and an empty line each.
    private static func events(_ lines: [String]) -> [UInt8] {
        var text = ""
        for line in lines { text += "data: \(line)\n\n" }
        return Array(text.utf8)
    }

    /// A status line and header fields, with `Connection: close` (one request per connection).
    private static func head(status: Int, headers: [(String, String)]) -> [UInt8] {
        var text = "HTTP/1.1 \(status) \(reasonPhrase(status))\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n"
        return Array(text.utf8)
    }

    private static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 200: "OK"
        case 400: "Bad Request"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 413: "Content Too Large"
        case 415: "Unsupported Media Type"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 503: "Service Unavailable"
        case 505: "HTTP Version Not Supported"
        default: "Status"
        }
    }

    /// Waits for bytes and appends what arrived to ``buffer``; returns `false` when the client
    /// closed the connection, nothing came before `deadline`, or the server stopped.
    private mutating func receive(until deadline: ContinuousClock.Instant) -> Bool {
        // A spurious wake-up (`EAGAIN`) retries; the deadline still bounds the rounds.
        for _ in 0..<1_000 {
            guard case .ready = core.wait(for: socket, events: Int16(POLLIN), until: deadline) else { return false }
            let countBefore = buffer.count
            guard receiveAvailable() else { return false }
            if buffer.count > countBefore { return true }
        }
        return false
    }

    /// Receives what the socket has now into ``buffer``; `false` when the client closed the
    /// connection or it failed. Nothing to read is not a failure.
    private mutating func receiveAvailable() -> Bool {
        let count = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
        if count > 0 {
            buffer.append(contentsOf: chunk[..<count])
            return true
        }
        return count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
    }

    /// Writes all of `bytes`; returns whether it did (not when the client hung up, the server
    /// stopped, or there was no room for ``InspectorServerCore/idleTimeout``).
    private func sendAll(_ bytes: [UInt8]) -> Bool {
        let deadline = ContinuousClock.now + InspectorServerCore.idleTimeout
        var offset = 0
        // Each round writes bytes, or waits for room until the deadline.
        for _ in 0...bytes.count + 1_000 {
            if offset == bytes.count { return true }
            let count = bytes.withUnsafeBytes { bytes in
                send(socket, bytes.baseAddress! + offset, bytes.count - offset, LoopbackSocket.sendFlags)
            }
            if count > 0 {
                offset += count
            } else if count < 0 && errno == EINTR {
                continue
            } else if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                guard case .ready = core.wait(for: socket, events: Int16(POLLOUT), until: deadline) else {
                    return false
                }
            } else {
                return false  // the client hung up (EPIPE, ECONNRESET)
            }
        }
        return false
    }

    /// Ends the sending side and reads what the client still sends, until it closes, for at most
    /// a second: closing with unread bytes would reset the connection, and the client could lose
    /// the response it has not read yet.
    private mutating func lingerAndClose() {
        shutdown(socket, Int32(SHUT_WR))
        let deadline = ContinuousClock.now + .seconds(1)
        for _ in 0..<64 {
            buffer = []
            guard receive(until: deadline) else { return }
        }
    }
}
