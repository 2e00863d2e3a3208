import LoadableSupport

/// Something that loads asynchronously, tells observers how it is going, and keeps what it loaded
/// while it loads it again.
///
/// Subclass it and override ``doSync()``: start the work there and finish it with
/// ``PushLoadable/setDidSyncSuccessfully(_:)`` or ``PushLoadable/setDidFailToSync(_:)``.
///
/// ```swift
/// final class PhotosLoadable: Loadable<[Photo]> {
///     private let client: any PhotosClient
///     init(client: any PhotosClient) {
///         self.client = client
///         super.init()
///     }
///     override func doSync() {
///         Task {
///             do { setDidSyncSuccessfully(try await client.photos()) }
///             catch { setDidFailToSync(error) }
///         }
///     }
/// }
/// ```
///
/// Contents are kept across re-syncs and failures; the state moves
/// idle → syncing → did-sync-successfully / did-fail-to-sync, and back to syncing on the next
/// sync. For work that is one `async` call, ``AsyncLoadable`` does the `Task` bookkeeping
/// (cancellation, late results) for you.
///
/// Isolated to the main actor; observers are called on the main actor, synchronously, in the
/// order they were added. Observable through closures (``PushLoadable/addObserver(_:)``,
/// ``PureLoadable/observe(_:)``), async sequences (``PureLoadable/states()``,
/// ``PushLoadable/snapshots(bufferingPolicy:)``) and the Observation framework.
@MainActor
open class Loadable<Contents>: PushLoadable<Contents>, SyncableLoadable {
    /// Creates an idle loadable.
    ///
    /// - Parameters:
    ///   - contents: Contents to start with (for example from a cache); the state is
    ///     ``LoadableState/idle`` either way, and ``needsSync`` stays `true` until a sync succeeds.
    ///     Contents given here have no ``age``: they were never confirmed by a sync.
    ///   - clock: The clock that ``age``, ``maxAge`` and the sync watchdog (``syncTimeout``,
    ///     ``slowSyncAfter``) read and sleep on; a `ManualClock` in tests.
    public init(contents: Contents? = nil, clock: any Clock<Duration> = ContinuousClock()) {
        super.init(contents: contents)
        core.use(clock)
    }

    /// One of the package's syncable loadables, with its core.
    public override var loadableCapabilities: LoadableCapabilities {
        LoadableCapabilities(owner: self, syncable: self)
    }

    // MARK: - Freshness

    /// The time since the contents were last confirmed: by a successful sync, by
    /// ``PushLoadable/setContents(_:)`` or ``PushLoadable/updateContents(_:)``; `nil` when never.
    ///
    /// Never negative on a clock that goes forward; it saturates at `Int64.max` nanoseconds (292
    /// years), the age of contents restored from an entry saved longer ago than that.
    public final var age: Duration? {
        core.trackAccess()
        return core.age
    }

    /// The age from which the contents are stale; `nil` (the default): never stale by age.
    ///
    /// While the loadable has observers and fresh contents, it notifies them once when the
    /// contents turn stale by age (one timer on its clock), so a "stale" badge updates by itself.
    /// Setting it is not a notification. Must not be negative: a negative value stops the program
    /// with a message. Any length up to `.seconds(Int64.max)` is valid (it saturates at 292 years:
    /// practically never).
    public final var maxAge: Duration? {
        get { core.extras?.maxAge }
        set {
            if let newValue {
                requireValid(newValue >= .zero, "\(type(of: self)).maxAge must be >= .zero or nil, got \(newValue)")
            }
            guard newValue != core.extras?.maxAge else { return }
            core.extrasForWriting.maxAge = newValue
            core.changeForObservationOnly()
            scheduleTimer()
        }
    }

    /// Whether the contents are out of date: no contents available, or ``invalidate()`` was
    /// called since the last confirmation, or ``maxAge`` is set and the ``age`` reached it (or
    /// there was no confirmation yet).
    ///
    /// An age equal to ``maxAge`` is stale.
    public final var isStale: Bool {
        core.trackAccess()
        return !isContentsAvailable || core.isStaleByInvalidationOrAge
    }

    /// Whether ``syncIfNeeded()`` would sync: by default when the contents are stale
    /// (``isStale``), or the state is ``LoadableState/idle`` or ``LoadableState/didFailToSync``.
    ///
    /// Override it for other rules.
    open var needsSync: Bool {
        switch loadableState {
        case .idle, .didFailToSync: true
        case .syncing, .didSyncSuccessfully: isStale
        }
    }

