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
package final class SaveProgress: @unchecked Sendable {
    /// No save finished yet.
    package init() {}

    private let condition = NSCondition()
    private var saves = 0

    package func finishSave() {
        condition.withLock {
            saves += 1
            condition.broadcast()
        }
    }

    /// Blocks the calling thread, without spinning, until `count` saves have finished.
    package func waitForSaves(_ count: Int) {
        condition.withLock {
            while saves < count { condition.wait() }
        }
    }

    /// Starts a thread that kills the process with SIGKILL once `saves` saves have finished and
    /// it has yielded `spins` times: the spin never sleeps, so the moment falls anywhere in a save.
    /// The wait for the saves blocks instead of spinning: tens of children run at once, and
    /// spinning ones would starve the test process of the processor.
    package func killProcess(afterSaves saves: Int, spins: Int) {
        Thread {
            self.waitForSaves(saves)
            for _ in 0..<spins { sched_yield() }
            kill(getpid(), SIGKILL)
        }
        .start()
    }
}
