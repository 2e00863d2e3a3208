import LoadableSupport
public import Observation

/// Keeps a loadable fresh: retries it with backoff after a failure and refreshes it periodically
/// after a success.
///
/// The syncer watches its loadable and acts on *transitions* of its state:
/// - to `LoadableState.didFailToSync`: if ``shouldRetry`` accepts the error, it schedules a retry
///   after the policy's next failure delay (growing with each failure, for a
///   ``BackoffTimeoutPolicy``);
/// - to `LoadableState.didSyncSuccessfully`: it schedules a refresh after the policy's period
///   (none without a period) and the backoff starts over; a pending retry is cancelled;
/// - to `LoadableState.idle` or `LoadableState.syncing`: it cancels its timer.
///
/// A notification in the state seen last (new contents, a repeated failure report) changes nothing:
/// it neither consumes a backoff step nor postpones a refresh. The syncer **never starts the first
/// sync**: whoever needs the contents asks for them; the syncer only keeps them coming.
///
/// ```swift
/// let token = AccessTokenLoadable(api: api)
/// let syncer = LoadableSyncer(
///     token,
///     timeoutPolicy: BackoffTimeoutPolicy(period: .seconds(600), min: .seconds(1), max: .seconds(60))
/// )
/// token.sync()   // the syncer retries this one if it fails, then refreshes every 10 minutes
/// ```
///
/// Tests pass a `ManualClock` (module `LoadableTesting`) and assert the whole schedule:
///
/// ```swift
/// let clock = ManualClock()
/// let token = TestLoadable<String>()
/// let syncer = LoadableSyncer(token, timeoutPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(4)), clock: clock)
/// token.sync(); token.setDidFailToSync(nil)
/// await clock.waitForSleepers()
/// await clock.advance(by: .seconds(1))      // the retry: token.syncCount == 2
/// ```
///
/// The syncer holds its loadable **weakly** (a loadable may own its syncer); once the loadable is
/// gone the syncer does nothing. While the syncer lives, its loadable is in use
/// (`SyncableLoadable.isInUse`): an `invalidate()` syncs it at once. Releasing the syncer cancels its timer.
///
/// The syncer follows an ``ActivityMonitor`` (``ActivityMonitor/system`` unless given another):
/// - while the app is **inactive** or **offline** its timer pauses (keeping its deadline), and a
///   failure arms no retry and does not advance the backoff (offline, ``isWaitingForNetwork`` is
///   `true`);
/// - when it is active and online again, the backoff and the retry budget start over, and a
///   failed loadable, a refresh that fell due and a stale loadable (`needsSync`) sync at once;
///   otherwise the timer goes on for the time it had left.
///
/// A running sync is never cancelled by any of this. An error that is ``RetryAfterProviding``
/// (a server's `Retry-After`) stretches its retry delay to `min(max(backoff, hint),`
/// ``maxRetryAfter``); jitter applies to the backoff only. The hint is also a **deadline**: a
/// failure at time `t` whose error asked for `h` is not retried before `t + min(h,`
/// ``maxRetryAfter``), not even by the catch-up when the app comes back or the network returns
/// (or ``appDidBecomeActive()``): the catch-up schedules the retry for that moment instead of
/// syncing at once. This holds for a failure that came while paused too.
///
/// ``nextSyncIn`` and ``isWaitingForNetwork`` are observable (`withObservationTracking`,
/// SwiftUI): they change when the schedule does, not as time passes.
///
/// With a `LoadableInspector` attached, the syncer records, under its loadable's
/// `inspectorLabel`, each retry it schedules after a failure (`LoadableEvent.retryScheduled`, with
/// the delay and its cause: `backoff`, or `retryAfter` when the server's hint asked for longer),
/// and each pause and resumption (`paused`, with `offline` when the network is unreachable and
/// `inactive` otherwise; `resumed`). A retry's timer armed again after a pause is not a new retry.
///
/// Isolated to the main actor.
@MainActor
public final class LoadableSyncer: Observable {
    /// How a scheduled sync is started.
    ///
    /// ```swift
    /// let syncer = LoadableSyncer(cache, syncPolicy: .syncIfNeeded, timeoutPolicy: policy)
    /// ```
    public enum SyncPolicy: Sendable, Hashable, CaseIterable {
        /// Call `SyncableLoadable.sync()`: always refresh.
        case sync
        /// Call `SyncableLoadable.syncIfNeeded()`: refresh only when the loadable says it needs to
        /// (a cache that expires). When nothing is synced, the timer is armed again for the current
        /// state.
        case syncIfNeeded
    }

