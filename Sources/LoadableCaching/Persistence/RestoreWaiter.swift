/// Whether a restore is still to finish, and the callers of `restored()` waiting for it: the one
/// mechanism behind the `restored()` of a persistence, an outbox and a synced collection.
///
/// Starts restoring; ``finish()`` ends the restore and the waits, once (later calls do nothing).
@MainActor
package final class RestoreWaiter {
    /// Whether the restore is still to finish.
    package private(set) var isRestoring = true
    /// The callers of ``restored()`` waiting for ``finish()``.
    private var waiters: [CheckedContinuation<Void, Never>] = []

    package init() {}

    /// Returns once ``finish()`` was called; at once when it was.
    package func restored() async {
        guard isRestoring else { return }
        await withCheckedContinuation { waiters.append($0) }
    }

    /// Ends the restore: the waits of ``restored()`` end (their callers run after the caller of
    /// this, on the main actor), and later ones return at once.
    package func finish() {
        guard isRestoring else { return }
        isRestoring = false
        let waiting = waiters
        waiters = []
        for waiter in waiting { waiter.resume() }
    }
}
