/// Calls a completion once, when a loadable is not syncing anymore.
///
/// It never starts a sync and has no timeout: it only watches. The completion is called at most
/// once, whatever the outcome (success, failure, idle after a cancelled sync): read the loadable in
/// it to see how the sync went.
///
/// ```swift
/// photos.sync()
/// SimpleLoadableWaiter.whenDoneSyncing(photos) {
///     refreshControl.endRefreshing()
/// }
/// ```
///
/// Differences from MMMLoadable's `MMMSimpleLoadableWaiter`:
/// - If the loadable is not syncing when the waiter is made, the completion is called at once,
///   synchronously, before ``whenDoneSyncing(_:_:)`` returns (not on a later main-queue turn).
/// - The result may be discarded: until it completes or is cancelled, the waiter keeps itself and
///   the loadable alive (through the loadable's observer list and its own strong reference).
///
/// For `async` code, `PureLoadable.doneSyncing()` does the same job.
///
/// Isolated to the main actor.
@MainActor
public final class SimpleLoadableWaiter {
    private var loadable: (any PureLoadable)?
    private var observation: LoadableObservation?
    private var completion: (@MainActor () -> Void)?

    private init(_ loadable: any PureLoadable, completion: @escaping @MainActor () -> Void) {
        self.loadable = loadable
        self.completion = completion
    }

    /// Calls `completion` once `loadable` is not `LoadableState.syncing`.
    ///
    /// - Parameters:
    ///   - loadable: The loadable to watch; kept alive until the completion runs or the waiter is
    ///     cancelled.
    ///   - completion: Called once on the main actor: at once (before this method returns) if the
    ///     loadable is not syncing now, otherwise after the notification that ends the sync.
    /// - Returns: The waiter, to ``cancel()`` it; it may be discarded.
    @discardableResult
    public static func whenDoneSyncing(
        _ loadable: any PureLoadable,
        _ completion: @escaping @MainActor () -> Void
    ) -> SimpleLoadableWaiter {
        let waiter = SimpleLoadableWaiter(loadable, completion: completion)
        if loadable.statusUntrackedWherePossible.state == .syncing {
            // The observer holds the waiter strongly: the loadable keeps it alive until it ends.
            waiter.observation = loadable.addObserver { _ in waiter.check() }
        } else {
            waiter.complete()
        }
        return waiter
    }

    /// Whether the completion has not run yet and the waiter was not cancelled.
    public var isPending: Bool { completion != nil }

    /// Stops waiting: the completion will not be called, and the loadable is let go. Calling it
    /// again, or after the completion ran, does nothing.
    public func cancel() {
        completion = nil
        observation?.cancel()
        observation = nil
        loadable = nil
    }

    private func check() {
        guard let loadable, loadable.statusUntrackedWherePossible.state != .syncing else { return }
        complete()
    }

    private func complete() {
        let completion = completion
        cancel()
        completion?()
    }
}
