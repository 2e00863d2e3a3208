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
    private var targetObservation: LoadableObservation?

    /// The loadable the proxy stands for; `nil` until it is known.
    ///
    /// Setting a different object (or `nil` after an object) re-subscribes, calls
    /// ``proxyDidChange()`` and notifies observers once. Setting the same object does nothing.
    public var target: Target? {
        didSet {
            guard oldValue !== target else { return }
            targetDidChange(from: oldValue)
            targetObservation?.cancel()
            targetObservation = nil
            if let target { subscribe(to: target) }
            forwardChange()
        }
    }

    /// Creates a proxy.
    ///
    /// - Parameter target: The loadable to stand for, if known already.
    public init(target: Target? = nil) {
        self.target = target
        if let target { subscribe(to: target) }
    }

    private func subscribe(to target: Target) {
        targetWillBeObserved(target)
        // Weakly: the proxy may be released on another thread while the target notifies.
        // Immediate: the proxy (and what `proxyDidChange()` derives) is up to date at every change
        // of the target.
        targetObservation = target.addFollowerObserver { [weak self] _ in
            self?.forwardChange()
        }
    }

    /// The target's state; the proxy's own (``LoadableState/idle``) without a target.
    public var loadableState: LoadableState {
        core.trackAccess()
        return target?.loadableState ?? core.state
    }

    /// The target's error; `nil` without a target.
    public var error: (any Error)? {
        core.trackAccess()
        return target?.error
    }

    /// The target's availability; `false` without a target.
    public var isContentsAvailable: Bool {
        core.trackAccess()
        return target?.isContentsAvailable ?? false
    }

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
        loadableDescription(details: ", target: \(target.map { String(describing: $0) } ?? "none")")
    }

    /// Passes "in use" from the old target to the new one (see `SyncableLoadable.isInUse`).
    private func targetDidChange(from oldTarget: Target?) {
        guard core.isInUse else { return }
        (target as? any SyncableLoadable)?.beginUseIfCounted()
        (oldTarget as? any SyncableLoadable)?.endUseIfCounted()
    }

    /// Called with a new target before the proxy subscribes to it.
    package func targetWillBeObserved(_ target: Target) {}

    /// Tells Observation and the observers that the proxy changed (its target, its own state,
    /// or the target notified).
    package final func forwardChange() {
        core.willChange()
        proxyDidChange()
        core.didChange(NotificationSubject(self))
    }

    /// Shows `state` while there is no target, and notifies.
    package final func setOwnState(_ state: LoadableState) {
        core.willChange()
        core.store(state: state, error: nil)
        proxyDidChange()
        core.didChange(NotificationSubject(self))
    }
}

extension PureLoadableProxy: LoadableCoreOwner {
    /// The target's state and availability, read without telling Observation; the proxy's own
    /// without a target.
    package var untrackedStatus: (state: LoadableState, isContentsAvailable: Bool) {
        target?.statusUntrackedWherePossible ?? (core.state, false)
    }

    /// Passes "in use" on to a syncable target.
    package func didBeginUse() { (target as? any SyncableLoadable)?.beginUseIfCounted() }
    /// Ends the target's use through this proxy.
    package func didEndUse() { (target as? any SyncableLoadable)?.endUseIfCounted() }

    /// The target's staleness; `false` without a target.
    /// The failure record of what this loadable stands for.
    package var failureRecord: (lastError: (any Error)?, consecutiveFailures: Int)? {
        target?.failureRecordIfKnown
    }

    package var untrackedIsStale: Bool { target?.isStaleUntracked ?? false }
}

extension PureLoadableProxy: ContentsLoadable where Target: ContentsLoadable {
    /// The target's contents; `nil` without a target.
    public var contents: Target.Contents? {
        core.trackAccess()
        return target?.contents
    }
}
