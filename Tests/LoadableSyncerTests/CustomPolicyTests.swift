import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// A loadable whose every sync ends before `sync()` returns, with a failure or a success.
@MainActor
final class InstantLoadable: Loadable<Int> {
    /// Whether each sync succeeds (`true`) or fails.
    let succeeds: Bool
    /// How many times `doSync()` ran.
    var syncs = 0

    /// Creates an idle loadable whose syncs succeed or fail at once.
    init(succeeds: Bool) {
        self.succeeds = succeeds
        super.init()
    }

    /// Counts the sync and ends it at once.
    override func doSync() {
        syncs += 1
        if succeeds {
            setDidSyncSuccessfully(syncs)
        } else {
            setDidFailToSync(TestError(code: syncs))
        }
    }
}

/// A policy that answers a negative delay, which is invalid.
struct NegativeDelayPolicy: TimeoutPolicy {
    /// Always -5 seconds.
    mutating func nextTimeout(afterFailure: Bool) -> Duration? { .seconds(-5) }
    /// Does nothing.
    mutating func reset() {}
}

/// A syncer given a custom policy with bad answers: zero delays every time, negative delays.
@MainActor
@Suite struct CustomPolicyTests {
    /// The syncers' clock; it never moves in these tests.
    let clock = ManualClock()

    /// Gives the main actor `turns` turns; the clock does not move.
    func yieldTurns(_ turns: Int = 200) async {
        for _ in 0..<turns { await Task.yield() }
    }

    @Test(
        "A policy that always answers zero gets one sync at once per outside sync, not one per turn",
        arguments: [false, true])
    func zeroDelayIsHonouredOnce(succeeds: Bool) async {
        let loadable = InstantLoadable(succeeds: succeeds)
        let syncer = LoadableSyncer(
            loadable, timeoutPolicy: ScriptedPolicy(retry: .zero, refresh: .zero), clock: clock)
        loadable.sync()  // someone else's sync...
        await yieldTurns()
        #expect(loadable.syncs == 2)  // ...and the syncer's one sync at once; then it stops
        #expect(syncer.nextSyncIn == nil)
        #expect(clock.requestedSleeps == [.zero])
        #expect(clock.pendingSleepCount == 0)

        loadable.sync()  // another outside sync: one more sync at once
        await yieldTurns()
        #expect(loadable.syncs == 4)
        #expect(syncer.nextSyncIn == nil)
        #expect(clock.requestedSleeps == [.zero, .zero])
    }

    @Test("After a zero retry was not honoured, appDidBecomeActive syncs at once and its failure gets one zero retry")
    func appDidBecomeActiveAfterRefusedZeroRetry() async {
        let loadable = InstantLoadable(succeeds: false)
        let syncer = LoadableSyncer(loadable, timeoutPolicy: ScriptedPolicy(retry: .zero), clock: clock)
        loadable.sync()
        await yieldTurns()
        #expect(loadable.syncs == 2)
        syncer.appDidBecomeActive()
        #expect(loadable.syncs == 3)
        await yieldTurns()
        #expect(loadable.syncs == 4)
        #expect(syncer.nextSyncIn == nil)
        #expect(clock.requestedSleeps == [.zero, .zero])
    }

    @Test("With syncIfNeeded, a zero retry delay does not make the syncer sync on every turn")
    func zeroDelayWithSyncIfNeeded() async {
        let loadable = InstantLoadable(succeeds: false)
        let syncer = LoadableSyncer(
            loadable, syncPolicy: .syncIfNeeded, timeoutPolicy: ScriptedPolicy(retry: .zero), clock: clock)
        loadable.sync()
        await yieldTurns()
        #expect(loadable.syncs == 2)
        #expect(syncer.nextSyncIn == nil)
    }

    @Test("A policy answering a negative retry delay stops the program with a message naming the policy and the delay")
    func negativeRetryDelayExits() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let token = TestLoadable<Int>()
                let syncer = LoadableSyncer(token, timeoutPolicy: NegativeDelayPolicy(), clock: ManualClock())
                token.setDidFailToSync(nil)
                withExtendedLifetime(syncer) {}
            }
        }
        #expect(
            bytes(
                result?.standardErrorContent ?? [],
                contain: "LoadableSyncer: timeoutPolicy NegativeDelayPolicy returned a negative delay -5.0 seconds; "
                    + "delays must be >= .zero"
            )
        )
    }

    @Test("A policy answering a negative refresh period stops the program with a message naming the policy")
    func negativeRefreshDelayExits() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let token = TestLoadable<Int>()
                let syncer = LoadableSyncer(token, timeoutPolicy: NegativeDelayPolicy(), clock: ManualClock())
                token.setDidSyncSuccessfully(1)
                withExtendedLifetime(syncer) {}
            }
        }
        #expect(
            bytes(
                result?.standardErrorContent ?? [],
                contain: "timeoutPolicy NegativeDelayPolicy returned a negative delay -5.0 seconds"
            )
        )
    }
}
