internal import Dispatch

/// A token that keeps one observer of a loadable registered.
///
/// The observation ends when you call ``cancel()`` or release the token. The token holds the
/// loadable weakly, so observing never keeps a loadable alive.
///
/// Isolated to the main actor. Releasing the token on the main thread removes the observer at
/// once; releasing it elsewhere hands the removal to the main actor.
///
/// ```swift
/// final class PhotosScreen {
///     private var observation: LoadableObservation?
///     func bind(to photos: PhotosLoadable) {
///         observation = photos.observe { photos in render(photos.snapshot) }
///     }
/// }
/// ```
@MainActor
public final class LoadableObservation {
    private weak var owner: (any ObserverRegistry)?
    private let id: Int

    package init(owner: any ObserverRegistry, id: Int) {
        self.owner = owner
        self.id = id
    }

    /// Whether the observer is still registered: not cancelled and the loadable still exists.
    public var isActive: Bool { owner != nil }

    /// Ends the observation; the handler is not called again. Calling it again does nothing.
    public func cancel() {
        owner?.unregisterObserver(id)
        owner = nil
    }

    deinit {
        guard let owner else { return }
        let id = id
        if isRunningOnMainQueue() {
            // The main actor runs its jobs on the main dispatch queue (on Linux that queue may be
            // served by a thread other than the main thread), so this cannot fail.
            MainActor.assumeIsolated { owner.unregisterObserver(id) }
        } else {
            Task { @MainActor [weak owner] in owner?.unregisterObserver(id) }
        }
    }
}

/// Marks the main dispatch queue so that code can tell whether it runs on it from any thread.
private let mainQueueKey: DispatchSpecificKey<Bool> = {
    let key = DispatchSpecificKey<Bool>()
    DispatchQueue.main.setSpecific(key: key, value: true)
    return key
}()

/// Whether the caller runs on the main dispatch queue, where the main actor runs its jobs.
///
/// `Thread.isMainThread` is not enough: on Linux, `dispatchMain()` (used by an async `main`)
/// serves the main queue from a worker thread.
private func isRunningOnMainQueue() -> Bool {
    DispatchQueue.getSpecific(key: mainQueueKey) == true
}
