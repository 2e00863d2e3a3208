public import Loadable
import LoadableSupport

extension Loadable {
    /// Refreshes the loadable every `interval` while someone observes it: any loadable, a
    /// `PagedLoadable` or an `HTTPLoadable` included.
    ///
    /// ```swift
    /// let posts = PagedLoadable<Post, Int> { cursor in try await api.posts(after: cursor) }
    /// posts.autosync(every: .seconds(60))
    /// let token = posts.observe { render($0.snapshot) }  // syncs if needed now, then every minute
    /// ```
    ///
    /// When the first observer arrives (`addObserver(_:)`, `observe`), it syncs if
    /// it needs to (`syncIfNeeded()`), then every `interval` it calls `sync()` (a refresh,
    /// skipped while a sync runs; for a paged list, the first page again). When the last
    /// observer leaves, the timer stops; the next observer starts it again. Attached while the
    /// loadable has observers, it starts at once.
    ///
    /// The cadence is fixed while observed: the ticks fall every `interval` from the moment the
    /// first observer arrived, whatever syncs happened in between. It follows `activity`, as a
    /// `LoadableSyncer` does: while the app is inactive or offline the ticks pause, and a first
    /// observer arriving then does not sync; when the app is active and online again, a tick that
    /// fell due meanwhile syncs at once (then the ticks go on every interval from then), and
    /// otherwise a failed or stale loadable syncs (`syncIfNeeded()`) and the ticks go on where
    /// they were. A running sync is never cancelled. For retries with backoff and refreshes
    /// counted from the last sync, use a ``LoadableSyncer``.
    ///
    /// The loadable owns its autosync: it runs as long as the loadable lives, or until
    /// ``LoadableAutosync/stop()``; releasing the loadable (on any thread) stops its timer.
    /// Calling `autosync` again replaces the previous autosync, which stops.
    ///
    /// With a `LoadableInspector` attached, the autosync records when its ticks pause and resume
    /// (`LoadableEvent.paused`, `resumed`), under the loadable's `inspectorLabel`, whether or not
    /// the loadable is observed then. A loadable with a `LoadableSyncer` too gets those events
    /// from each.
    ///
    /// - Parameters:
    ///   - interval: The time between two refreshes; greater than `.zero` (anything else stops the
    ///     program with a message naming it). Any length up to `.seconds(Int64.max)` is valid: the
    ///     timer sleeps in chunks on the real clock.
    ///   - clock: The clock the timer sleeps on; a `ManualClock` in tests.
    ///   - activity: The monitor to follow: ``ActivityMonitor/system`` by default; an
    ///     `ActivityMonitor()` the test drives in tests.
    /// - Returns: The autosync, to stop it or to read whether it is running.
    @discardableResult
    public func autosync(
        every interval: Duration,
        clock: any Clock<Duration> = ContinuousClock(),
        activity: ActivityMonitor = .system
    ) -> LoadableAutosync {
        requireValid(
            interval > .zero,
            "\(type(of: self)).autosync(every:): interval must be > .zero, got \(interval)"
        )
        return attachAutosync(every: interval, clock: clock, activity: activity)
    }

    /// Attaches an autosync whose interval was checked (replacing one attached before), and
    /// starts it when the loadable is observed already.
    func attachAutosync(
        every interval: Duration, clock: any Clock<Duration>, activity: ActivityMonitor
    )
        -> LoadableAutosync
    {
        core.subscriber(LoadableAutosync.self)?.stop()
        let autosync = LoadableAutosync(loadable: self, interval: interval, clock: clock, activity: activity)
        core.subscribe(autosync)
        activity.addFollower(autosync)
        if core.hasObservers { autosync.observedDidChange(isObserved: true) }
        return autosync
    }
}

/// A loadable's refresh-while-observed timer: what ``Loadable/autosync(every:clock:activity:)``
/// attaches and returns.
///
/// The loadable owns it (see there); keeping this handle is needed only to stop it or to read
/// whether it runs. Isolated to the main actor.
@MainActor
public final class LoadableAutosync {
    /// The time between two refreshes while observed.
    public let interval: Duration
    /// The monitor the ticks follow to pause and catch up.
    public let activity: ActivityMonitor
    /// Whether ``stop()`` was called (or the loadable's autosync was replaced, which stops this one).
    public private(set) var isStopped = false

