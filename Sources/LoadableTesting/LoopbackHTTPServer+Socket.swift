import Foundation
import LoadableSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

// The POSIX side of `LoopbackHTTPServer`: its sockets, its threads and the loop of each connection.

extension LoopbackHTTPServer.StartError {
    /// The error of a socket call that failed.
    init(_ failure: LoopbackSocket.Failure) {
        operation = failure.operation
        code = failure.code
        description = "LoopbackHTTPServer could not start: \(failure.message)"
    }
}

extension LoopbackHTTPServer {
    /// The listening socket and the wake pipe, set up before any thread starts.
    struct Sockets {
        var listener: Int32
        var port: Int
        /// Readable once the server stops: one byte is written to ``wakeSender`` then and never
        /// read, so every thread that polls it wakes.
        var wakeReceiver: Int32
        var wakeSender: Int32

        /// The listen backlog.
        static let backlog: Int32 = 128

        /// Opens a listening socket on 127.0.0.1 on a port the system picks, and the wake pipe.
        static func open() throws(StartError) -> Sockets {
            let listener: Int32
            let port: Int
            do {
                (listener, port) = try LoopbackSocket.listen(backlog: backlog)
            } catch {
                throw StartError(error)
            }
            do {
                let (receiver, sender) = try LoopbackSocket.makePair()
                return Sockets(listener: listener, port: port, wakeReceiver: receiver, wakeSender: sender)
            } catch {
                close(listener)
                throw StartError(error)
            }
        }
    }

    /// A one-shot event that a connection thread can `poll`: readable once fired, for good.
    ///
    /// A gate's opening and a delay's end fire it from other threads; the connection thread
    /// waits for it together with its socket and the server's wake pipe, so that the client's
    /// close and the server's stop end the wait too.
    final class Signal: Sendable {
        /// Readable once ``fire()`` was called: the byte written is never read.
        let receiver: Int32
        private let sender: Int32

        /// A new signal, or `nil` if the system has no descriptors left.
        init?() {
            guard let (receiver, sender) = try? LoopbackSocket.makePair() else { return nil }
            self.receiver = receiver
            self.sender = sender
        }

        deinit {
            close(receiver)
            close(sender)
        }

        /// Fires the signal; firing it again changes nothing.
        func fire() {
            var byte: UInt8 = 1
            _ = send(sender, &byte, 1, LoopbackSocket.sendFlags)
        }
    }

    /// What the server's threads share: the sockets, the handler and the state behind one lock.
    ///
    /// The server holds it, and so does each of its threads; the threads never hold the server,
    /// so releasing the server stops them.
    final class Core: Sendable {
        /// How long a connection may wait for its next request, and a send for room to write.
        /// Generous, because a test's client may be a task that a loaded machine resumes seconds
        /// late; it only bounds a connection that a client forgot.
        static let idleTimeout = Duration.seconds(60)
        /// How long a closing connection keeps reading what the client still sends, so that the
        /// client reads the last response before it sees the close.
        static let lingerTimeout = Duration.seconds(1)
        /// How many requests one connection serves at most.
        static let maximumRequestsPerConnection = 1_000_000

        let state = Locked(State())
        let handler: @Sendable (Request) -> Response
        let lifetimeEnd: ContinuousClock.Instant
        private let listener: Int32
        private let port: Int
        private let wakeReceiver: Int32
        private let wakeSender: Int32
        /// Signalled once the accept loop closed the listening socket.
        private let acceptLoopEnded = DispatchSemaphore(value: 0)

        init(
            sockets: Sockets, lifetimeEnd: ContinuousClock.Instant,
            handler: @escaping @Sendable (Request) -> Response
        ) {
            listener = sockets.listener
            port = sockets.port
            wakeReceiver = sockets.wakeReceiver
            wakeSender = sockets.wakeSender
            self.lifetimeEnd = lifetimeEnd
            self.handler = handler
        }

        deinit {
            // Every thread has ended: each one holds the core.
            close(wakeReceiver)
            close(wakeSender)
        }

        /// Starts the thread that accepts connections.
        func startAcceptLoop() {
            let thread = Thread { [self] in runAcceptLoop() }
            thread.name = "LoopbackHTTPServer :\(port) accept"
            thread.start()
        }

