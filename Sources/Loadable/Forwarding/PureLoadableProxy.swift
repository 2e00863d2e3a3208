public import Observation

/// A loadable that stands for another one that may not exist yet: a "promise for a promise".
///
/// With no ``target`` it is ``LoadableState/idle`` with no contents and no error. With a target
/// its state, error and availability are the target's, and every notification of the target is
/// forwarded. Setting a different target notifies once.
///
/// ```swift
/// let avatar = PureLoadableProxy<PushLoadable<Image>>()
/// let token = avatar.observe { render($0) }   // observe now...
/// avatar.target = imageCache.image(for: url) // ...point it at the real loadable later
/// ```
///
/// The proxy holds its target strongly. Override ``proxyDidChange()`` to update derived values
/// before observers are told.
///
/// Isolated to the main actor; observers are called on the main actor.
@MainActor
open class PureLoadableProxy<Target: PureLoadable>: PureLoadable, Observable, @MainActor CustomStringConvertible {
    /// The observers, the Observation registrar, and the proxy's own state (shown while there is
    /// no target).
    package final let core = LoadableCore()

    /// One of the package's loadables, with its core (a class member, so that a syncable subclass
    /// answers for itself).
    public var loadableCapabilities: LoadableCapabilities { LoadableCapabilities(owner: self) }
    /// The subscription to the target.
    package final var follower = LoadableFollower()

    /// The loadable the proxy stands for; `nil` until it is known. Observed: a read is told of a
    /// change of the target (and, like every getter of a loadable, of any change the proxy shows).
    ///
    /// Setting a different object (or `nil` after an object) re-subscribes, calls
    /// ``proxyDidChange()`` and notifies observers once. Setting the same object does nothing.
    public var target: Target? {
        get {
            core.trackAccess()
            return storedTarget
        }
        set {
            let oldValue = storedTarget
            guard oldValue !== newValue else { return }
            storedTarget = newValue
            followedDidChange(from: oldValue) {
                if let newValue { targetWillBeObserved(newValue) }
            }
            // Other contents shown: their readers are told.
            announceChange(changesContents: true) { proxyDidChange() }
        }
    }
    /// ``target``, read without telling Observation.
    private var storedTarget: Target?

    /// Creates a proxy.
    ///
    /// - Parameter target: The loadable to stand for, if known already.
    public init(target: Target? = nil) {
        storedTarget = target
        if let target { targetWillBeObserved(target) }
        follow()
    }

    /// The target's state; the proxy's own (``LoadableState/idle``) without a target.
    public var loadableState: LoadableState { forwardedState }

    /// The target's error; `nil` without a target.
    public var error: (any Error)? { forwardedError }

    /// The target's availability; `false` without a target.
    public var isContentsAvailable: Bool { forwardedIsContentsAvailable }

    /// Calls `handler` after every change of the proxy or of its target.
    ///
    /// - Parameter handler: Called on the main actor with the proxy.
    /// - Returns: The token that keeps the observation alive.
    public final func addObserver(
        _ handler: @escaping @MainActor (any PureLoadable) -> Void
    ) -> LoadableObservation {
        registerObserver(handler)
    }

    /// Called before observers are notified of any change (target set, target notified).
    ///
    /// Does nothing by default; override it to update values derived from the target.
    open func proxyDidChange() {}

    /// `<TypeName: state, contents available: yes|no, target: …>`.
    open var description: String {
        loadableDescription(details: ", target: \(storedTarget.map { String(describing: $0) } ?? "none")")
    }

    /// Called with a new target before the proxy follows it.
    func targetWillBeObserved(_ target: Target) {}

    /// Tells Observation and the observers that the proxy changed (its target, its own state,
    /// or the target notified), calling ``proxyDidChange()`` first.
    final func forwardChange() {
        announceChange { proxyDidChange() }
    }

    /// Shows `state` while there is no target, and notifies.
    final func setOwnState(_ state: LoadableState) {
        announceChange {
            core.store(state: state, error: nil)
            proxyDidChange()
        }
    }
}

extension PureLoadableProxy: LoadableFollowing {
    /// The target.
    package var followed: Target? { storedTarget }

    package func followedDidNotify() { forwardChange() }
}

extension PureLoadableProxy: ContentsLoadable where Target: ContentsLoadable {
    /// The target's contents; `nil` without a target.
    public var contents: Target.Contents? { forwardedContents }
}
