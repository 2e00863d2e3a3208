import Foundation
import LoadableHTTP
import LoadableSupport
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `HTTPLoadable`'s conditional requests and cancel paths against a reference model: random
/// sequences of syncs, cancels (`cancelSync()`, releasing the loadable, the `syncTimeout`
/// watchdog) and answers (200 with or without an `ETag`, 304, 500, a body that does not decode),
/// including answers to requests that were cancelled and arrive late.
///
/// The model is written from `HTTPLoadable`'s documentation: a request carries `If-None-Match`
/// with the `ETag` of the last kept 2xx (or a newer one a 304 sent) while there are contents; a
/// 2xx replaces the contents and the validators; a 304 to a conditional request succeeds keeping
/// both (taking a new `ETag` if it has one) and is an error otherwise; a late answer changes
/// nothing; `cancelSync()` restores the state and error from before the sync; the watchdog fails
/// the sync with `LoadableError.timedOut`, contents kept; a released loadable is replaced by a new
/// one, which starts empty. After every step the state, the contents, the error and the
/// `If-None-Match` of every request sent must match.
///
/// The sequences run twice: through a transport the test answers by hand, and through
/// `URLSession.shared` against a `LoopbackHTTPServer` whose answers wait on a gate each, so that
/// every cancel path meets the real transport with the answer held, written, or already read.
@Suite("HTTPLoadable's conditional requests and cancels against a reference model", .timeLimit(.minutes(5)))
@MainActor
struct HTTPLoadableModelTests {
    enum Answer: Equatable, CustomStringConvertible {
        case ok(Int, etag: String?), notModified(etag: String?), serverError, malformed

        var description: String {
            switch self {
            case .ok(let value, let etag): "200(\(value), etag: \(etag ?? "-"))"
            case .notModified(let etag): "304(etag: \(etag ?? "-"))"
            case .serverError: "500"
            case .malformed: "malformed"
            }
        }

        var status: Int {
            switch self {
            case .ok, .malformed: 200
            case .notModified: 304
            case .serverError: 500
            }
        }

        var headers: [String: String] {
            switch self {
            case .ok(_, let etag?), .notModified(let etag?): ["ETag": etag]
            case .ok, .notModified, .serverError, .malformed: [:]
            }
        }

        var body: String {
            switch self {
            case .ok(let value, _): "\(value)"
            case .malformed: "{"
            case .notModified, .serverError: ""
            }
        }
    }

    enum Operation: Equatable, CustomStringConvertible {
        /// `sync()`.
        case sync
        /// `cancelSync()`.
        case cancel
        /// Releases the loadable (which cancels its sync) and makes a new one.
        case release
        /// Moves the clock past `syncTimeout`: the watchdog ends a running sync.
        case timeOut
        /// Answers the open request at `index` (modulo the number open), if any.
        case answer(index: Int, Answer)

        var description: String {
            switch self {
            case .sync: "sync"
            case .cancel: "cancel"
            case .release: "release"
            case .timeOut: "timeOut"
            case .answer(let index, let answer): "answer(#\(index), \(answer))"
            }
        }
    }

    /// Where the requests go.
    enum Wire: String, CaseIterable, CustomTestStringConvertible {
        /// A transport the test answers by hand.
        case scripted
        /// `URLSession.shared` and a `LoopbackHTTPServer`.
        case loopback

        var testDescription: String { rawValue }
    }

    static let syncTimeout = Duration.seconds(10)

    static func errorKind(_ error: (any Error)?) -> String? {
        switch error {
        case .status(let code, _, _)? as HTTPLoadableError?: "status \(code)"
        case .decoding? as HTTPLoadableError?: "decoding"
        case .timedOut? as LoadableError?: "timed out"
        case nil: nil
        default: "unexpected: \(String(describing: error))"
        }
    }

    /// What the requests of a sequence go through, and how the test answers them.
    @MainActor
    protocol Channel {
        var transport: any HTTPTransport { get }
        var url: URL { get }
        /// The `If-None-Match` of each request received so far.
        var ifNoneMatchSent: [String?] { get }
        /// Returns once `count` requests were received.
        func waitForRequests(_ count: Int) async
        /// Sends the answer of request `index`.
        func answer(_ index: Int, with answer: Answer)
        /// Ends every request still open.
        func finish()
    }

    /// ``Wire/scripted``: a `ScriptedTransport` that answers late after a cancel.
    final class ScriptedChannel: Channel {
        let scripted = ScriptedTransport(ignoresCancellation: true)
        var transport: any HTTPTransport { scripted }
        let url = feedURL
        var ifNoneMatchSent: [String?] { scripted.requests.map { $0.value(forHTTPHeaderField: "If-None-Match") } }
        func waitForRequests(_ count: Int) async { await scripted.waitForRequests(count) }
        func answer(_ index: Int, with answer: Answer) {
            scripted.answer(index, status: answer.status, headers: answer.headers, body: answer.body)
        }
        func finish() {
            for index in scripted.requests.indices { scripted.answer(index, status: 500) }
        }
    }

    /// ``Wire/loopback``: `URLSession.shared` against a server that holds request `index` on gate
    /// `index` until the test answers it, with the answer the model gives it (computed before the
    /// run, since the server's handler must return it when the request arrives).
    final class LoopbackChannel: Channel {
        let server: LoopbackHTTPServer
        let gates: [LoopbackHTTPServer.Gate]
        var transport: any HTTPTransport { URLSession.shared }
        var url: URL { server.url("/feed") }
        var ifNoneMatchSent: [String?] { server.requests.map { $0.header("If-None-Match") } }