    /// Marks the contents stale. See ``SyncableLoadable/invalidate()`` for the rules: during a
    /// sync, exactly one more sync follows it; otherwise observers are notified once, and a
    /// loadable that ``SyncableLoadable/isInUse`` syncs at once (in that same one notification).
    ///
    /// Override it to do more (call `super`).
    open func invalidate() {
        if let inspector = LoadableInspection.inspector {
            inspector.record(self) { .invalidated(label: $0, time: $1, deferred: storedState == .syncing) }
        }
        if storedState == .syncing {
            // Stale at once (a waiter must not take these contents), one more sync when this ends.
            // Not a notification (the state does not change), but Observation sees `isStale`.
            core.freshness.insert([.invalidated, .pendingSync])
            core.changeForObservationOnly()
            return
        }
        if core.isInUse, !Invalidation.defersSyncs {
            core.freshness.insert(.invalidated)
            sync()
            return
        }
        core.willChange()
        core.freshness.insert(.invalidated)
        core.didChange(NotificationSubject(self))
    }

    // MARK: - Watchdog

    /// How long a sync may run: one still running after this is cancelled (``doCancelSync()``) and
    /// fails with ``LoadableError/timedOut``, contents kept. `nil` (the default): no limit.
    ///
    /// Measured on the loadable's clock from the moment the sync began. Applies to syncs that
    /// begin after it is set. Must be greater than `.zero`: anything else stops the program with
    /// a message. Any length up to `.seconds(Int64.max)` is valid.
    public final var syncTimeout: Duration? {
        get { core.extras?.syncTimeout }
        set {
            if let newValue {
                requireValid(newValue > .zero, "\(type(of: self)).syncTimeout must be > .zero or nil, got \(newValue)")
            }
            core.extrasForWriting.syncTimeout = newValue
            scheduleTimer()
        }
    }

    /// After how long a running sync counts as slow (``isSlowSync``); `nil` (the default): never.
    ///
    /// Must be greater than `.zero`: anything else stops the program with a message. Any length up
    /// to `.seconds(Int64.max)` is valid.
    public final var slowSyncAfter: Duration? {
        get { core.extras?.slowSyncAfter }
        set {
            if let newValue {
                requireValid(
                    newValue > .zero, "\(type(of: self)).slowSyncAfter must be > .zero or nil, got \(newValue)")
            }
            core.extrasForWriting.slowSyncAfter = newValue
            scheduleTimer()
        }
    }

    /// Whether the running sync has gone on longer than ``slowSyncAfter``.
    ///
    /// Becoming slow notifies observers once, without a state change; the flag clears when the
    /// sync ends (in that notification).
    public final var isSlowSync: Bool {
        core.trackAccess()
        return core.freshness.contains(.slowSync)
    }

    // MARK: - Syncing

    /// Starts a sync: clears the error, moves to ``LoadableState/syncing``, notifies observers,
    /// then calls ``doSync()``.
    ///
    /// Calling it while syncing does nothing (the running sync is the one that counts; to have
    /// one more after it, call ``invalidate()``). If an observer moves the loadable out of
    /// `syncing` while being told of the sync, ``doSync()`` is not called.
    public final func sync() {
        // Stored state, not `loadableState`: starting a sync is not a read for Observation.
        guard storedState != .syncing else { return }
        willBeginSync()
        core.willChange()
        beginSyncAndNotify()
    }

    /// Moves to `syncing` inside a change already begun (``LoadableCore/willChange()``), arms the
    /// watchdog, ends the change (observers are told), then calls ``doSync()`` unless an observer
    /// of that notification cancelled this sync, or cancelled it and started another (which
    /// already called `doSync()` for itself, clearing the flag).
    ///
    /// The one way into a sync: ``sync()`` and the sync that follows an invalidated one.
    ///
    /// - Parameter changedContents: Whether the change began with
    ///   ``LoadableCore/willChangeContents()`` too (the result of the sync that ended in it).
    private func beginSyncAndNotify(changedContents: Bool = false) {
        let oldState = storedState
        core.store(state: .syncing, error: nil)
        inspectStateChange(from: oldState)
        core.isSyncAwaitingDoSync = true
        if let extras = core.extras, extras.hasWatchdog { startWatchdog(extras) }
        core.didChange(NotificationSubject(self), changedContents: changedContents)
        guard storedState == .syncing, core.isSyncAwaitingDoSync else { return }
        core.isSyncAwaitingDoSync = false
        doSync()
    }

