import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// What a relaunch keeps of a failure: the error's type name and description, and the moment
/// before which the failing scope sends nothing.
@Suite("Outbox: failures across a relaunch")
@MainActor
struct OutboxRelaunchRetryTests {
    @Test("lastError comes back as OutboxRestoredError with the type's name and the description")
    func lastErrorKeepsItsTypeName() async {
        let cache = InMemoryLoadableCache()
        let server = OutcomeServer()
        var outbox: LoadableOutbox<Append>! = makeOutcomeOutbox(cache: cache, server: server, clock: ManualClock())
        await outbox.restored()
        let errors: [any Error] = [Refused(), Busy(retryAfter: .seconds(5)), TestError("refused", code: 7)]
        for (index, error) in errors.enumerated() {
            let word = "w\(index)"
            outbox.enqueue(Append(word: word), scope: word)
            await server.fail(word, with: error)
        }
        #expect(outbox.items.map(\.state) == [.failed, .pending, .failed])
        await outbox.saved()
        outbox = nil

        let relaunched = makeOutcomeOutbox(
            cache: cache, server: OutcomeServer(), activity: ActivityMonitor(connectivity: .offline),
            clock: ManualClock())
        await relaunched.restored()
        let restored = relaunched.items.map { $0.lastError as? OutboxRestoredError }
        #expect(restored.map { $0?.typeName } == errors.map { String(reflecting: type(of: $0)) })
        #expect(restored.map { $0?.description } == errors.map { "\($0)" })
        #expect(restored.first??.typeName == "LoadableCachingTests.Refused")
        #expect(relaunched.items.map(\.attempts) == [1, 1, 1])
    }

    @Test("a Retry-After survives a relaunch: the scope sends nothing before the kept moment, whatever resumes")
    func retryAfterSurvivesARelaunch() async {
        let wall = PersistenceWallClock()
        let cache = InMemoryLoadableCache()
        let server = OutcomeServer()
        var outbox: LoadableOutbox<Append>! = makeOutcomeOutbox(
            cache: cache, server: server, clock: ManualClock(), now: wall.function)
        await outbox.restored()
        outbox.enqueue(Append(word: "a"), scope: "s")
        await server.fail("a", with: Busy(retryAfter: .seconds(120)))
        let key = outbox.items.first?.idempotencyKey
        await outbox.saved()
        outbox = nil

        wall.advance(by: 30)  // closed for 30 s: 90 s are left
        let activity = ActivityMonitor()
        let clock = ManualClock()
        let second = OutcomeServer()
        let relaunched = makeOutcomeOutbox(
            cache: cache, server: second, activity: activity, clock: clock, now: wall.function)
        await relaunched.restored()
        relaunched.enqueue(Append(word: "t"), scope: "t")
        await second.answer("t")  // another scope is not held
        relaunched.enqueue(Append(word: "s2"), scope: "s")
        activity.connectivity = .offline
        activity.connectivity = .online
        activity.isActive = false
        activity.isActive = true
        await settleOutbox()
        #expect(second.sentWords == ["t"], "neither an enqueue into the scope nor a resume lifts it")
        await waitForTimer(on: clock, sleeping: .seconds(90))
        await clock.advance(by: .seconds(89))
        #expect(second.sentWords == ["t"])
        await clock.advance(by: .seconds(1))
        await yield(until: { second.running == ["a"] })
        #expect(second.calls.last?.idempotencyKey == key)
        await second.answer("a")
        await second.answer("s2")
        #expect(relaunched.items.isEmpty)
    }

    @Test("a kept moment that passed while the app was closed holds nothing")
    func passedMomentHoldsNothing() async {
        let wall = PersistenceWallClock()
        let cache = InMemoryLoadableCache()
        let server = OutcomeServer()
        var outbox: LoadableOutbox<Append>! = makeOutcomeOutbox(
            cache: cache, server: server, clock: ManualClock(), now: wall.function)
        await outbox.restored()
        outbox.enqueue(Append(word: "a"), scope: "s")
        await server.fail("a", with: Busy(retryAfter: .seconds(120)))
        await outbox.saved()
        outbox = nil

        wall.advance(by: 121)
        let second = OutcomeServer()
        let relaunched = makeOutcomeOutbox(cache: cache, server: second, clock: ManualClock(), now: wall.function)
        await relaunched.restored()
        await yield(until: { second.running == ["a"] })
        await second.answer("a")
        #expect(relaunched.items.isEmpty)
    }

    @Test("the backoff's deadline survives a relaunch too")
    func backoffSurvivesARelaunch() async {
        let wall = PersistenceWallClock()
        let cache = InMemoryLoadableCache()
        let server = OutcomeServer()
        let policy = BackoffTimeoutPolicy(min: .seconds(100), max: .seconds(400), multiplier: 2)
        var outbox: LoadableOutbox<Append>! = makeOutcomeOutbox(
            cache: cache, server: server, clock: ManualClock(), retryPolicy: policy, now: wall.function)
        await outbox.restored()
        outbox.enqueue(Append(word: "a"))
        await server.fail("a", with: URLError(.timedOut))
        await outbox.saved()
        outbox = nil

        wall.advance(by: 40)
        let clock = ManualClock()
        let second = OutcomeServer()
        let relaunched = makeOutcomeOutbox(
            cache: cache, server: second, clock: clock, retryPolicy: policy, now: wall.function)
        await relaunched.restored()
        await waitForTimer(on: clock, sleeping: .seconds(60))
        await clock.advance(by: .seconds(59))
        #expect(second.calls.isEmpty)
        await clock.advance(by: .seconds(1))
        await yield(until: { second.running == ["a"] })
        await second.answer("a")
    }

    @Test("an answer after a retry forgets the scope's hold: a conflict does not hold its scope after a relaunch")
    func conflictAfterARetryHoldsNothingAfterARelaunch() async {
        let wall = PersistenceWallClock()
        let cache = InMemoryLoadableCache()
        let activity = ActivityMonitor()
        let server = OutcomeServer()
        let policy = BackoffTimeoutPolicy(min: .seconds(60), max: .seconds(60), multiplier: 2)
        var outbox: LoadableOutbox<Append>! = makeOutcomeOutbox(
            cache: cache, server: server, activity: activity, clock: ManualClock(), retryPolicy: policy,
            now: wall.function)
        await outbox.restored()
        outbox.enqueue(Append(word: "a"), scope: "s")
        await server.fail("a", with: URLError(.timedOut))
        activity.connectivity = .offline
        activity.connectivity = .online  // a resume retries at once
        await server.answer("a", .conflict(remote: nil))
        activity.connectivity = .offline
        outbox.enqueue(Append(word: "b"), scope: "s")
        await outbox.saved()
        outbox = nil

        wall.advance(by: 5)
        activity.connectivity = .online
        let second = OutcomeServer()
        let relaunched = makeOutcomeOutbox(
            cache: cache, server: second, activity: activity, clock: ManualClock(), retryPolicy: policy,
            now: wall.function)
        await relaunched.restored()
        await yield(until: { second.running == ["b"] })
        await second.answer("b")
        #expect(relaunched.items.map(\.state) == [.conflict])
    }
}