    /// The loadable kept fresh; `nil` once it was released (the syncer holds it weakly).
    public private(set) weak var loadable: (any SyncableLoadable)?

    /// Whether a fired timer calls `sync()` or `syncIfNeeded()`.
    public let syncPolicy: SyncPolicy

    /// Whether a failure may be retried, given the loadable's error
    /// (`LoadableError.unspecified` when it has none).
    ///
    /// By default it is the error's ``RetryAfterProviding/isRetryable`` when the error is
    /// ``RetryAfterProviding`` (an `HTTPLoadableError` for a 404 is not retried, a 503 is), and
    /// `true` for every other error.
    ///
    /// Return `false` for errors a retry cannot fix ("not found", "forbidden"): the syncer then
    /// waits until someone else syncs the loadable. Asked on each transition to
    /// `LoadableState.didFailToSync` (and by ``appDidBecomeActive()`` while failed).
    ///
    /// ```swift
    /// syncer.shouldRetry = { error in (error as? APIError) != .notFound }
    /// ```
    public var shouldRetry: @MainActor (any Error) -> Bool = { error in
        (error as? any RetryAfterProviding)?.isRetryable ?? true
    }

    /// The longest delay a server's hint (an error that is ``RetryAfterProviding``) may ask for; 1
    /// hour by default. Greater than `.zero`.
    ///
    /// With a hint `h` and the policy's backoff `d`, the retry comes after
    /// `min(max(d, h), maxRetryAfter)`: a hint longer than the backoff wins, a shorter one loses,
    /// and a huge one is capped here. Without a hint the delay is the backoff. A catch-up (the app
    /// active again, the network back) does not retry before `min(h, maxRetryAfter)` after the
    /// failure either. The value in force when the failure arrives applies to it. Setting `.zero`
    /// or less stops the program with a message naming the value.
    ///
    /// ```swift
    /// syncer.maxRetryAfter = .seconds(300)  // "Retry-After: 86400" waits 5 minutes, not a day
    /// ```
    public var maxRetryAfter: Duration {
        get { machine.maxRetryAfter }
        set {
            requireValid(newValue > .zero, "LoadableSyncer: maxRetryAfter must be > .zero, got \(newValue)")
            machine.maxRetryAfter = newValue
        }
    }

    /// The monitor the syncer follows to pause and catch up.
    public let activity: ActivityMonitor

    private var machine: SyncerStateMachine
    private let clock: ElapsedClock
    private var observation: LoadableObservation?
    private var timer = ClockTimer()
    /// Keeps the loadable in use (without keeping it alive) for as long as the syncer lives.
    private let use: WeakLoadableUse
    /// The loadable again, when it has a core: the syncer reads it without telling Observation
    /// (its bookkeeping is not a view's read, and must not make every change of the loadable pay
    /// for a registrar).
    private weak var coreOwner: (any LoadableCoreOwner)?
    /// The Observation registrar, made by the first read of an observable property.
    private var observationState: ObservationState?
    /// Told when the syncer gives up on a failure (see the package init).
    private let didGiveUp: (@MainActor (any Error) -> Void)?
    /// Whether ``didGiveUp`` was told of the failure the machine gave up on last.
    private var hasReportedGivingUp = false