    /// Called by ``sync()`` just before it moves to `syncing` and notifies, so that a subclass in
    /// this module can change more of its state in that one notification. Does nothing here.
    func willBeginSync() {}

    /// Calls ``sync()`` if ``needsSync`` is `true`.
    ///
    /// Deciding is not a read for Observation: ``needsSync`` is read untracked, so a loadable
    /// that only the package's bookkeeping syncs (a syncer, a group, a store) gets no registrar.
    public final func syncIfNeeded() {
        if LoadableCore.readUntracked({ needsSync }) { sync() }
    }

    /// Does the work of a sync; every subclass overrides it.
    ///
    /// Called by ``sync()`` after observers saw ``LoadableState/syncing``. Finish the sync by
    /// calling ``PushLoadable/setDidSyncSuccessfully(_:)`` or ``PushLoadable/setDidFailToSync(_:)``,
    /// now or later. Do not call `super`.
    open func doSync() {
        fatalError(
            "\(type(of: self)) must override doSync(): Loadable does not know how to load its contents"
        )
    }

    /// Cancels the running sync: calls ``doCancelSync()`` and goes back to the state and error the
    /// loadable had before the sync began. Contents are untouched, and a sync pending after this
    /// one (an ``invalidate()`` during it) is dropped.
    ///
    /// Does nothing when not syncing. A completion that arrives after the cancel must be ignored
    /// by the subclass; ``AsyncLoadable`` does that itself.
    public final func cancelSync() {
        guard storedState == .syncing else { return }
        core.freshness.remove(.pendingSync)
        // An observer of the `syncing` notification cancelling before `doSync()` ran: there is
        // no work to stop.
        if !core.isSyncAwaitingDoSync {
            doCancelSync()
            guard storedState == .syncing else { return }
        }
        restoreStateBeforeSyncing()
    }

    /// Stops the work started by ``doSync()``; does nothing by default.
    ///
    /// Called by ``cancelSync()`` before the state is restored, and by the watchdog when a sync
    /// runs past ``syncTimeout``; not called when the sync is cancelled before ``doSync()`` ran
    /// (by an observer of the `syncing` notification).
    open func doCancelSync() {}

    /// `<TypeName: state, contents available: yes|no>`.
    open override var description: String { super.description }

    // MARK: - Freshness bookkeeping

    override func notifyAfterFreshnessChange(endingSync: Bool, changedContents: Bool) {
        if endingSync {
            core.freshness.remove(.slowSync)
            if core.freshness.contains(.pendingSync) {
                restartAfterInvalidation(changedContents: changedContents)
                return
            }
        }
        scheduleTimer()
        core.didChange(NotificationSubject(self), changedContents: changedContents)
    }

    /// The sync that just ended was invalidated while it ran: its result is stored (the caller
    /// did that), and the next sync begins in the same notification, so observers see the new
    /// contents while still `syncing`, and an awaiting caller waits for the fresh answer.
    private func restartAfterInvalidation(changedContents: Bool) {
        core.freshness.remove(.pendingSync)
        core.freshness.insert(.invalidated)
        willBeginSync()
        beginSyncAndNotify(changedContents: changedContents)
    }

    /// A commit changed the base contents while this sync runs, which may have started before
    /// the server saw the change: exactly one more sync follows it, as after ``invalidate()``.
    override func baseDidChangeDuringSync() {
        core.freshness.insert([.invalidated, .pendingSync])
    }

    override func observersDidChange() {
        if core.extras?.maxAge != nil { scheduleTimer() }
    }

    /// Sets the deadlines of the sync that begins, from the settings now, and arms the timer.
    private func startWatchdog(_ extras: LoadableCoreExtras) {
        // `if let` rather than `Optional.map`: a closure formed here is main-actor isolated, and
        // checks its executor on each call (about 100 instructions).
        let now = core.now
        if let timeout = extras.syncTimeoutNanoseconds {
            extras.syncTimeoutAt = LoadableTime.adding(timeout, to: now)
        }
        if let slow = extras.slowSyncAfterNanoseconds {
            extras.slowSyncAt = LoadableTime.adding(slow, to: now)
        }
        scheduleTimer()
    }