        init(answers: [Answer]) throws {
            let gates = answers.map { _ in LoopbackHTTPServer.Gate() }
            let responses = answers.map { answer in
                LoopbackHTTPServer.Response.status(
                    answer.status, headers: answer.headers.map { LoopbackHTTPServer.Header($0, $1) },
                    body: Data(answer.body.utf8))
            }
            let next = Locked(0)
            server = try LoopbackHTTPServer { _ in
                let index = next.withLock { index in
                    defer { index += 1 }
                    return index
                }
                guard index < gates.count else { return .status(500) }
                return .gated(gates[index], responses[index])
            }
            self.gates = gates
        }

        // A request counts once its handler chose its gate: the next one is sent after that, so
        // requests reach the handler in order.
        func waitForRequests(_ count: Int) async { await server.waitForRequests(count) }
        func answer(_ index: Int, with answer: Answer) { gates[index].open() }
        func finish() {
            for gate in gates { gate.open() }
            server.stop()
        }
    }

    static func mismatch(in operations: [Operation], wire: Wire) async -> String? {
        // The answers of the requests, as the model hands them out (500 for those never answered).
        var planned = Model()
        for operation in operations { planned.apply(operation) }
        let answers = planned.requests.indices.map { planned.answers[$0] ?? .serverError }
        let channel: any Channel
        switch wire {
        case .scripted: channel = ScriptedChannel()
        case .loopback:
            do {
                channel = try LoopbackChannel(answers: answers)
            } catch {
                return "the server did not start: \(error)"
            }
        }
        defer { channel.finish() }

        let clock = ManualClock()
        func makeLoadable() -> HTTPLoadable<Int> {
            let loadable = HTTPLoadable<Int>(
                request: URLRequest(url: channel.url), transport: channel.transport, clock: clock)
            loadable.syncTimeout = syncTimeout
            return loadable
        }
        var model = Model()
        var loadable = makeLoadable()
        for (step, operation) in operations.enumerated() {
            let sentBefore = model.requests.count
            let answered = model.apply(operation)
            switch operation {
            case .sync:
                loadable.sync()
                if model.requests.count > sentBefore { await channel.waitForRequests(model.requests.count) }
            case .cancel:
                loadable.cancelSync()
            case .release:
                loadable = makeLoadable()
            case .timeOut:
                // The watchdog's timer sleeps on the clock while a sync runs.
                if loadable.loadableState == .syncing { await settle { clock.pendingSleepCount > 0 } }
                await clock.advance(by: syncTimeout)
                await settle { loadable.loadableState != .syncing || model.state == .syncing }
            case .answer(_, let answer):
                guard let answered else { break }
                channel.answer(answered, with: answer)
                // The answer travels back to the main actor. An answer that ends the sync is
                // waited for; a late one is given a few turns (it must change nothing, whenever
                // it lands).
                if model.state != .syncing {
                    try? await loadable.doneSyncing()
                } else {
                    await settle(rounds: 50) { false }
                }
            }
            var problems: [String] = []
            if loadable.loadableState != model.state {
                problems.append("state \(loadable.loadableState) vs \(model.state)")
            }
            if loadable.contents != model.contents {
                problems.append(
                    "contents \(String(describing: loadable.contents)) vs \(String(describing: model.contents))")
            }
            let error = errorKind(loadable.error)
            if error != model.error { problems.append("error \(error ?? "nil") vs \(model.error ?? "nil")") }
            let sent = channel.ifNoneMatchSent
            let expected = model.requests.map(\.ifNoneMatch)
            if sent != expected { problems.append("If-None-Match sent \(sent) vs \(expected)") }
            if !problems.isEmpty {
                return "after step \(step) (\(operation)): " + problems.joined(separator: "; ")
            }
        }
        return nil
    }

    static func randomOperation(_ random: inout SeededRandomNumberGenerator) -> Operation {
        let tag = { (random: inout SeededRandomNumberGenerator) -> String? in
            random.next() % 4 == 0 ? nil : "e\(random.next() % 5)"
        }
        switch random.next() % 14 {
        case 0, 1, 2: return .sync
        case 3: return .cancel
        case 4: return .release
        case 5: return .timeOut
        case 6, 7, 8: return .answer(index: Int(random.next() % 4), .ok(Int(random.next() % 100), etag: tag(&random)))
        case 9, 10: return .answer(index: Int(random.next() % 4), .notModified(etag: tag(&random)))
        case 11: return .answer(index: Int(random.next() % 4), .serverError)
        default: return .answer(index: Int(random.next() % 4), .malformed)
        }
    }

    @Test(
        "random sequences of syncs, cancels by every path and (late) answers match the model", arguments: Wire.allCases)
    func randomSequences(wire: Wire) async {
        await checkRandomSequences(count: 200, baseSeed: 0x4E7A_6000) { seed in
            var random = SeededRandomNumberGenerator(seed: seed)
            return (0..<(Int(random.next() % 25) + 1)).map { _ in Self.randomOperation(&random) }
        } mismatch: {
            await Self.mismatch(in: $0, wire: wire)
        }
    }
}
