import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// Waits until `clock` has `count` pending sleeps (the code under test armed its timers); records
/// an issue, rather than waiting forever, if they do not come.
@MainActor
func expectSleepers(_ count: Int, on clock: ManualClock, sourceLocation: SourceLocation = #_sourceLocation) async {
    let armed = await settle { clock.pendingSleepCount >= count }
    #expect(armed, "\(clock.pendingSleepCount) sleeps pending, expected \(count)", sourceLocation: sourceLocation)
}

/// Freshness as the syncer, the waiter and the autosync loadable see it: stale contents are not
/// good enough, and a sync stuck past its `syncTimeout` is retried.
@Suite("Freshness with syncers and waiters")
@MainActor
struct FreshnessSyncerTests {
    /// A loadable whose syncs the test finishes; counts `doSync()` and `doCancelSync()`.
    final class Manual: Loadable<String> {
        var doSyncCount = 0
        var doCancelSyncCount = 0

        override func doSync() {
            doSyncCount += 1
        }

        override func doCancelSync() {
            doCancelSyncCount += 1
        }
    }

    /// An autosync loadable whose syncs the test finishes; counts `doSync()`.
    final class ManualAutosync: AutosyncLoadable<String> {
        var doSyncCount = 0

        override func doSync() {
            doSyncCount += 1
        }
    }

    let clock = ManualClock()

    // MARK: - LoadableWaiter

    @Test("contentsAvailable is not met by invalidated contents: the wait syncs new ones")
    func waiterIgnoresInvalidatedContents() {
        let token = Manual()
        token.setDidSyncSuccessfully("old")
        let waiter = LoadableWaiter(token, timeout: .seconds(30), clock: clock)
        #expect(waiter.isConditionMet)
        token.invalidate()
        #expect(!waiter.isConditionMet)

        var outcomes: [String] = []
        waiter.wait { result in outcomes.append((try? result.get().contents) ?? "failed") }
        #expect(outcomes.isEmpty)
        #expect(token.doSyncCount == 1)
        token.setDidSyncSuccessfully("new")
        #expect(outcomes == ["new"])
    }

    @Test("contentsAvailable is not met by an extra sync's contents, which are invalidated: the wait gets the next")
    func waiterWaitsForExtraSync() {
        let token = Manual()
        let waiter = LoadableWaiter(token, timeout: .seconds(30), clock: clock)
        var outcomes: [String] = []
        waiter.wait { result in outcomes.append((try? result.get().contents) ?? "failed") }
        token.invalidate()  // during the sync the wait started
        token.setDidSyncSuccessfully("first")
        #expect(outcomes.isEmpty)
        #expect(token.doSyncCount == 2)
        token.setDidSyncSuccessfully("second")
        #expect(outcomes == ["second"])
    }

    @Test("contentsAvailable is not met by contents as old as maxAge: the wait syncs new ones")
    func waiterIgnoresOldContents() async {
        let token = Manual(clock: clock)
        token.maxAge = .seconds(60)
        token.setDidSyncSuccessfully("old")
        let waiter = LoadableWaiter(token, timeout: .seconds(30), clock: clock)
        await clock.advance(by: .seconds(59))
        #expect(waiter.isConditionMet)
        var outcomes: [String] = []
        waiter.wait { result in outcomes.append((try? result.get().contents) ?? "failed") }
        #expect(outcomes == ["old"])  // fresh enough: at once, without a sync
        #expect(token.doSyncCount == 0)

        await clock.advance(by: .seconds(1))
        #expect(!waiter.isConditionMet)
        waiter.wait { result in outcomes.append((try? result.get().contents) ?? "failed") }
        #expect(outcomes == ["old"])
        #expect(token.doSyncCount == 1)
        token.setDidSyncSuccessfully("new")
        #expect(outcomes == ["old", "new"])
    }

    // MARK: - LoadableSyncer

    @Test("a syncer with syncPolicy syncIfNeeded skips fresh contents and refreshes those stale by maxAge")
    func syncIfNeededFollowsMaxAge() async {
        let feed = Manual(clock: clock)
        feed.maxAge = .seconds(90)
        let syncer = LoadableSyncer(
            feed,
            syncPolicy: .syncIfNeeded,
            timeoutPolicy: BackoffTimeoutPolicy(period: .seconds(60), min: .seconds(1), max: .seconds(8)),
            clock: clock
        )
        feed.sync()
        feed.setDidSyncSuccessfully("news 1")
        #expect(syncer.nextSyncIn == .seconds(60))

        await expectSleepers(2, on: clock)  // the syncer's refresh and the stale-by-age timer
        await clock.advance(by: .seconds(60))  // age 60 s: fresh, skipped
        #expect(feed.doSyncCount == 1)
        #expect(feed.loadableState == .didSyncSuccessfully)
        #expect(syncer.nextSyncIn == .seconds(60))

        await expectSleepers(2, on: clock)
        await clock.advance(by: .seconds(60))  // age 120 s: stale since 90 s, refreshed
        #expect(feed.doSyncCount == 2)
        #expect(feed.loadableState == .syncing)
        feed.setDidSyncSuccessfully("news 2")
        #expect(!feed.isStale)
    }