    /// The earliest time something is due: the running sync's timeout or slow mark, or the
    /// contents turning stale by age while observed; `nil` when nothing is.
    private func nextDeadline(_ extras: LoadableCoreExtras) -> Int64? {
        func earliest(_ a: Int64?, _ b: Int64?) -> Int64? {
            guard let a else { return b }
            guard let b else { return a }
            return Swift.min(a, b)
        }
        return earliest(earliest(timeoutDeadline(extras), slowSyncDeadline(extras)), staleAnnouncementDeadline)
    }

    /// When the running sync times out; `nil` when not syncing or without a timeout.
    @inline(__always)
    private func timeoutDeadline(_ extras: LoadableCoreExtras) -> Int64? {
        storedState == .syncing ? extras.syncTimeoutAt : nil
    }

    /// When the running sync becomes slow; `nil` when not syncing, without the setting, or slow
    /// already.
    @inline(__always)
    private func slowSyncDeadline(_ extras: LoadableCoreExtras) -> Int64? {
        guard storedState == .syncing, !core.freshness.contains(.slowSync) else { return nil }
        return extras.slowSyncAt
    }

    /// When observers are to be told that the contents turned stale by age; `nil` when nobody
    /// observes, or the contents are stale otherwise already, or it was announced.
    @inline(__always)
    private var staleAnnouncementDeadline: Int64? {
        guard let staleAt = core.staleByAgeAt, core.hasObservers,
            core.freshness.isDisjoint(with: [.invalidated, .staleByAgeAnnounced])
        else { return nil }
        return staleAt
    }

    /// Arms the one timer for the next deadline, or stops it when there is none.
    ///
    /// A timer armed for an earlier time is left alone: it wakes, finds nothing due, and sleeps
    /// again until the real deadline. Deadlines only move later in a sync cycle (a success pushes
    /// the stale time back), so a loadable that syncs often re-arms rarely, and a sync cycle
    /// allocates nothing.
    private func scheduleTimer() {
        guard let extras = core.extras else { return }
        // With nothing due, an armed timer is left to wake and find nothing: cancelling it would
        // cost the next sync a new task.
        guard let deadline = nextDeadline(extras) else { return }
        if let armed = extras.timerDeadline, armed <= deadline { return }
        extras.timerDeadline = deadline
        let delay = LoadableTime.duration(Swift.max(0, deadline &- core.now))
        // The task holds the loadable weakly; releasing it cancels the task (the extras' deinit).
        extras.timer.arm(after: delay, on: core.elapsedClock) { [weak self] generation in
            self?.timerFired(generation)
        }
    }

    private func timerFired(_ generation: Int) {
        guard let extras = core.extras, extras.timer.fired(generation) else { return }
        extras.timerDeadline = nil
        let now = core.now
        if let timeoutAt = timeoutDeadline(extras), now >= timeoutAt {
            timeOut()
            scheduleTimer()
            return
        }
        if let slowAt = slowSyncDeadline(extras), now >= slowAt {
            if let inspector = LoadableInspection.inspector {
                inspector.record(self) { .watchdog(label: $0, time: $1, alarm: .slow) }
            }
            core.willChange()
            core.freshness.insert(.slowSync)
            core.didChange(NotificationSubject(self))
        }
        if let staleAt = staleAnnouncementDeadline, now >= staleAt {
            core.willChange()
            core.freshness.insert(.staleByAgeAnnounced)
            core.didChange(NotificationSubject(self))
        }
        scheduleTimer()
    }

    /// The running sync went past ``syncTimeout``: stop its work and fail, contents kept.
    private func timeOut() {
        if let inspector = LoadableInspection.inspector {
            inspector.record(self) { .watchdog(label: $0, time: $1, alarm: .timedOut) }
        }
        if !core.isSyncAwaitingDoSync {
            doCancelSync()
            guard storedState == .syncing else { return }
        }
        setDidFailToSync(LoadableError.timedOut)
    }
}

/// How ``Loadable/invalidate()`` treats a loadable in use, for the code running now.
@MainActor
package enum Invalidation {
    /// Whether an invalidated loadable in use only marks itself stale instead of syncing at once:
    /// set while a chain marks its items stale (it then syncs them in order itself).
    ///
    /// A main-actor static rather than a task-local value: a task started by an observer during
    /// that invalidation would inherit a task-local value and defer its own invalidations later.
    package private(set) static var defersSyncs = false

    /// Runs `body` with ``defersSyncs`` set.
    package static func deferringSyncs(_ body: () -> Void) {
        let wasDeferring = defersSyncs
        defersSyncs = true
        defer { defersSyncs = wasDeferring }
        body()
    }
}
