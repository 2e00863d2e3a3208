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
    // Stored properties are private (or internal and read-only outside this file) so that the
    // compiler sees every access and can drop most dynamic exclusivity checks. Their order packs
    // the object: the one-byte fields right after the observer list's flags, the generic contents
    // (whose size only the runtime knows) last, so that the fields before it have fixed offsets.
    private var observers = ObserverList()
    /// The state without telling Observation: for internal paths that are not reads of the
    /// loadable (``Loadable/sync()``), so that they neither count as one nor create the registrar.
    private(set) final var storedState: LoadableState = .idle
    /// The state before the current sync began, restored by a cancelled sync.
    private var stateBeforeSyncing: LoadableState = .idle
    /// `storedContents != nil`, kept so that reading it needs no generic code.
    private var hasContents: Bool
    /// Set while ``untrackedStatus`` runs, so that its reads do not tell Observation.
    private var isReadingUntracked = false
    /// The error of the current state, except while syncing: a syncing loadable has no error, so
    /// this keeps the error the sync started from (restored by a cancelled sync) without a field
    /// of its own.
    private var storedError: (any Error)?
    /// Created by the first read: Observation can only track a loadable that was read, so until
    /// then changes skip it, and an idle loadable nobody read does not pay for a registrar (three
    /// allocations, about 160 bytes).
    private var observation: ObservationState?
    private var storedContents: Contents?

    /// Creates an idle loadable.
    ///
    /// - Parameter contents: Contents to start with (for example from a cache); the state is
    ///   ``LoadableState/idle`` either way.
    public init(contents: Contents? = nil) {
        storedContents = contents
        hasContents = contents != nil
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
        return storedState == .syncing ? nil : storedError
    }

    /// Whether there are contents to show; by default `contents != nil`.
    ///
    /// Override it for loadables whose contents come in parts (a chunked download that can show
    /// something before it is complete). ``LoadableState/didSyncSuccessfully`` must imply `true`.
    open var isContentsAvailable: Bool {
        trackAccess()
        return hasContents
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
    public final var hasObservers: Bool { !observers.isEmpty }

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
    ///
    /// - Parameters:
    ///   - state: The new state.
    ///   - error: The new error; must be `nil` when `state` is ``LoadableState/syncing``.
    package final func update(state: LoadableState, error: (any Error)?) {
        willChange()
        store(state: state, error: error)
        didChange()
    }

    /// Stores a new state, error and contents with one Observation mutation, then notifies
    /// observers.
    ///
    /// - Parameters:
    ///   - state: The new state.
    ///   - error: The new error; must be `nil` when `state` is ``LoadableState/syncing``.
    ///   - contents: The new contents.
    package final func update(state: LoadableState, error: (any Error)?, contents: Contents) {
        willChange()
        store(state: state, error: error)
        storedContents = contents
        hasContents = true
        didChange()
    }

    /// Goes back to the state and error the loadable had before the current sync began, with one
    /// Observation mutation, then notifies observers. Contents are untouched.
    final func restoreStateBeforeSyncing() {
        update(state: stateBeforeSyncing, error: storedError)
    }

    // MARK: - Observation

    // Hot paths: a change costs one Observation mutation (`willSet` + `didSet`, what
    // `withMutation` does, without its closure) and one notification round; a read costs one
    // `access`. Nothing here allocates.

    /// Tells Observation that the loadable was read (every getter calls it).
    private func trackAccess() {
        guard !isReadingUntracked else { return }
        let observation = observation ?? makeObservationState()
        observation.registrar.access(ObservationKey(), keyPath: ObservationKey.keyPath)
    }

    /// Creates the registrar on the first read and keeps it.
    private func makeObservationState() -> ObservationState {
        let observation = ObservationState()
        self.observation = observation
        return observation
    }

    /// Begins a change: tells Observation.
    private func willChange() {
        observation?.registrar.willSet(ObservationKey(), keyPath: ObservationKey.keyPath)
    }

    /// Stores a new state and error. Entering ``LoadableState/syncing`` remembers the state it
    /// starts from and keeps the error in ``storedError`` (see there).
    private func store(state: LoadableState, error: (any Error)?) {
        assert(state != .syncing || error == nil, "a syncing loadable has no error")
        if state != .syncing {
            storedError = error
        } else if storedState != .syncing {
            stateBeforeSyncing = storedState
        }
        storedState = state
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
        let id = observers.add(handler)
        if observers.count == 1 { didAddFirstObserver() }
        return LoadableObservation(owner: self, id: id)
    }

    /// Calls every observer with `self`, in the order they were added.
    ///
    /// If a round is running (an observer changed this loadable), the notification is queued as
    /// one more round right after the current one instead of nesting. The same loop as
    /// ``ObserverOwner/notifyObservers()``, on the private list: no access to it is held while a
    /// handler runs.
    private func notifyObservers() {
        guard observers.beginRound() else { return }
        // Keep the loadable alive for the whole round even if an observer releases the last
        // reference to it.
        let subject: any PureLoadable = self
        defer {
            #if compiler(>=6.2)
                extendLifetime(subject)
            #else
                withExtendedLifetime(subject) {}
            #endif
        }
        repeat {
            let end = observers.roundEnd
            var index = 0
            while index < end {
                if let handler = observers.handler(at: index) { handler(subject) }
                index += 1
            }
        } while observers.endRound()
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

/// A loadable whose state and availability can be read without telling Observation.
///
/// For bookkeeping that follows a loadable, such as a group's: it is not a read by a view, so it
/// should neither count as an Observation access nor create the loadable's registrar (which would
/// then cost every later change a registrar mutation).
@MainActor
package protocol UntrackedReadable: PureLoadable {
    /// ``PureLoadable/loadableState`` and ``PureLoadable/isContentsAvailable``, read without
    /// telling Observation.
    var untrackedStatus: (state: LoadableState, isContentsAvailable: Bool) { get }
}

extension PushLoadable: UntrackedReadable {
    /// ``loadableState`` and ``isContentsAvailable`` (which a subclass may override), read
    /// without telling Observation.
    package final var untrackedStatus: (state: LoadableState, isContentsAvailable: Bool) {
        let wasReadingUntracked = isReadingUntracked
        isReadingUntracked = true
        defer { isReadingUntracked = wasReadingUntracked }
        return (storedState, isContentsAvailable)
    }
}

extension PushLoadable: ObserverRegistry {
    /// Removes the observer `id` (called by its token).
    package func unregisterObserver(_ id: Int) {
        if observers.remove(id), observers.isEmpty { didRemoveLastObserver() }
    }
}
