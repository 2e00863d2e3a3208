import LoadableSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

/// An error with a server's hint, as an HTTP 429 with `Retry-After` gives.
struct HintedError: RetryAfterProviding {
    var retryAfter: Duration?
}

/// The errors a syncer gave up on, in order.
@MainActor
final class GiveUpLog {
    private(set) var values: [String] = []

    func append(_ value: String) { values.append(value) }
}

/// An error that says whether a retry may help, as an HTTP status does.
struct HTTPLikeError: RetryAfterProviding, CustomStringConvertible {
    var status: Int
    var retryAfter: Duration? { nil }
    var isRetryable: Bool { status == 429 || status >= 500 }
    var description: String { "HTTP \(status)" }
}

/// The syncer with an ``ActivityMonitor``: pausing while inactive or offline, the catch-up, the
/// Retry-After hint and the retry budget, with the clock's requested sleeps as the oracle.
@MainActor
@Suite struct ActivitySyncerTests {
    let clock = ManualClock()
    let token = TestLoadable<String>()
    let activity = ActivityMonitor()

    func makeSyncer(
        period: Duration? = nil,
        max: Duration = .seconds(15),
        jitter: BackoffTimeoutPolicy.Jitter = .none,
        maxRetries: Int? = nil,
        syncPolicy: LoadableSyncer.SyncPolicy = .sync
    ) -> LoadableSyncer {
        LoadableSyncer(
            token,
            syncPolicy: syncPolicy,
            timeoutPolicy: BackoffTimeoutPolicy(
                period: period,
                min: .seconds(1),
                max: max,
                jitter: jitter,
                maxRetries: maxRetries,
                random: SeededRandomNumberGenerator(seed: 7)
            ),
            clock: clock,
            activity: activity
        )
    }

