public import Observation

/// A loadable its owner drives: a socket feed, a database listener, anything that pushes.
///
/// It has contents, setters, hooks, snapshots and observation like ``Loadable``, but no `sync()`:
/// only the owner changes it. Vend it as `any PureLoadable` (or `any ContentsLoadable<Contents>`)
/// so that nobody else can. ``Loadable`` is a `PushLoadable` that can also be asked to sync; the
/// two share this one implementation.
///
/// Isolated to the main actor; observers are called on the main actor. It conforms to
/// `Observable`, so a SwiftUI view (or `withObservationTracking`) that reads ``loadableState``,
/// ``contents``, ``error`` or ``isContentsAvailable`` is updated after every change.
///
/// ```swift
/// final class ChatFeed {
///     private let messages = PushLoadable<[Message]>()
///     var loadable: any ContentsLoadable<[Message]> { messages }
///
///     func socketDidConnect() { messages.setSyncing() }
///     func socketDidReceive(_ all: [Message]) { messages.setDidSyncSuccessfully(all) }
///     func socketDidFail(_ error: any Error) { messages.setDidFailToSync(error) }
/// }
/// ```
///
/// Every setter notifies observers, even when the value does not change (a repeated
/// ``setDidSyncSuccessfully()`` announces changed contents).
@MainActor
open class PushLoadable<Contents>: ContentsLoadable, Observable, @MainActor CustomStringConvertible {
    private var storedState: LoadableState = .idle
    private var storedContents: Contents?
    private var storedError: (any Error)?
    /// The state and error before the current sync began, restored by a cancelled sync.
    package var stateBeforeSyncing: (state: LoadableState, error: (any Error)?) = (.idle, nil)
    package var observerList = ObserverList()
    /// Created by the first read: Observation can only track a loadable that was read, so until
    /// then changes skip it, and an idle loadable nobody read does not pay for a registrar (three
    /// allocations, about 160 bytes).
    private var observation: ObservationState?

    /// Creates an idle loadable.
    ///
    /// - Parameter contents: Contents to start with (for example from a cache); the state is
    ///   ``LoadableState/idle`` either way.
    public init(contents: Contents? = nil) {
        storedContents = contents
    }

    // MARK: - Reading

    /// The stage the loadable is at. Changes only through the setters.
    public final var loadableState: LoadableState {
        trackAccess()
        return storedState
    }

    /// The contents, kept across re-syncs and failures. Changes only through the setters.
    public final var contents: Contents? {
        trackAccess()
        return storedContents
    }

    /// Why the last sync failed, if it failed and said why; `nil` in any other state.
    public final var error: (any Error)? {
        trackAccess()
        return storedError
    }

    /// Whether there are contents to show; by default `contents != nil`.
    ///
    /// Override it for loadables whose contents come in parts (a chunked download that can show
    /// something before it is complete). ``LoadableState/didSyncSuccessfully`` must imply `true`.
    open var isContentsAvailable: Bool {
        trackAccess()
        return storedContents != nil
    }

    /// The state, contents and error as one value, for views and for crossing actors.
    public final var snapshot: LoadableSnapshot<Contents> {
        LoadableSnapshot(
            state: loadableState,
            contents: contents,
            error: error,
            isContentsAvailable: isContentsAvailable
        )
    }

    /// Whether at least one observer is registered through ``addObserver(_:)``.
    public final var hasObservers: Bool { !observerList.isEmpty }

    /// `<TypeName: state, contents available: yes|no>`.
    open var description: String {
        "<\(type(of: self)): \(storedState), contents available: \(isContentsAvailable ? "yes" : "no")>"
    }

    // MARK: - Setters

    /// Moves to ``LoadableState/syncing`` and notifies. The error is cleared; contents stay.
    public final func setSyncing() {
        update(state: .syncing, error: nil)
    }

    /// Stores `contents`, moves to ``LoadableState/didSyncSuccessfully`` and notifies.
    ///
    /// - Parameter contents: The new contents.
    public final func setDidSyncSuccessfully(_ contents: Contents) {
        update(state: .didSyncSuccessfully, error: nil, contents: contents)
    }

    /// Moves to ``LoadableState/didSyncSuccessfully`` keeping the contents, and notifies.
    ///
    /// Use it after changing contents that ``isContentsAvailable`` accounts for. Calling it while
    /// no contents are available is a programmer error and stops the program.
    public final func setDidSyncSuccessfully() {
        guard isContentsAvailable else {
            // `fatalError` (unlike `precondition`) prints its message in release builds too.
            fatalError(
                "\(type(of: self)).setDidSyncSuccessfully() called while isContentsAvailable is false: "
                    + "a successful sync must leave contents available; pass them with setDidSyncSuccessfully(_:)"
            )
        }
        update(state: .didSyncSuccessfully, error: nil)
    }

