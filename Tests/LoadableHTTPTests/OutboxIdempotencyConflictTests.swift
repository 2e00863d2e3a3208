import Foundation
import LoadableCaching
import LoadableHTTP
import LoadableSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A word added to the server's list.
private struct AddWord: Codable, Sendable, Equatable {
    var word: String
}

/// A server that honours `Idempotency-Key` as the IETF draft says: the first `POST /words` with a
/// key starts applying it and answers `409` (still processing); a repeat with the same key gets the
/// finished answer, `204`, and applies nothing again.
private final class ProcessingWordServer: Sendable {
    private struct State {
        var words = ["x"]
        var keys: [String] = []
    }

    private let state = Locked(State())

    var words: [String] { state.withLock { $0.words } }
    /// The key of each `POST`, in order.
    var keys: [String] { state.withLock { $0.keys } }

    func handle(_ request: LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Response {
        state.withLock { state in
            guard request.method == "POST", let key = request.header("Idempotency-Key"),
                let added = try? JSONDecoder().decode(AddWord.self, from: request.body)
            else { return .status(400) }
            let isFirst = !state.keys.contains(key)
            state.keys.append(key)
            guard isFirst else { return .status(204) }
            state.words.append(added.word)
            return .status(409, body: Data("a request with this key is being processed".utf8))
        }
    }
}

/// One row of the default rule's truth table for HTTP errors.
struct OutboxHTTPRetryCase: Sendable, CustomStringConvertible {
    let code: Int
    let headers: [String: String]
    let isRetryable: Bool
    let retried: Bool

    var error: HTTPLoadableError { .status(code: code, headers: headers, bodyPrefix: Data()) }
    var description: String { "\(code) \(headers)" }
}

/// The outbox's default retry rule with HTTP errors: a `409` to a keyed write means "still
/// processing", which a retry with the same key resolves.
@MainActor
@Suite(.timeLimit(.minutes(5))) final class OutboxIdempotencyConflictTests {
    let session: URLSession

    init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 300
        session = URLSession(configuration: configuration)
    }

    deinit {
        session.invalidateAndCancel()
    }

    @Test(
        "retriesByDefault: a 409 without Retry-After is retried though not isRetryable; a 412 fails",
        arguments: [
            OutboxHTTPRetryCase(code: 409, headers: [:], isRetryable: false, retried: true),
            OutboxHTTPRetryCase(code: 409, headers: ["Retry-After": "3"], isRetryable: true, retried: true),
            OutboxHTTPRetryCase(code: 412, headers: [:], isRetryable: false, retried: false),
            OutboxHTTPRetryCase(code: 404, headers: [:], isRetryable: false, retried: false),
            OutboxHTTPRetryCase(code: 503, headers: [:], isRetryable: true, retried: true),
        ])
    func defaultRuleForStatuses(_ row: OutboxHTTPRetryCase) {
        #expect(row.error.isRetryable == row.isRetryable)
        #expect(LoadableOutbox<AddWord>.retriesByDefault(row.error) == row.retried)
    }

    @Test("retriesByDefault retries a transport failure")
    func defaultRuleForTransport() {
        #expect(LoadableOutbox<AddWord>.retriesByDefault(HTTPLoadableError.transport(URLError(.timedOut))))
    }

    @Test("a 409 'still processing' is retried after the backoff with the same key; the change is applied once")
    func stillProcessingIsRetriedWithTheSameKey() async throws {
        let words = ProcessingWordServer()
        let server = try LoopbackHTTPServer { words.handle($0) }
        let service = HTTPService(baseURL: server.url("/"), transport: session)
        let clock = ManualClock()
        let outbox = LoadableOutbox<AddWord>(
            cache: InMemoryLoadableCache(), activity: ActivityMonitor(),
            retryPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(8), multiplier: 2), clock: clock
        ) { change, idempotencyKey in
            try await service.send(.post, "words", json: change, idempotencyKey: idempotencyKey)
        }
        await outbox.restored()
        outbox.enqueue(AddWord(word: "a"))
        #expect(await settle(rounds: 20_000) { outbox.items.first?.lastError != nil })
        let error = outbox.items.first?.lastError as? HTTPLoadableError
        guard case .status(409, _, _)? = error else {
            Issue.record("expected a 409, got \(String(describing: outbox.items.first?.lastError))")
            server.stop()
            return
        }
        #expect(error?.isRetryable == false)
        guard outbox.items.first?.state == .pending else {
            let state = String(describing: outbox.items.first?.state)
            Issue.record("a 409 to a keyed write must be retried; the item is \(state)")
            server.stop()
            return
        }
        await clock.waitForSleepers()  // the retry timer is armed
        #expect(clock.requestedSleeps.last == .seconds(1))
        await clock.advance(by: .milliseconds(999))
        #expect(outbox.items.first?.state == .pending, "not before the backoff")
        #expect(!outbox.isSending)
        await clock.advance(by: .milliseconds(1))
        #expect(await settle(rounds: 20_000) { outbox.items.isEmpty })
        #expect(words.keys.count == 2)
        #expect(Set(words.keys).count == 1, "the same Idempotency-Key")
        #expect(words.words == ["x", "a"], "applied once")
        server.stop()
    }
}
