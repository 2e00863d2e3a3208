import LoadableSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The lines of one event stream, handed from the main actor (where events happen) to the
/// connection's thread (which writes them): a buffer behind a lock, and a socket pair whose
/// readable end wakes the thread's `poll`.
final class EventFeed: Sendable {
    /// The most lines kept for a reader that does not keep up; older ones are dropped.
    static let capacity = 10_000

    /// Readable while lines wait: ``push(_:)`` writes a byte, ``take()`` reads them.
    let receiver: Int32
    private let sender: Int32
    private let lines = Locked<[String]>([])

    init() throws(LoopbackSocket.Failure) {
        (receiver, sender) = try LoopbackSocket.makePair()
    }

    deinit {
        close(receiver)
        close(sender)
    }

    /// Adds `line` and wakes the connection's thread.
    func push(_ line: String) {
        let wasEmpty = lines.withLock { lines in
            defer {
                lines.append(line)
                if lines.count > Self.capacity { lines.removeFirst(lines.count - Self.capacity) }
            }
            return lines.isEmpty
        }
        guard wasEmpty else { return }
        var byte: UInt8 = 1
        _ = send(sender, &byte, 1, LoopbackSocket.sendFlags)
    }

    /// The lines waiting, oldest first; empties the buffer.
    func take() -> [String] {
        // The wake bytes first: a push after this writes a new one, so none is lost.
        var bytes = [UInt8](repeating: 0, count: 64)
        for _ in 0..<1_000 {
            let count = bytes.withUnsafeMutableBytes { recv(receiver, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
        }
        return lines.withLock { lines in
            defer { lines = [] }
            return lines
        }
    }
}
