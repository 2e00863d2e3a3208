import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// A server's answer that asks for a retry after `retryAfter`, as a 429 or 503 does.
private struct InspectedBusyAnswer: RetryAfterProviding {
    var retryAfter: Duration?
}

/// What a syncer, an autosync and an activity monitor tell an attached `LoadableInspector`: the
/// retries they schedule and why, their pauses and resumptions, and the simulated offline of the
/// inspector page. One serialized suite: the attached inspector is the process's.
@MainActor
@Suite(.serialized) struct SyncerInspectionTests {
    let clock = ManualClock()
    let activity = ActivityMonitor()

    /// Moves the clock once the syncer's timer task sleeps on it.
    func advance(by duration: Duration) async {
        await settle { clock.pendingSleepCount == 1 }
        await clock.advance(by: duration)
    }

    func makeSyncer(for token: TestLoadable<String>) -> LoadableSyncer {
        LoadableSyncer(
            token,
            timeoutPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(8), multiplier: 2, jitter: .none),
            clock: clock, activity: activity)
    }

    @Test("a retry after a failure is recorded with its delay and its cause: the backoff, or the server's Retry-After")
    func retriesAndTheirCauses() async {
        let label = "syncer-inspection.retries"
        await withAttachedInspector(clock: clock) { inspector in
            let token = TestLoadable<String>()
            token.inspectorLabel = label
            let syncer = makeSyncer(for: token)
            token.sync()
            token.setDidFailToSync(TestError())  // backoff: 1 s
            await advance(by: .seconds(1))
            await yield { token.syncCount == 2 }
            token.setDidFailToSync(InspectedBusyAnswer(retryAfter: .seconds(30)))  // the hint beats the 2 s backoff
            await advance(by: .seconds(30))
            await yield { token.syncCount == 3 }
            token.setDidFailToSync(InspectedBusyAnswer(retryAfter: .seconds(1)))  // the 4 s backoff beats the hint
            let retries = inspector.events(of: label).filter { $0.kind == .retryScheduled }
            #expect(
                retries == [
                    .retryScheduled(label: label, time: .zero, delay: .seconds(1), cause: .backoff),
                    .retryScheduled(label: label, time: .seconds(1), delay: .seconds(30), cause: .retryAfter),
                    .retryScheduled(label: label, time: .seconds(31), delay: .seconds(4), cause: .backoff),
                ])
            withExtendedLifetime(syncer) {}
        }
    }

    @Test("the catch-up's wait for a Retry-After deadline is a retry; a refresh, and its timer armed again, are not")
    func catchUpsAndRefreshes() async {
        let label = "syncer-inspection.catch-up"
        await withAttachedInspector(clock: clock) { inspector in
            let token = TestLoadable<String>()
            token.inspectorLabel = label
            let syncer = LoadableSyncer(
                token, timeoutPolicy: BackoffTimeoutPolicy(period: .seconds(60), min: .seconds(1), jitter: .none),
                clock: clock, activity: activity)
            token.sync()
            token.setDidFailToSync(InspectedBusyAnswer(retryAfter: .seconds(600)))
            activity.isActive = false
            await clock.advance(by: .seconds(10))
            activity.isActive = true  // not before the server's deadline: a retry in 590 s
            #expect(syncer.nextSyncIn == .seconds(590))
            await advance(by: .seconds(590))
            await yield { token.syncCount == 2 }
            token.setDidSyncSuccessfully("fresh")  // a refresh in 60 s
            activity.isActive = false
            activity.isActive = true  // the refresh's timer goes on for the time it had left
            #expect(syncer.nextSyncIn == .seconds(60))
            #expect(
                inspector.events(of: label) == [
                    .retryScheduled(label: label, time: .zero, delay: .seconds(600), cause: .retryAfter),
                    .paused(label: label, time: .zero, reason: .inactive),
                    .resumed(label: label, time: .seconds(10)),
                    .retryScheduled(label: label, time: .seconds(10), delay: .seconds(590), cause: .retryAfter),
                    .paused(label: label, time: .seconds(600), reason: .inactive),
                    .resumed(label: label, time: .seconds(600)),
                ])
        }
    }

    @Test("a syncer and an autosync record one pause and one resumption for going inactive, and for going offline")
    func pausedAndResumed() async {
        let syncerLabel = "syncer-inspection.paused.syncer"
        let autosyncLabel = "syncer-inspection.paused.autosync"
        await withAttachedInspector(clock: clock) { inspector in
            let token = TestLoadable<String>()
            token.inspectorLabel = syncerLabel
            let syncer = makeSyncer(for: token)
            let feed = AsyncLoadable<Int>(clock: clock) { 1 }
            feed.inspectorLabel = autosyncLabel
            feed.autosync(every: .seconds(60), clock: clock, activity: activity)

            activity.isActive = false
            activity.isActive = false  // no change: nothing more
            await clock.advance(by: .seconds(5))
            activity.connectivity = .offline  // still paused: nothing more
            activity.isActive = true  // still offline: nothing more
            activity.connectivity = .unknown  // counts as online: resumed
            await clock.advance(by: .seconds(5))
            activity.connectivity = .offline
            activity.connectivity = .online

            for label in [syncerLabel, autosyncLabel] {
                let pauses = inspector.events(of: label).filter { $0.kind == .paused || $0.kind == .resumed }
                #expect(
                    pauses == [
                        .paused(label: label, time: .zero, reason: .inactive),
                        .resumed(label: label, time: .seconds(5)),
                        .paused(label: label, time: .seconds(10), reason: .offline),
                        .resumed(label: label, time: .seconds(10)),
                    ], "\(label)")
            }
            withExtendedLifetime(syncer) {}
        }
    }

    /// The page's simulated offline reaches every activity monitor of the process, the `system`
    /// one that other tests' syncers follow too: pausing and resuming them resets their backoff
    /// and syncs what failed. So it runs in a child process of its own.
    @Test("the page's simulated offline pauses an autosync; ending it resumes it and restores the source's")
    func simulatedOffline() async {
        let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
            await SyncerInspectionTests.simulateOffline()
        }
        ChildReport.recordFailures(of: result, context: "simulated offline")
    }

    /// The child process of ``simulatedOffline()``: reports each failed check on its standard
    /// output.
    static func simulateOffline() async {
        func check(_ condition: Bool, _ message: String) {
            if !condition { ChildReport.fail(message) }
        }
        let clock = ManualClock()
        let activity = ActivityMonitor()
        let inspector = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
        inspector.attach()
        let label = "syncer-inspection.simulated-offline"
        let feed = AsyncLoadable<Int>(clock: clock) { 1 }
        feed.inspectorLabel = label
        let autosync = feed.autosync(every: .seconds(60), clock: clock, activity: activity)
        inspector.perform(.setOffline(true))
        check(activity.connectivity == .offline, "simulating: \(activity.connectivity), not offline")
        check(ActivityMonitor.system.connectivity == .offline, "the system monitor is not offline")
        check(inspector.snapshot().isOfflineSimulated, "the snapshot does not say offline is simulated")
        let observation = feed.observe { _ in }  // a first observer while paused: no sync
        check(autosync.isAutosyncing, "the autosync does not run")
        check(feed.loadableState == .idle, "a first observer while paused synced: \(feed.loadableState)")
        await clock.advance(by: .seconds(90))  // the tick falls due while paused: it waits
        check(feed.loadableState == .idle, "a tick synced while paused: \(feed.loadableState)")
        activity.connectivity = .online  // what the source says, kept for later
        check(activity.connectivity == .offline, "the source's online shows through the simulation")
        inspector.perform(.setOffline(false))
        check(activity.connectivity == .online, "after the simulation: \(activity.connectivity), not online")
        check(feed.loadableState == .syncing, "the tick that fell due did not sync on resuming: \(feed.loadableState)")
        let pauses = inspector.events(of: label).filter { $0.kind == .paused || $0.kind == .resumed }
        let expected: [LoadableEvent] = [
            .paused(label: label, time: .zero, reason: .offline),
            .resumed(label: label, time: .seconds(90)),
        ]
        check(pauses == expected, "events: \(pauses)")
        // The source said offline meanwhile: ending the simulation keeps it offline, silently.
        inspector.perform(.setOffline(true))
        activity.connectivity = .offline
        inspector.perform(.setOffline(false))
        check(activity.connectivity == .offline, "after a simulation over the source's offline: online")
        let more = inspector.events(of: label).filter { $0.kind == .paused || $0.kind == .resumed }.dropFirst(2)
        check(Array(more) == [.paused(label: label, time: .seconds(90), reason: .offline)], "then: \(Array(more))")
        withExtendedLifetime(observation) {}
    }

    @Test("once the inspector is detached, the same retries and pauses record nothing more")
    func nothingOnceDetached() async {
        let label = "syncer-inspection.detached"
        let token = TestLoadable<String>()
        token.inspectorLabel = label
        let syncer = makeSyncer(for: token)
        let inspector = await withAttachedInspector(clock: clock) { inspector in
            token.sync()
            token.setDidFailToSync(TestError())
            activity.isActive = false
            activity.isActive = true  // the catch-up retries at once
            return inspector
        }
        #expect(LoadableInspector.attached !== inspector)
        #expect(inspector.events(of: label).map(\.kind) == [.retryScheduled, .paused, .resumed])
        await yield { token.syncCount == 2 }
        token.setDidFailToSync(InspectedBusyAnswer(retryAfter: .seconds(3)))
        activity.isActive = false
        activity.isActive = true  // the catch-up waits for the hint's deadline
        await advance(by: .seconds(3))
        await yield { token.syncCount == 3 }
        #expect(inspector.events(of: label).count == 3)
        withExtendedLifetime(syncer) {}
    }
}
