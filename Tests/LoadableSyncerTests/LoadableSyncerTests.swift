import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

@MainActor
@Suite struct LoadableSyncerTests {
    let clock = ManualClock()
    let token = TestLoadable<String>()

    func makeSyncer(
        period: Duration? = nil,
        max: Duration = .seconds(15),
        syncPolicy: LoadableSyncer.SyncPolicy = .sync
    ) -> LoadableSyncer {
        LoadableSyncer(
            token,
            syncPolicy: syncPolicy,
            timeoutPolicy: BackoffTimeoutPolicy(period: period, min: .seconds(1), max: max),
            clock: clock
        )
    }

    @Test("The syncer never starts the first sync")
    func neverStartsFirstSync() async {
        let syncer = makeSyncer(period: .seconds(10))
        await clock.advance(by: .seconds(100))
        #expect(token.syncCount == 0)
        #expect(clock.requestedSleeps.isEmpty)
        #expect(syncer.nextSyncIn == nil)
        withExtendedLifetime(syncer) {}
    }

    @Test("Repeated failures are retried on the reference backoff schedule, asserted as the clock's sleeps")
    func fullBackoffSchedule() async {
        let syncer = makeSyncer()
        token.sync()
        token.setDidFailToSync(TestError())
        let expected = backoffSequence(min: .seconds(1), max: .seconds(15), count: 10)
        for (index, delay) in expected.enumerated() {
            await clock.waitForSleepers()
            await clock.advance(by: delay)
            #expect(token.syncCount == index + 2)
            #expect(token.loadableState == .syncing)
            token.setDidFailToSync(TestError())
        }
        await clock.waitForSleepers()
        #expect(clock.requestedSleeps == expected + [.seconds(15)])
        expectDurations(Array(clock.requestedSleeps.prefix(10)), approximately: referenceBackoffSeconds)
        withExtendedLifetime(syncer) {}
    }

