import Dispatch
import Foundation
import LoadableSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What the server's threads share: the listening socket, the wake pipe, the routes and whether
/// the server stopped.
///
/// The server holds it, and so does each of its threads; the threads never hold the server, so
/// releasing the server stops them.
final class InspectorServerCore: Sendable {
    /// How long a connection may take to send its request, and a send may wait for room.
    static let idleTimeout = Duration.seconds(30)
    /// The listen backlog, and the most connections accepted in one round.
    static let backlog: Int32 = 64

    let port: Int
    let routes: InspectorRoutes
    private let listener: Int32
    /// Readable once the server stops: one byte is written to ``wakeSender`` then and never
    /// read, so every thread that polls it wakes.
    private let wakeReceiver: Int32
    private let wakeSender: Int32
    private let stopped = Locked(false)
    /// The event streams open now, and the semaphores of those who wait for the count to change.
    private let eventStreams = Locked<(count: Int, waiters: [DispatchSemaphore])>((0, []))
    /// Signalled once the accept loop closed the listening socket.
    private let acceptLoopEnded = DispatchSemaphore(value: 0)

    init(port: Int, routes: InspectorRoutes) throws(LoopbackSocket.Failure) {
        let (listener, boundPort) = try LoopbackSocket.listen(port: port, backlog: Self.backlog)
        do {
            (wakeReceiver, wakeSender) = try LoopbackSocket.makePair()
        } catch {
            close(listener)
            throw error
        }
        self.listener = listener
        self.port = boundPort
        self.routes = routes
    }

    deinit {
        // Every thread has ended: each one holds the core.
        close(wakeReceiver)
        close(wakeSender)
    }

    /// Starts the thread that accepts connections.
    func startAcceptLoop() {
        let thread = Thread { [self] in runAcceptLoop() }
        thread.name = "LoadableInspectorServer :\(port) accept"
        thread.start()
    }

    /// Marks the server stopped, wakes every thread and waits until the listening socket is
    /// closed. Does nothing the second time.
    func stop() {
        let wasStopped = stopped.withLock { stopped in
            defer { stopped = true }
            return stopped
        }
        guard !wasStopped else { return }
        var byte: UInt8 = 1
        _ = write(wakeSender, &byte, 1)
        // Bounded, but the accept loop ends at once: its poll sees the wake pipe.
        _ = acceptLoopEnded.wait(timeout: .now() + .seconds(10))
    }

    /// Counts an event stream that opens (`+1`) or ends (`-1`), and wakes who waits for the count.
    func countEventStream(_ change: Int) {
        let waiters = eventStreams.withLock { streams in
            streams.count += change
            return streams.waiters
        }
        for waiter in waiters { waiter.signal() }
    }

    /// The event streams open now.
    var openEventStreamCount: Int { eventStreams.withLock { $0.count } }

    /// Blocks until ``openEventStreamCount`` is `count`, at most `seconds`; returns whether it is.
    func waitForOpenEventStreams(_ count: Int, seconds: Double) -> Bool {
        let waiter = DispatchSemaphore(value: 0)
        eventStreams.withLock { $0.waiters.append(waiter) }
        defer { eventStreams.withLock { streams in streams.waiters.removeAll { $0 === waiter } } }
        let deadline = DispatchTime.now() + seconds
        // Each round sees the count, or waits for its next change until the deadline.
        for _ in 0..<1_000_000 {
            if openEventStreamCount == count { return true }
            if waiter.wait(timeout: deadline) == .timedOut { return openEventStreamCount == count }
        }
        return false
    }

    /// Whether ``stop()`` was called.
    var isStopped: Bool { stopped.withLock { $0 } }

    /// Accepts connections until the server stops, then closes the listening socket.
    private func runAcceptLoop() {
        // Each round accepts what waits, or ends: the stop wakes the poll.
        acceptLoop: for _ in 0..<Int.max {
            switch wait(for: listener, events: Int16(POLLIN), until: .now + .seconds(3600)) {
            case .ready: acceptPendingConnections()
            case .timedOut, .signalled: continue
            case .stopped: break acceptLoop
            }
        }
        close(listener)
        acceptLoopEnded.signal()
    }

    /// Accepts the connections waiting in the backlog, each on a thread of its own.
    private func acceptPendingConnections() {
        for _ in 0..<Self.backlog {
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
            let thread = Thread { [self] in
                var connection = InspectorConnection(socket: socket, core: self)
                connection.run()
            }
            thread.name = "LoadableInspectorServer :\(port) connection"
            thread.start()
        }
    }

    /// What a wait on a socket found.
    enum Readiness {
        /// The socket has the events asked for, or an error or hang-up.
        case ready
        /// The other descriptor waited for is readable.
        case signalled
        /// The server stopped.
        case stopped
        /// `deadline` passed.
        case timedOut
    }

    /// Waits until `socket` has `events`, `signal` is readable, the server stops, or `deadline`
    /// passes. When several happen at once, the stop wins, then the signal.
    func wait(
        for socket: Int32, events: Int16, orFor signal: Int32? = nil, until deadline: ContinuousClock.Instant
    ) -> Readiness {
        var descriptors = [
            pollfd(fd: socket, events: events, revents: 0),
            pollfd(fd: wakeReceiver, events: Int16(POLLIN), revents: 0),
        ]
        if let signal { descriptors.append(pollfd(fd: signal, events: Int16(POLLIN), revents: 0)) }
        // Each round ends in an event or the deadline, or is a spurious wake-up; the count only
        // bounds the loop.
        for _ in 0..<1_000_000 {
            let result = poll(&descriptors, nfds_t(descriptors.count), Self.milliseconds(until: deadline))
            if result < 0 && errno != EINTR { return .stopped }
            if descriptors[1].revents != 0 { return .stopped }
            if descriptors.count > 2 && descriptors[2].revents != 0 { return .signalled }
            if descriptors[0].revents != 0 { return .ready }
            if result == 0 && ContinuousClock.now >= deadline { return .timedOut }
        }
        return .timedOut
    }

    /// The time until `deadline`, in whole milliseconds rounded up, for `poll`.
    private static func milliseconds(until deadline: ContinuousClock.Instant) -> Int32 {
        let left = ContinuousClock.now.duration(to: deadline)
        guard left > .zero else { return 0 }
        let (seconds, attoseconds) = left.components
        let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: milliseconds)
    }
}
