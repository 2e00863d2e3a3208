import LoadableSupport
package import Observation

/// The one implementation every loadable type is a façade over: state, error, observers, the
/// Observation registrar and the notification loop.
///
/// Every loadable type of the package owns one core and forwards to it (see ``LoadableCoreOwner``),
/// so the observer rules, Observation support and the cost of a change are the same for all of
/// them. The core knows none of the parts of the package that attach to a loadable (persistence,
/// a store's entry, a chain): they subscribe to its ``LoadableCoreEvent``s. The core is not generic: its code is compiled once, fully specialized, whatever a
/// loadable's contents are.
///
/// What the core stores is the loadable's *own* state and error. Types whose state follows
/// another loadable (see ``LoadableForwarding``) read that loadable instead and use
/// the core for observers and Observation only.
@MainActor
package final class LoadableCore {
    // Stored properties are private, and reached from other files only through computed
    // accessors, so that the compiler sees every access to them and can drop most dynamic
    // exclusivity checks. Their order packs the object: the one-byte fields right after the
    // observer list's own flags.
    // Unchecked: every access is instantaneous and on the main actor, and no method of the list
    // runs other code (it never releases a handler; see `ObserverList`). This saves two dynamic
    // checks per notification. The other unchecked fields (here and in `LoadableCoreExtras`) are
    // likewise main-actor only and never accessed across a call of other code; left checked,
    // they cost a sync cycle about 20 runtime calls.
    @exclusivity(unchecked) private var observers = ObserverList()
    private var storedState: LoadableState = .idle
    /// The state before the current sync began, restored by a cancelled sync.
    private var stateBeforeSyncing: LoadableState = .idle
    private var storedHasContents = false
    private var storedIsSyncAwaitingDoSync = false
    /// ``Freshness`` bits: invalidated, a sync pending after the running one, slow sync, stale
    /// by age announced.
    @exclusivity(unchecked) private var storedFreshness: Freshness = []
    /// When the contents were last confirmed (a successful sync, a write of contents, a restore),
    /// in nanoseconds on the loadable's clock (see ``now``); `Int64.min` when never.
    ///
    /// Stored here rather than in ``extras`` because every loadable that ever synced has one, and
    /// here it costs no byte: the core object is 88 bytes with or without it (a 96-byte malloc
    /// chunk), the list's and the core's small fields packing into the first 64.
    @exclusivity(unchecked) private var storedConfirmedAt: Int64 = .min
    /// The error of the last failure, kept until a success (``lastError``): the current error
    /// while the state is ``LoadableState/didFailToSync``, and restored with that state by a
    /// cancelled sync.
    private var storedError: (any Error)?
    /// Everything most loadables never need, created on first use: the Observation registrar,
    /// a custom clock, freshness settings and their timer, the use count, the failure count.
    @exclusivity(unchecked) private var storedExtras: LoadableCoreExtras?

    /// The state, without telling Observation.
    package var state: LoadableState { storedState }

    /// Whether the owner has contents; kept here so that reading it needs no generic code.
    package var hasContents: Bool {
        get { storedHasContents }
        set { storedHasContents = newValue }
    }

    /// Set by `Loadable.sync()` from the moment it moves to `syncing` until it calls `doSync()`.
    ///
    /// A cancel in between (by an observer of the `syncing` notification) then does not call
    /// `doCancelSync()` for work that never started; and a sync started by such an observer
    /// clears it when it calls `doSync()` itself, which tells the outer `sync()` not to call it
    /// again. Cleared whenever the state leaves `syncing`.
    var isSyncAwaitingDoSync: Bool {
        get { storedIsSyncAwaitingDoSync }
        set { storedIsSyncAwaitingDoSync = newValue }
    }

    /// Whether optimistic changes are pending: the owner keeps them in
    /// ``LoadableCoreExtras/pendingChanges``.
    ///
    /// A bit of the freshness byte rather than a field of its own: one more byte would move the
    /// core to a larger malloc size class.
    package var hasPendingChanges: Bool {
        get { storedFreshness.contains(.pendingChanges) }
        set {
            if newValue { storedFreshness.insert(.pendingChanges) } else { storedFreshness.remove(.pendingChanges) }
        }
    }

    /// Creates the core of an idle loadable with no observers.
    package init() {}

    // MARK: - State

    /// The error of the current state: set only while the state is
    /// ``LoadableState/didFailToSync``.
    package var error: (any Error)? { storedState == .didFailToSync ? storedError : nil }

    /// The error of the last failure, kept while the state moves on (a retry runs, the owner
    /// sets the loadable idle) and cleared by a success.
    package var lastError: (any Error)? { storedError }

    /// Stores a new state and error. A failure stores `error` as the ``lastError``, a success
    /// clears it, other states keep it (`error` must be `nil` for them). Entering
    /// ``LoadableState/syncing`` remembers the state it starts from.
    ///
    /// Does not notify: bracket it with ``willChange()`` and ``didChange(_:)``.
    package func store(state: LoadableState, error: (any Error)?) {
        assert(state == .didFailToSync || error == nil, "only a failed loadable has an error")
        switch state {
        case .didFailToSync: storedError = error
        case .didSyncSuccessfully: storedError = nil
        case .idle, .syncing: break
        }
        if state != .syncing {
            storedIsSyncAwaitingDoSync = false
        } else if storedState != .syncing {
            stateBeforeSyncing = storedState
            // A new sync: an earlier one's watchdog deadlines are over (`Loadable.sync()` sets
            // this one's).
            if let extras = storedExtras {
                extras.syncTimeoutAt = nil
                extras.slowSyncAt = nil
            }
        }
        let oldState = storedState
        storedState = state
        if oldState != state { emit(.stateChanged(from: oldState, to: state)) }
    }

    /// Stores the state and error the loadable had before the current sync began.
    package func storeStateBeforeSyncing() {
        store(state: stateBeforeSyncing, error: stateBeforeSyncing == .didFailToSync ? storedError : nil)
    }

    // MARK: - Freshness

    /// One-bit facts about a loadable's freshness, packed into one byte of the core.
    package struct Freshness: OptionSet {
        package var rawValue: UInt8
        package init(rawValue: UInt8) { self.rawValue = rawValue }

        /// Invalidated since the last confirmation: stale whatever its age.
        package static let invalidated = Freshness(rawValue: 1)
        /// Invalidated while syncing: one more sync starts when the running one ends.
        package static let pendingSync = Freshness(rawValue: 2)
        /// The running sync went on past `slowSyncAfter`.
        package static let slowSync = Freshness(rawValue: 4)
        /// Observers were told that the contents turned stale by age.
        static let staleByAgeAnnounced = Freshness(rawValue: 8)
        /// Not freshness, but kept in the same byte: optimistic changes are pending (see
        /// ``LoadableCore/hasPendingChanges``).
        static let pendingChanges = Freshness(rawValue: 16)
    }

    /// The freshness bits.
    package var freshness: Freshness {
        get { storedFreshness }
        set { storedFreshness = newValue }
    }

    /// The time on the loadable's clock, in nanoseconds from an origin of its own (only
    /// differences mean anything).
    ///
    /// The default clock (`ContinuousClock`, when no other was given) is read directly; another
    /// clock through the extras.
    package var now: Int64 {
        guard let extras = storedExtras, extras.hasCustomClock else { return LoadableTime.continuousNow }
        return extras.customClockNow
    }

    /// The loadable's clock, for sleeping on.
    var elapsedClock: ElapsedClock {
        let extras = extrasForWriting
        if let clock = extras.clock { return clock }
        if let clock = extras.continuousClock { return clock }
        let clock = ElapsedClock(ContinuousClock())
        extras.continuousClock = clock
        return clock
    }

    /// Reads time from `clock` from now on, unless it is `ContinuousClock` (the default).
    package func use(_ clock: any Clock<Duration>) {
        guard !(clock is ContinuousClock) else { return }
        extrasForWriting.clock = ElapsedClock(clock)
    }

    /// When the contents were last confirmed, on ``now``'s scale; `nil` when never.
    package var confirmedAt: Int64? {
        get { storedConfirmedAt == .min ? nil : storedConfirmedAt }
        set { storedConfirmedAt = newValue ?? .min }
    }

    /// The time since the contents were last confirmed; `nil` when never.
    ///
    /// Saturates at `Int64.max` nanoseconds (292 years): contents restored from an entry saved
    /// longer ago than that (`Date.distantPast`) are that old, never a negative age.
    package var age: Duration? {
        guard storedConfirmedAt != .min else { return nil }
        let (age, overflow) = now.subtractingReportingOverflow(storedConfirmedAt)
        guard overflow else { return LoadableTime.duration(age) }
        return LoadableTime.duration(storedConfirmedAt < 0 ? .max : .min)
    }

    /// Records a confirmation of the contents now: the age restarts, an invalidation and a stale
    /// announcement are forgotten. The caller tells what it was
    /// (``LoadableCoreEvent/contentsConfirmed`` or ``LoadableCoreEvent/baseContentsChanged(origin:)``).
    func confirmContents() {
        storedConfirmedAt = now
        storedFreshness.subtract([.invalidated, .staleByAgeAnnounced])
    }

    /// Whether a confirmation now (``confirmContents()``) would change what a reader sees of the
    /// freshness: it forgets an invalidation or a stale announcement.
    var confirmationChangesFreshness: Bool {
        !storedFreshness.isDisjoint(with: [.invalidated, .staleByAgeAnnounced])
    }

    /// Records contents restored from a cache, confirmed `age` ago: they are as old as the cache
    /// says, so freshness judges their real age. An invalidation stays; a stale announcement is
    /// forgotten. Not a change of the base contents (nothing is saved).
    func confirmRestoredContents(age: Duration) {
        // `.min` means "never": an age beyond the clock's range is the oldest time instead.
        storedConfirmedAt = Swift.max(LoadableTime.adding(-LoadableTime.nanoseconds(age), to: now), .min + 1)
        storedFreshness.remove(.staleByAgeAnnounced)
    }

    /// Records a successful sync: the contents are confirmed and the failure count starts over.
    func recordSuccess() {
        confirmContents()
        if let extras = storedExtras, extras.consecutiveFailures != 0 { extras.consecutiveFailures = 0 }
    }

    /// Records a failed sync.
    func recordFailure() {
        extrasForWriting.consecutiveFailures += 1
    }

    /// The number of failures since the last success.
    package var consecutiveFailures: Int { storedExtras?.consecutiveFailures ?? 0 }

    /// Whether the contents are stale by the freshness rules that the core knows: invalidated,
    /// or `maxAge` set and reached (or no confirmation yet). Availability is the owner's to add.
    var isStaleByInvalidationOrAge: Bool {
        if storedFreshness.contains(.invalidated) { return true }
        guard storedExtras?.maxAgeNanoseconds != nil else { return false }
        guard let staleAt = staleByAgeAt else { return true }
        return now >= staleAt
    }

    /// When the contents turn stale by age (their confirmation plus `maxAge`, saturating); `nil`
    /// without `maxAge` or without a confirmation.
    var staleByAgeAt: Int64? {
        guard let maxAge = storedExtras?.maxAgeNanoseconds, storedConfirmedAt != .min else { return nil }
        return LoadableTime.adding(maxAge, to: storedConfirmedAt)
    }

    /// The extras, created if needed.
    var extrasForWriting: LoadableCoreExtras {
        if let extras = storedExtras { return extras }
        let extras = LoadableCoreExtras()
        storedExtras = extras
        return extras
    }

    /// The extras, if created.
    package var extras: LoadableCoreExtras? { storedExtras }

    // MARK: - Use

    /// Whether at least one use (a lease, a syncer, a group or proxy in use) is alive.
    package var isInUse: Bool { (storedExtras?.useCount ?? 0) > 0 }

    /// Counts one more use; returns `true` if it is the first.
    func addUse() -> Bool {
        let extras = extrasForWriting
        extras.useCount += 1
        guard extras.useCount == 1 else { return false }
        changeForObservationOnly()
        emit(.useChanged(isInUse: true))
        return true
    }

    /// Counts one use less; returns `true` if it was the last. Does nothing (and returns `false`)
    /// when no use is counted.
    func removeUse() -> Bool {
        guard let extras = storedExtras, extras.useCount > 0 else { return false }
        extras.useCount -= 1
        guard extras.useCount == 0 else { return false }
        changeForObservationOnly()
        emit(.useChanged(isInUse: false))
        return true
    }

    /// Tells Observation of a change that observers are not notified of (``isInUse``).
    func changeForObservationOnly() {
        guard let observation = storedExtras?.observation, observation.tracksState else { return }
        observation.registrar.willSet(ObservationKey(), keyPath: ObservationKey.keyPath)
        observation.registrar.didSet(ObservationKey(), keyPath: ObservationKey.keyPath)
    }

    // MARK: - Observation

    // Hot paths: a change costs one Observation mutation (`willSet` + `didSet`, what
    // `withMutation` does, without its closure) and one notification round, and one more
    // mutation when it changed the contents; a read costs one `access`. A key that no read ever
    // tracked is not mutated at all. Nothing here allocates once the registrar exists.

    /// Tells Observation that the loadable's state was read (every public getter but the
    /// contents' calls it), unless ``readUntracked(_:)`` runs.
    package func trackAccess() {
        guard !Self.isReadingUntracked else { return }
        let observation = storedExtras?.observation ?? ObservationState.made(in: &extrasForWriting.observation)
        observation.tracksState = true
        observation.registrar.access(ObservationKey(), keyPath: ObservationKey.keyPath)
    }

    /// Tells Observation that the loadable's contents were read (the `contents` getter calls it),
    /// unless ``readUntracked(_:)`` runs.
    ///
    /// A key of its own: a reader of the contents alone is told of a change of the contents
    /// (``willChangeContents()``), not of every change of the state.
    func trackContentsAccess() {
        guard !Self.isReadingUntracked else { return }
        let observation = storedExtras?.observation ?? ObservationState.made(in: &extrasForWriting.observation)
        observation.tracksContents = true
        observation.registrar.access(ObservationKey(), keyPath: ObservationKey.contentsKeyPath)
    }

    /// Whether the loadable has an Observation registrar (something read it through a tracked
    /// getter): for tests that check that bookkeeping reads without tracking.
    package var hasObservationRegistrar: Bool { storedExtras?.observation != nil }

    /// Whether an Observation read of the contents was ever tracked: only then does a write of
    /// contents need to know whether they changed, for Observation's sake.
    var isContentsObserved: Bool { storedExtras?.observation?.tracksContents == true }

    /// Begins a change: tells Observation (readers of the state, every getter but the contents').
    package func willChange() {
        guard let observation = storedExtras?.observation, observation.tracksState else { return }
        observation.registrar.willSet(ObservationKey(), keyPath: ObservationKey.keyPath)
    }

    /// Begins a change of the contents, inside a change begun with ``willChange()``: tells
    /// Observation's readers of the contents. The change must end with
    /// ``didChange(_:changedContents:)`` and `changedContents: true`.
    func willChangeContents() {
        guard let observation = storedExtras?.observation, observation.tracksContents else { return }
        observation.registrar.willSet(ObservationKey(), keyPath: ObservationKey.contentsKeyPath)
    }

    /// Ends a change: tells Observation, calls the immediate observers (what follows this
    /// loadable), then notifies observers with `subject`.
    ///
    /// - Parameters:
    ///   - subject: The loadable, as observers get it.
    ///   - changedContents: Whether the change began with ``willChangeContents()``: Observation's
    ///     readers of the contents are told too, and what follows this loadable learns that the
    ///     contents may have changed (``followedChangeMayHaveChangedContents``). `false`: they did
    ///     not change.
    package func didChange(_ subject: NotificationSubject, changedContents: Bool = false) {
        if let observation = storedExtras?.observation {
            if changedContents, observation.tracksContents {
                observation.registrar.didSet(ObservationKey(), keyPath: ObservationKey.contentsKeyPath)
            }
            if observation.tracksState {
                observation.registrar.didSet(ObservationKey(), keyPath: ObservationKey.keyPath)
            }
        }
        if observers.hasImmediateObservers { callImmediateObservers(subject, changedContents: changedContents) }
        notify(subject)
    }

    /// While the immediate observers of a loadable run (what follows it: a mapped loadable, a
    /// proxy, a group), whether its change may have changed its contents; `true` anywhere else
    /// (an observer called in a round cannot tell).
    ///
    /// A mapped loadable reads it to skip its transform when only the state changed.
    @exclusivity(unchecked) package private(set) static var followedChangeMayHaveChangedContents = true

    /// Set while ``readUntracked(_:)`` runs: reads of every loadable of the package then do not
    /// tell Observation.
    @exclusivity(unchecked) private static var isReadingUntracked = false

    /// Runs `body` with Observation tracking suspended for every loadable of the package.
    ///
    /// For the package's own bookkeeping: a group following its members, a sync deciding whether
    /// it is needed, a timer's tick, a stream or a wait reading its condition. None of them is a
    /// read by a view, so none should count as an Observation access or create a registrar
    /// (which would then cost every later change of that loadable a registrar mutation). Every
    /// loadable read inside `body`, not only one, is untracked: a proxy, a lease or a mapped
    /// loadable reads what it stands for through its getters.
    ///
    /// Keep `body` to reads: code that changes a loadable runs its observers, and an observer
    /// that starts Observation tracking of its own must not run inside it.
    package static func readUntracked<Value>(_ body: () -> Value) -> Value {
        let wasReadingUntracked = isReadingUntracked
        isReadingUntracked = true
        defer { isReadingUntracked = wasReadingUntracked }
        return body()
    }

    /// The same as the static ``readUntracked(_:)``: every loadable read inside `body`, this one
    /// and any other, is untracked.
    package func readUntracked<Value>(_ body: () -> Value) -> Value {
        Self.readUntracked(body)
    }

    // MARK: - Observers

    /// Whether at least one observer is registered.
    package var hasObservers: Bool { !observers.isEmpty }

    /// Registers `handler`; returns its identifier and whether it is the first observer.
    ///
    /// - Parameters:
    ///   - handler: The observer.
    ///   - isImmediate: `false` for an observer called in notification rounds (what
    ///     `addObserver` gives everyone); `true` for the bookkeeping of a loadable that follows
    ///     this one (a group, a proxy, a mapped loadable), called at every change, even while a
    ///     round runs and the next is queued, before the round's observers.
    package func addObserver(
        _ handler: @escaping ObserverList.Handler, isImmediate: Bool = false
    ) -> (id: Int, isFirst: Bool) {
        let id = Self.nextObserverID | (isImmediate ? 1 : 0)
        Self.nextObserverID += 2
        observers.add(handler, id: id)
        return (id, observers.count == 1)
    }

    /// Unregisters the observer `id`; returns `false` if it was not registered.
    package func removeObserver(_ id: Int) -> Bool {
        let handler = observers.remove(id)
        // Dropped here, after the access to the list ended: what it captured may run any code.
        return handler != nil
    }

    /// Identifiers are unique in the process, not per loadable, so that an observer whose token
    /// was released off the main actor can be recognised by its identifier alone (see
    /// ``ReleasedObservers``) even if its loadable is gone and another took its address.
    @exclusivity(unchecked) private static var nextObserverID = 0

    /// The deepest that notification rounds of different loadables nest (an observer of one
    /// changing another, whose observer changes a third...; each level of nested groups is one
    /// more). A round asked for deeper than this is queued and runs when the round at this depth
    /// ends, so a cascade of any length runs in a bounded stack.
    ///
    /// Measured on Linux x86_64: one level takes about 550-620 bytes of stack in a release build
    /// and 1.6-2.2 KB in a debug build, so 100 levels stay under 250 KB even in debug builds (an
    /// iOS main thread has 1 MB).
    package static let maxNestingDepth = 100

    // Unchecked, like the observer list: main-actor only, every access instantaneous, and
    // `runDeferredRounds()` releases the rounds it ran only after taking them out.
    /// The number of notification rounds running now, one inside the other.
    @exclusivity(unchecked) private static var nestingDepth = 0
    /// Rounds and calls of immediate observers asked for at ``maxNestingDepth``, in the order
    /// they were asked for.
    @exclusivity(unchecked) private static var deferredRounds: [DeferredRound] = []

    /// A round, or a call of the immediate observers, to run now or once the nesting allows it.
    private struct DeferredRound {
        var core: LoadableCore
        var subject: NotificationSubject
        var isImmediate: Bool
        /// For immediate calls: whether the change may have changed the contents.
        var changedContents = true

        @MainActor @inline(__always)
        func run() {
            if isImmediate {
                core.runImmediateCalls(subject, changedContents: changedContents)
            } else {
                // A round that waited shows every change made meanwhile: no extra round for them.
                core.observers.clearQueuedRound()
                core.runRounds(subject)
            }
        }
    }

    /// Calls every observer with `subject`, in the order they were added.
    ///
    /// If a round of this loadable is running (an observer changed it), the notification is
    /// queued as one more round right after the current one instead of nesting. `subject` is kept
    /// alive for the whole round, even if an observer releases the last reference to it.
    package func notify(_ subject: NotificationSubject) {
        guard observers.beginRound() else { return }
        // Deferred, the round stays "running" for the list, so further changes are coalesced
        // into it.
        runNested(subject, isImmediate: false)
    }

    /// Calls the immediate observers with `subject`, in the order they were added.
    private func callImmediateObservers(_ subject: NotificationSubject, changedContents: Bool) {
        runNested(subject, isImmediate: true, changedContents: changedContents)
    }

    /// Runs a round (or the immediate calls) now, one level deeper, or queues it when the nesting
    /// is at its limit; runs the queued ones once the round at the limit ended.
    ///
    /// Inlined with a constant `isImmediate` at both call sites; the queued form is made only when
    /// needed (making it on every notification costs about 400 instructions: it retains the core
    /// and the subject).
    @inline(__always)
    private func runNested(_ subject: NotificationSubject, isImmediate: Bool, changedContents: Bool = true) {
        guard Self.nestingDepth < Self.maxNestingDepth else {
            Self.deferredRounds.append(
                DeferredRound(core: self, subject: subject, isImmediate: isImmediate, changedContents: changedContents))
            return
        }
        // Keep the loadable alive until its observers were called, even if one of them releases
        // the last reference to it. (A queued round is kept alive by the queue.)
        defer {
            #if compiler(>=6.2)
                extendLifetime(subject.loadable)
            #else
                withExtendedLifetime(subject.loadable) {}
            #endif
        }
        Self.nestingDepth += 1
        if isImmediate { runImmediateCalls(subject, changedContents: changedContents) } else { runRounds(subject) }
        Self.nestingDepth -= 1
        if Self.nestingDepth == Self.maxNestingDepth - 1, !Self.deferredRounds.isEmpty {
            Self.runDeferredRounds()
        }
    }

    /// The loop of ``callImmediateObservers(_:)``.
    private func runImmediateCalls(_ subject: NotificationSubject, changedContents: Bool) {
        let subject = subject.loadable
        let outerChangedContents = Self.followedChangeMayHaveChangedContents
        Self.followedChangeMayHaveChangedContents = changedContents
        defer { Self.followedChangeMayHaveChangedContents = outerChangedContents }
        let end = observers.beginImmediateCalls()
        var index = 0
        while index < end {
            let id = observers.id(at: index)
            if ObserverList.isImmediate(id), let handler = observers.handler(at: index),
                !ReleasedObservers.contains(id)
            {
                handler(subject)
            }
            index += 1
        }
        observers.endImmediateCalls()
    }

    /// Runs the rounds queued at the deepest level, one after another, at that level; rounds they
    /// queue in turn are run by the same loop.
    private static func runDeferredRounds() {
        nestingDepth += 1
        while !deferredRounds.isEmpty {
            // Taken out whole, so that releasing the rounds (which may end a loadable's life and
            // run any code) happens outside every access to the list.
            let rounds = deferredRounds
            deferredRounds = []
            for round in rounds { round.run() }
        }
        nestingDepth -= 1
    }

    /// The loop: one round over the observers, and one more for every round queued meanwhile.
    private func runRounds(_ subject: NotificationSubject) {
        let subject = subject.loadable
        repeat {
            let end = observers.roundEnd
            var index = 0
            while index < end {
                let id = observers.id(at: index)
                if !ObserverList.isImmediate(id), let handler = observers.handler(at: index),
                    !ReleasedObservers.contains(id)
                {
                    handler(subject)
                }
                index += 1
            }
        } while observers.endRound()
    }
}

