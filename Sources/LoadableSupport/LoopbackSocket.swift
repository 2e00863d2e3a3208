#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The POSIX sockets the package's two HTTP servers share (`LoopbackHTTPServer` for tests, the
/// inspector's page): a listening socket on 127.0.0.1, socket pairs that wake a `poll`, and the
/// flags that differ between the C libraries.
///
/// Every socket it makes is non-blocking and close-on-exec, and never raises `SIGPIPE`.
package enum LoopbackSocket {
    /// A system call that failed, with its `errno`.
    package struct Failure: Error, Sendable {
        /// The call, as in `"bind"`.
        package let operation: String
        /// The `errno` value the call set.
        package let code: Int32

        /// The failure of `operation`, with the current `errno` unless `code` is given.
        package init(operation: String, code: Int32 = errno) {
            self.operation = operation
            self.code = code
        }

        /// `<operation> failed with errno <code> (<meaning>)`.
        package var message: String {
            "\(operation) failed with errno \(code) (\(String(cString: strerror(code))))"
        }
    }

    #if canImport(Glibc)
        static let streamSocket = Int32(SOCK_STREAM.rawValue)
        /// Set when the socket is made, so a process spawned meanwhile (an exit test) never
        /// inherits it.
        static let closeOnExecFlag = Int32(SOCK_CLOEXEC.rawValue)
        /// A client that hung up makes `send` fail with `EPIPE` instead of raising `SIGPIPE`.
        package static let sendFlags = Int32(MSG_NOSIGNAL)
    #elseif canImport(Musl)
        static let streamSocket = SOCK_STREAM
        static let closeOnExecFlag = SOCK_CLOEXEC
        /// A client that hung up makes `send` fail with `EPIPE` instead of raising `SIGPIPE`.
        package static let sendFlags = MSG_NOSIGNAL
    #else
        static let streamSocket = SOCK_STREAM
        /// Darwin has no `SOCK_CLOEXEC`: `configure` sets `FD_CLOEXEC` instead.
        static let closeOnExecFlag: Int32 = 0
        /// Darwin has no `MSG_NOSIGNAL`: `configure` sets `SO_NOSIGPIPE` on each socket instead.
        package static let sendFlags: Int32 = 0
    #endif

    /// Makes `socket` close on exec, non-blocking and, on Darwin, free of `SIGPIPE`.
    package static func configure(_ socket: Int32) throws(Failure) {
        guard fcntl(socket, F_SETFD, fcntl(socket, F_GETFD) | FD_CLOEXEC) == 0 else {
            throw Failure(operation: "fcntl(F_SETFD)")
        }
        guard fcntl(socket, F_SETFL, fcntl(socket, F_GETFL) | O_NONBLOCK) == 0 else {
            throw Failure(operation: "fcntl(F_SETFL)")
        }
        #if canImport(Darwin)
            try setOption(socket, SOL_SOCKET, SO_NOSIGPIPE, name: "setsockopt(SO_NOSIGPIPE)")
        #endif
    }

    /// Sets the integer socket option `option` to 1.
    package static func setOption(_ socket: Int32, _ level: Int32, _ option: Int32, name: String) throws(Failure) {
        var one: Int32 = 1
        guard setsockopt(socket, level, option, &one, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
            throw Failure(operation: name)
        }
    }

    /// Configures a socket just accepted: ``configure(_:)`` and `TCP_NODELAY` (a response goes
    /// out at once, not after the next one).
    package static func configureAccepted(_ socket: Int32) throws(Failure) {
        try configure(socket)
        try setOption(socket, Int32(IPPROTO_TCP), TCP_NODELAY, name: "setsockopt(TCP_NODELAY)")
    }

    /// Opens a socket listening on 127.0.0.1 and only there.
    ///
    /// - Parameters:
    ///   - port: The port, `0` for one the system picks.
    ///   - backlog: The listen backlog.
    /// - Returns: The socket and the port it listens on.
    package static func listen(port: Int = 0, backlog: Int32) throws(Failure) -> (socket: Int32, port: Int) {
        let listener = socket(AF_INET, streamSocket | closeOnExecFlag, 0)
        guard listener >= 0 else { throw Failure(operation: "socket") }
        do {
            return (listener, try bindAndListen(listener, port: port, backlog: backlog))
        } catch {
            close(listener)
            throw error
        }
    }

    /// Binds `listener` to 127.0.0.1 on `port` (`0`: a free one), listens, and returns the port.
    private static func bindAndListen(_ listener: Int32, port: Int, backlog: Int32) throws(Failure) -> Int {
        try configure(listener)
        try setOption(listener, SOL_SOCKET, SO_REUSEADDR, name: "setsockopt(SO_REUSEADDR)")
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(truncatingIfNeeded: port).bigEndian
        address.sin_addr = in_addr(s_addr: UInt32(0x7F00_0001).bigEndian)
        #if canImport(Darwin)
            address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        #endif
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) }
        }
        guard bound == 0 else { throw Failure(operation: "bind") }
        guard systemListen(listener, backlog) == 0 else { throw Failure(operation: "listen") }
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        guard named == 0 else { throw Failure(operation: "getsockname") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// A connected pair of local sockets, both configured: what one end writes wakes a `poll` on
    /// the other.
    ///
    /// A socket pair, not a pipe: it can be made close-on-exec atomically without `pipe2`, which
    /// Swift's Glibc module does not show.
    package static func makePair() throws(Failure) -> (receiver: Int32, sender: Int32) {
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, streamSocket | closeOnExecFlag, 0, &pair) == 0 else {
            throw Failure(operation: "socketpair")
        }
        do {
            try configure(pair[0])
            try configure(pair[1])
        } catch {
            close(pair[0])
            close(pair[1])
            throw error
        }
        return (pair[0], pair[1])
    }
}

/// The C library's `listen`, which ``LoopbackSocket/listen(port:backlog:)`` hides inside the enum.
private func systemListen(_ socket: Int32, _ backlog: Int32) -> Int32 {
    listen(socket, backlog)
}