        /// Marks the server stopped, wakes every thread, waits until the listening socket is
        /// closed and resumes the pending waits. Does nothing the second time.
        func stop() {
            guard let waits = state.withLock({ $0.markStopped() }) else { return }
            wakeEveryThread()
            // Bounded, but the accept loop ends at once: its poll sees the wake pipe.
            _ = acceptLoopEnded.wait(timeout: .now() + .seconds(10))
            for wait in waits { wait.resume() }
        }

        private func wakeEveryThread() {
            var byte: UInt8 = 1
            _ = write(wakeSender, &byte, 1)
        }

        /// Accepts connections until the server stops or its lifetime ends, then closes the
        /// listening socket.
        private func runAcceptLoop() {
            acceptLoop: for _ in 0..<Int.max {
                switch wait(for: listener, events: Int16(POLLIN), until: lifetimeEnd) {
                case .ready: acceptPendingConnections()
                case .stopped, .timedOut, .signalled: break acceptLoop
                }
            }
            close(listener)
            // At the end of the lifetime the server stops by itself; after `stop()` this is nil.
            if let waits = state.withLock({ $0.markStopped() }) {
                wakeEveryThread()
                for wait in waits { wait.resume() }
            }
            acceptLoopEnded.signal()
        }

        /// Accepts the connections waiting in the backlog, each on a thread of its own.
        private func acceptPendingConnections() {
            for _ in 0..<Sockets.backlog {
                let socket = accept(listener, nil, nil)
                guard socket >= 0 else {
                    if errno == EINTR || errno == ECONNABORTED { continue }
                    return  // EAGAIN: none left; anything else: the next poll tells
                }
                do {
                    try LoopbackSocket.configureAccepted(socket)
                } catch {
                    close(socket)
                    continue
                }
                let number = state.withLock { state in
                    state.connectionCount += 1
                    state.openConnectionCount += 1
                    return state.connectionCount
                }
                let thread = Thread { [self] in
                    var connection = Connection(socket: socket, core: self)
                    connection.run()
                    let waits = state.withLock { $0.closeConnection() }
                    for wait in waits { wait.resume() }
                }
                thread.name = "LoopbackHTTPServer :\(port) connection \(number)"
                thread.start()
            }
        }

        /// Whether the server stopped, or its lifetime ended.
        var isStopped: Bool {
            state.withLock { $0.isStopped } || ContinuousClock.now >= lifetimeEnd
        }

        /// What a wait on a socket found.
        enum Readiness {
            /// The socket has the events asked for, or an error or hang-up.
            case ready
            /// The signal waited for fired.
            case signalled
            /// The server stopped or its lifetime ended.
            case stopped
            /// `deadline` passed.
            case timedOut
        }

        /// Waits until `socket` has `events`, `signal` fires, the server stops, or `deadline`
        /// passes. When several happen at once, the stop wins, then the signal.
        func wait(
            for socket: Int32, events: Int16, orFor signal: Signal? = nil, until deadline: ContinuousClock.Instant
        ) -> Readiness {
            let end = min(deadline, lifetimeEnd)
            var descriptors = [
                pollfd(fd: socket, events: events, revents: 0),
                pollfd(fd: wakeReceiver, events: Int16(POLLIN), revents: 0),
            ]
            if let signal { descriptors.append(pollfd(fd: signal.receiver, events: Int16(POLLIN), revents: 0)) }
            // Each round ends in an event, a signal or the deadline; the count only bounds the loop.
            for _ in 0..<1_000_000 {
                let timeout = Self.milliseconds(until: end)
                let result = poll(&descriptors, nfds_t(descriptors.count), timeout)
                if result < 0 && errno != EINTR { return .stopped }
                if descriptors[1].revents != 0 { return .stopped }
                if descriptors.count > 2 && descriptors[2].revents != 0 { return .signalled }
                if descriptors[0].revents != 0 { return .ready }
                if result == 0 && ContinuousClock.now >= end { return end == lifetimeEnd ? .stopped : .timedOut }
            }
            return .timedOut
        }

