/// A ``PureLoadableProxy`` for a loadable that can sync, which can be asked to sync before its
/// target exists.
///
/// A ``sync()`` or ``syncIfNeeded()`` asked for before there is a target shows
/// ``LoadableState/syncing`` and is replayed as `syncIfNeeded()` on the target when it arrives.
/// With a target, both are forwarded as they are (even while the target syncs: a group target may
/// be syncing while one member still needs a sync).
///
/// ```swift
/// let profile = LoadableProxy<ProfileLoadable>()
/// profile.sync()                        // shows `syncing` at once
/// profile.target = ProfileLoadable(id)  // the target is asked to `syncIfNeeded()`
/// ```
///
/// Setting the target to `nil` keeps a pending sync pending until the next target arrives.
///
/// Isolated to the main actor; observers are called on the main actor.
@MainActor
open class LoadableProxy<Target: SyncableLoadable>: PureLoadableProxy<Target>, SyncableLoadable {
    /// Creates a proxy.
    ///
    /// - Parameter target: The loadable to stand for, if known already.
    public override init(target: Target? = nil) {
        super.init(target: target)
    }

    /// One of the package's syncable loadables, with its core.
    public override var loadableCapabilities: LoadableCapabilities {
        LoadableCapabilities(owner: self, syncable: self)
    }

    /// The target's ``SyncableLoadable/needsSync``; `true` without a target.
    public var needsSync: Bool { forwardedNeedsSync(default: true) }

    /// Forwards `sync()` to the target, or shows ``LoadableState/syncing`` until a target arrives.
    public func sync() {
        if let target = followed {
            target.sync()
        } else {
            requestSyncWithoutTarget()
        }
    }

    /// Forwards `syncIfNeeded()` to the target, or shows ``LoadableState/syncing`` until a target
    /// arrives.
    public func syncIfNeeded() {
        if let target = followed {
            target.syncIfNeeded()
        } else {
            requestSyncWithoutTarget()
        }
    }

    /// Invalidates the target. Without a target it does nothing: there are no contents to mark
    /// stale (a sync asked for without a target is already replayed on the target).
    public func invalidate() {
        forwardInvalidate()
    }

    /// Cancels the target's sync; without a target, drops a sync asked for meanwhile (the proxy
    /// goes back to ``LoadableState/idle``).
    public func cancelSync() {
        if let target = followed {
            target.cancelSync()
        } else if core.state == .syncing {
            setOwnState(.idle)
        }
    }

    private func requestSyncWithoutTarget() {
        guard core.state != .syncing else { return }
        setOwnState(.syncing)
    }

    override func targetWillBeObserved(_ target: Target) {
        guard core.state == .syncing else { return }
        // No notification: setting the target notifies once, after the target was asked.
        core.store(state: .idle, error: nil)
        target.syncIfNeeded()
    }
}
