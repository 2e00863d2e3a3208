import LoadableSyncer
import LoadableTestSupport
import Testing

/// Every duration of the syncing module up to `.seconds(Int64.max)` ("practically never") is
/// accepted on the real clock: a waiter's timeout, a backoff's `max` and `period`, a syncer's
/// `maxRetryAfter`, an autosync interval.
///
/// `ContinuousClock` stops the program ("Not enough bits to represent the passed value") when a
/// deadline passes `Int64.max` seconds; a `ManualClock` hides it. Each test runs in a child
/// process, arms the timer on a `ContinuousClock`, gives the timer task turns until its sleep has
/// started, and ends cleanly. Nothing waits for real time.
@Suite("Syncing durations of centuries never trap on the real clock")
struct SyncerLongDurationExitTests {
    @Test("a LoadableWaiter with a timeout of .seconds(Int64.max) waits without trapping")
    func waiterTimeout() async {
        await #expect(processExitsWith: .success) {
            await SyncerLongDurationExitTests.waitWithCenturiesOfTimeout()
        }
    }

    @Test("a syncer whose backoff grows to max .seconds(Int64.max) (multiplier 1e30) retries without trapping")
    func backoffMax() async {
        await #expect(processExitsWith: .success) {
            await SyncerLongDurationExitTests.failTwiceUnderHugeBackoff()
        }
    }

    @Test("a syncer with a period of .seconds(Int64.max) schedules its refresh without trapping")
    func backoffPeriod() async {
        await #expect(processExitsWith: .success) {
            await SyncerLongDurationExitTests.succeedUnderCenturiesOfPeriod()
        }
    }

    @Test("a Retry-After of .seconds(Int64.max) under maxRetryAfter .seconds(Int64.max) schedules without trapping")
    func retryAfter() async {
        await #expect(processExitsWith: .success) {
            await SyncerLongDurationExitTests.failWithCenturiesOfRetryAfter()
        }
    }

    @Test("an AutosyncLoadable with an interval of .seconds(Int64.max) starts its ticks without trapping")
    func autosyncInterval() async {
        await #expect(processExitsWith: .success) {
            await SyncerLongDurationExitTests.observeCenturiesOfAutosync()
        }
    }

    @MainActor
    static func waitWithCenturiesOfTimeout() async {
        let target = NeverEndingLoadable()
        let waiter = LoadableWaiter(target, timeout: .seconds(Int64.max))
        var result: Result<NeverEndingLoadable, any Error>?
        let handle = waiter.wait { result = $0 }
        await letTimersStartSleeping()
        #expect(result == nil)
        #expect(waiter.pendingWaitCount == 1)
        handle.cancel()
    }

    @MainActor
    static func failTwiceUnderHugeBackoff() async {
        let loadable = FailingLoadable(error: TestError("offline"))
        let syncer = LoadableSyncer(
            loadable,
            timeoutPolicy: BackoffTimeoutPolicy(min: .milliseconds(10), max: .seconds(Int64.max), multiplier: 1e30),
            activity: ActivityMonitor()
        )
        loadable.sync()  // fails: a retry in 10 ms
        loadable.sync()  // fails again: the next retry in .seconds(Int64.max)
        await letTimersStartSleeping()
        #expect(syncer.nextSyncIn.map { $0 > .seconds(Int64.max / 2) } == true)
        withExtendedLifetime(syncer) {}
    }

    @MainActor
    static func succeedUnderCenturiesOfPeriod() async {
        let loadable = FailingLoadable(error: nil)
        let syncer = LoadableSyncer(
            loadable,
            timeoutPolicy: BackoffTimeoutPolicy(period: .seconds(Int64.max), min: .seconds(1), max: .seconds(2)),
            activity: ActivityMonitor()
        )
        loadable.sync()
        await letTimersStartSleeping()
        #expect(loadable.loadableState == .didSyncSuccessfully)
        #expect(syncer.nextSyncIn.map { $0 > .seconds(Int64.max / 2) } == true)
        withExtendedLifetime(syncer) {}
    }

    @MainActor
    static func failWithCenturiesOfRetryAfter() async {
        let loadable = FailingLoadable(error: BusyError(retryAfter: .seconds(Int64.max)))
        let syncer = LoadableSyncer(
            loadable,
            timeoutPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(2)),
            activity: ActivityMonitor()
        )
        syncer.maxRetryAfter = .seconds(Int64.max)
        loadable.sync()
        await letTimersStartSleeping()
        #expect(syncer.nextSyncIn.map { $0 > .seconds(Int64.max / 2) } == true)
        withExtendedLifetime(syncer) {}
    }

    @MainActor
    static func observeCenturiesOfAutosync() async {
        let loadable = CountingAutosyncLoadable(autosyncInterval: .seconds(Int64.max), activity: ActivityMonitor())
        await observing(loadable, { _ in }) {
            await letTimersStartSleeping()
            #expect(loadable.isAutosyncing)
            #expect(loadable.syncCount == 1)  // the first observer's sync; no tick
        }
    }
}

/// A loadable whose sync never ends.
private final class NeverEndingLoadable: Loadable<Int> {
    override func doSync() {}
}

/// A loadable whose every sync ends at once: it fails with `error`, or succeeds when it is `nil`.
private final class FailingLoadable: Loadable<Int> {
    let failure: (any Error)?

    init(error: (any Error)?) {
        failure = error
        super.init()
    }

    override func doSync() {
        if let failure { setDidFailToSync(failure) } else { setDidSyncSuccessfully(1) }
    }
}

/// An autosync loadable that counts its syncs and succeeds at once.
private final class CountingAutosyncLoadable: AutosyncLoadable<Int> {
    private(set) var syncCount = 0

    override func doSync() {
        syncCount += 1
        setDidSyncSuccessfully(syncCount)
    }
}

/// A failure whose server asked to retry after `retryAfter`.
private struct BusyError: RetryAfterProviding {
    var retryAfter: Duration?
}

/// Gives the main actor and the global executor turns, so that a timer task armed before starts
/// its sleep (the task runs on the main actor; `ContinuousClock` enqueues the sleep on the global
/// executor).
@MainActor
private func letTimersStartSleeping() async {
    for _ in 0..<50 {
        await Task.yield()
        await Task.detached {}.value
    }
}
