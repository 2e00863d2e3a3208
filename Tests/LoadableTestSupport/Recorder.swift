public import Loadable

/// Records what an observer of a loadable sees: one state per notification.
///
/// It observes with `[weak self]`, as an app should: a recorder released on another thread never
/// leaves a dangling observer.
@MainActor
public final class Recorder {
    /// The state the observer saw at each notification, in order.
    public private(set) var states: [LoadableState] = []
    private var observation: LoadableObservation?

    /// Creates a recorder that does not observe anything yet; call ``record(_:)`` from your own
    /// observer.
    public init() {}

    /// Creates a recorder observing `loadable` until it is released.
    public init(_ loadable: some PureLoadable) {
        observation = loadable.addObserver { [weak self] loadable in
            self?.record(loadable)
        }
    }

    /// The number of notifications seen.
    public var count: Int { states.count }

    /// Records `loadable`'s state now.
    public func record(_ loadable: any PureLoadable) {
        states.append(loadable.loadableState)
    }
}