    /// Creates a syncer for `loadable` and starts watching it.
    ///
    /// If the loadable already failed or succeeded, the retry or refresh is scheduled at once; an
    /// idle loadable is left alone (the syncer never starts the first sync).
    ///
    /// - Parameters:
    ///   - loadable: The loadable to keep fresh; held weakly.
    ///   - syncPolicy: Whether a scheduled sync calls `sync()` (the default) or `syncIfNeeded()`.
    ///   - timeoutPolicy: The delays; the syncer keeps its own copy.
    ///   - clock: The clock timers sleep on; a `ManualClock` in tests.
    ///   - activity: The monitor to follow: ``ActivityMonitor/system`` by default; an
    ///     `ActivityMonitor()` the test drives in tests.
    public convenience init(
        _ loadable: some SyncableLoadable,
        syncPolicy: SyncPolicy = .sync,
        timeoutPolicy: any TimeoutPolicy,
        clock: any Clock<Duration> = ContinuousClock(),
        activity: ActivityMonitor = .system
    ) {
        self.init(
            loadable,
            syncPolicy: syncPolicy,
            timeoutPolicy: timeoutPolicy,
            clock: clock,
            activity: activity,
            didGiveUp: nil
        )
    }

    /// Creates a syncer that also tells `didGiveUp` each time it gives up on a failure.
    ///
    /// The syncer gives up when the loadable moves to `LoadableState.didFailToSync` and no retry
    /// will follow: ``shouldRetry`` refuses the error, or the policy's retries are used up. A
    /// failure that may be retried while the monitor pauses the syncer is not given up (the
    /// catch-up retries it). `didGiveUp` gets the loadable's error (`LoadableError.unspecified`
    /// when it has none), after the syncer made its decision; it may be called during this init,
    /// for a loadable that already failed. For a ``LoadableWaiter``, whose waits then fail at once.
    package init(
        _ loadable: some SyncableLoadable,
        syncPolicy: SyncPolicy = .sync,
        timeoutPolicy: any TimeoutPolicy,
        clock: any Clock<Duration> = ContinuousClock(),
        activity: ActivityMonitor = .system,
        didGiveUp: (@MainActor (any Error) -> Void)?
    ) {
        self.didGiveUp = didGiveUp
        self.loadable = loadable
        self.syncPolicy = syncPolicy
        self.activity = activity
        self.machine = SyncerStateMachine(
            policy: timeoutPolicy,
            syncPolicy: syncPolicy,
            isPaused: !activity.allowsSyncing,
            isOffline: activity.isOffline
        )
        self.clock = ElapsedClock(clock)
        use = WeakLoadableUse(loadable)
        coreOwner = loadable.loadableCapabilities.owner
        observation = loadable.addObserver { [weak self] _ in
            self?.loadableDidChange()
        }
        activity.addFollower(self)
        loadableDidChange()
    }

    /// The time until the next scheduled sync, or `nil` when none is scheduled.
    ///
    /// `.zero` when the sync is due (or overdue) but has not happened yet, which is the case while
    /// a paused timer's deadline passes. `nil` after a failure while paused (the catch-up retries
    /// it), after a failure that may not be retried, and once the retries are used up. After a
    /// catch-up that waits for a `Retry-After` deadline, the time left until that deadline.
    ///
    /// Observable: Observation sees it change when the schedule changes (not as time passes).
    public var nextSyncIn: Duration? {
        trackAccess(\.nextSyncIn)
        return machine.nextSyncIn(now: clock.elapsed)
    }

    /// Whether the loadable failed, may be retried (``shouldRetry``), and the monitor says the
    /// network cannot be reached: the retry waits for the network, and happens at once when it is
    /// back.
    ///
    /// Observable: Observation sees it change.
    ///
    /// ```swift
    /// if syncer.isWaitingForNetwork { banner = "Offline: will retry when connected" }
    /// ```
    public var isWaitingForNetwork: Bool {
        trackAccess(\.isWaitingForNetwork)
        return machine.isWaitingForNetwork
    }

