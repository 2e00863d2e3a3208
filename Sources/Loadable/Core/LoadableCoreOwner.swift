/// A loadable type built on a ``LoadableCore``.
///
/// Conforming gives the type the package's observer registration, token handling and untracked
/// reads; the type keeps its own public API (its getters call ``LoadableCore/trackAccess()``, its
/// changes go through ``LoadableCore/willChange()`` and ``LoadableCore/didChange(_:)``).
@MainActor
package protocol LoadableCoreOwner: PureLoadable, ObserverRegistry {
    /// The loadable's core.
    var core: LoadableCore { get }
    /// ``PureLoadable/loadableState`` and ``PureLoadable/isContentsAvailable``, read without
    /// telling Observation.
    ///
    /// For bookkeeping that follows a loadable, such as a group's: it is not a read by a view, so
    /// it should neither count as an Observation access nor create the loadable's registrar (which
    /// would then cost every later change a registrar mutation).
    var untrackedStatus: (state: LoadableState, isContentsAvailable: Bool) { get }
    /// Called after the first observer was added.
    func observersDidBecomeNonEmpty()
    /// Called after the last observer was removed.
    func observersDidBecomeEmpty()
    /// Registers the bookkeeping of a loadable that follows this one; see the default.
    func registerImmediateObserver(_ handler: @escaping ObserverList.Handler) -> LoadableObservation
    /// Called when the first use begins (see ``LoadableCore/isInUse``): a composite passes "in
    /// use" on to what it stands for. Does nothing by default.
    func didBeginUse()
    /// Called when the last use ends. Does nothing by default.
    func didEndUse()
    /// Whether the contents are stale, read without telling Observation: for a waiter that must
    /// not accept stale contents. By default the core's rules: invalidated, or too old.
    var untrackedIsStale: Bool { get }
    /// ``PushLoadable/lastError`` and ``PushLoadable/consecutiveFailures`` of the loadable (or of
    /// what it stands for), for snapshots; `nil` when it keeps no such record (a group).
    var failureRecord: (lastError: (any Error)?, consecutiveFailures: Int)? { get }
}

extension PureLoadable {
    /// Observes this loadable for a loadable that follows it (a group, a proxy, a mapped
    /// loadable): as an immediate observer when this loadable has a core, so that the follower
    /// is up to date at every change; as an ordinary observer otherwise (a type of the app's own).
    func addFollowerObserver(_ handler: @escaping ObserverList.Handler) -> LoadableObservation {
        if let owner = loadableCapabilities.owner { return owner.registerImmediateObserver(handler) }
        return addObserver(handler)
    }
}

extension LoadableCoreOwner {
    /// One of the package's loadables, with its core. (A syncable one says so with a member of its
    /// own: an extension with a package constraint cannot declare a public witness.)
    public var loadableCapabilities: LoadableCapabilities { LoadableCapabilities(owner: self) }
}

extension LoadableCoreOwner {
    package func observersDidBecomeNonEmpty() {}
    package func observersDidBecomeEmpty() {}
    package func didBeginUse() {}
    package func didEndUse() {}
    package var untrackedIsStale: Bool { core.isStaleByInvalidationOrAge }
    package var failureRecord: (lastError: (any Error)?, consecutiveFailures: Int)? { nil }

    /// Counts one use of this loadable; the first calls ``didBeginUse()``.
    package func beginUse() {
        if core.addUse() { didBeginUse() }
    }

    /// Ends one use of this loadable; the last calls ``didEndUse()``. Does nothing when none is
    /// counted.
    package func endUse() {
        if core.removeUse() { didEndUse() }
    }

    /// Registers `handler` with the core and returns the token that keeps it registered.
    package func registerObserver(_ handler: @escaping ObserverList.Handler) -> LoadableObservation {
        let (id, isFirst) = core.addObserver(handler)
        if isFirst { observersDidBecomeNonEmpty() }
        return LoadableObservation(owner: self, id: id)
    }

    /// Registers the bookkeeping of a loadable that follows this one as an immediate observer
    /// (see ``LoadableCore/addObserver(_:isImmediate:)``).
    package func registerImmediateObserver(_ handler: @escaping ObserverList.Handler) -> LoadableObservation {
        let (id, isFirst) = core.addObserver(handler, isImmediate: true)
        if isFirst { observersDidBecomeNonEmpty() }
        return LoadableObservation(owner: self, id: id)
    }

    /// Removes the observer `id` (called by its token).
    package func unregisterObserver(_ id: Int) {
        if core.removeObserver(id), !core.hasObservers { observersDidBecomeEmpty() }
    }

    /// The loadable's state and availability read with Observation tracking suspended.
    package var untrackedStatus: (state: LoadableState, isContentsAvailable: Bool) {
        core.readUntracked { (loadableState, isContentsAvailable) }
    }

    /// `<TypeName: state, contents available: yes|no>`, the description every loadable uses,
    /// with `details` (`", target: …"`) before the closing bracket.
    package func loadableDescription(details: String = "") -> String {
        let (state, isContentsAvailable) = untrackedStatus
        return "<\(type(of: self)): \(state), contents available: \(isContentsAvailable ? "yes" : "no")\(details)>"
    }
}
