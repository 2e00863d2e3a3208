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
/// Isolated to the main actor; observers are called on the main actor.
@MainActor
open class AutosyncLoadable<Contents>: Loadable<Contents> {
    /// The time between two refreshes while observed; greater than `.zero`.
    public let autosyncInterval: Duration

    private let clock: ElapsedClock
    private var timer = ClockTimer()

    /// Creates an idle loadable that refreshes itself every `autosyncInterval` while observed.
    ///
    /// - Parameters:
    ///   - contents: Contents to start with, if any.
    ///   - autosyncInterval: The time between two refreshes; greater than `.zero`.
    ///   - clock: The clock the timer sleeps on; a `ManualClock` in tests.
    public init(
        contents: Contents? = nil,
        autosyncInterval: Duration,
        clock: any Clock<Duration> = ContinuousClock()
    ) {
        requireValid(
            autosyncInterval > .zero,
            "AutosyncLoadable: autosyncInterval must be > .zero, got \(autosyncInterval)"
        )
        self.autosyncInterval = autosyncInterval
        self.clock = ElapsedClock(clock)
        super.init(contents: contents, clock: clock)
    }

    /// Whether the refresh timer runs (someone observes the loadable).
    public var isAutosyncing: Bool { timer.isArmed }

    /// Syncs if needed and starts the refresh timer. Call `super` when you override it.
    open override func didAddFirstObserver() {
        super.didAddFirstObserver()
        startTimer()
        syncIfNeeded()
    }

    /// Stops the refresh timer. Call `super` when you override it.
    open override func didRemoveLastObserver() {
        super.didRemoveLastObserver()
        timer.cancel()
    }

    /// Arms the timer for the next tick, one ``autosyncInterval`` from now.
    ///
    /// Armed again as soon as it fires, before the tick's sync (which may remove the last observer
    /// and stop it): the ticks keep their cadence from the moment the first observer arrived,
    /// whatever syncs happen in between.
    private func startTimer() {
        // The task holds the loadable weakly; releasing the loadable or its last observer stops it.
        timer.arm(after: autosyncInterval, on: clock) { [weak self] generation in
            self?.autosyncTimerFired(generation)
        }
    }

    private func autosyncTimerFired(_ generation: Int) {
        guard timer.fired(generation) else { return }
        startTimer()
        guard loadableState != .syncing else { return }
        sync()
    }

    deinit {
        timer.cancelTask()
    }
}