    /// A syncer for another loadable, on the same clock and monitor.
    func makeOtherSyncer(for loadable: TestLoadable<Int>) -> LoadableSyncer {
        LoadableSyncer(
            loadable,
            timeoutPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(2)),
            clock: clock,
            activity: activity
        )
    }

    /// Lets the syncer's timer task reach its sleep (or its cancellation end).
    func settle(sleepers: Int) async {
        await LoadableTestSupport.settle { clock.pendingSleepCount == sleepers }
    }

    // MARK: - Pausing and catching up

    @Test("Inactive for 100 s with a 60 s period: no sync while inactive, one at activation")
    func inactiveRefreshRunsOnActivation() async {
        let syncer = makeSyncer(period: .seconds(60))
        token.sync()
        token.setDidSyncSuccessfully("a")
        await settle(sleepers: 1)
        activity.isActive = false
        await settle(sleepers: 0)
        await clock.advance(by: .seconds(100))
        #expect(token.syncCount == 1)
        #expect(syncer.nextSyncIn == .zero)  // due, held back
        activity.isActive = true
        #expect(token.syncCount == 2)
        token.setDidSyncSuccessfully("b")
        await settle(sleepers: 1)
        #expect(clock.requestedSleeps == [.seconds(60), .seconds(60)])
    }

    @Test("Inactive for part of a period: activation arms the timer for the time left, and it fires then")
    func shortInactivityKeepsTheSchedule() async {
        let syncer = makeSyncer(period: .seconds(60))
        token.sync()
        token.setDidSyncSuccessfully("a")
        await settle(sleepers: 1)
        await clock.advance(by: .seconds(10))
        activity.isActive = false
        await clock.advance(by: .seconds(20))
        #expect(syncer.nextSyncIn == .seconds(30))
        activity.isActive = true
        #expect(token.syncCount == 1)
        await settle(sleepers: 1)
        #expect(clock.requestedSleeps == [.seconds(60), .seconds(30)])
        await clock.advance(by: .seconds(30))
        #expect(token.syncCount == 2)
    }

    @Test("A failure while offline arms nothing and keeps the backoff; back online: one sync, backoff at its minimum")
    func offlineFailureWaitsForNetwork() async {
        let syncer = makeSyncer()
        token.sync()
        token.setDidFailToSync(TestError())  // retry in 1 s
        await settle(sleepers: 1)
        await clock.advance(by: .seconds(1))
        token.setDidFailToSync(TestError())  // retry in 1.414 s
        await settle(sleepers: 1)
        #expect(!syncer.isWaitingForNetwork)
        activity.connectivity = .offline
        await settle(sleepers: 0)
        #expect(syncer.isWaitingForNetwork)
        token.sync()  // someone tries anyway
        token.setDidFailToSync(TestError())
        token.sync()
        token.setDidFailToSync(TestError())
        await settle(sleepers: 0)
        #expect(syncer.nextSyncIn == nil)
        #expect(syncer.isWaitingForNetwork)
        await clock.advance(by: .seconds(100))
        #expect(token.syncCount == 4)
        #expect(clock.requestedSleeps == backoffSequence(min: .seconds(1), max: .seconds(15), count: 2))

        activity.connectivity = .online
        #expect(token.syncCount == 5)
        #expect(token.loadableState == .syncing)
        #expect(!syncer.isWaitingForNetwork)
        token.setDidFailToSync(TestError())
        await settle(sleepers: 1)
        #expect(clock.requestedSleeps.last == .seconds(1))
    }

    @Test("A retry timer pauses while inactive; the retry that fell due runs on return")
    func retryTimerPausesWhileInactive() async {
        let syncer = makeSyncer()
        token.sync()
        token.setDidFailToSync(TestError())
        await settle(sleepers: 1)
        activity.isActive = false
        await settle(sleepers: 0)
        await clock.advance(by: .seconds(10))
        #expect(token.syncCount == 1)
        #expect(syncer.nextSyncIn == .zero)
        activity.isActive = true
        #expect(token.syncCount == 2)
        #expect(syncer.nextSyncIn == nil)
    }

    @Test("Becoming active while offline syncs nothing; the catch-up waits for connectivity, and the reverse")
    func catchUpNeedsBoth() async {
        activity.isActive = false
        activity.connectivity = .offline
        let syncer = makeSyncer()
        token.sync()
        token.setDidFailToSync(TestError())
        activity.isActive = true
        #expect(token.syncCount == 1)
        #expect(syncer.isWaitingForNetwork)
        activity.connectivity = .online
        #expect(token.syncCount == 2)

        token.setDidFailToSync(TestError())
        await settle(sleepers: 1)
        activity.isActive = false
        activity.connectivity = .offline
        activity.connectivity = .online  // online while inactive: waits for activity
        #expect(token.syncCount == 2)
        activity.isActive = true
        #expect(token.syncCount == 3)
    }

    @Test("Unknown connectivity behaves as online")
    func unknownIsOnline() async {
        activity.connectivity = .unknown
        let syncer = makeSyncer()
        token.sync()
        token.setDidFailToSync(TestError())
        await settle(sleepers: 1)
        #expect(!syncer.isWaitingForNetwork)
        activity.connectivity = .offline
        #expect(syncer.isWaitingForNetwork)
        activity.connectivity = .unknown
        #expect(token.syncCount == 2)
    }

    @Test("Flapping activity and connectivity never cancels a running sync nor starts another")
    func flappingDoesNotCancel() async {
        let syncer = makeSyncer(period: .seconds(60))
        token.sync()
        for _ in 0..<10 {
            activity.isActive = false
            activity.connectivity = .offline
            activity.isActive = true
            activity.connectivity = .online
        }
        #expect(token.syncCount == 1)
        #expect(token.cancelSyncCount == 0)
        #expect(token.loadableState == .syncing)
        #expect(clock.requestedSleeps.isEmpty)
        withExtendedLifetime(syncer) {}
    }

    @Test("Flapping never cancels the sync of a real loadable: its load runs to the end")
    func flappingDoesNotCancelRealLoad() async {
        var resume: CheckedContinuation<Void, Never>?
        var wasCancelled: Bool?
        let profile = AsyncLoadable<Int> {
            await withCheckedContinuation { resume = $0 }
            wasCancelled = Task.isCancelled
            return 1
        }
        let syncer = LoadableSyncer(
            profile,
            timeoutPolicy: BackoffTimeoutPolicy(period: .seconds(60), min: .seconds(1), max: .seconds(8)),
            clock: clock,
            activity: activity
        )
        profile.sync()
        await LoadableTestSupport.settle { resume != nil }
        for _ in 0..<5 {
            activity.connectivity = .offline
            activity.connectivity = .online
            activity.isActive = false
            activity.isActive = true
        }
        resume?.resume()
        await LoadableTestSupport.settle { profile.loadableState == .didSyncSuccessfully }
        #expect(wasCancelled == false)
        #expect(profile.contents == 1)
        #expect(syncer.nextSyncIn == .seconds(60))
    }

    @Test("On activation a stale loadable (needsSync) syncs at once even though its refresh is not due")
    func staleSyncsOnActivation() async {
        let syncer = makeSyncer(period: .seconds(600))
        token.sync()
        token.setDidSyncSuccessfully("a")
        activity.isActive = false
        token.needsSync = true  // invalidated, or older than maxAge
        activity.isActive = true
        #expect(token.syncCount == 2)
        #expect(syncer.nextSyncIn == nil)
    }

    @Test("A refresh that falls due while offline runs when the network is back")
    func refreshDueWhileOffline() async {
        let syncer = makeSyncer(period: .seconds(60))
        token.sync()
        token.setDidSyncSuccessfully("a")
        activity.connectivity = .offline
        await settle(sleepers: 0)
        await clock.advance(by: .seconds(61))
        #expect(token.syncCount == 1)
        #expect(!syncer.isWaitingForNetwork)  // nothing failed
        activity.connectivity = .online
        #expect(token.syncCount == 2)
    }

    @Test("A success while paused records its refresh without a timer; resuming arms it for the time left")
    func successWhilePaused() async {
        let syncer = makeSyncer(period: .seconds(60))
        token.sync()
        activity.isActive = false
        token.setDidSyncSuccessfully("a")
        #expect(syncer.nextSyncIn == .seconds(60))
        await clock.advance(by: .seconds(15))
        #expect(clock.requestedSleeps.isEmpty)
        activity.isActive = true
        await settle(sleepers: 1)
        #expect(clock.requestedSleeps == [.seconds(45)])
    }

    @Test("A failure not to be retried is not waiting for the network, and resuming does not sync it")
    func notRetriedIsNotWaiting() async {
        let syncer = makeSyncer()
        syncer.shouldRetry = { ($0 as? TestError)?.code != 404 }
        activity.connectivity = .offline
        token.sync()
        token.setDidFailToSync(TestError(code: 404))
        #expect(!syncer.isWaitingForNetwork)
        activity.connectivity = .online
        #expect(token.syncCount == 1)
    }

    @Test("appDidBecomeActive while the monitor pauses the syncer resets the backoff and syncs nothing")
    func manualActivationWhilePaused() async {
        let syncer = makeSyncer()
        token.sync()
        token.setDidFailToSync(TestError())
        await settle(sleepers: 1)
        await clock.advance(by: .seconds(1))
        token.setDidFailToSync(TestError())  // the backoff moved on to 1.414 s
        activity.connectivity = .offline
        syncer.appDidBecomeActive()
        #expect(token.syncCount == 2)
        activity.connectivity = .online
        #expect(token.syncCount == 3)
        token.setDidFailToSync(TestError())
        await settle(sleepers: 1)
        #expect(clock.requestedSleeps.last == .seconds(1))
    }

    // MARK: - Retry-After

    @Test(
        "A hint longer than the backoff wins, a shorter one loses, a huge one is capped",
        arguments: [
            (hint: Duration.seconds(5), expected: Duration.seconds(5)),
            (hint: .milliseconds(500), expected: .seconds(1)),
            (hint: .seconds(1), expected: .seconds(1)),
            (hint: .seconds(100_000), expected: .seconds(3600)),
            (hint: .seconds(-5), expected: .seconds(1)),
        ]
    )
    func hintAgainstBackoff(hint: Duration, expected: Duration) async {
        let syncer = makeSyncer()
        token.sync()
        token.setDidFailToSync(HintedError(retryAfter: hint))
        await settle(sleepers: 1)
        #expect(clock.requestedSleeps == [expected])
        #expect(syncer.nextSyncIn == expected)
    }

    @Test("maxRetryAfter caps the hint, and the backoff with it")
    func maxRetryAfterCaps() async {
        let syncer = makeSyncer(max: .seconds(60))
        syncer.maxRetryAfter = .seconds(10)
        #expect(syncer.maxRetryAfter == .seconds(10))
        token.sync()
        token.setDidFailToSync(HintedError(retryAfter: .seconds(300)))
        await settle(sleepers: 1)
        await clock.advance(by: .seconds(10))
        token.setDidFailToSync(HintedError(retryAfter: nil))  // no hint: the backoff, 1.414 s
        await settle(sleepers: 1)
        #expect(clock.requestedSleeps == [.seconds(10), .seconds(1) * 2.0.squareRoot()])
    }

    @Test("Jitter never touches the hint: 20 failures with full jitter all wait exactly the hint")
    func jitterLeavesTheHint() async {
        let syncer = makeSyncer(max: .seconds(4), jitter: .full)
        token.sync()
        for _ in 0..<20 {
            token.setDidFailToSync(HintedError(retryAfter: .seconds(5)))
            await settle(sleepers: 1)
            await clock.advance(by: .seconds(5))
        }
        #expect(clock.requestedSleeps == Array(repeating: .seconds(5), count: 20))
        // Without the hint the same policy jitters: the delays differ and stay within the backoff.
        token.setDidFailToSync(TestError())
        await settle(sleepers: 1)
        let jittered = clock.requestedSleeps.last!
        #expect(jittered <= .seconds(4))
        withExtendedLifetime(syncer) {}
    }

    @Test("By default the syncer retries what isRetryable allows, and every error that does not say")
    func defaultShouldRetryAsksIsRetryable() async {
        struct Verdict: RetryAfterProviding {
            var retryAfter: Duration?
            var isRetryable: Bool
        }
        let syncer = makeSyncer()
        #expect(HintedError(retryAfter: nil).isRetryable)
        token.sync()
        token.setDidFailToSync(Verdict(retryAfter: .seconds(30), isRetryable: false))
        #expect(syncer.nextSyncIn == nil)
        #expect(clock.requestedSleeps.isEmpty)
        token.sync()
        token.setDidFailToSync(Verdict(retryAfter: .seconds(3), isRetryable: true))
        await settle(sleepers: 1)
        #expect(clock.requestedSleeps == [.seconds(3)])
        token.sync()
        token.setDidFailToSync(TestError())
        await settle(sleepers: 1)
        #expect(syncer.nextSyncIn != nil)
        // An app's own rule replaces the default.
        syncer.shouldRetry = { _ in true }
        token.sync()
        token.setDidFailToSync(Verdict(retryAfter: nil, isRetryable: false))
        await settle(sleepers: 1)
        #expect(syncer.nextSyncIn != nil)
    }

    @Test("A hint while offline arms nothing either")
    func hintWhileOffline() async {
        let syncer = makeSyncer()
        activity.connectivity = .offline
        token.sync()
        token.setDidFailToSync(HintedError(retryAfter: .seconds(30)))
        #expect(syncer.nextSyncIn == nil)
        #expect(syncer.isWaitingForNetwork)
        #expect(clock.requestedSleeps.isEmpty)
    }

    // MARK: - Retry-After is a deadline

    @Test("After a 429 asking for 600 s, a trip to the background does not retry before 600 s")
    func backgroundTripKeepsTheHintsDeadline() async {
        let syncer = makeSyncer()
        token.sync()
        token.setDidFailToSync(HintedError(retryAfter: .seconds(600)))
        await settle(sleepers: 1)
        await clock.advance(by: .seconds(10))
        activity.isActive = false
        await settle(sleepers: 0)
        await clock.advance(by: .seconds(10))
        activity.isActive = true  // the backoff starts over, but the server said 600 s
        #expect(token.syncCount == 1)
        #expect(syncer.nextSyncIn == .seconds(580))
        await settle(sleepers: 1)
        await clock.advance(by: .seconds(579))
        #expect(token.syncCount == 1)
        await clock.advance(by: .seconds(1))
        #expect(token.syncCount == 2)
        #expect(clock.requestedSleeps == [.seconds(600), .seconds(580)])
    }

    @Test("A network flap does not retry before the hint's deadline; appDidBecomeActive neither")
    func networkFlapKeepsTheHintsDeadline() async {
        let syncer = makeSyncer()
        token.sync()
        token.setDidFailToSync(HintedError(retryAfter: .seconds(120)))
        await settle(sleepers: 1)
        await clock.advance(by: .seconds(10))
        activity.connectivity = .offline
        activity.connectivity = .online
        #expect(token.syncCount == 1)
        #expect(syncer.nextSyncIn == .seconds(110))
        await clock.advance(by: .seconds(20))
        syncer.appDidBecomeActive()
        #expect(token.syncCount == 1)
        #expect(syncer.nextSyncIn == .seconds(90))
        await settle(sleepers: 1)
        await clock.advance(by: .seconds(90))
        #expect(token.syncCount == 2)
    }

    @Test("A failure while offline remembers its hint: back online before the deadline, the retry waits for it")
    func pausedFailureRemembersTheHintsDeadline() async {
        let syncer = makeSyncer()
        activity.connectivity = .offline
        token.sync()
        token.setDidFailToSync(HintedError(retryAfter: .seconds(300)))
        #expect(syncer.nextSyncIn == nil)
        await clock.advance(by: .seconds(100))
        activity.connectivity = .online
        #expect(token.syncCount == 1)
        #expect(syncer.nextSyncIn == .seconds(200))
        await settle(sleepers: 1)
        await clock.advance(by: .seconds(200))
        #expect(token.syncCount == 2)
        // Past the deadline, a catch-up syncs at once again.
        token.setDidFailToSync(HintedError(retryAfter: .seconds(30)))
        await settle(sleepers: 1)
        activity.isActive = false
        await clock.advance(by: .seconds(30))
        activity.isActive = true
        #expect(token.syncCount == 3)
    }

    // MARK: - Giving up (what a waiter's waits fail fast on)

    /// A syncer for `token` that records what it gives up on.
    func makeRecordingSyncer(maxRetries: Int? = nil, gaveUp: GiveUpLog) -> LoadableSyncer {
        LoadableSyncer(
            token,
            timeoutPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(15), maxRetries: maxRetries),
            clock: clock,
            activity: activity,
            didGiveUp: { gaveUp.append("\($0)") }
        )
    }

    @Test("The syncer tells once when it gives up: an error shouldRetry refuses, not one it retries")
    func givesUpOnAnErrorItDoesNotRetry() async {
        let gaveUp = GiveUpLog()
        let syncer = makeRecordingSyncer(gaveUp: gaveUp)
        token.sync()
        token.setDidFailToSync(TestError("busy"))
        #expect(gaveUp.values.isEmpty)
        token.sync()
        token.setDidFailToSync(HTTPLikeError(status: 401))
        #expect(gaveUp.values == ["HTTP 401"])
        token.notifyDidChange()  // the same state: nothing new
        #expect(gaveUp.values == ["HTTP 401"])
        token.sync()
        token.setDidFailToSync(HTTPLikeError(status: 400))
        #expect(gaveUp.values == ["HTTP 401", "HTTP 400"])
        syncer.shouldRetry = { _ in false }
        token.sync()
        token.setDidFailToSync(nil)
        #expect(gaveUp.values == ["HTTP 401", "HTTP 400", "\(LoadableError.unspecified)"])
    }

    @Test("The syncer gives up when its retries are used up, not while a retryable failure waits for the network")
    func givesUpWhenOutOfRetries() async {
        let gaveUp = GiveUpLog()
        let syncer = makeRecordingSyncer(maxRetries: 1, gaveUp: gaveUp)
        token.sync()
        token.setDidFailToSync(TestError("busy"))
        await settle(sleepers: 1)
        await clock.advance(by: .seconds(1))
        #expect(token.syncCount == 2)
        #expect(gaveUp.values.isEmpty)
        token.setDidFailToSync(TestError("busy"))
        #expect(gaveUp.values == ["busy"])
        #expect(syncer.nextSyncIn == nil)
        // Paused: a retryable failure is not given up (the catch-up retries it); one that may not
        // be retried is.
        activity.connectivity = .offline
        token.sync()
        token.setDidFailToSync(TestError("offline"))
        #expect(gaveUp.values == ["busy"])
        token.sync()
        token.setDidFailToSync(HTTPLikeError(status: 404))
        #expect(gaveUp.values == ["busy", "HTTP 404"])
    }

    @Test("A syncer made for a loadable that failed already gives up during its init")
    func givesUpAtInit() {
        token.setDidFailToSync(HTTPLikeError(status: 401))
        let gaveUp = GiveUpLog()
        let syncer = makeRecordingSyncer(gaveUp: gaveUp)
        #expect(gaveUp.values == ["HTTP 401"])
        withExtendedLifetime(syncer) {}
    }

    // MARK: - The retry budget

    @Test("After maxRetries failed retries the syncer stops; a manual sync gives a new budget")
    func maxRetriesThenManualSync() async {
        let syncer = makeSyncer(maxRetries: 2)
        token.sync()
        token.setDidFailToSync(TestError())
        for _ in 0..<2 {
            await settle(sleepers: 1)
            await clock.advance(by: syncer.nextSyncIn!)
            token.setDidFailToSync(TestError())
        }
        #expect(token.syncCount == 3)  // the first attempt and 2 retries
        #expect(syncer.nextSyncIn == nil)
        await clock.advance(by: .seconds(1000))
        #expect(token.syncCount == 3)

        token.sync()  // the user taps "retry"
        token.setDidFailToSync(TestError())
        await settle(sleepers: 1)
        #expect(syncer.nextSyncIn == .seconds(1))
        #expect(clock.requestedSleeps == backoffSequence(min: .seconds(1), max: .seconds(15), count: 2) + [.seconds(1)])
    }

    @Test("Used-up retries get a new budget on activation and on reconnection")
    func maxRetriesRenewedByActivity() async {
        let syncer = makeSyncer(maxRetries: 0)
        token.sync()
        token.setDidFailToSync(TestError())
        #expect(syncer.nextSyncIn == nil)
        activity.isActive = false
        activity.isActive = true
        #expect(token.syncCount == 2)
        token.setDidFailToSync(TestError())
        #expect(syncer.nextSyncIn == nil)
        activity.connectivity = .offline
        activity.connectivity = .online
        #expect(token.syncCount == 3)
    }

    @Test("A success gives a new budget")
    func successRenewsBudget() async {
        let syncer = makeSyncer(maxRetries: 1)
        token.sync()
        token.setDidFailToSync(TestError())
        await settle(sleepers: 1)
        await clock.advance(by: .seconds(1))
        token.setDidFailToSync(TestError())
        #expect(syncer.nextSyncIn == nil)
        token.sync()
        token.setDidSyncSuccessfully("a")
        token.sync()
        token.setDidFailToSync(TestError())
        #expect(syncer.nextSyncIn == .seconds(1))
    }

    // MARK: - Observation

    @Test("nextSyncIn is observable: a tracked read is told when a retry is armed, whatever the observer order")
    func nextSyncInIsObservable() async {
        // An observer of the loadable registered before the syncer's own reads too early.
        var seenByEarlyObserver: [Duration?] = []
        var syncer: LoadableSyncer?
        observing(token, { _ in seenByEarlyObserver.append(syncer?.nextSyncIn) }) {
            syncer = makeSyncer()
            let changes = Locked(0)
            withObservationTracking {
                _ = syncer?.nextSyncIn
            } onChange: {
                changes.withLock { $0 += 1 }
            }
            token.sync()  // syncing: no schedule, nothing changes
            #expect(changes.withLock { $0 } == 0)
            token.setDidFailToSync(TestError())
            #expect(changes.withLock { $0 } == 1)
            #expect(syncer?.nextSyncIn == .seconds(1))
            #expect(seenByEarlyObserver.last == .some(nil))  // why observation was needed
        }
    }

    @Test("isWaitingForNetwork is observable")
    func isWaitingForNetworkIsObservable() async {
        let syncer = makeSyncer()
        token.sync()
        token.setDidFailToSync(TestError())
        let changed = Locked(false)
        withObservationTracking {
            _ = syncer.isWaitingForNetwork
        } onChange: {
            changed.withLock { $0 = true }
        }
        activity.connectivity = .offline
        #expect(changed.withLock { $0 })
        #expect(syncer.isWaitingForNetwork)
    }

    @Test("A syncer nobody reads tells Observation nothing, and reading does not change the schedule")
    func unreadSyncer() async {
        let syncer = makeSyncer(period: .seconds(5))
        token.sync()
        token.setDidSyncSuccessfully("a")
        #expect(syncer.nextSyncIn == .seconds(5))
        #expect(syncer.nextSyncIn == .seconds(5))
    }

    @Test("The syncer reads its loadable without Observation: a loadable nobody else reads gets no registrar")
    func syncerReadsUntracked() async {
        let feed = AsyncLoadable<Int> { throw HintedError(retryAfter: .seconds(2)) }
        let syncer = LoadableSyncer(
            feed,
            timeoutPolicy: BackoffTimeoutPolicy(period: .seconds(60), min: .seconds(1), max: .seconds(8)),
            clock: clock,
            activity: activity
        )
        syncer.shouldRetry = { _ in true }
        feed.sync()
        await LoadableTestSupport.settle { feed.core.readUntracked { feed.loadableState } == .didFailToSync }
        activity.connectivity = .offline
        activity.connectivity = .online
        syncer.appDidBecomeActive()
        await LoadableTestSupport.settle { clock.pendingSleepCount == 1 }
        #expect(!feed.core.hasObservationRegistrar)
        #expect(clock.requestedSleeps == [.seconds(2), .seconds(2)])
        _ = feed.loadableState  // a view's read makes one
        #expect(feed.core.hasObservationRegistrar)
    }

    // MARK: - Lifetimes and re-entrancy

    @Test("A released syncer stops following the monitor; changes after that do nothing")
    func releasedSyncerIsForgotten() async {
        var syncer: LoadableSyncer? = makeSyncer()
        weak let weakSyncer = syncer
        token.sync()
        token.setDidFailToSync(TestError())
        syncer = nil
        #expect(weakSyncer == nil)
        activity.connectivity = .offline
        activity.connectivity = .online
        #expect(token.syncCount == 1)
    }

    @Test("A syncer released by its loadable's observer during the catch-up sync: the round goes on")
    func releasedDuringCatchUp() async {
        var syncer: LoadableSyncer? = makeSyncer()
        weak let weakSyncer = syncer
        let other = TestLoadable<Int>()
        let second = makeOtherSyncer(for: other)
        token.sync()
        token.setDidFailToSync(TestError())
        other.sync()
        other.setDidFailToSync(TestError())
        activity.connectivity = .offline
        observing(
            token,
            { token in
                if token.loadableState == .syncing { syncer = nil }
            }
        ) {
            activity.connectivity = .online
            #expect(weakSyncer == nil)
            #expect(token.syncCount == 2)
            #expect(other.syncCount == 2)
            #expect(!second.isWaitingForNetwork)
        }
    }

    @Test("A syncer released on another thread is forgotten by the monitor")
    func syncerReleasedOffMainActor() async {
        let box = Locked<LoadableSyncer?>(makeSyncer())
        token.sync()
        token.setDidFailToSync(TestError())
        releaseOnAnotherThread(box)
        activity.connectivity = .offline
        activity.connectivity = .online
        #expect(token.syncCount == 1)
    }

    @Test("Many syncers made and released: the monitor tells only the live ones, in order")
    func manySyncersCome() async {
        var syncers: [LoadableSyncer] = []
        var loadables: [TestLoadable<Int>] = []
        for index in 0..<100 {
            let loadable = TestLoadable<Int>()
            loadables.append(loadable)
            let syncer = makeOtherSyncer(for: loadable)
            if index.isMultiple(of: 2) { syncers.append(syncer) }
            loadable.sync()
            loadable.setDidFailToSync(TestError())
        }
        activity.isActive = false
        activity.isActive = true
        let synced = loadables.map(\.syncCount)
        #expect(synced == (0..<100).map { $0.isMultiple(of: 2) ? 2 : 1 })
        withExtendedLifetime(syncers) {}
    }

    @Test("A change of the monitor made while it tells its followers reaches every follower after the round")
    func reentrantMonitorChange() async {
        let other = TestLoadable<Int>()
        let first = makeSyncer()
        let second = makeOtherSyncer(for: other)
        token.sync()
        token.setDidFailToSync(TestError())
        other.sync()
        other.setDidFailToSync(TestError())
        activity.connectivity = .offline
        // The first syncer's catch-up sync makes the app go offline again before the second hears.
        observing(
            token,
            { [activity] token in
                if token.loadableState == .syncing { activity.connectivity = .offline }
            }
        ) {
            activity.connectivity = .online
            #expect(token.syncCount == 2)
            #expect(activity.connectivity == .offline)
            // The second syncer heard "online" after the first had already put it back: it stays
            // paused, and waits for the network.
            #expect(other.syncCount == 1)
            #expect(second.isWaitingForNetwork)
            #expect(!first.isWaitingForNetwork)  // syncing
        }
    }

    // MARK: - Bad configuration

    @Test("maxRetryAfter <= .zero stops the program with a message naming the value")
    func invalidMaxRetryAfter() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let syncer = LoadableSyncer(
                    TestLoadable<Int>(),
                    timeoutPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(2)),
                    clock: ManualClock(),
                    activity: ActivityMonitor()
                )
                syncer.maxRetryAfter = .zero
            }
        }
        #expect(
            bytes(
                result?.standardErrorContent ?? [],
                contain: "LoadableSyncer: maxRetryAfter must be > .zero, got 0.0 seconds"
            )
        )
    }
}