    /// Stores `error`, moves to ``LoadableState/didFailToSync`` and notifies. Contents stay.
    ///
    /// A repeated failure replaces the error and notifies again.
    ///
    /// - Parameter error: Why the sync failed, or `nil` if unknown.
    public final func setDidFailToSync(_ error: (any Error)?) {
        update(state: .didFailToSync, error: error)
    }

    /// Moves to ``LoadableState/idle`` and notifies. The error is cleared; contents stay.
    public final func setIdle() {
        update(state: .idle, error: nil)
    }

    /// Notifies observers that the contents changed in place (the state stays as it is).
    public final func notifyDidChange() {
        willChange()
        didChange()
    }

    /// Stores a new state and error, contents untouched, with one Observation mutation, then
    /// notifies observers.
    package final func update(state: LoadableState, error: (any Error)?) {
        willChange(to: state)
        storedState = state
        storedError = error
        didChange()
    }

    /// Stores a new state, error and contents with one Observation mutation, then notifies
    /// observers.
    package final func update(state: LoadableState, error: (any Error)?, contents: Contents) {
        willChange(to: state)
        storedState = state
        storedError = error
        storedContents = contents
        didChange()
    }

    // MARK: - Observation

    // Hot paths: a change costs one Observation mutation (`willSet` + `didSet`, what
    // `withMutation` does, without its closure) and one notification round; a read costs one
    // `access`. Nothing here allocates.

    /// Tells Observation that the loadable was read (every getter calls it).
    private func trackAccess() {
        let observation = observation ?? makeObservationState()
        observation.registrar.access(ObservationKey(), keyPath: ObservationKey.keyPath)
    }

    /// Creates the registrar on the first read and keeps it.
    private func makeObservationState() -> ObservationState {
        let observation = ObservationState()
        self.observation = observation
        return observation
    }

    /// Begins a change: remembers the state a sync starts from and tells Observation.
    private func willChange(to state: LoadableState? = nil) {
        if state == .syncing, storedState != .syncing {
            stateBeforeSyncing = (storedState, storedError)
        }
        observation?.registrar.willSet(ObservationKey(), keyPath: ObservationKey.keyPath)
    }

    /// Ends a change: tells Observation, then notifies observers.
    private func didChange() {
        observation?.registrar.didSet(ObservationKey(), keyPath: ObservationKey.keyPath)
        notifyObservers()
    }

    /// Calls `handler` after every change until the returned token is cancelled or released.
    ///
    /// - Parameter handler: Called on the main actor with this loadable.
    /// - Returns: The token that keeps the observation alive.
    public final func addObserver(
        _ handler: @escaping @MainActor (any PureLoadable) -> Void
    ) -> LoadableObservation {
        registerObserver(handler)
    }

    /// Called after the first observer was added. Does nothing by default.
    ///
    /// Override it to start work only while someone watches (open a socket, start a timer).
    open func didAddFirstObserver() {}

    /// Called after the last observer was removed. Does nothing by default.
    open func didRemoveLastObserver() {}
}

/// The one property Observation tracks for every loadable: every getter reads it, every change
/// mutates it.
///
/// Observation keeps tracked properties per registrar (each loadable has its own) and key path; it
/// never uses the subject instance, only its type. The key path is rooted here, at a non-generic
/// type, rather than at `PushLoadable<Contents>` because a key path literal rooted at a generic
/// class is instantiated anew each time it is evaluated (an allocation and a runtime type lookup,
/// several microseconds), while this one is built once.
private struct ObservationKey: Observable {
    var anyProperty: Void { () }

    /// `\.anyProperty`, built once.
    @MainActor static let keyPath: KeyPath<ObservationKey, Void> = \.anyProperty
}

/// A loadable's Observation registrar, in a box so that it can be created on first use and
/// checked cheaply (`ObservationRegistrar` is a resilient struct: an optional one is copied through
/// runtime calls on each use).
private final class ObservationState {
    let registrar = ObservationRegistrar()
}

extension PushLoadable: ObserverOwner {
    package func observerListDidBecomeNonEmpty() { didAddFirstObserver() }
    package func observerListDidBecomeEmpty() { didRemoveLastObserver() }
}
