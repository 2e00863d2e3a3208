import LoadableSupport

/// What a ``LoadableCore`` needs only for some loadables, in one object created on first use, so
/// that a loadable that never uses any of it (no registrar, default clock, no freshness settings,
/// never leased, never failed) does not pay for it.
@MainActor
package final class LoadableCoreExtras {
    /// The Observation registrar, created by the first tracked read.
    @exclusivity(unchecked) var observation: ObservationState?
    /// A clock other than `ContinuousClock`, given at init.
    @exclusivity(unchecked) var clock: ElapsedClock? {
        didSet { hasCustomClock = clock != nil }
    }
    /// Whether ``clock`` is set: checked without copying the clock out.
    @exclusivity(unchecked) private(set) var hasCustomClock = false

    /// The time on ``clock``, in nanoseconds; read in place.
    var customClockNow: Int64 {
        LoadableTime.nanoseconds(clock?.elapsed ?? .zero)
    }
    /// The default clock, made the first time a timer sleeps on it.
    @exclusivity(unchecked) var continuousClock: ElapsedClock?
    /// The number of live uses (see ``LoadableCore/isInUse``).
    @exclusivity(unchecked) var useCount = 0
    /// What follows this loadable's ``LoadableCoreEvent``s, held strongly (see
    /// ``LoadableCoreSubscriber``).
    @exclusivity(unchecked) var subscribers = LoadableCoreSubscriberList()
    /// The kinds of event some subscriber asked for.
    @exclusivity(unchecked) var subscribedEvents: LoadableCoreEvent.Kinds = []
    /// Storage of the owning type that most of its instances never need, made on first use (the
    /// pending optimistic changes of a loadable with contents, and the base contents under them).
    @exclusivity(unchecked) var ownerStorage: AnyObject?
    /// Failures since the last success.
    @exclusivity(unchecked) var consecutiveFailures = 0
    /// Contents older than this are stale; `nil`: never stale by age.
    @exclusivity(unchecked) var maxAge: Duration? {
        didSet { maxAgeNanoseconds = maxAge.map(LoadableTime.nanoseconds) }
    }
    /// A sync running this long is cancelled and fails with `LoadableError.timedOut`.
    @exclusivity(unchecked) var syncTimeout: Duration? {
        didSet { syncTimeoutNanoseconds = syncTimeout.map(LoadableTime.nanoseconds) }
    }
    /// A sync running this long is announced as slow.
    @exclusivity(unchecked) var slowSyncAfter: Duration? {
        didSet { slowSyncAfterNanoseconds = slowSyncAfter.map(LoadableTime.nanoseconds) }
    }
    // The settings again in nanoseconds, converted once: `Duration` arithmetic is 128-bit.
    /// ``maxAge`` in nanoseconds.
    @exclusivity(unchecked) private(set) var maxAgeNanoseconds: Int64? {
        didSet { updateFlags() }
    }
    /// ``syncTimeout`` in nanoseconds.
    @exclusivity(unchecked) private(set) var syncTimeoutNanoseconds: Int64? {
        didSet { updateFlags() }
    }
    /// ``slowSyncAfter`` in nanoseconds.
    @exclusivity(unchecked) private(set) var slowSyncAfterNanoseconds: Int64? {
        didSet { updateFlags() }
    }
    /// Whether any of ``maxAge``, ``syncTimeout``, ``slowSyncAfter`` is set: changes then go
    /// through the loadable's timer bookkeeping.
    @exclusivity(unchecked) private(set) var hasDeadlines = false
    /// Whether ``syncTimeout`` or ``slowSyncAfter`` is set: a sync then notes when it began.
    @exclusivity(unchecked) private(set) var hasWatchdog = false

    private func updateFlags() {
        hasWatchdog = syncTimeoutNanoseconds != nil || slowSyncAfterNanoseconds != nil
        hasDeadlines = hasWatchdog || maxAgeNanoseconds != nil
    }
    /// When the running sync times out, on the core's ``LoadableCore/now`` scale: set by
    /// `Loadable.sync()` from ``syncTimeout`` as it was when the sync began; `nil` when that sync
    /// has none, or began otherwise (`setSyncing()`). Cleared whenever a sync begins.
    @exclusivity(unchecked) var syncTimeoutAt: Int64?
    /// When the running sync counts as slow, set and cleared like ``syncTimeoutAt``.
    @exclusivity(unchecked) var slowSyncAt: Int64?
    /// The one timer for every deadline of the loadable (timeout, slow sync, stale by age).
    @exclusivity(unchecked) var timer = ClockTimer()
    /// The time the armed ``timer`` wakes at; `nil` when not armed.
    @exclusivity(unchecked) package var timerDeadline: Int64?

    init() {}

    deinit {
        timer.cancelTask()
    }
}
