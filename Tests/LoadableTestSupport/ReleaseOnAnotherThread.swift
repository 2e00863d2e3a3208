internal import Foundation
import Loadable
package import LoadableSupport

/// Drops the value in `box` on a new thread (a real second thread, not a task) and returns once
/// it was dropped there.
///
/// Blocks the calling thread meanwhile (a semaphore wait, not a sleep), so that nothing the release
/// hands to the main actor can run before the caller continues: the caller sees the state right
/// after the release, as code on the main thread would if another thread released the object just
/// before.
package func releaseOnAnotherThread<Value>(_ box: Locked<Value?>) {
    let released = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        // Taken out under the lock, released outside it, on this thread.
        var value = box.withLock { $0.take() }
        value = nil
        _ = value
        released.signal()
    }
    released.wait()
}
