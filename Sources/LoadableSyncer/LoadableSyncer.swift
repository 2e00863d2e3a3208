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
/// (`SyncableLoadable.isInUse`): an `invalidate()` syncs it at once. Releasing the syncer cancels its timer. Where UIKit or AppKit exist,
/// ``appDidBecomeActive()`` is called on the application's did-become-active notification; elsewhere
/// call it yourself (from a SwiftUI `scenePhase` change, for example).
///
/// Isolated to the main actor.
@MainActor
public final class LoadableSyncer {
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
    /// (`LoadableError.unspecified` when it has none). Always `true` by default.
    ///
    /// Return `false` for errors a retry cannot fix ("not found", "forbidden"): the syncer then
    /// waits until someone else syncs the loadable. Asked on each transition to
    /// `LoadableState.didFailToSync` (and by ``appDidBecomeActive()`` while failed).
    ///
    /// ```swift
    /// syncer.shouldRetry = { error in (error as? APIError) != .notFound }
    /// ```
    public var shouldRetry: @MainActor (any Error) -> Bool = { _ in true }

    private var machine: SyncerStateMachine
    private let clock: ElapsedClock
    private var observation: LoadableObservation?
    private var timer = ClockTimer()
    private var activationObserver: AppActivationObserver?
    /// Keeps the loadable in use (without keeping it alive) for as long as the syncer lives.
    private let use: WeakLoadableUse

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
    public init(
        _ loadable: some SyncableLoadable,
        syncPolicy: SyncPolicy = .sync,
        timeoutPolicy: any TimeoutPolicy,
        clock: any Clock<Duration> = ContinuousClock()
    ) {
        self.loadable = loadable
        self.syncPolicy = syncPolicy
        self.machine = SyncerStateMachine(policy: timeoutPolicy, syncPolicy: syncPolicy)
        self.clock = ElapsedClock(clock)
        use = WeakLoadableUse(loadable)
        observation = loadable.addObserver { [weak self] _ in
            self?.loadableDidChange()
        }
        activationObserver = AppActivationObserver { [weak self] in
            self?.appDidBecomeActive()
        }
        loadableDidChange()
    }

    /// The time until the next scheduled sync, or `nil` when none is scheduled.
    ///
    /// `.zero` when the sync is due (or overdue) but has not happened yet.
    public var nextSyncIn: Duration? {
        machine.nextSyncIn(now: clock.elapsed)
    }

    /// Tells the syncer that the app came back to the foreground.
    ///
    /// The backoff starts over, and the loadable is synced at once if its last attempt failed (and
    /// ``shouldRetry`` allows it) or if a scheduled refresh is overdue. Otherwise nothing changes.
    /// Called automatically where UIKit (`UIApplication.didBecomeActiveNotification`) or AppKit
    /// (`NSApplication.didBecomeActiveNotification`) exist.
    public func appDidBecomeActive() {
        guard let loadable else { return }
        perform(machine.appDidBecomeActive(retryAllowed: retryAllowed(loadable), now: clock.elapsed))
    }

    deinit {
        timer.cancelTask()
    }

    // MARK: - Carrying out the machine's actions

    private func loadableDidChange() {
        // Not a transition: nothing to decide, and `shouldRetry` is not asked again.
        guard let loadable, loadable.loadableState != machine.observedState else { return }
        perform(
            machine.stateChanged(
                to: loadable.loadableState,
                retryAllowed: retryAllowed(loadable),
                now: clock.elapsed
            )
        )
    }

    private func retryAllowed(_ loadable: any SyncableLoadable) -> Bool {
        guard loadable.loadableState == .didFailToSync else { return true }
        return shouldRetry(loadable.error ?? LoadableError.unspecified)
    }

    private func perform(_ actions: [SyncerStateMachine.Action]) {
        for action in actions {
            switch action {
            case .cancelTimer:
                cancelTimer()
            case .schedule(let delay):
                armTimer(after: delay)
            case .sync, .syncIfNeeded:
                guard let loadable else {
                    cancelTimer()
                    return
                }
                if action == .sync { loadable.sync() } else { loadable.syncIfNeeded() }
                perform(
                    machine.syncRequestHandled(
                        state: loadable.loadableState,
                        retryAllowed: retryAllowed(loadable),
                        now: clock.elapsed
                    )
                )
            }
        }
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
        let actions = machine.timerFired(now: clock.elapsed)
        // With the loadable gone there is nothing to sync, but the timer is over all the same (so
        // `nextSyncIn` says nothing is scheduled).
        guard loadable != nil else { return }
        perform(actions)
    }
}
