import LoadableSupport

/// A `Loadable` that refreshes itself periodically while someone observes it.
///
/// When its first observer arrives it syncs if it needs to (`Loadable.syncIfNeeded()`), then every
/// ``autosyncInterval`` it calls `Loadable.sync()` (a refresh, skipped while a sync is running).
/// When its last observer leaves, the timer stops; the next observer starts it again. Override
/// `Loadable.doSync()` as with any loadable.
///
/// ```swift
/// final class WeatherLoadable: AutosyncLoadable<Forecast> {
///     init() { super.init(autosyncInterval: .seconds(300)) }
///     override func doSync() {
///         Task {
///             do { setDidSyncSuccessfully(try await weatherAPI.forecast()) }
///             catch { setDidFailToSync(error) }
///         }
///     }
/// }
/// let token = weather.observe { render($0.snapshot) }  // syncs now, then every 5 minutes
/// ```
///
/// The cadence is fixed while observed: the ticks fall every ``autosyncInterval`` from the moment
/// the first observer arrived, whatever syncs happened in between. For retries with backoff and
/// refreshes counted from the last sync, use a ``LoadableSyncer``.
///
/// It follows an ``ActivityMonitor`` (``ActivityMonitor/system`` unless given another), as a
/// syncer does: while the app is inactive or offline the ticks pause, and a first observer arriving
/// then does not sync; when the app is active and online again, a tick that fell due meanwhile
/// syncs at once (then the ticks go on every interval from then), and otherwise a failed or stale
/// loadable syncs (`syncIfNeeded()`) and the ticks go on where they were. A running sync is never
/// cancelled.
///
/// Isolated to the main actor; observers are called on the main actor.
@MainActor
open class AutosyncLoadable<Contents>: Loadable<Contents> {
    /// The time between two refreshes while observed; greater than `.zero`, any length up to
    /// `.seconds(Int64.max)` ("practically never").
    public let autosyncInterval: Duration

    /// The monitor the ticks follow to pause and catch up.
    public let activity: ActivityMonitor

    private let clock: ElapsedClock
    private var timer = ClockTimer()
    /// When the next tick falls due, on ``clock``; `nil` while nobody observes the loadable.
    private var tickDeadline: Duration?
    /// Whether the ticks are paused (inactive or offline), as last read from ``activity``.
    private var isPaused: Bool

    /// Creates an idle loadable that refreshes itself every `autosyncInterval` while observed.
    ///
    /// - Parameters:
    ///   - contents: Contents to start with, if any.
    ///   - autosyncInterval: The time between two refreshes; greater than `.zero`. Any length up to
    ///     `.seconds(Int64.max)` is valid: the timer sleeps in chunks on the real clock.
    ///   - clock: The clock the timer sleeps on; a `ManualClock` in tests.
    ///   - activity: The monitor to follow: ``ActivityMonitor/system`` by default; an
    ///     `ActivityMonitor()` the test drives in tests.
    public init(
        contents: Contents? = nil,
        autosyncInterval: Duration,
        clock: any Clock<Duration> = ContinuousClock(),
        activity: ActivityMonitor = .system
    ) {
        requireValid(
            autosyncInterval > .zero,
            "AutosyncLoadable: autosyncInterval must be > .zero, got \(autosyncInterval)"
        )
        self.autosyncInterval = autosyncInterval
        self.activity = activity
        self.clock = ElapsedClock(clock)
        isPaused = !activity.allowsSyncing
        super.init(contents: contents, clock: clock)
        activity.addFollower(self)
    }

    /// Whether someone observes the loadable, so that it refreshes itself every
    /// ``autosyncInterval`` (paused while the ``activity`` monitor is inactive or offline).
    public var isAutosyncing: Bool { tickDeadline != nil }

    /// Whether someone observes the loadable, its last sync failed, and the ``activity`` monitor
    /// says the network cannot be reached: it syncs again as soon as the network is back.
    ///
    /// Observable: it reads the loadable's state and the monitor's connectivity.
    public var isWaitingForNetwork: Bool {
        activity.connectivity == .offline && loadableState == .didFailToSync && isAutosyncing
    }

    /// Syncs if needed and starts the refresh timer (only the timer's deadline while the
    /// ``activity`` monitor pauses it). Call `super` when you override it.
    open override func didAddFirstObserver() {
        super.didAddFirstObserver()
        scheduleNextTick()
        guard !isPaused else { return }
        syncIfNeeded()
    }

    /// Stops the refresh timer. Call `super` when you override it.
    open override func didRemoveLastObserver() {
        super.didRemoveLastObserver()
        tickDeadline = nil
        timer.cancel()
    }

    /// Arms the timer for the next tick, `delay` from now.
    private func armTimer(after delay: Duration) {
        // The task holds the loadable weakly; releasing the loadable or its last observer stops it.
        timer.arm(after: delay, on: clock) { [weak self] generation in
            self?.autosyncTimerFired(generation)
        }
    }

    /// Sets the next tick one ``autosyncInterval`` from now, and arms the timer for it unless
    /// paused (resuming arms it).
    private func scheduleNextTick() {
        tickDeadline = clock.elapsed + autosyncInterval
        guard !isPaused else { return }
        armTimer(after: autosyncInterval)
    }

    private func autosyncTimerFired(_ generation: Int) {
        guard timer.fired(generation) else { return }
        tick()
    }

    /// A tick: the next one is scheduled before the tick's sync (which may remove the last
    /// observer and stop it), so that the ticks keep their cadence whatever syncs happen in
    /// between; the sync is skipped while one runs.
    private func tick() {
        scheduleNextTick()
        // The core's state: a tick is not a read for Observation.
        guard core.state != .syncing else { return }
        sync()
    }

    deinit {
        timer.cancelTask()
    }
}

extension AutosyncLoadable: ActivityMonitorFollower {
    package func activityDidChange() {
        let paused = !activity.allowsSyncing
        guard paused != isPaused else { return }
        isPaused = paused
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
            syncIfNeeded()
        }
    }
}
