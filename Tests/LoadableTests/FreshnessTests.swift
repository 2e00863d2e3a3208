import Loadable
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

/// What an observer saw at one notification, for the freshness tests.
private struct FreshnessNote: Equatable {
    var state: LoadableState
    var contents: Int?
    var isStale: Bool

    @MainActor
    init(_ loadable: ManualLoadable) {
        state = loadable.loadableState
        contents = loadable.contents
        isStale = loadable.isStale
    }

    init(_ state: LoadableState, _ contents: Int?, stale isStale: Bool) {
        self.state = state
        self.contents = contents
        self.isStale = isStale
    }
}

@Suite("Freshness: age, maxAge, isStale, setContents and the failure record")
@MainActor
struct FreshnessTests {
    let clock = ManualClock()

    // MARK: - age

    @Test("age is nil until contents are confirmed: initial contents have no age")
    func ageNilUntilConfirmed() async {
        let empty = ManualLoadable(clock: clock)
        #expect(empty.age == nil)
        let cached = ManualLoadable(contents: 1, clock: clock)
        #expect(cached.age == nil)
        await clock.advance(by: .seconds(30))
        #expect(cached.age == nil)
        cached.sync()
        #expect(cached.age == nil)
        cached.setDidFailToSync(TestError())
        #expect(cached.age == nil)
        cached.setIdle()
        #expect(cached.age == nil)
        cached.sync()
        cached.setDidSyncSuccessfully(2)
        #expect(cached.age == .zero)
    }

    @Test("age counts on the injected clock from the last successful sync, and restarts with the next one")
    func ageRestartsOnSuccess() async {
        let loadable = ManualLoadable(clock: clock)
        loadable.sync()
        loadable.setDidSyncSuccessfully(1)
        #expect(loadable.age == .zero)
        await clock.advance(by: .seconds(5))
        #expect(loadable.age == .seconds(5))
        loadable.sync()
        await clock.advance(by: .seconds(2))
        #expect(loadable.age == .seconds(7))  // a running sync does not confirm anything
        loadable.setDidFailToSync(TestError())
        #expect(loadable.age == .seconds(7))  // nor does a failure
        loadable.sync()
        await clock.advance(by: .milliseconds(250))
        loadable.setDidSyncSuccessfully(2)
        #expect(loadable.age == .zero)
        await clock.advance(by: .seconds(3))
        #expect(loadable.age == .seconds(3))
    }

    @Test("setDidSyncSuccessfully() without new contents confirms the contents too")
    func ageRestartsOnSuccessKeepingContents() async {
        let loadable = ManualLoadable(contents: 1, clock: clock)
        loadable.sync()
        loadable.setDidSyncSuccessfully()
        await clock.advance(by: .seconds(4))
        #expect(loadable.age == .seconds(4))
        loadable.sync()
        loadable.setDidSyncSuccessfully()
        #expect(loadable.age == .zero)
    }

    @Test("setContents and updateContents restart the age")
    func ageRestartsOnWrites() async {
        let loadable = ManualLoadable(contents: 1, clock: clock)
        loadable.setContents(2)
        #expect(loadable.age == .zero)
        await clock.advance(by: .seconds(8))
        #expect(loadable.age == .seconds(8))
        loadable.updateContents { $0 += 1 }
        #expect(loadable.age == .zero)
        await clock.advance(by: .seconds(1))
        #expect(loadable.age == .seconds(1))
        loadable.setContents(5)
        #expect(loadable.age == .zero)
    }

    // MARK: - isStale and maxAge

    @Test("isStale is true while no contents are available, whatever the state")
    func staleWithoutContents() {
        let loadable = ManualLoadable(clock: clock)
        #expect(loadable.isStale)
        loadable.sync()
        #expect(loadable.isStale)
        loadable.setDidFailToSync(TestError())
        #expect(loadable.isStale)
        loadable.setIdle()
        #expect(loadable.isStale)
    }

