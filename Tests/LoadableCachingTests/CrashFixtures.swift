import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What the crash tests' child processes share: the number of saves finished, which a killing
/// thread of the child watches, and that thread.
final class SaveProgress: @unchecked Sendable {
    private let lock = NSLock()
    private var saves = 0

    var finishedSaves: Int { lock.withLock { saves } }
    func finishSave() { lock.withLock { saves += 1 } }

    /// Starts a thread that kills the process with SIGKILL once `saves` saves have finished and
    /// it has yielded `spins` times: it never sleeps, so the moment falls anywhere in a save.
    func killProcess(afterSaves saves: Int, spins: Int) {
        Thread {
            while self.finishedSaves < saves { sched_yield() }
            for _ in 0..<spins { sched_yield() }
            kill(getpid(), SIGKILL)
        }
        .start()
    }
}
