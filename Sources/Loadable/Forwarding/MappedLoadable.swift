public import Observation

/// A loadable that follows another one and shows its contents transformed.
///
/// Made by `map(_:)` on any ``ContentsLoadable``. Its state, error and availability are the source's; its
/// contents are `transform(source.contents)`, computed when the source notifies with contents
/// available that may have changed (and once at creation). It holds the source strongly.
///
/// A change of the source's state alone does not run `transform`, and is not told to readers of
/// ``contents``; neither is new transformed contents equal to the old, when `Contents` is
/// `Equatable`. Observers are told of every change of the source.
///
/// It is syncable when its source is. The package's groups and waiters see that when the source's
/// type was known to be syncable where the mapped loadable was made (as it is for `map(_:)` on a
/// concrete type); one made in generic code over any `ContentsLoadable` is followed, not synced.
///
/// Isolated to the main actor; observers are called on the main actor.
///
/// ```swift
/// let count = photos.map { $0.count }
/// let token = count.observe { print($0.contents ?? 0) }
/// ```
@MainActor
public final class MappedLoadable<Source: ContentsLoadable, Contents>: ContentsLoadable, Observable {
    /// The observers and the Observation registrar.
    package let core = LoadableCore()
    /// The loadable this one follows.
    public let source: Source
    private let transform: @MainActor (Source.Contents) -> Contents
    /// The subscription to the source.
    package var follower = LoadableFollower()
    private var storedContents: Contents?
    /// This loadable as a ``SyncableLoadable``, made where `Source` is known to be one (its
    /// conformance is conditional, and ``loadableCapabilities`` is chosen without the condition);
    /// `nil` otherwise.
    private let asSyncable: (@MainActor (MappedLoadable) -> any SyncableLoadable)?

    /// Creates a loadable showing `transform(source.contents)`.
    ///
    /// - Parameters:
    ///   - source: The loadable to follow.
    ///   - transform: Turns the source's contents into this loadable's contents.
    public init(_ source: Source, transform: @escaping @MainActor (Source.Contents) -> Contents) {
        self.source = source
        self.transform = transform
        asSyncable = nil
        refreshDerivedContents()
        follow()
    }

    /// Creates a loadable showing `transform(source.contents)` of a syncable `source`: it is
    /// syncable too, also to the package's groups and waiters.
    ///
    /// - Parameters:
    ///   - source: The loadable to follow.
    ///   - transform: Turns the source's contents into this loadable's contents.
    public init(_ source: Source, transform: @escaping @MainActor (Source.Contents) -> Contents)
    where Source: SyncableLoadable {
        self.source = source
        self.transform = transform
        asSyncable = { $0 }
        refreshDerivedContents()
        follow()
    }

    /// One of the package's loadables; syncable when made from a syncable source.
    public var loadableCapabilities: LoadableCapabilities {
        LoadableCapabilities(owner: self, syncable: asSyncable?(self))
    }

    /// Recomputes the contents from the source's, read untracked (following the source is not a
    /// read by a view).
    package func refreshDerivedContents() {
        _ = refreshContents(sourceContentsMayHaveChanged: true)
    }

    /// Recomputes the contents from the source's, read untracked, when the source's contents may
    /// have changed or it gained or lost contents; calls ``LoadableCore/willChangeContents()``
    /// before storing different ones. Returns whether it did.
    private func refreshContents(sourceContentsMayHaveChanged: Bool) -> Bool {
        let isSourceContentsAvailable = LoadableCore.readUntracked { source.isContentsAvailable }
        guard isSourceContentsAvailable else {
            guard storedContents != nil else { return false }
            core.willChangeContents()
            storedContents = nil
            return true
        }
        guard sourceContentsMayHaveChanged || storedContents == nil,
            let sourceContents = LoadableCore.readUntracked({ source.contents })
        else { return false }
        let newContents = transform(sourceContents)
        if let storedContents, areEqualIfEquatable(storedContents, newContents) { return false }
        core.willChangeContents()
        storedContents = newContents
        return true
    }

    /// The transformed contents; kept while the source keeps its contents.
    public var contents: Contents? {
        core.trackContentsAccess()
        return storedContents
    }

    /// The source's state.
    public var loadableState: LoadableState { forwardedState }

    /// The source's error.
    public var error: (any Error)? { forwardedError }

    /// Whether the source has contents and the transformed contents exist.
    public var isContentsAvailable: Bool {
        core.trackAccess()
        return source.isContentsAvailable && storedContents != nil
    }

    /// Calls `handler` after every change of the source.
    ///
    /// - Parameter handler: Called on the main actor with this loadable.
    /// - Returns: The token that keeps the observation alive.
    public func addObserver(
        _ handler: @escaping @MainActor (any PureLoadable) -> Void
    ) -> LoadableObservation {
        registerObserver(handler)
    }
}

extension MappedLoadable: LoadableDeriving, LoadableFollowing {
    /// The source.
    package var followed: Source? { source }
    package var hasDerivedContents: Bool { storedContents != nil }

    /// Recomputes the contents when the source's may have changed, then notifies; readers of the
    /// contents are told only when they changed.
    package func followedDidNotify() {
        core.willChange()
        let changedContents = refreshContents(
            sourceContentsMayHaveChanged: LoadableCore.followedChangeMayHaveChangedContents)
        core.didChange(NotificationSubject(self), changedContents: changedContents)
    }
}

extension MappedLoadable: @MainActor CustomStringConvertible {
    /// `<MappedLoadable<Source, Contents>: state, contents available: yes|no>`.
    public var description: String { loadableDescription() }
}

extension MappedLoadable: SyncableLoadable where Source: SyncableLoadable {
    /// The source's ``SyncableLoadable/needsSync``.
    public var needsSync: Bool {
        core.trackAccess()
        return source.needsSync
    }
    /// Asks the source to sync.
    public func sync() { forwardSync() }
    /// Asks the source to sync if needed.
    public func syncIfNeeded() { forwardSyncIfNeeded() }
    /// Invalidates the source.
    public func invalidate() { forwardInvalidate() }
    /// Cancels the source's sync.
    public func cancelSync() { forwardCancelSync() }
}

extension ContentsLoadable {
    /// A loadable that follows this one and shows its contents transformed.
    ///
    /// ```swift
    /// let names = users.map { $0.map(\.name) }
    /// ```
    ///
    /// - Parameter transform: Turns this loadable's contents into the new contents; runs on the
    ///   main actor when this loadable notifies with contents available.
    /// - Returns: A loadable with the source's state, error and availability.
    public func map<NewContents>(
        _ transform: @escaping @MainActor (Contents) -> NewContents
    ) -> MappedLoadable<Self, NewContents> {
        MappedLoadable(self, transform: transform)
    }
}

extension ContentsLoadable where Self: SyncableLoadable {
    /// A loadable that follows this one and shows its contents transformed; syncable, as this
    /// one is.
    ///
    /// - Parameter transform: Turns this loadable's contents into the new contents; runs on the
    ///   main actor when this loadable notifies with contents available.
    /// - Returns: A loadable with the source's state, error and availability.
    public func map<NewContents>(
        _ transform: @escaping @MainActor (Contents) -> NewContents
    ) -> MappedLoadable<Self, NewContents> {
        MappedLoadable(self, transform: transform)
    }
}