    @Test("without maxAge, contents are fresh until invalidated, however old")
    func freshWithoutMaxAge() async {
        let cached = ManualLoadable(contents: 1, clock: clock)
        #expect(!cached.isStale)  // initial contents, never invalidated, no maxAge
        let synced = ManualLoadable(clock: clock)
        synced.sync()
        synced.setDidSyncSuccessfully(1)
        await clock.advance(by: .seconds(86_400 * 365))
        #expect(!synced.isStale)
        #expect(!synced.needsSync)
        synced.invalidate()
        #expect(synced.isStale)
    }

    @Test("with maxAge set and no confirmation yet, contents are stale")
    func maxAgeWithoutConfirmationIsStale() {
        let loadable = ManualLoadable(contents: 1, clock: clock)
        #expect(!loadable.isStale)
        loadable.maxAge = .seconds(3600)
        #expect(loadable.isStale)
        #expect(loadable.age == nil)
        loadable.maxAge = nil
        #expect(!loadable.isStale)
    }

    @Test("an age equal to maxAge is stale; one nanosecond less is not")
    func maxAgeBoundary() async {
        let loadable = ManualLoadable(clock: clock)
        loadable.maxAge = .seconds(10)
        loadable.sync()
        loadable.setDidSyncSuccessfully(1)
        #expect(!loadable.isStale)
        await clock.advance(by: .seconds(10) - .nanoseconds(1))
        #expect(!loadable.isStale)
        #expect(!loadable.needsSync)
        await clock.advance(by: .nanoseconds(1))
        #expect(loadable.age == .seconds(10))
        #expect(loadable.isStale)
        #expect(loadable.needsSync)
    }

    @Test("a maxAge of zero is valid and makes any confirmed contents stale at once")
    func zeroMaxAge() {
        let loadable = ManualLoadable(clock: clock)
        loadable.maxAge = .zero
        #expect(loadable.maxAge == .zero)
        loadable.sync()
        loadable.setDidSyncSuccessfully(1)
        #expect(loadable.age == .zero)
        #expect(loadable.isStale)
    }

    @Test("changing maxAge moves the stale point without a new confirmation")
    func maxAgeChangeApplies() async {
        let loadable = ManualLoadable(clock: clock)
        loadable.sync()
        loadable.setDidSyncSuccessfully(1)
        await clock.advance(by: .seconds(20))
        loadable.maxAge = .seconds(30)
        #expect(!loadable.isStale)
        loadable.maxAge = .seconds(20)
        #expect(loadable.isStale)
        loadable.maxAge = .seconds(21)
        #expect(!loadable.isStale)
    }

    @Test("setContents and updateContents make invalidated or too old contents fresh again")
    func writesMakeFresh() async {
        let loadable = ManualLoadable(contents: 1, clock: clock)
        loadable.invalidate()
        #expect(loadable.isStale)
        loadable.setContents(2)
        #expect(!loadable.isStale)
        loadable.maxAge = .seconds(5)
        await clock.advance(by: .seconds(5))
        #expect(loadable.isStale)
        loadable.updateContents { $0 += 1 }
        #expect(!loadable.isStale)
        loadable.invalidate()
        #expect(loadable.isStale)
        loadable.updateContents { $0 += 1 }
        #expect(!loadable.isStale)
    }

    // MARK: - needsSync

    enum Staleness: String, CaseIterable, Sendable {
        case fresh, invalidated, tooOld
    }

    enum Phase: String, CaseIterable, Sendable {
        case idle, syncing, succeeded, failed
    }

