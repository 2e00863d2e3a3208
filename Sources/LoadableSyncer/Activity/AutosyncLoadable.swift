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
/// cancelled. With a `LoadableInspector` attached, its pauses and resumptions are recorded (see
/// ``Loadable/autosync(every:clock:activity:)``).
///
/// The refresh timer is the one ``Loadable/autosync(every:clock:activity:)`` attaches to any
/// loadable: this class is that, attached at init, for code written as a subclass. To make a
/// `PagedLoadable` or an `HTTPLoadable` refresh itself while observed, call `autosync` on it.
///
/// Isolated to the main actor; observers are called on the main actor.
@MainActor
open class AutosyncLoadable<Contents>: Loadable<Contents> {
    /// The time between two refreshes while observed; greater than `.zero`, any length up to
    /// `.seconds(Int64.max)` ("practically never").
    public let autosyncInterval: Duration

    /// The monitor the ticks follow to pause and catch up.
    public let activity: ActivityMonitor

    /// The refresh timer, attached at init.
    private var autosync: LoadableAutosync?

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
        super.init(contents: contents, clock: clock)
        autosync = attachAutosync(every: autosyncInterval, clock: clock, activity: activity)
    }

    /// Whether someone observes the loadable, so that it refreshes itself every
    /// ``autosyncInterval`` (paused while the ``activity`` monitor is inactive or offline).
    public var isAutosyncing: Bool { autosync?.isAutosyncing ?? false }

    /// Whether someone observes the loadable, its last sync failed, and the ``activity`` monitor
    /// says the network cannot be reached: it syncs again as soon as the network is back.
    ///
    /// Observable: it reads the loadable's state and the monitor's connectivity.
    public var isWaitingForNetwork: Bool {
        autosync?.isWaitingForNetwork ?? false
    }
}
