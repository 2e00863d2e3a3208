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
    // The core first, the generic contents (whose size only the runtime knows) last, so that the
    // core has a fixed offset.
    /// The state, error, observers and Observation registrar, shared by every loadable type.
    package final let core = LoadableCore()
    private var storedContents: Contents?

    /// The state without telling Observation: for internal paths that are not reads of the
    /// loadable (``Loadable/sync()``), so that they neither count as one nor create the registrar.
    final var storedState: LoadableState { core.state }

    /// Creates an idle loadable.
    ///
    /// - Parameter contents: Contents to start with (for example from a cache); the state is
    ///   ``LoadableState/idle`` either way.
    public init(contents: Contents? = nil) {
        storedContents = contents
        core.hasContents = contents != nil
    }

    // MARK: - Reading

    /// The stage the loadable is at. Changes only through the setters.
    public final var loadableState: LoadableState {
        core.trackAccess()
        return core.state
    }

    /// The contents, kept across re-syncs and failures. Changes only through the setters.
    public final var contents: Contents? {
        core.trackAccess()
        return storedContents
    }

    /// Why the last sync failed, if it failed and said why; `nil` in any other state.
    public final var error: (any Error)? {
        core.trackAccess()
        return core.error
    }

    /// Whether there are contents to show; by default `contents != nil`.
    ///
    /// Override it for loadables whose contents come in parts (a chunked download that can show
    /// something before it is complete). ``LoadableState/didSyncSuccessfully`` must imply `true`.
    open var isContentsAvailable: Bool {
        core.trackAccess()
        return core.hasContents
    }

    /// Whether at least one observer is registered through ``addObserver(_:)``.
    public final var hasObservers: Bool { core.hasObservers }

    /// `<TypeName: state, contents available: yes|no>`.
    open var description: String { loadableDescription() }

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
        core.willChange()
        core.didChange(NotificationSubject(self))
    }

    /// Stores a new state and error, contents untouched, with one Observation mutation, then
    /// notifies observers.
    ///
    /// - Parameters:
    ///   - state: The new state.
    ///   - error: The new error; must be `nil` when `state` is ``LoadableState/syncing``.
    package final func update(state: LoadableState, error: (any Error)?) {
        core.willChange()
        core.store(state: state, error: error)
        core.didChange(NotificationSubject(self))
    }

    /// Stores a new state, error and contents with one Observation mutation, then notifies
    /// observers.
    ///
    /// - Parameters:
    ///   - state: The new state.
    ///   - error: The new error; must be `nil` when `state` is ``LoadableState/syncing``.
    ///   - contents: The new contents.
    package final func update(state: LoadableState, error: (any Error)?, contents: Contents) {
        core.willChange()
        core.store(state: state, error: error)
        storedContents = contents
        core.hasContents = true
        core.didChange(NotificationSubject(self))
    }

    /// Goes back to the state and error the loadable had before the current sync began, with one
    /// Observation mutation, then notifies observers. Contents are untouched.
    final func restoreStateBeforeSyncing() {
        core.willChange()
        core.storeStateBeforeSyncing()
        core.didChange(NotificationSubject(self))
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

extension PushLoadable: LoadableCoreOwner {
    package func observersDidBecomeNonEmpty() { didAddFirstObserver() }
    package func observersDidBecomeEmpty() { didRemoveLastObserver() }
}
