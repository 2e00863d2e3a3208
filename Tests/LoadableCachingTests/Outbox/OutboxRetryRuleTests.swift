import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// An error a plain request must not repeat, but a write with an idempotency key may (as an HTTP
/// `409` "still processing" to a keyed request).
private struct StillProcessing: RetryAfterProviding {
    var retryAfter: Duration? { nil }
    var isRetryable: Bool { false }
    var isRetryableWithIdempotencyKey: Bool { true }
}

/// An error a plain request may repeat, but a keyed write must not.
private struct NotForWrites: RetryAfterProviding {
    var retryAfter: Duration? { nil }
    var isRetryableWithIdempotencyKey: Bool { false }
}

/// One row of the default rule's truth table.
struct OutboxRetryCase: Sendable, CustomStringConvertible {
    let error: any Error
    let retried: Bool
    var description: String { "\(type(of: error)) → \(retried ? "retried" : "failed")" }
}

/// `shouldRetry`: which thrown errors keep an item pending, and which fail it.
@Suite("Outbox: retry rules")
@MainActor
struct OutboxRetryRuleTests {
    @Test(
        "retriesByDefault: isRetryableWithIdempotencyKey, or a URLError",
        arguments: [
            OutboxRetryCase(error: Busy(retryAfter: nil), retried: true),
            OutboxRetryCase(error: Refused(), retried: false),
            OutboxRetryCase(error: StillProcessing(), retried: true),
            OutboxRetryCase(error: NotForWrites(), retried: false),
            OutboxRetryCase(error: URLError(.timedOut), retried: true),
            OutboxRetryCase(error: TestError("other"), retried: false),
            OutboxRetryCase(error: CancellationError(), retried: false),
        ])
    func defaultRule(_ row: OutboxRetryCase) {
        #expect(LoadableOutbox<Append>.retriesByDefault(row.error) == row.retried)
    }

    @Test("an outbox made without a rule follows the default: retried items stay pending, others fail")
    func outboxUsesTheDefaultRule() async {
        let clock = ManualClock()
        let server = OutcomeServer()
        let outbox = makeOutcomeOutbox(cache: InMemoryLoadableCache(), server: server, clock: clock)
        await outbox.restored()
        for word in ["a", "b", "c"] { outbox.enqueue(Append(word: word), scope: word) }
        await server.fail("a", with: StillProcessing())
        await server.fail("b", with: URLError(.networkConnectionLost))
        await server.fail("c", with: Refused())
        #expect(outbox.items.map(\.state) == [.pending, .pending, .failed])
        await waitForTimer(on: clock, sleeping: .seconds(1))
        await clock.advance(by: .seconds(1))
        await yield(until: { server.running == ["a", "b"] })
        await server.answer("a")
        await server.answer("b")
        #expect(outbox.items.map(\.change.word) == ["c"])
    }

    @Test("a custom shouldRetry overrides the default, given to the init or set later")
    func customRuleOverrides() async {
        let clock = ManualClock()
        let server = OutcomeServer()
        let outbox = makeOutcomeOutbox(
            cache: InMemoryLoadableCache(), server: server, clock: clock, shouldRetry: { $0 is Refused })
        await outbox.restored()
        outbox.enqueue(Append(word: "a"), scope: "a")
        outbox.enqueue(Append(word: "b"), scope: "b")
        await server.fail("a", with: Refused())
        await server.fail("b", with: Busy(retryAfter: nil))
        #expect(outbox.items.map(\.state) == [.pending, .failed])
        #expect(outbox.items.first?.lastError is Refused)
        outbox.shouldRetry = { _ in false }
        await waitForTimer(on: clock, sleeping: .seconds(1))
        await clock.advance(by: .seconds(1))
        await server.fail("a", with: URLError(.timedOut))
        #expect(outbox.items.map(\.state) == [.failed, .failed], "the rule set later applies")
        #expect(outbox.items.map(\.attempts) == [2, 1])
        await clock.run()
        #expect(server.sentWords == ["a", "b", "a"])
    }
}