        /// The time until `deadline`, in whole milliseconds rounded up, for `poll`.
        private static func milliseconds(until deadline: ContinuousClock.Instant) -> Int32 {
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero else { return 0 }
            let (seconds, attoseconds) = remaining.components
            let milliseconds = min(seconds, 1_000_000) * 1000 + attoseconds / 1_000_000_000_000_000 + 1
            return Int32(clamping: milliseconds)
        }
    }

    /// One accepted connection, on its own thread: reads requests, calls the handler and writes
    /// the responses until the client or the server ends it.
    struct Connection {
        let socket: Int32
        let core: Core
        /// Bytes received and not yet parsed.
        private var buffer: [UInt8] = []
        /// How far ``buffer`` was searched for the end of a head.
        private var searchedCount = 0
        private var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        /// Whether the request being answered counts in the server's held connections.
        private var isHeld = false

        init(socket: Int32, core: Core) {
            self.socket = socket
            self.core = core
        }

        mutating func run() {
            defer { close(socket) }
            for _ in 0..<Core.maximumRequestsPerConnection {
                guard serveNextRequest() else { return }
            }
            lingerAndClose()
        }

        /// Reads a request and answers it; returns whether the connection stays open.
        private mutating func serveNextRequest() -> Bool {
            let headEnd: Int
            switch readHead(until: .now + Core.idleTimeout) {
            case .complete(let end): headEnd = end
            case .tooLarge:
                refuse(RequestHead.Refusal(status: 431, reason: "the request head is over \(maximumHeadSize) bytes"))
                return false
            case .ended: return false
            }
            let head: RequestHead
            switch RequestHead.parse(buffer[..<(headEnd - 4)], maximumBodySize: maximumBodySize) {
            case .success(let parsed): head = parsed
            case .failure(let refusal):
                refuse(refusal)
                return false
            }
            let bodyEnd = headEnd + head.contentLength
            if head.expectsContinue && buffer.count < bodyEnd {
                guard sendAll(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)) else { return false }
            }
            guard readBody(upTo: bodyEnd, until: .now + Core.idleTimeout) else { return false }
            let request = Request(
                method: head.method, target: head.target, httpVersion: head.httpVersion,
                headers: head.headers.map { Header($0.name, $0.value) },
                body: Data(buffer[headEnd..<bodyEnd]))
            buffer.removeSubrange(..<bodyEnd)
            searchedCount = 0

            let arrivalWaits = core.state.withLock { $0.recordArrival() }
            for wait in arrivalWaits { wait.resume() }

            let response = core.handler(request)
            // A first delay starts before the request is recorded: a test that saw the request may
            // move its clock at once.
            var startedDelay: StartedDelay?
            if case .delayed(let delay, _) = response.kind {
                guard let started = StartedDelay(delay) else { return false }
                startedDelay = started
            }
            isHeld = response.holdsConnection
            defer { endHoldIfHeld() }
            let waits = core.state.withLock { $0.record(request, holdsConnection: response.holdsConnection) }
            for wait in waits { wait.resume() }
            return answer(response.kind, to: head, startedDelay: startedDelay)
        }

        /// A delay whose sleep runs: the signal it fires and the task that sleeps.
        private struct StartedDelay {
            var signal: Signal
            var task: Task<Void, Never>

            /// Starts `delay` now; `nil` if the system has no descriptors left.
            init?(_ delay: Delay) {
                guard let signal = Signal() else { return nil }
                self.signal = signal
                task = delay.start(firing: signal)
            }
        }