    @Test(
        "default needsSync: idle or failed always; syncing or succeeded only when stale",
        arguments: Phase.allCases, Staleness.allCases)
    func needsSyncTable(phase: Phase, staleness: Staleness) async {
        let loadable = ManualLoadable(clock: clock)
        loadable.maxAge = .seconds(10)
        loadable.sync()
        loadable.setDidSyncSuccessfully(1)
        switch staleness {
        case .fresh: break
        case .invalidated: loadable.invalidate()
        case .tooOld: await clock.advance(by: .seconds(10))
        }
        switch phase {
        case .idle: loadable.setIdle()
        case .syncing: loadable.sync()
        case .succeeded: break
        case .failed:
            loadable.sync()
            loadable.setDidFailToSync(TestError())
        }
        let isStale = staleness != .fresh
        #expect(loadable.isStale == isStale)
        switch phase {
        case .idle, .failed: #expect(loadable.needsSync)
        case .syncing, .succeeded: #expect(loadable.needsSync == isStale)
        }
    }

    @Test("default needsSync without contents is true in every state it can be in")
    func needsSyncWithoutContents() {
        let loadable = ManualLoadable(clock: clock)
        #expect(loadable.needsSync)
        loadable.sync()
        #expect(loadable.needsSync)  // syncing, but stale: nothing to show
        loadable.setDidFailToSync(nil)
        #expect(loadable.needsSync)
        loadable.setIdle()
        #expect(loadable.needsSync)
    }

    @Test("syncIfNeeded syncs again once the contents reached maxAge")
    func syncIfNeededAfterMaxAge() async {
        let loadable = ManualLoadable(clock: clock)
        loadable.maxAge = .seconds(10)
        loadable.finishInDoSync = .succeed(1)
        loadable.syncIfNeeded()
        #expect(loadable.doSyncCount == 1)
        await clock.advance(by: .seconds(9))
        loadable.syncIfNeeded()
        #expect(loadable.doSyncCount == 1)
        await clock.advance(by: .seconds(1))
        loadable.syncIfNeeded()
        #expect(loadable.doSyncCount == 2)
        #expect(!loadable.isStale)
    }

    // MARK: - Stale-by-age notification

