internal import Dispatch
import LoadableSupport

#if !canImport(Darwin)
    internal import Synchronization
#endif

/// A token that keeps one observer of a loadable registered.
///
/// The observation ends when you call ``cancel()`` or release the token. The token holds the
/// loadable weakly, so observing never keeps a loadable alive.
///
/// Isolated to the main actor. Whichever thread releases the token, its observer is never called
/// after the release: released on the main thread, the token removes the observer at once;
/// released elsewhere (a main-actor object is `Sendable`, so its last reference may drop on any
/// thread), it marks the observer as released, which the loadable checks before each call, and
/// hands the removal itself to the main actor.
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
            // Mark it first: until the main actor runs the removal, the loadable skips it.
            ReleasedObservers.insert(id)
            Task { @MainActor [weak owner] in
                owner?.unregisterObserver(id)
                ReleasedObservers.remove(id)
            }
        }
    }
}

/// Observers whose token was released off the main actor and whose removal has not run yet.
///
/// The notification loop asks ``contains(_:)`` before each call. That costs one atomic load while
/// the set is empty (nearly always); the lock is taken only while a removal is on its way to the
/// main actor. Observer identifiers are unique in the process, so an identifier here can only be
/// the released observer's.
enum ReleasedObservers {
    private static let ids = Locked(Set<Int>())

    #if canImport(Darwin)
        // `Atomic` needs macOS 15 / iOS 18; the package's floor is macOS 14 / iOS 17, so on Apple
        // platforms the check takes the lock (an uncontended unfair-lock-class cost).
        /// Whether the observer `id` was released and must not be called.
        package static func contains(_ id: Int) -> Bool {
            ids.withLock { !$0.isEmpty && $0.contains(id) }
        }

        /// Marks the observer `id` as released.
        static func insert(_ id: Int) {
            ids.withLock { _ = $0.insert(id) }
        }

        /// Forgets `id` once its removal ran.
        static func remove(_ id: Int) {
            ids.withLock { _ = $0.remove(id) }
        }
    #else
        /// The number of identifiers in ``ids``, readable without the lock.
        private static let count = Atomic<Int>(0)

        /// Whether the observer `id` was released and must not be called.
        @inline(__always)
        package static func contains(_ id: Int) -> Bool {
            guard count.load(ordering: .acquiring) > 0 else { return false }
            return ids.withLock { $0.contains(id) }
        }

        /// Marks the observer `id` as released.
        static func insert(_ id: Int) {
            ids.withLock { ids in
                if ids.insert(id).inserted { count.add(1, ordering: .releasing) }
            }
        }

        /// Forgets `id` once its removal ran.
        static func remove(_ id: Int) {
            ids.withLock { ids in
                if ids.remove(id) != nil { count.subtract(1, ordering: .releasing) }
            }
        }
    #endif
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
func isRunningOnMainQueue() -> Bool {
    // The overlays of Linux and Apple platforms both key a queue's value by the key object's
    // address.
    dispatchGetSpecific(Unmanaged.passUnretained(mainQueueKey).toOpaque()) != nil
}

/// libdispatch's own `dispatch_get_specific`, which the overlay hides behind a generic
/// `getSpecific(key:)` that boxes and casts the value (most of the check's cost).
@_silgen_name("dispatch_get_specific")
private func dispatchGetSpecific(_ key: UnsafeRawPointer) -> UnsafeMutableRawPointer?

/// Runs `body` on the main actor: now if this is the main actor (a `deinit` on the main thread),
/// otherwise in a task (a main-actor object released on another thread).
package func runOnMainActor(_ body: @escaping @MainActor @Sendable () -> Void) {
    if isRunningOnMainQueue() {
        MainActor.assumeIsolated { body() }
    } else {
        Task { @MainActor in body() }
    }
}

/// What a ``LoadableObservation`` token points at: something that registered an observer under
/// an identifier and can remove it.
@MainActor
package protocol ObserverRegistry: AnyObject, Sendable {
    /// Removes the observer `id` (called by its token).
    func unregisterObserver(_ id: Int)
}

/// A main-actor object (every loadable is one) carried where the compiler cannot see that it is
/// `Sendable`: a generic parameter constrained to a main-actor protocol, read in a `deinit` to
/// be handed back to the main actor.
struct MainActorObject<Value>: @unchecked Sendable {
    /// The object; use it on the main actor only.
    package let value: Value

    /// Wraps `value`, which must be isolated to the main actor.
    package init(_ value: Value) {
        self.value = value
    }
}