        /// Answers a request with `kind`, after the waits it asks for; returns whether the
        /// connection stays open.
        ///
        /// - Parameter startedDelay: The delay of `kind`, if it is a delay that already started.
        private mutating func answer(
            _ kind: Response.Kind, to head: RequestHead, startedDelay: StartedDelay? = nil
        ) -> Bool {
            switch kind {
            case .delayed(let delay, let next):
                guard let started = startedDelay ?? StartedDelay(delay) else { return false }
                let hasPassed = waitUntilFired(started.signal)
                started.task.cancel()
                return hasPassed && answer(next, to: head)
            case .gated(let gate, let next):
                guard let signal = Signal() else { return false }
                guard let id = gate.register(signal) else { return answer(next, to: head) }
                let isOpen = waitUntilFired(signal)
                gate.unregister(id)
                return isOpen && answer(next, to: head)
            case .complete(let status, let headers, let body):
                endHoldIfHeld()
                let closes = Self.closes(after: head, headers: headers)
                let bytes = responseBytes(status: status, headers: headers, body: body, request: head, closes: closes)
                guard sendAll(bytes) else { return false }
                if closes { lingerAndClose() }
                return !closes
            case .stream(let stream):
                endHoldIfHeld()
                let closes = Self.closes(after: head, headers: stream.headers)
                guard sendStream(stream, to: head, closes: closes) else { return false }
                if closes { lingerAndClose() }
                return !closes
            case .raw(let bytes, let thenHold):
                if !thenHold { endHoldIfHeld() }
                let isSent = sendAll(Array(bytes))
                if thenHold {
                    if isSent { holdUntilClosed() }
                } else if isSent {
                    lingerAndClose()
                }
                return false
            case .hold:
                holdUntilClosed()
                return false
            }
        }

        /// Whether the server closes the connection after answering `head` with `headers`: the
        /// client did not keep it alive, or the handler sent `Connection: close`.
        private static func closes(after head: RequestHead, headers: [Header]) -> Bool {
            !head.keepsAlive
                || headers.contains { header in
                    header.name.lowercased() == "connection"
                        && header.value.lowercased().split(separator: ",").contains {
                            $0.trimmingCharacters(in: .whitespaces) == "close"
                        }
                }
        }

        /// Waits until `signal` fires; returns `false` if the client closes the connection (or
        /// sends more than a whole next request meanwhile) or the server stops first.
        ///
        /// Bytes the client sends meanwhile stay in ``buffer``: a pipelined next request.
        private mutating func waitUntilFired(_ signal: Signal) -> Bool {
            // Each round ends the wait, or receives at least one byte (bounded by the limit) or
            // wakes spuriously; the lifetime bounds the whole wait.
            for _ in 0..<Int.max {
                switch core.wait(for: socket, events: Int16(POLLIN), orFor: signal, until: core.lifetimeEnd) {
                case .signalled: return true
                case .stopped, .timedOut: return false
                case .ready:
                    guard receiveAvailable(), buffer.count <= maximumHeadSize + maximumBodySize else { return false }
                }
            }
            return false
        }

        /// Sends the head and body of `stream`, the body made piece by piece; returns whether
        /// all of it was sent. Stops as soon as a send fails (the client hung up) or the server
        /// stops.
        private func sendStream(_ stream: BodyStream, to head: RequestHead, closes: Bool) -> Bool {
            let headBytes = responseHead(
                status: stream.status, headers: stream.headerFields,
                contentLength: stream.contentLength ? stream.encodedSize : nil, request: head, closes: closes)
            guard sendAll(headBytes) else { return false }
            guard sendsBody(status: stream.status, request: head) else { return true }
            var body = stream.makeBody()
            var piece: [UInt8] = []
            piece.reserveCapacity(BodyStream.pieceSize + 64)
            // Each round sends a whole piece (the last one may be shorter), or ends.
            for _ in 0...(stream.encodedSize / BodyStream.pieceSize + 1) {
                guard !core.isStopped else { return false }
                piece.removeAll(keepingCapacity: true)
                body.appendNextPiece(to: &piece)
                if piece.isEmpty { return stream.contentLength || sendAll(Array("0\r\n\r\n".utf8)) }
                if stream.contentLength {
                    guard sendAll(piece) else { return false }
                } else {
                    guard sendAll(Array("\(String(piece.count, radix: 16))\r\n".utf8)), sendAll(piece),
                        sendAll([0x0D, 0x0A])
                    else { return false }
                }
            }
            return false
        }

        private enum HeadOutcome {
            /// A head ends at this offset of ``buffer``, after its empty line.
            case complete(Int)
            case tooLarge
            /// The client closed the connection or sent nothing in time, or the server stopped.
            case ended
        }