    /// The loadable, held weakly: it owns this autosync through its core's subscription.
    private weak var loadable: (any SyncableLoadable)?
    /// The loadable's core: its state read without telling Observation, and the subscription.
    private weak var core: LoadableCore?
    private let clock: ElapsedClock
    private var timer = ClockTimer()
    /// When the next tick falls due, on ``clock``; `nil` while nobody observes the loadable.
    private var tickDeadline: Duration?
    /// Whether the ticks are paused (inactive or offline), as last read from ``activity``.
    private var isPaused: Bool

    init<Contents>(
        loadable: Loadable<Contents>, interval: Duration, clock: any Clock<Duration>, activity: ActivityMonitor
    ) {
        self.interval = interval
        self.activity = activity
        self.clock = ElapsedClock(clock)
        self.loadable = loadable
        core = loadable.core
        isPaused = !activity.allowsSyncing
    }

    /// Whether someone observes the loadable, so that it refreshes itself every ``interval``
    /// (paused while the ``activity`` monitor is inactive or offline).
    public var isAutosyncing: Bool { tickDeadline != nil }

    /// Whether someone observes the loadable, its last sync failed, and the ``activity`` monitor
    /// says the network cannot be reached: it syncs again as soon as the network is back.
    ///
    /// Observable: it reads the loadable's state and the monitor's connectivity.
    public var isWaitingForNetwork: Bool {
        activity.connectivity == .offline && loadable?.loadableState == .didFailToSync && isAutosyncing
    }

    /// Stops the timer for good: the loadable no longer refreshes itself. Calling it again does
    /// nothing.
    public func stop() {
        guard !isStopped else { return }
        isStopped = true
        tickDeadline = nil
        timer.cancel()
        core?.unsubscribe(self)
    }

    /// The first observer arrived (start the ticks, and sync if needed unless paused) or the
    /// last one left (stop them).
    func observedDidChange(isObserved: Bool) {
        guard !isStopped else { return }
        guard isObserved else {
            tickDeadline = nil
            timer.cancel()
            return
        }
        scheduleNextTick()
        guard !isPaused else { return }
        loadable?.syncIfNeeded()
    }

    /// Arms the timer for the next tick, `delay` from now.
    private func armTimer(after delay: Duration) {
        // The task holds the autosync weakly; releasing the loadable (which owns it) or its last
        // observer stops it.
        timer.arm(after: delay, on: clock) { [weak self] generation in
            self?.timerFired(generation)
        }
    }

    /// Sets the next tick one ``interval`` from now, and arms the timer for it unless paused
    /// (resuming arms it).
    private func scheduleNextTick() {
        tickDeadline = clock.elapsed + interval
        guard !isPaused else { return }
        armTimer(after: interval)
    }

    private func timerFired(_ generation: Int) {
        guard timer.fired(generation) else { return }
        tick()
    }

    /// A tick: the next one is scheduled before the tick's sync (which may remove the last
    /// observer and stop it), so that the ticks keep their cadence whatever syncs happen in
    /// between; the sync is skipped while one runs.
    private func tick() {
        guard let loadable, let core else {
            // The loadable is gone (this handle was kept): nothing to refresh any more.
            stop()
            return
        }
        scheduleNextTick()
        // The core's state: a tick is not a read for Observation.
        guard core.state != .syncing else { return }
        loadable.sync()
    }

    deinit {
        timer.cancelTask()
    }
}

extension LoadableAutosync: LoadableCoreSubscriber {
    /// An autosync follows its loadable's observers.
    package var coreEvents: LoadableCoreEvent.Kinds { .observedChanged }

    package func loadableCoreDidEmit(_ event: LoadableCoreEvent) {
        guard case .observedChanged(let isObserved) = event else { return }
        observedDidChange(isObserved: isObserved)
    }
}

extension LoadableAutosync: ActivityMonitorFollower {
    package func activityDidChange() {
        let paused = !activity.allowsSyncing
        guard paused != isPaused else { return }
        isPaused = paused
        // Told before the catch-up, so that the resumed event comes before the sync it starts.
        if let inspector = LoadableInspection.inspector, !isStopped, let loadable {
            activity.inspectPause(paused, of: loadable, inspector)
        }
        guard let tickDeadline else { return }
        if paused {
            // The ticks stop; the deadline stays, so that a tick that falls due meanwhile runs on
            // return.
            timer.cancel()
            return
        }
        let now = clock.elapsed
        if tickDeadline <= now {
            // A tick fell due while paused: it runs now, and the ticks go on from here.
            tick()
        } else {
            armTimer(after: tickDeadline - now)
            loadable?.syncIfNeeded()
        }
    }
}