    @Test("an observed loadable notifies exactly once when its age reaches maxAge, state unchanged")
    func staleByAgeNotifiesOnce() async {
        let loadable = ManualLoadable(clock: clock)
        loadable.maxAge = .seconds(10)
        var notes: [FreshnessNote] = []
        await observing(loadable, { notes.append(FreshnessNote($0)) }) {
            loadable.sync()
            loadable.setDidSyncSuccessfully(1)
            #expect(notes.count == 2)
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(10) - .nanoseconds(1))
            #expect(notes.count == 2)
            await clock.advance(by: .nanoseconds(1))
            #expect(notes.count == 3)
            #expect(notes.last == FreshnessNote(.didSyncSuccessfully, 1, stale: true))
            await clock.advance(by: .seconds(1000))
            #expect(notes.count == 3)
            #expect(clock.pendingSleepCount == 0)
        }
    }

    @Test("the stale-by-age notification is re-armed by each new confirmation")
    func staleByAgeRearmed() async {
        let loadable = ManualLoadable(clock: clock)
        loadable.maxAge = .seconds(10)
        var notes: [FreshnessNote] = []
        await observing(loadable, { notes.append(FreshnessNote($0)) }) {
            loadable.sync()
            loadable.setDidSyncSuccessfully(1)
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(10))
            #expect(notes.count == 3)

            loadable.sync()
            loadable.setDidSyncSuccessfully(2)
            #expect(notes.count == 5)
            #expect(notes.last == FreshnessNote(.didSyncSuccessfully, 2, stale: false))
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(10) - .nanoseconds(1))
            #expect(notes.count == 5)
            await clock.advance(by: .nanoseconds(1))
            #expect(notes.count == 6)
            #expect(notes.last == FreshnessNote(.didSyncSuccessfully, 2, stale: true))

            loadable.setContents(3)  // a write confirms too
            #expect(notes.count == 7)
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(10))
            #expect(notes.count == 8)
            #expect(notes.last == FreshnessNote(.didSyncSuccessfully, 3, stale: true))
        }
    }

    @Test("a confirmation before maxAge pushes the stale notification back")
    func staleByAgePushedBack() async {
        let loadable = ManualLoadable(clock: clock)
        loadable.maxAge = .seconds(10)
        var notes: [FreshnessNote] = []
        await observing(loadable, { notes.append(FreshnessNote($0)) }) {
            loadable.sync()
            loadable.setDidSyncSuccessfully(1)
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(6))
            loadable.sync()
            loadable.setDidSyncSuccessfully(2)  // confirmed at 6 s: stale at 16 s
            #expect(notes.count == 4)
            await clock.advance(by: .seconds(10) - .nanoseconds(1))
            #expect(notes.count == 4)
            #expect(!loadable.isStale)
            await clock.advance(by: .nanoseconds(1))
            #expect(notes.count == 5)
            #expect(notes.last == FreshnessNote(.didSyncSuccessfully, 2, stale: true))
        }
    }

    @Test("without observers no timer runs and nothing is reported when the contents turn stale by age")
    func staleByAgeWithoutObservers() async {
        let loadable = ManualLoadable(clock: clock)
        loadable.maxAge = .seconds(10)
        loadable.sync()
        loadable.setDidSyncSuccessfully(1)
        let counter = trackObservationChanges { _ = loadable.isStale }
        for _ in 0..<5 { await Task.yield() }
        #expect(clock.pendingSleepCount == 0)
        await clock.advance(by: .seconds(20))
        #expect(counter.count == 0)
        #expect(clock.requestedSleeps.isEmpty)
        #expect(loadable.isStale)  // stale all the same
    }

    @Test("an observer added after the confirmation is told at confirmation + maxAge")
    func staleTimerArmedByFirstObserver() async {
        let loadable = ManualLoadable(clock: clock)
        loadable.maxAge = .seconds(10)
        loadable.sync()
        loadable.setDidSyncSuccessfully(1)
        await clock.advance(by: .seconds(3))
        var count = 0
        await observing(loadable, { _ in count += 1 }) {
            await clock.waitForSleepers()
            #expect(clock.requestedSleeps == [.seconds(7)])
            await clock.advance(by: .seconds(7) - .nanoseconds(1))
            #expect(count == 0)
            await clock.advance(by: .nanoseconds(1))
            #expect(count == 1)
            #expect(loadable.isStale)
        }
    }

    @Test("once the last observer left, reaching maxAge reports nothing")
    func staleByAgeAfterLastObserverLeft() async {
        let loadable = ManualLoadable(clock: clock)
        loadable.maxAge = .seconds(10)
        let token = loadable.observe { _ in }
        loadable.sync()
        loadable.setDidSyncSuccessfully(1)
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(3))
        token.cancel()
        let counter = trackObservationChanges { _ = loadable.isStale }
        await clock.advance(by: .seconds(60))
        #expect(counter.count == 0)
        #expect(loadable.isStale)
    }

    @Test("contents invalidated before maxAge get no stale-by-age notification")
    func staleByAgeNotAfterInvalidation() async {
        let loadable = ManualLoadable(clock: clock)
        loadable.maxAge = .seconds(10)
        var notes: [FreshnessNote] = []
        await observing(loadable, { notes.append(FreshnessNote($0)) }) {
            loadable.sync()
            loadable.setDidSyncSuccessfully(1)
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(4))
            loadable.invalidate()
            #expect(notes.count == 3)
            #expect(notes.last == FreshnessNote(.didSyncSuccessfully, 1, stale: true))
            await clock.advance(by: .seconds(60))
            #expect(notes.count == 3)
        }
    }

    @Test("setting maxAge is not a notification")
    func settingMaxAgeDoesNotNotify() {
        let loadable = ManualLoadable(clock: clock)
        loadable.sync()
        loadable.setDidSyncSuccessfully(1)
        var count = 0
        observing(loadable, { _ in count += 1 }) {
            loadable.maxAge = .seconds(5)
            loadable.maxAge = nil
            #expect(count == 0)
        }
    }

    // MARK: - Observation

    @Test("isStale is tracked: invalidate() reports a change")
    func observationIsStaleInvalidate() {
        let loadable = ManualLoadable(contents: 1, clock: clock)
        let counter = trackObservationChanges { _ = loadable.isStale }
        #expect(counter.count == 0)
        loadable.invalidate()
        #expect(counter.count == 1)
    }

    @Test("isStale is tracked: setting maxAge reports a change to Observation only")
    func observationIsStaleMaxAge() {
        let loadable = ManualLoadable(contents: 1, clock: clock)
        let counter = trackObservationChanges { _ = loadable.isStale }
        loadable.maxAge = .seconds(1)
        #expect(counter.count == 1)
    }

    @Test("isStale is tracked: the stale-by-age notification reports a change")
    func observationIsStaleByAge() async {
        let loadable = ManualLoadable(clock: clock)
        loadable.maxAge = .seconds(10)
        await observing(loadable, { _ in }) {
            loadable.sync()
            loadable.setDidSyncSuccessfully(1)
            let counter = trackObservationChanges { _ = loadable.isStale }
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(10) - .nanoseconds(1))
            #expect(counter.count == 0)
            await clock.advance(by: .nanoseconds(1))
            #expect(counter.count == 1)
        }
    }

    @Test("age is tracked: setContents and updateContents report a change")
    func observationAge() {
        let loadable = ManualLoadable(contents: 1, clock: clock)
        let counter = trackObservationChanges { _ = loadable.age }
        loadable.setContents(2)
        #expect(counter.count == 1)
        let second = trackObservationChanges { _ = loadable.age }
        loadable.updateContents { $0 += 1 }
        #expect(second.count == 1)
    }

    @Test("isSlowSync is tracked: becoming slow reports a change")
    func observationIsSlowSync() async {
        let loadable = ManualLoadable(clock: clock)
        loadable.slowSyncAfter = .seconds(2)
        loadable.sync()
        let counter = trackObservationChanges { _ = loadable.isSlowSync }
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(2) - .nanoseconds(1))
        #expect(counter.count == 0)
        await clock.advance(by: .nanoseconds(1))
        #expect(counter.count == 1)
        #expect(loadable.isSlowSync)
    }

    @Test("lastError and consecutiveFailures are tracked", arguments: [false, true])
    func observationFailureRecord(readsCount: Bool) {
        let loadable = ManualLoadable(clock: clock)
        loadable.sync()
        let counter = trackObservationChanges {
            if readsCount { _ = loadable.consecutiveFailures } else { _ = loadable.lastError }
        }
        loadable.setDidFailToSync(TestError())
        #expect(counter.count == 1)
    }

    // MARK: - setContents / updateContents

    @Test("setContents notifies once and leaves the state and error alone")
    func setContentsNotifiesOnce() {
        let loadable = ManualLoadable(clock: clock)
        var notes: [FreshnessNote] = []
        observing(loadable, { notes.append(FreshnessNote($0)) }) {
            loadable.setContents(4)
            #expect(notes == [FreshnessNote(.idle, 4, stale: false)])
            #expect(loadable.isContentsAvailable)

            loadable.sync()
            loadable.setDidFailToSync(TestError("offline"))
            notes = []
            loadable.setContents(5)
            #expect(notes == [FreshnessNote(.didFailToSync, 5, stale: false)])
            #expect(loadable.error as? TestError == TestError("offline"))
        }
    }

    @Test("setContents during a sync keeps it running, and its result lands later")
    func setContentsDuringSync() {
        let loadable = ManualLoadable(contents: 1, clock: clock)
        var notes: [FreshnessNote] = []
        observing(loadable, { notes.append(FreshnessNote($0)) }) {
            loadable.sync()
            loadable.setContents(2)
            #expect(loadable.loadableState == .syncing)
            #expect(loadable.doSyncCount == 1)
            #expect(loadable.doCancelSyncCount == 0)
            loadable.setDidSyncSuccessfully(3)
            #expect(
                notes == [
                    FreshnessNote(.syncing, 1, stale: false),
                    FreshnessNote(.syncing, 2, stale: false),
                    FreshnessNote(.didSyncSuccessfully, 3, stale: false),
                ])
        }
    }

    @Test("updateContents during an AsyncLoadable sync keeps it running, and the load's result lands")
    func updateContentsDuringAsyncSync() async {
        let pending = PendingLoad()
        let loadable = AsyncLoadable(contents: 1, clock: clock) { try await pending.load() }
        loadable.sync()
        await yield(until: { pending.pending == 1 })
        loadable.updateContents { $0 += 10 }
        #expect(loadable.contents == 11)
        #expect(loadable.loadableState == .syncing)
        pending.finish(.success(42))
        await yield(until: { loadable.loadableState == .didSyncSuccessfully })
        #expect(loadable.contents == 42)
    }

    @Test("updateContents changes the contents in place and notifies once")
    func updateContentsNotifiesOnce() {
        let loadable = ManualLoadable(contents: 1, clock: clock)
        var notes: [FreshnessNote] = []
        observing(loadable, { notes.append(FreshnessNote($0)) }) {
            loadable.updateContents { $0 *= 7 }
            #expect(notes == [FreshnessNote(.idle, 7, stale: false)])
        }
    }

    @Test("updateContents without contents does nothing: no call of the body, no notification, no age")
    func updateContentsWithoutContents() {
        let loadable = ManualLoadable(clock: clock)
        var count = 0
        observing(loadable, { _ in count += 1 }) {
            var bodyCalls = 0
            loadable.updateContents { _ in bodyCalls += 1 }
            #expect(bodyCalls == 0)
            #expect(count == 0)
            #expect(loadable.contents == nil)
            #expect(loadable.age == nil)
            #expect(loadable.isStale)
        }
    }

    @Test("inside the updateContents body, contents read as nil")
    func updateContentsBodySeesNil() {
        let loadable = ManualLoadable(contents: 1, clock: clock)
        var seenInside: Int?? = .none
        loadable.updateContents { value in
            seenInside = .some(loadable.contents)
            value += 1
        }
        #expect(seenInside == .some(nil))
        #expect(loadable.contents == 2)
        #expect(loadable.isContentsAvailable)
    }

    // MARK: - lastError and consecutiveFailures

    @Test("lastError and consecutiveFailures are kept while a retry runs, and cleared by a success")
    func failureRecordThroughRetries() {
        let loadable = ManualLoadable(contents: 1, clock: clock)
        #expect(loadable.lastError == nil)
        #expect(loadable.consecutiveFailures == 0)
        loadable.sync()
        #expect(!loadable.snapshot.isRetrying)  // refreshing, not retrying
        loadable.setDidFailToSync(TestError("a"))
        #expect(loadable.error as? TestError == TestError("a"))
        #expect(loadable.lastError as? TestError == TestError("a"))
        #expect(loadable.consecutiveFailures == 1)
        #expect(!loadable.snapshot.isRetrying)

        loadable.sync()
        #expect(loadable.error == nil)
        #expect(loadable.lastError as? TestError == TestError("a"))
        #expect(loadable.consecutiveFailures == 1)
        #expect(loadable.snapshot.isRetrying)

        loadable.setDidFailToSync(TestError("b"))
        #expect(loadable.lastError as? TestError == TestError("b"))
        #expect(loadable.consecutiveFailures == 2)

        loadable.sync()
        #expect(loadable.snapshot.isRetrying)
        loadable.setDidSyncSuccessfully(2)
        #expect(loadable.lastError == nil)
        #expect(loadable.consecutiveFailures == 0)
        loadable.sync()
        #expect(!loadable.snapshot.isRetrying)
    }

    @Test("a failure without an error counts, and clears the last error")
    func failureWithoutError() {
        let loadable = ManualLoadable(clock: clock)
        loadable.setDidFailToSync(TestError())
        loadable.setDidFailToSync(nil)
        #expect(loadable.lastError == nil)
        #expect(loadable.consecutiveFailures == 2)
    }

    @Test("setContents, updateContents and setIdle keep the failure record")
    func failureRecordKeptByWrites() {
        let loadable = ManualLoadable(contents: 1, clock: clock)
        loadable.sync()
        loadable.setDidFailToSync(TestError("x"))
        loadable.setContents(2)
        #expect(loadable.lastError as? TestError == TestError("x"))
        #expect(loadable.consecutiveFailures == 1)
        loadable.updateContents { $0 += 1 }
        #expect(loadable.consecutiveFailures == 1)
        loadable.setIdle()
        #expect(loadable.error == nil)
        #expect(loadable.lastError as? TestError == TestError("x"))
        #expect(loadable.consecutiveFailures == 1)
        loadable.sync()
        #expect(loadable.snapshot.isRetrying)
    }

    @Test("a cancelled retry goes back to the failure, its error and count intact")
    func cancelledRetryKeepsRecord() {
        let loadable = ManualLoadable(clock: clock)
        loadable.sync()
        loadable.setDidFailToSync(TestError("x"))
        loadable.sync()
        loadable.cancelSync()
        #expect(loadable.loadableState == .didFailToSync)
        #expect(loadable.error as? TestError == TestError("x"))
        #expect(loadable.lastError as? TestError == TestError("x"))
        #expect(loadable.consecutiveFailures == 1)
    }

    @Test("the snapshot carries lastError and consecutiveFailures")
    func snapshotCarriesRecord() {
        let loadable = ManualLoadable(clock: clock)
        loadable.sync()
        loadable.setDidFailToSync(TestError("a"))
        loadable.sync()
        loadable.setDidFailToSync(TestError("b"))
        loadable.sync()
        let snapshot = loadable.snapshot
        #expect(snapshot.state == .syncing)
        #expect(snapshot.error == nil)
        #expect(snapshot.lastError as? TestError == TestError("b"))
        #expect(snapshot.consecutiveFailures == 2)
        #expect(snapshot.isRetrying)
    }

    // MARK: - AsyncLoadable

    @Test("an AsyncLoadable reads age and maxAge on the clock it was given")
    func asyncLoadableWithClock() async {
        let pending = PendingLoad()
        let loadable = AsyncLoadable(contents: 1, clock: clock) { try await pending.load() }
        loadable.maxAge = .seconds(10)
        #expect(loadable.age == nil)
        #expect(loadable.isStale)
        loadable.sync()
        await yield(until: { pending.pending == 1 })
        await clock.advance(by: .seconds(3))
        pending.finish(.success(2))
        await yield(until: { loadable.loadableState == .didSyncSuccessfully })
        #expect(loadable.age == .zero)
        #expect(!loadable.isStale)
        await clock.advance(by: .seconds(10))
        #expect(loadable.age == .seconds(10))
        #expect(loadable.isStale)
        #expect(loadable.needsSync)
    }

    @Test("an AsyncLoadable subclass passes its clock through init(contents:clock:)")
    func asyncLoadableSubclassWithClock() async throws {
        final class Answer: AsyncLoadable<Int> {
            override func load() async throws -> Int { 42 }
        }
        let loadable = Answer(contents: 1, clock: clock)
        #expect(try await loadable.syncedContents(forceSync: true) == 42)
        await clock.advance(by: .seconds(4))
        #expect(loadable.age == .seconds(4))
    }
}