        /// Receives until ``buffer`` holds a whole request head.
        private mutating func readHead(until deadline: ContinuousClock.Instant) -> HeadOutcome {
            // Each round receives at least one byte or ends the read, so the bound is never met.
            for _ in 0...maximumHeadSize + 1 {
                if let end = headEnd() { return end > maximumHeadSize ? .tooLarge : .complete(end) }
                if buffer.count > maximumHeadSize { return .tooLarge }
                guard receive(until: deadline) else { return .ended }
            }
            return .tooLarge
        }

        /// The offset after the first `\r\n\r\n` in ``buffer``, searching only bytes not searched
        /// before.
        private mutating func headEnd() -> Int? {
            let terminator: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A]
            let start = max(0, searchedCount - 3)
            searchedCount = buffer.count
            guard buffer.count - start >= 4 else { return nil }
            for index in start...(buffer.count - 4) where buffer[index] == 0x0D {
                if buffer[index..<(index + 4)].elementsEqual(terminator) { return index + 4 }
            }
            return nil
        }

        /// Receives until ``buffer`` holds `count` bytes; returns whether it does.
        private mutating func readBody(upTo count: Int, until deadline: ContinuousClock.Instant) -> Bool {
            // Each round receives at least one byte or ends the read.
            for _ in 0...maximumBodySize + 1 {
                if buffer.count >= count { return true }
                guard receive(until: deadline) else { return false }
            }
            return false
        }

        /// Waits for bytes and appends what arrived to ``buffer``; returns `false` when the client
        /// closed the connection, nothing came before `deadline`, or the server stopped.
        private mutating func receive(until deadline: ContinuousClock.Instant) -> Bool {
            // A spurious wake-up (`EAGAIN`) retries; the deadline still bounds the rounds.
            for _ in 0..<1_000 {
                guard case .ready = core.wait(for: socket, events: Int16(POLLIN), until: deadline) else {
                    return false
                }
                let countBefore = buffer.count
                guard receiveAvailable() else { return false }
                if buffer.count > countBefore { return true }
            }
            return false
        }

        /// Receives what the socket has now and appends it to ``buffer``; returns `false` when the
        /// client closed the connection or it failed. Nothing to read is not a failure.
        private mutating func receiveAvailable() -> Bool {
            let count = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                buffer.append(contentsOf: chunk[..<count])
                return true
            }
            return count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        }

        /// Writes all of `bytes`, in one `send` when the socket has room; returns whether it did.
        private func sendAll(_ bytes: [UInt8]) -> Bool {
            let deadline = ContinuousClock.now + Core.idleTimeout
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

        /// Answers a request the server will not take, and closes.
        private mutating func refuse(_ refusal: RequestHead.Refusal) {
            let body = Data("\(refusal.status) \(reasonPhrase(for: refusal.status)): \(refusal.reason)\n".utf8)
            let headers = [Header("Content-Type", "text/plain; charset=utf-8")]
            let bytes = responseBytes(status: refusal.status, headers: headers, body: body, request: nil, closes: true)
            if sendAll(bytes) { lingerAndClose() }
        }

        /// Ends the sending side and reads what the client still sends, until it closes, for at
        /// most ``Core/lingerTimeout``: closing with unread bytes would reset the connection, and
        /// the client could lose the response it has not read yet.
        private mutating func lingerAndClose() {
            shutdown(socket, Int32(SHUT_WR))
            let deadline = ContinuousClock.now + Core.lingerTimeout
            buffer = []
            for _ in 0..<64 {
                guard receive(until: deadline) else { return }
                buffer = []
            }
        }

        /// Holds the connection without answering until the client closes it or the server stops;
        /// bytes the client sends meanwhile are dropped.
        private mutating func holdUntilClosed() {
            for _ in 0..<Int.max {
                guard receive(until: core.lifetimeEnd) else { return }
                buffer = []
            }
        }

        /// Ends the hold of the request being answered, if it is held.
        private mutating func endHoldIfHeld() {
            guard isHeld else { return }
            isHeld = false
            let waits = core.state.withLock { $0.endHold() }
            for wait in waits { wait.resume() }
        }
    }
}
