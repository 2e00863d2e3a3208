import LoadableTestSupport
import LoadableTesting
import Testing

@testable import LoadableSyncer

@MainActor
@Suite struct LoadableWaiterTests {
    let clock = ManualClock()
    let token = TestLoadable<String>()

    func makeWaiter(
        condition: LoadableWaiter<TestLoadable<String>>.Condition = .contentsAvailable,
        timeout: Duration = .seconds(10),
        syncsIfPossible: Bool = true
    ) -> LoadableWaiter<TestLoadable<String>> {
        LoadableWaiter(token, condition: condition, timeout: timeout, syncsIfPossible: syncsIfPossible, clock: clock)
    }

    @Test("A wait whose condition already holds returns at once, with no timer and no sync")
    func conditionAlreadyHolds() async throws {
        token.contents = "secret"
        token.isContentsAvailable = true
        let waiter = makeWaiter()
        let result = try await waiter.wait()
        #expect(result === token)
        #expect(clock.requestedSleeps.isEmpty)
        #expect(token.syncCount == 0)
        #expect(token.addObserverCount == 0)
        #expect(waiter.pendingWaitCount == 0)
    }

    @Test("A wait that is not satisfied in time fails with timedOut")
    func timeout() async {
        let waiter = makeWaiter(syncsIfPossible: false)
        let task = Task { try await waiter.wait() }
        await clock.waitForSleepers()
        #expect(waiter.pendingWaitCount == 1)
        await clock.advance(by: .seconds(10))
        await #expect(throws: LoadableWaiterError.timedOut) { try await task.value }
        #expect(clock.requestedSleeps == [.seconds(10)])
        #expect(waiter.pendingWaitCount == 0)
        #expect(token.hasObservers == false)
        #expect("\(LoadableWaiterError.timedOut)" == "Timed out waiting for the loadable")
    }

    @Test("A success before the timeout ends the wait and cancels the timer")
    func successBeforeTimeout() async throws {
        let waiter = makeWaiter()
        let task = Task { try await waiter.wait() }
        await clock.waitForSleepers()
        #expect(token.syncCount == 1)
        await clock.advance(by: .seconds(9))
        token.setDidSyncSuccessfully("secret")
        #expect(try await task.value === token)
        #expect(clock.pendingSleepCount == 0)
        #expect(token.hasObservers == false)
    }

