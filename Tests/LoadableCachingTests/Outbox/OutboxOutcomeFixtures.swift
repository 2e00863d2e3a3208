import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// The other end of an outbox whose `send` says what the server did (``OutboxOutcome``): records
/// each send, and ends each one when the test answers it, by its word, since scopes send in
/// parallel.
@MainActor
final class OutcomeServer {
    /// What ends a send: an outcome, or an error to throw.
    typealias Answer = Result<OutboxOutcome<Append>, any Error>

    struct Call: Equatable {
        let change: Append
        let idempotencyKey: String
    }

    /// Every send that began, in order.
    private(set) var calls: [Call] = []
    private var waiting: [(word: String, continuation: CheckedContinuation<Answer, Never>)] = []

    /// The words of the sends running (a discarded item's included), oldest first.
    var running: [String] { waiting.map(\.word) }

    /// The words sent, in order.
    var sentWords: [String] { calls.map(\.change.word) }

    /// What the outbox's `send` calls.
    func send(_ change: Append, _ idempotencyKey: String) async throws -> OutboxOutcome<Append> {
        calls.append(Call(change: change, idempotencyKey: idempotencyKey))
        return try await withCheckedContinuation { waiting.append((change.word, $0)) }.get()
    }

    /// Ends the oldest running send of `word` with `outcome`, then lets the outbox react; records
    /// an issue when no send of `word` starts.
    func answer(
        _ word: String, _ outcome: OutboxOutcome<Append> = .applied,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        await end(word, with: .success(outcome), sourceLocation: sourceLocation)
    }

    /// Ends the oldest running send of `word` by throwing `error`, then lets the outbox react.
    func fail(_ word: String, with error: any Error, sourceLocation: SourceLocation = #_sourceLocation) async {
        await end(word, with: .failure(error), sourceLocation: sourceLocation)
    }

    private func end(_ word: String, with result: Answer, sourceLocation: SourceLocation) async {
        await yield(until: { self.running.contains(word) }, sourceLocation: sourceLocation)
        guard let index = waiting.firstIndex(where: { $0.word == word }) else { return }
        waiting.remove(at: index).continuation.resume(returning: result)
        await settleOutbox()
    }
}

/// An outbox on `cache` whose sends go to `server` (outcomes), with a retry policy of 1, 2, 4…
/// seconds unless told otherwise; `maxConcurrentSends` `nil` leaves the init's default.
@MainActor
func makeOutcomeOutbox(
    cache: any LoadableCache,
    server: OutcomeServer,
    activity: ActivityMonitor = ActivityMonitor(),
    clock: ManualClock,
    key: String = "outbox",
    rebase: (@MainActor (inout Append, Append) -> Void)? = nil,
    coalesce: (@MainActor (Append, Append) -> Append?)? = nil,
    maxConcurrentSends: Int? = nil,
    shouldRetry: (@MainActor (any Error) -> Bool)? = nil,
    retryPolicy: any TimeoutPolicy = BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(64), multiplier: 2),
    now: @escaping @Sendable () -> Date = { Date.now }
) -> LoadableOutbox<Append> {
    let send: @MainActor (Append, String) async throws -> OutboxOutcome<Append> = { [server] change, key in
        try await server.send(change, key)
    }
    guard let maxConcurrentSends else {
        return LoadableOutbox(
            cache: cache, rebase: rebase, coalesce: coalesce, shouldRetry: shouldRetry, key: key, activity: activity,
            retryPolicy: retryPolicy, clock: clock, now: now, send: send)
    }
    return LoadableOutbox(
        cache: cache, rebase: rebase, coalesce: coalesce, maxConcurrentSends: maxConcurrentSends,
        shouldRetry: shouldRetry, key: key, activity: activity, retryPolicy: retryPolicy, clock: clock, now: now,
        send: send)
}

/// Appends the change's word to a list; a change whose word starts with "other:" does not
/// concern the list.
@MainActor
func appendingWord(_ words: inout [String], _ change: Append) -> Bool {
    guard !change.word.hasPrefix("other:") else { return false }
    words.append(change.word)
    return true
}

/// Gives the outbox's tasks turns until its retry timer sleeps on `clock` for `delay` (a sleep for
/// a relative delay that starts after the clock moved would fall due late); records an issue when
/// it does not. Never sleeps.
@MainActor
func waitForTimer(
    on clock: ManualClock, sleeping delay: Duration, sourceLocation: SourceLocation = #_sourceLocation
) async {
    let armed = await settle { clock.pendingSleepCount == 1 && clock.requestedSleeps.last == delay }
    #expect(
        armed, "the outbox's timer did not sleep for \(delay): \(clock.requestedSleeps)",
        sourceLocation: sourceLocation)
}