/// The loadable a notification is about, as observers get it.
///
/// A struct around the existential rather than the existential itself: given an `any PureLoadable`
/// parameter, the optimizer turns ``LoadableCore/notify(_:)`` into a generic function, and every
/// caller in a generic class (a loadable generic over its contents) then looks up its class's metadata at run
/// time (about 330 instructions per change) just to pass it along.
package struct NotificationSubject {
    /// The loadable.
    package let loadable: any PureLoadable

    /// Wraps `loadable`.
    @inline(__always)
    package init(_ loadable: any PureLoadable) {
        self.loadable = loadable
    }
}

/// The two properties Observation tracks for every loadable: `anyProperty` for the state (every
/// getter but the contents' reads it, every change mutates it) and `contents` for the contents
/// (the `contents` getter reads it, a change of the contents mutates it too).
///
/// Observation keeps tracked properties per registrar (each loadable has its own) and key path; it
/// never uses the subject instance, only its type. The key path is rooted here, at a non-generic
/// type, rather than at a loadable class because a key path literal rooted at a generic class is
/// instantiated anew each time it is evaluated (an allocation and a runtime type lookup, several
/// microseconds), while this one is built once.
private struct ObservationKey: Observable {
    var anyProperty: Void { () }
    var contents: Void { () }

    /// `\.anyProperty`, built once.
    @MainActor static let keyPath: KeyPath<ObservationKey, Void> = \.anyProperty
    /// `\.contents`, built once.
    @MainActor static let contentsKeyPath: KeyPath<ObservationKey, Void> = \.contents
}

/// An Observation registrar in a box, so that it can be created on first use and checked cheaply
/// (`ObservationRegistrar` is a resilient struct: an optional one is copied through runtime calls
/// on each use). Loadables keep theirs in their core; stores and outboxes keep one too.
package final class ObservationState {
    package let registrar = ObservationRegistrar()
    // Unchecked: main-actor only, and every access is instantaneous (left checked, they cost each
    // change two runtime calls).
    /// Whether a read of a loadable's state was ever tracked: until then, a change of it has no
    /// reader to tell.
    @exclusivity(unchecked) var tracksState = false
    /// Whether a read of a loadable's contents was ever tracked.
    @exclusivity(unchecked) var tracksContents = false

    package init() {}

    /// The state in `slot`, made and kept there first if there is none: how an object makes its
    /// registrar on the first tracked read, so that one nobody observes pays nothing for it.
    package static func made(in slot: inout ObservationState?) -> ObservationState {
        if let state = slot { return state }
        let state = ObservationState()
        slot = state
        return state
    }
}