    @Test("One success ends many waits, all with one sync and one timer")
    func manyWaiters() async throws {
        let waiter = makeWaiter()
        let tasks = (0..<100).map { _ in Task { try await waiter.wait() } }
        await yield { waiter.pendingWaitCount == 100 }
        await clock.waitForSleepers()  // the timeout timer task has started sleeping
        #expect(token.syncCount == 1)
        #expect(clock.requestedSleeps == [.seconds(10)])
        token.setDidSyncSuccessfully("secret")
        for task in tasks { #expect(try await task.value === token) }
        #expect(waiter.pendingWaitCount == 0)
    }

    @Test("Cancelling one waiting task ends only its wait, with CancellationError")
    func perCallerCancellation() async throws {
        let waiter = makeWaiter()
        let first = Task { try await waiter.wait() }
        let second = Task { try await waiter.wait() }
        let third = Task { try await waiter.wait() }
        await yield { waiter.pendingWaitCount == 3 }
        second.cancel()
        await #expect(throws: CancellationError.self) { try await second.value }
        #expect(waiter.pendingWaitCount == 2)
        #expect(token.hasObservers)
        token.setDidSyncSuccessfully("secret")
        #expect(try await first.value === token)
        #expect(try await third.value === token)
    }

    @Test("A task cancelled before it waits fails at once")
    func cancelledBeforeWaiting() async {
        let waiter = makeWaiter()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await waiter.wait()
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(waiter.pendingWaitCount == 0)
        #expect(token.syncCount == 0)
    }

    @Test("The callback form is called once: synchronously when the condition holds, or later")
    func callbackForm() async {
        let waiter = makeWaiter()
        var outcomes: [String] = []
        let handle = waiter.wait { outcomes.append(outcome($0)) }
        #expect(handle.isPending)
        #expect(outcomes.isEmpty)
        token.setDidSyncSuccessfully("secret")
        #expect(outcomes == ["success"])
        #expect(!handle.isPending)
        let immediate = waiter.wait { outcomes.append(outcome($0)) }
        #expect(outcomes == ["success", "success"])
        #expect(!immediate.isPending)
        immediate.cancel()
        #expect(outcomes.count == 2)
    }

    @Test("Cancelling a callback wait calls its completion with CancellationError, once")
    func callbackCancellation() async {
        let waiter = makeWaiter()
        var outcomes: [String] = []
        let handle = waiter.wait { outcomes.append("first: " + outcome($0)) }
        waiter.wait { outcomes.append("second: " + outcome($0)) }
        await clock.waitForSleepers()
        handle.cancel()
        handle.cancel()
        #expect(outcomes == ["first: cancelled"])
        #expect(waiter.pendingWaitCount == 1)
        await clock.advance(by: .seconds(10))
        #expect(outcomes == ["first: cancelled", "second: Timed out waiting for the loadable"])
    }

    @Test("Waits that began at different times expire at their own deadlines with one timer")
    func staggeredDeadlines() async {
        let waiter = makeWaiter(syncsIfPossible: false)
        var outcomes: [String] = []
        waiter.wait { outcomes.append("a: " + outcome($0)) }
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(3))
        waiter.wait { outcomes.append("b: " + outcome($0)) }
        #expect(clock.pendingSleepCount == 1)
        await clock.advance(by: .seconds(7))
        #expect(outcomes == ["a: Timed out waiting for the loadable"])
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(3))
        #expect(outcomes.count == 2)
        #expect(clock.requestedSleeps == [.seconds(10), .seconds(3)])
    }

    @Test("While waited on, a failing target is retried with backoff; the retries stop when nobody waits")
    func keepsSyncingWithBackoff() async {
        let waiter = makeWaiter()
        var outcomes: [String] = []
        waiter.wait { outcomes.append(outcome($0)) }
        #expect(token.syncCount == 1)
        let retries = backoffSequence(min: .seconds(1), max: .seconds(10), count: 4)
        token.setDidFailToSync(TestError())
        for (index, delay) in retries.prefix(3).enumerated() {
            await clock.waitForSleepers(count: 2)
            await clock.advance(by: delay)
            #expect(token.syncCount == index + 2)
            token.setDidFailToSync(TestError())
        }
        await clock.waitForSleepers(count: 2)
        #expect(clock.requestedSleeps == [.seconds(10)] + retries)
        await clock.advance(to: .init(offset: .seconds(10)))
        #expect(token.syncCount == 5)  // the fourth retry fell before the timeout
        #expect(outcomes == ["Timed out waiting for the loadable"])
        #expect(clock.pendingSleepCount == 0)
        #expect(!token.hasObservers)
        await clock.advance(by: .seconds(100))
        #expect(token.syncCount == 5)
    }

    /// An error that says a retry cannot help (a token endpoint's 401).
    struct Refused: RetryAfterProviding, CustomStringConvertible {
        var retryAfter: Duration? { nil }
        var isRetryable: Bool { false }
        var description: String { "refused" }
    }

    @Test(
        "A target that fails with an error its syncer will not retry fails every pending wait at once",
        arguments: LoadableWaiter<TestLoadable<String>>.Condition.allCases
    )
    func targetFailureEndsPendingWaits(condition: LoadableWaiter<TestLoadable<String>>.Condition) async {
        let waiter = makeWaiter(condition: condition)
        var outcomes: [String] = []
        for _ in 0..<3 { waiter.wait { outcomes.append(outcome($0)) } }
        let task = Task { try await waiter.wait() }
        await clock.waitForSleepers()
        #expect(token.syncCount == 1)
        token.setDidFailToSync(Refused())
        #expect(outcomes.count == 3)
        #expect(outcomes.allSatisfy { $0 == "The loadable waited for failed: refused" })
        await #expect(throws: LoadableWaiterError.targetFailed(Refused())) { try await task.value }
        #expect(clock.now.offset == .zero)
        #expect(waiter.pendingWaitCount == 0)
        await settle { clock.pendingSleepCount == 0 }
        #expect(clock.pendingSleepCount == 0)
        if outcomes.isEmpty { await clock.advance(by: .seconds(10)) }
    }

    @Test("Later waits fail at once without syncing, until someone else syncs the target")
    func targetFailureEndsLaterWaitsUntilTheTargetSyncsAgain() async throws {
        let waiter = makeWaiter()
        var outcomes: [String] = []
        waiter.wait { outcomes.append(outcome($0)) }
        token.setDidFailToSync(Refused())
        #expect(outcomes.count == 1)
        waiter.wait { outcomes.append(outcome($0)) }
        #expect(outcomes.count == 2)
        #expect(outcomes.last == "The loadable waited for failed: refused")
        await #expect(throws: LoadableWaiterError.targetFailed(Refused())) { try await waiter.wait() }
        #expect(token.syncCount == 1)
        #expect(waiter.pendingWaitCount == 0)
        // A new login: someone syncs the token; waits wait for it again.
        token.sync()
        waiter.wait { outcomes.append(outcome($0)) }
        #expect(outcomes.count == 2)
        token.setDidSyncSuccessfully("new")
        #expect(outcomes.last == "success")
        if outcomes.count < 3 { await clock.advance(by: .seconds(10)) }
    }

    @Test("A target that already failed and will not be retried fails the first wait at once when it does not sync")
    func targetGivenUpWhenTheSyncerIsMade() async {
        token.needsSync = false  // syncIfNeeded() does nothing: the syncer sees the failure as it is
        token.setDidFailToSync(Refused())
        let waiter = makeWaiter(condition: .didSyncSuccessfully)
        var outcomes: [String] = []
        waiter.wait { outcomes.append(outcome($0)) }
        #expect(outcomes == ["The loadable waited for failed: refused"])
        #expect(token.syncCount == 0)
        await settle { clock.pendingSleepCount == 0 }
        #expect(clock.pendingSleepCount == 0)
        #expect(waiter.pendingWaitCount == 0)
    }

    @Test("waitAfterSync waits for the running sync to end even when the old contents meet the condition")
    func waitAfterSyncWaitsForTheSyncsEnd() async throws {
        token.setDidSyncSuccessfully("old")
        let waiter = makeWaiter()
        token.sync()
        var outcomes: [String] = []
        let task = Task { try await waiter.waitAfterSync().contents }
        await clock.waitForSleepers()
        #expect(waiter.pendingWaitCount == 1)
        // While it waits, a plain wait waits for the sync's end too.
        waiter.wait { outcomes.append(outcome($0)) }
        #expect(outcomes.isEmpty)
        token.setDidSyncSuccessfully("new")
        #expect(try await task.value == "new")
        #expect(outcomes == ["success"])
        // Not syncing: it returns at once, as wait() does; and wait() again takes the contents.
        #expect(try await waiter.waitAfterSync().contents == "new")
        token.sync()
        #expect(try await waiter.wait().contents == "new")
        #expect(waiter.pendingWaitCount == 0)
    }

    @Test("A cancelled waitAfterSync stops holding back the other waits")
    func cancelledWaitAfterSync() async {
        token.setDidSyncSuccessfully("old")
        let waiter = makeWaiter()
        token.sync()
        let task = Task { try await waiter.waitAfterSync() }
        await clock.waitForSleepers()
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        var outcomes: [String] = []
        waiter.wait { outcomes.append(outcome($0)) }
        #expect(outcomes == ["success"])
        token.setDidSyncSuccessfully("new")
    }

    @Test("LoadableWaiterError: equal when the case and the error's type and description are")
    func errorEquality() {
        let refused = LoadableWaiterError.targetFailed(Refused())
        #expect(LoadableWaiterError.timedOut == .timedOut)
        #expect(refused == .targetFailed(Refused()))
        #expect(refused != .timedOut)
        #expect(refused != .targetFailed(TestError("refused")))  // same description, another type
        #expect(LoadableWaiterError.targetFailed(TestError(code: 1)) != .targetFailed(TestError(code: 2)))
        #expect(Set([refused, .targetFailed(Refused()), .timedOut]).count == 2)
        #expect(refused.description == "The loadable waited for failed: refused")
        #expect(LoadableWaiterError.timedOut.isRetryable)
        #expect(!refused.isRetryable)
        #expect(refused.retryAfter == nil)
    }

    @Test("A failure the syncer retries keeps the waits waiting")
    func retryableFailureKeepsWaiting() async {
        let waiter = makeWaiter()
        var outcomes: [String] = []
        waiter.wait { outcomes.append(outcome($0)) }
        token.setDidFailToSync(TestError())
        #expect(outcomes.isEmpty)
        await clock.waitForSleepers(count: 2)
        await clock.advance(by: .seconds(1))
        #expect(token.syncCount == 2)
        token.setDidSyncSuccessfully("secret")
        #expect(outcomes == ["success"])
    }

    @Test("Without a syncer (syncsIfPossible false) a failure changes nothing: the waits wait for whoever syncs")
    func failureWithoutSyncerKeepsWaiting() async {
        let waiter = makeWaiter(syncsIfPossible: false)
        var outcomes: [String] = []
        waiter.wait { outcomes.append(outcome($0)) }
        token.setDidFailToSync(Refused())
        #expect(outcomes.isEmpty)
        token.sync()
        token.setDidSyncSuccessfully("secret")
        #expect(outcomes == ["success"])
    }

    @Test("With syncsIfPossible false the target is never synced")
    func doesNotSyncWhenAskedNotTo() async {
        let waiter = makeWaiter(syncsIfPossible: false)
        waiter.wait { _ in }
        token.setDidFailToSync(nil)
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(10))
        #expect(token.syncCount == 0)
        #expect(clock.requestedSleeps == [.seconds(10)])
    }

    @Test("A pure target is waited for without syncing")
    func pureTarget() async throws {
        let feed = PushLoadable<Int>()
        let waiter = LoadableWaiter(feed, timeout: .seconds(5), clock: clock)
        let task = Task { try await waiter.wait() }
        await clock.waitForSleepers()
        feed.setDidSyncSuccessfully(1)
        #expect(try await task.value.contents == 1)
    }

    @Test(
        "The didSyncSuccessfully condition ignores stale contents",
        arguments: LoadableWaiter<TestLoadable<String>>.Condition.allCases)
    func conditions(condition: LoadableWaiter<TestLoadable<String>>.Condition) async {
        token.contents = "stale"
        token.isContentsAvailable = true
        token.setDidFailToSync(nil)
        let waiter = makeWaiter(condition: condition)
        var outcomes: [String] = []
        waiter.wait { outcomes.append(outcome($0)) }
        switch condition {
        case .contentsAvailable:
            #expect(outcomes == ["success"])
            #expect(token.syncCount == 0)
        case .didSyncSuccessfully:
            #expect(outcomes.isEmpty)
            #expect(token.syncCount == 1)
            token.setDidSyncSuccessfully()
            #expect(outcomes == ["success"])
        }
    }

    @Test("At the timeout the condition is checked once more, for targets that change without notifying")
    func checksAtTimeout() async {
        let waiter = makeWaiter(syncsIfPossible: false)
        var outcomes: [String] = []
        waiter.wait { outcomes.append(outcome($0)) }
        token.isContentsAvailable = true
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(10))
        #expect(outcomes == ["success"])
    }

    @Test("Pending waits end even when the waiter is released")
    func releasedWaiter() async {
        var outcomes: [String] = []
        var waiter: LoadableWaiter? = makeWaiter()
        waiter?.wait { outcomes.append(outcome($0)) }
        weak let weakWaiter = waiter
        waiter = nil
        #expect(weakWaiter != nil)
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(10))
        #expect(outcomes == ["Timed out waiting for the loadable"])
        await yield { weakWaiter == nil }
    }

    @Test("Any timeout above zero works, even below the retry minimum of one second")
    func shortTimeout() async {
        let waiter = makeWaiter(timeout: .milliseconds(300))
        var outcomes: [String] = []
        waiter.wait { outcomes.append(outcome($0)) }
        token.setDidFailToSync(nil)
        await clock.waitForSleepers(count: 2)
        await clock.advance(by: .milliseconds(300))
        #expect(outcomes == ["Timed out waiting for the loadable"])
        #expect(clock.requestedSleeps == [.milliseconds(300), .milliseconds(300)])
    }

    @Test("The waiter's retry policy: 1 s growing to min(timeout, 30 s)")
    func retryPolicy() {
        let short = LoadableWaiter<TestLoadable<String>>.retryPolicy(timeout: .seconds(10))
        #expect(short.min == .seconds(1) && short.max == .seconds(10) && short.period == nil)
        let long = LoadableWaiter<TestLoadable<String>>.retryPolicy(timeout: .seconds(600))
        #expect(long.max == .seconds(30))
        let tiny = LoadableWaiter<TestLoadable<String>>.retryPolicy(timeout: .milliseconds(100))
        #expect(tiny.min == .milliseconds(100) && tiny.max == .milliseconds(100))
    }

    @Test("A zero timeout stops the program with a message naming timeout")
    func zeroTimeoutExits() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                _ = LoadableWaiter(TestLoadable<Int>(), timeout: .zero, clock: ManualClock())
            }
        }
        #expect(bytes(result?.standardErrorContent ?? [], contain: "timeout must be > .zero, got 0.0 seconds"))
    }
}