    @Test("Retries, a success, periodic refreshes and a new failure make one exact schedule")
    func mixedSchedule() async {
        let syncer = makeSyncer(period: .seconds(60))
        token.sync()
        token.setDidFailToSync(nil)  // retry in 1 s
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(1))
        token.setDidFailToSync(nil)  // retry in 1.414 s
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(1) * 2.0.squareRoot())
        token.setDidSyncSuccessfully("a")  // refresh in 60 s
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(60))
        #expect(token.syncCount == 4)
        token.setDidSyncSuccessfully("b")  // refresh in 60 s
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(60))
        token.setDidFailToSync(nil)  // the backoff started over: 1 s
        await clock.waitForSleepers()
        #expect(token.syncCount == 5)
        #expect(
            clock.requestedSleeps == [
                .seconds(1), .seconds(1) * 2.0.squareRoot(), .seconds(60), .seconds(60), .seconds(1),
            ]
        )
        withExtendedLifetime(syncer) {}
    }

    @Test("Repeated failure notifications do not advance the backoff")
    func repeatedFailuresAreNotTransitions() async {
        let syncer = makeSyncer()
        token.setDidFailToSync(nil)
        await clock.waitForSleepers()
        token.setDidFailToSync(TestError())
        token.notifyDidChange()
        token.setDidFailToSync(nil)
        #expect(clock.requestedSleeps == [.seconds(1)])
        #expect(syncer.nextSyncIn == .seconds(1))
        await clock.advance(by: .seconds(1))
        #expect(token.syncCount == 1)
        withExtendedLifetime(syncer) {}
    }

    @Test("Repeated success notifications do not postpone a refresh")
    func repeatedSuccessesDoNotPostpone() async {
        let syncer = makeSyncer(period: .seconds(10))
        token.setDidSyncSuccessfully("a")
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(5))
        token.notifyDidChange()
        token.setDidSyncSuccessfully("b")
        #expect(syncer.nextSyncIn == .seconds(5))
        await clock.advance(by: .seconds(5))
        #expect(token.syncCount == 1)
        #expect(clock.requestedSleeps == [.seconds(10)])
        withExtendedLifetime(syncer) {}
    }

    @Test("A success cancels a pending retry timer")
    func successCancelsRetry() async {
        let syncer = makeSyncer()
        token.setDidFailToSync(nil)
        await clock.waitForSleepers()
        token.setDidSyncSuccessfully("a")
        #expect(clock.pendingSleepCount == 0)
        #expect(syncer.nextSyncIn == nil)
        await clock.advance(by: .seconds(10))
        #expect(token.syncCount == 0)
        withExtendedLifetime(syncer) {}
    }

    @Test("shouldRetry returning false stops the retries; it sees the loadable's error or unspecified")
    func shouldRetryStopsRetries() async {
        let syncer = makeSyncer()
        var seen: [String] = []
        syncer.shouldRetry = { error in
            seen.append("\(error)")
            return (error as? TestError)?.code != 404
        }
        token.setDidFailToSync(TestError(code: 404))
        token.notifyDidChange()  // not a transition: shouldRetry is not asked again
        #expect(seen.count == 1)
        #expect(clock.pendingSleepCount == 0)
        #expect(syncer.nextSyncIn == nil)
        token.sync()
        token.setDidFailToSync(nil)
        await clock.waitForSleepers()
        #expect(syncer.nextSyncIn == .seconds(1))
        #expect(seen == ["\(TestError(code: 404))", "\(LoadableError.unspecified)"])
        withExtendedLifetime(syncer) {}
    }

    @Test("With syncIfNeeded, a tick that syncs nothing is armed again; a needed sync happens")
    func syncIfNeededPolicy() async {
        let syncer = makeSyncer(period: .seconds(10), syncPolicy: .syncIfNeeded)
        token.setDidSyncSuccessfully("a")
        token.needsSync = false
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(10))
        #expect(token.syncIfNeededCount == 1)
        #expect(token.syncCount == 0)
        await clock.waitForSleepers()
        token.needsSync = true
        await clock.advance(by: .seconds(10))
        #expect(token.syncIfNeededCount == 2)
        #expect(token.syncCount == 1)
        #expect(clock.requestedSleeps == [.seconds(10), .seconds(10)])
        withExtendedLifetime(syncer) {}
    }

    @Test("appDidBecomeActive after a failure syncs at once and starts the backoff over")
    func appDidBecomeActiveAfterFailure() async {
        let syncer = makeSyncer()
        token.setDidFailToSync(nil)
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(1))
        token.setDidFailToSync(nil)  // next retry in 1.414 s
        await clock.waitForSleepers()
        syncer.appDidBecomeActive()
        #expect(token.syncCount == 2)
        #expect(clock.pendingSleepCount == 0)
        token.setDidFailToSync(nil)
        await clock.waitForSleepers()
        #expect(clock.requestedSleeps == [.seconds(1), .seconds(1) * 2.0.squareRoot(), .seconds(1)])
        withExtendedLifetime(syncer) {}
    }

    @Test("appDidBecomeActive with a refresh not yet due, or while idle, does nothing")
    func appDidBecomeActiveWithoutReason() async {
        let syncer = makeSyncer(period: .seconds(60))
        syncer.appDidBecomeActive()
        #expect(token.syncCount == 0)
        token.setDidSyncSuccessfully("a")
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(30))
        syncer.appDidBecomeActive()
        #expect(token.syncCount == 0)
        #expect(syncer.nextSyncIn == .seconds(30))
        withExtendedLifetime(syncer) {}
    }

    @Test("nextSyncIn counts down with the clock")
    func nextSyncIn() async {
        let syncer = makeSyncer()
        #expect(syncer.nextSyncIn == nil)
        token.setDidFailToSync(nil)
        #expect(syncer.nextSyncIn == .seconds(1))
        await clock.waitForSleepers()
        await clock.advance(by: .milliseconds(400))
        #expect(syncer.nextSyncIn == .milliseconds(600))
        await clock.advance(by: .milliseconds(600))
        #expect(syncer.nextSyncIn == nil)
        withExtendedLifetime(syncer) {}
    }

    @Test("A syncer made for a loadable that already finished schedules at once", arguments: [true, false])
    func startsFromCurrentState(failed: Bool) async {
        if failed { token.setDidFailToSync(nil) } else { token.setDidSyncSuccessfully("a") }
        let syncer = makeSyncer(period: .seconds(30))
        #expect(syncer.nextSyncIn == (failed ? .seconds(1) : .seconds(30)))
        withExtendedLifetime(syncer) {}
    }

    @Test("Releasing the syncer cancels its timer")
    func releasedSyncerStops() async {
        var syncer: LoadableSyncer? = makeSyncer()
        token.setDidFailToSync(nil)
        await clock.waitForSleepers()
        weak let weakSyncer = syncer
        syncer = nil
        #expect(weakSyncer == nil)
        #expect(clock.pendingSleepCount == 0)
        await clock.advance(by: .seconds(10))
        #expect(token.syncCount == 0)
        #expect(token.hasObservers == false)
    }

    @Test("A released loadable stops the syncer without a crash")
    func releasedTarget() async {
        var target: TestLoadable<String>? = TestLoadable()
        let syncer = LoadableSyncer(
            target!,
            timeoutPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(2)),
            clock: clock
        )
        target!.setDidFailToSync(nil)
        await clock.waitForSleepers()
        weak let weakTarget = target
        target = nil
        #expect(weakTarget == nil)
        #expect(syncer.loadable == nil)
        await clock.advance(by: .seconds(10))
        #expect(clock.pendingSleepCount == 0)
        syncer.appDidBecomeActive()
        #expect(clock.requestedSleeps == [.seconds(1)])
    }

    @Test("The syncer works with a real Loadable subclass")
    func realLoadable() async {
        final class Flaky: Loadable<Int> {
            var failuresLeft = 2
            override func doSync() {
                if failuresLeft > 0 {
                    failuresLeft -= 1
                    setDidFailToSync(TestError())
                } else {
                    setDidSyncSuccessfully(42)
                }
            }
        }
        let flaky = Flaky()
        let syncer = LoadableSyncer(
            flaky,
            timeoutPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(8)),
            clock: clock
        )
        flaky.sync()
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(1))
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(1) * 2.0.squareRoot())
        #expect(flaky.contents == 42)
        #expect(clock.requestedSleeps == [.seconds(1), .seconds(1) * 2.0.squareRoot()])
        #expect(syncer.nextSyncIn == nil)
    }

    @Test("SyncPolicy has two cases")
    func syncPolicyCases() {
        #expect(LoadableSyncer.SyncPolicy.allCases == [.sync, .syncIfNeeded])
    }
}