    @Test("a syncer with syncPolicy syncIfNeeded refreshes invalidated contents (it keeps them in use: at once)")
    func syncIfNeededAfterInvalidation() {
        let feed = Manual(clock: clock)
        let syncer = LoadableSyncer(
            feed,
            syncPolicy: .syncIfNeeded,
            timeoutPolicy: BackoffTimeoutPolicy(period: .seconds(60), min: .seconds(1), max: .seconds(8)),
            clock: clock
        )
        feed.sync()
        feed.setDidSyncSuccessfully("news 1")
        feed.invalidate()
        #expect(feed.doSyncCount == 2)
        withExtendedLifetime(syncer) {}
    }

    @Test("a sync stuck past its syncTimeout fails with timedOut and the syncer retries it")
    func timedOutSyncIsRetried() async {
        let feed = Manual(clock: clock)
        feed.syncTimeout = .seconds(10)
        let syncer = LoadableSyncer(
            feed, timeoutPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(8)), clock: clock)
        feed.sync()
        await expectSleepers(1, on: clock)
        await clock.advance(by: .seconds(10))
        #expect(feed.doCancelSyncCount == 1)
        #expect(feed.loadableState == .didFailToSync)
        #expect(feed.error as? LoadableError == .timedOut)
        #expect(syncer.nextSyncIn == .seconds(1))

        await expectSleepers(1, on: clock)
        await clock.advance(by: .seconds(1))
        #expect(feed.doSyncCount == 2)
        #expect(feed.loadableState == .syncing)
        feed.setDidSyncSuccessfully("rescued")
        #expect(feed.loadableState == .didSyncSuccessfully)
        #expect(feed.consecutiveFailures == 0)
    }

    @Test("without a syncTimeout, a stuck sync is never retried")
    func stuckWithoutTimeout() async {
        let feed = Manual(clock: clock)
        let syncer = LoadableSyncer(
            feed, timeoutPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(8)), clock: clock)
        feed.sync()
        await clock.advance(by: .seconds(3600))
        #expect(feed.doSyncCount == 1)
        #expect(feed.loadableState == .syncing)
        #expect(syncer.nextSyncIn == nil)
    }

    @Test("a wait on a loadable whose sync hangs is rescued by the timeout and the waiter's retry")
    func waiterRescuedByTimeout() async {
        let token = Manual(clock: clock)
        token.syncTimeout = .seconds(5)
        let waiter = LoadableWaiter(token, timeout: .seconds(30), clock: clock)
        var outcomes: [String] = []
        waiter.wait { result in outcomes.append((try? result.get().contents) ?? "failed") }
        #expect(token.doSyncCount == 1)
        await expectSleepers(2, on: clock)  // the wait's timeout and the sync's
        await clock.advance(by: .seconds(5))
        #expect(token.loadableState == .didFailToSync)
        await expectSleepers(2, on: clock)  // the wait's timeout and the retry
        await clock.advance(by: .seconds(1))
        #expect(token.doSyncCount == 2)
        token.setDidSyncSuccessfully("token")
        #expect(outcomes == ["token"])
    }

    // MARK: - AutosyncLoadable

    @Test("the first observer of an autosync loadable syncs invalidated contents, not fresh ones")
    func autosyncFirstObserverAfterInvalidation() {
        let weather = ManualAutosync(autosyncInterval: .seconds(300), clock: clock)
        weather.setDidSyncSuccessfully("sunny")
        let first = weather.observe { _ in }
        #expect(weather.doSyncCount == 0)
        first.cancel()

        weather.invalidate()
        #expect(weather.doSyncCount == 0)  // nobody uses it
        observing(weather, { _ in }) {
            #expect(weather.doSyncCount == 1)
        }
    }

    @Test("the first observer of an autosync loadable syncs contents as old as maxAge, on its clock")
    func autosyncFirstObserverAfterMaxAge() async {
        let weather = ManualAutosync(autosyncInterval: .seconds(300), clock: clock)
        weather.maxAge = .seconds(120)
        weather.setDidSyncSuccessfully("sunny")
        await clock.advance(by: .seconds(119))
        #expect(!weather.isStale)
        await clock.advance(by: .seconds(1))
        #expect(weather.isStale)
        #expect(weather.age == .seconds(120))
        observing(weather, { _ in }) {
            #expect(weather.doSyncCount == 1)
        }
    }
}
