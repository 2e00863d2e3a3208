import LoadableSyncer
import LoadableTesting
import Testing

// The syncer sample of Docs/Testing.md, verbatim.

@Test @MainActor func retriesWithBackoffThenRefreshes() async {
    let clock = ManualClock()
    let feed = TestLoadable<[String]>()
    let syncer = LoadableSyncer(
        feed,
        timeoutPolicy: BackoffTimeoutPolicy(period: .seconds(60), min: .seconds(1), max: .seconds(4), multiplier: 2),
        clock: clock
    )

    feed.sync()  // the syncer never starts the first sync
    for attempt in 1...3 {
        feed.setDidFailToSync(nil)
        await clock.waitForSleepers()  // the retry timer is armed...
        #expect(syncer.nextSyncIn != nil)
        await clock.advance(by: clock.requestedSleeps.last!)  // ...and falls due
        #expect(feed.syncCount == 1 + attempt)
    }
    feed.setDidSyncSuccessfully(["news"])
    await clock.waitForSleepers()
    #expect(clock.requestedSleeps == [.seconds(1), .seconds(2), .seconds(4), .seconds(60)])
    withExtendedLifetime(syncer) {}
}