    /// Catches up as when the app comes back to the foreground, for this syncer alone.
    ///
    /// The backoff and the retry budget start over. Unless the monitor pauses the syncer (inactive
    /// or offline), the loadable is synced at once if its last attempt failed (and ``shouldRetry``
    /// allows it), if a scheduled refresh is overdue, or if it is stale (`needsSync`). Otherwise
    /// nothing changes. A failure whose error gave a `Retry-After` hint is not retried before the
    /// failure's time plus the hint (capped by ``maxRetryAfter``): the retry is scheduled for that
    /// moment instead (``nextSyncIn`` tells it).
    ///
    /// ```swift
    /// // A 429 asked for 600 s, 10 s ago:
    /// syncer.appDidBecomeActive()  // no sync now; syncer.nextSyncIn == .seconds(590)
    /// ```
    ///
    /// The ``activity`` monitor does this for every syncer that follows it when it becomes active;
    /// call this only for a syncer whose monitor does not know (or in tests).
    public func appDidBecomeActive() {
        guard let loadable else { return }
        perform {
            machine.appDidBecomeActive(
                retryAllowed: retryAllowed(loadable),
                needsSync: untracked { loadable.needsSync },
                now: clock.elapsed
            )
        }
    }

    deinit {
        timer.cancelTask()
    }

    // MARK: - Carrying out the machine's actions

    private func loadableDidChange() {
        // Not a transition: nothing to decide, and `shouldRetry` is not asked again.
        guard let loadable else { return }
        let state = state(of: loadable)
        guard state != machine.observedState else { return }
        let failure = failure(of: loadable, in: state)
        perform {
            machine.stateChanged(
                to: state,
                retryAllowed: failure.retryAllowed,
                retryAfter: failure.retryAfter,
                now: clock.elapsed
            )
        }
    }

    /// What the machine needs to know of the loadable in `state`: whether its failure may be
    /// retried (``shouldRetry``; `true` when it did not fail), and its error's hint.
    private func failure(
        of loadable: any SyncableLoadable,
        in state: LoadableState
    ) -> (retryAllowed: Bool, retryAfter: Duration?) {
        guard state == .didFailToSync else { return (true, nil) }
        let error = untracked { loadable.error }
        return (shouldRetry(error ?? LoadableError.unspecified), (error as? any RetryAfterProviding)?.retryAfter)
    }

    /// Whether the loadable's failure may be retried (`true` when it did not fail).
    private func retryAllowed(_ loadable: any SyncableLoadable) -> Bool {
        failure(of: loadable, in: state(of: loadable)).retryAllowed
    }

    /// The loadable's state, read without telling Observation when it has a core
    /// (``coreOwner``, asked once rather than on every transition).
    private func state(of loadable: any SyncableLoadable) -> LoadableState {
        coreOwner?.untrackedStatus.state ?? loadable.loadableState
    }

    /// `read()`, without telling Observation of the loadable's reads when it has a core.
    private func untracked<Value>(_ read: () -> Value) -> Value {
        guard let coreOwner else { return read() }
        return coreOwner.core.readUntracked(read)
    }

    /// Asks the machine (`decide`), carries out its actions, then tells Observation if what it can
    /// see changed (only once someone read it: a syncer nobody reads compares nothing).
    private func perform(_ decide: () -> [SyncerStateMachine.Action]) {
        let before = observationState == nil ? nil : observableValues
        carryOut(decide())
        if let before, observableValues != before { didChangeObservableValues() }
        if didGiveUp != nil { reportGivingUp() }
    }

    /// Tells ``didGiveUp`` once per failure the machine gives up on (a sync the syncer starts may
    /// fail inside this call, in a nested decision that reports it first).
    private func reportGivingUp() {
        guard machine.hasGivenUp else {
            hasReportedGivingUp = false
            return
        }
        guard !hasReportedGivingUp, let loadable else { return }
        hasReportedGivingUp = true
        didGiveUp?(untracked { loadable.error } ?? LoadableError.unspecified)
    }

    private func carryOut(_ actions: [SyncerStateMachine.Action]) {
        for action in actions {
            switch action {
            case .cancelTimer:
                cancelTimer()
            case .schedule(let delay):
                armTimer(after: delay)
                if let inspector = LoadableInspection.inspector { inspectSchedule(inspector, delay: delay) }
            case .sync, .syncIfNeeded:
                guard let loadable else {
                    cancelTimer()
                    return
                }
                if action == .sync { loadable.sync() } else { loadable.syncIfNeeded() }
                let state = state(of: loadable)
                let failure = failure(of: loadable, in: state)
                carryOut(
                    machine.syncRequestHandled(
                        state: state,
                        retryAllowed: failure.retryAllowed,
                        retryAfter: failure.retryAfter,
                        now: clock.elapsed
                    )
                )
            }
        }
    }

    /// Records the retry the machine just scheduled, if the schedule is one (not a refresh, not
    /// the timer armed again after a pause).
    private func inspectSchedule(_ inspector: LoadableInspector, delay: Duration) {
        guard let cause = machine.scheduledRetryCause, let loadable else { return }
        inspector.record(loadable) { .retryScheduled(label: $0, time: $1, delay: delay, cause: cause) }
    }

    private func armTimer(after delay: Duration) {
        // The task holds the syncer weakly: releasing the syncer cancels it (see `deinit`).
        timer.arm(after: delay, on: clock) { [weak self] generation in
            self?.timerDidFire(generation)
        }
    }

    private func cancelTimer() {
        timer.cancel()
    }

    private func timerDidFire(_ generation: Int) {
        guard timer.fired(generation) else { return }
        perform {
            let actions = machine.timerFired(now: clock.elapsed)
            // With the loadable gone there is nothing to sync, but the timer is over all the same
            // (so `nextSyncIn` says nothing is scheduled).
            return loadable == nil ? [] : actions
        }
    }

    // MARK: - Observation

    /// What Observation can see: the deadline (not the time left, which changes by itself) and
    /// whether the retry waits for the network.
    private var observableValues: ObservableValues {
        ObservableValues(deadline: machine.deadline, isWaitingForNetwork: machine.isWaitingForNetwork)
    }

    private struct ObservableValues: Equatable {
        var deadline: Duration?
        var isWaitingForNetwork: Bool
    }

    /// Tells Observation that `keyPath` was read; makes the registrar on the first read, so that a
    /// syncer nobody reads pays nothing for Observation.
    private func trackAccess<Value>(_ keyPath: KeyPath<LoadableSyncer, Value>) {
        let state = ObservationState.made(in: &observationState)
        state.registrar.access(self, keyPath: keyPath)
    }

    /// Tells Observation that both observable properties changed (after the change: a tracked
    /// `onChange` that reads them sees the new values).
    private func didChangeObservableValues() {
        guard let registrar = observationState?.registrar else { return }
        registrar.willSet(self, keyPath: \.nextSyncIn)
        registrar.didSet(self, keyPath: \.nextSyncIn)
        registrar.willSet(self, keyPath: \.isWaitingForNetwork)
        registrar.didSet(self, keyPath: \.isWaitingForNetwork)
    }
}

extension LoadableSyncer: ActivityMonitorFollower {
    package func activityDidChange() {
        guard let loadable else { return }
        let paused = !activity.allowsSyncing
        // Only resuming may sync, so only then are `shouldRetry` and `needsSync` asked: a change of
        // the monitor does not call the app's code in every syncer for nothing.
        let resumes = !paused && machine.isPaused
        let pauses = paused && !machine.isPaused
        // Told before the catch-up, so that the resumed event comes before the sync it starts.
        if pauses || resumes, let inspector = LoadableInspection.inspector {
            activity.inspectPause(paused, of: loadable, inspector)
        }
        perform {
            machine.activityChanged(
                paused: paused,
                offline: activity.isOffline,
                retryAllowed: resumes ? retryAllowed(loadable) : true,
                needsSync: resumes && untracked { loadable.needsSync },
                now: clock.elapsed
            )
        }
    }
}
