import Foundation
import LoadableHTTP
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `HTTPLoadable`'s conditional requests against a reference model: random sequences of syncs,
/// cancels and answers (200 with or without an `ETag`, 304, 500, a body that does not decode),
/// including answers to requests that were cancelled and arrive late.
///
/// The model is written from `HTTPLoadable`'s documentation: a request carries `If-None-Match`
/// with the `ETag` of the last kept 2xx (or a newer one a 304 sent) while there are contents; a
/// 2xx replaces the contents and the validators; a 304 to a conditional request succeeds keeping
/// both (taking a new `ETag` if it has one) and is an error otherwise; a late answer changes
/// nothing; `cancelSync()` restores the state and error from before the sync. After every step
/// the state, the contents, the error and the `If-None-Match` of every request sent must match.
@Suite("HTTPLoadable's conditional requests against a reference model", .timeLimit(.minutes(5)))
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
    }

    enum Operation: Equatable, CustomStringConvertible {
        /// `sync()`.
        case sync
        /// `cancelSync()`.
        case cancel
        /// Answers the open request at `index` (modulo the number open), if any.
        case answer(index: Int, Answer)

        var description: String {
            switch self {
            case .sync: "sync"
            case .cancel: "cancel"
            case .answer(let index, let answer): "answer(#\(index), \(answer))"
            }
        }
    }

    struct Model {
        struct Request {
            let ifNoneMatch: String?
            var isCurrent: Bool
        }

        var state = LoadableState.idle
        var contents: Int?
        var error: String?
        var etag: String?
        var requests: [Request] = []
        /// Requests not answered yet, by index into `requests`.
        var open: [Int] = []
        var before: (state: LoadableState, error: String?) = (.idle, nil)

        mutating func apply(_ operation: Operation) {
            switch operation {
            case .sync:
                guard state != .syncing else { return }
                before = (state, error)
                state = .syncing
                error = nil
                requests.append(Request(ifNoneMatch: contents == nil ? nil : etag, isCurrent: true))
                open.append(requests.count - 1)
            case .cancel:
                guard state == .syncing else { return }
                (state, error) = before
                for index in requests.indices { requests[index].isCurrent = false }
            case .answer(let index, let answer):
                guard !open.isEmpty else { return }
                let request = open.remove(at: index % open.count)
                guard requests[request].isCurrent else { return }
                requests[request].isCurrent = false
                switch answer {
                case .ok(let value, let newTag):
                    (state, contents, error, etag) = (.didSyncSuccessfully, value, nil, newTag)
                case .notModified(let newTag) where requests[request].ifNoneMatch != nil:
                    state = .didSyncSuccessfully
                    if let newTag { etag = newTag }
                case .notModified:
                    (state, error) = (.didFailToSync, "status 304")
                case .serverError:
                    (state, error) = (.didFailToSync, "status 500")
                case .malformed:
                    (state, error) = (.didFailToSync, "decoding")
                }
            }
        }
    }

    static func errorKind(_ error: (any Error)?) -> String? {
        switch error as? HTTPLoadableError {
        case .status(let code, _, _)?: "status \(code)"
        case .decoding?: "decoding"
        case nil: error.map { "other: \($0)" }
        default: "unexpected: \(String(describing: error))"
        }
    }

    static func mismatch(in operations: [Operation]) async -> String? {
        var model = Model()
        let transport = ScriptedTransport(ignoresCancellation: true)
        let loadable = HTTPLoadable<Int>(request: URLRequest(url: feedURL), transport: transport)
        var open: [Int] = []
        for (step, operation) in operations.enumerated() {
            model.apply(operation)
            switch operation {
            case .sync:
                let sent = transport.requests.count
                loadable.sync()
                if loadable.loadableState == .syncing, sent < model.requests.count {
                    await transport.waitForRequests(sent + 1)
                    open.append(sent)
                }
            case .cancel:
                loadable.cancelSync()
            case .answer(let index, let answer):
                guard !open.isEmpty else { break }
                let request = open.remove(at: index % open.count)
                switch answer {
                case .ok(let value, let etag):
                    transport.answer(request, headers: etag.map { ["ETag": $0] } ?? [:], body: "\(value)")
                case .notModified(let etag):
                    transport.answer(request, status: 304, headers: etag.map { ["ETag": $0] } ?? [:])
                case .serverError: transport.answer(request, status: 500)
                case .malformed: transport.answer(request, body: "{")
                }
                // The answer travels through the exchange task and back to the main actor. An
                // answer that ends the sync is waited for; a late one is given a few turns (it
                // must change nothing, whenever it lands).
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
            let sent = transport.requests.map { $0.value(forHTTPHeaderField: "If-None-Match") }
            let expected = model.requests.map(\.ifNoneMatch)
            if sent != expected { problems.append("If-None-Match sent \(sent) vs \(expected)") }
            if !problems.isEmpty {
                for index in open { transport.answer(index, status: 500) }
                return "after step \(step) (\(operation)): " + problems.joined(separator: "; ")
            }
        }
        for index in open { transport.answer(index, status: 500) }
        return nil
    }

    static func randomOperation(_ random: inout SeededRandomNumberGenerator) -> Operation {
        let tag = { (random: inout SeededRandomNumberGenerator) -> String? in
            random.next() % 4 == 0 ? nil : "e\(random.next() % 5)"
        }
        switch random.next() % 12 {
        case 0, 1, 2: return .sync
        case 3: return .cancel
        case 4, 5, 6: return .answer(index: Int(random.next() % 4), .ok(Int(random.next() % 100), etag: tag(&random)))
        case 7, 8: return .answer(index: Int(random.next() % 4), .notModified(etag: tag(&random)))
        case 9: return .answer(index: Int(random.next() % 4), .serverError)
        default: return .answer(index: Int(random.next() % 4), .malformed)
        }
    }

    @Test("200 random sequences of syncs, cancels and (late) answers match the model")
    func randomSequences() async {
        await checkRandomSequences(count: 200, baseSeed: 0x4E7A_6000) { seed in
            var random = SeededRandomNumberGenerator(seed: seed)
            return (0..<(Int(random.next() % 25) + 1)).map { _ in Self.randomOperation(&random) }
        } mismatch: {
            await Self.mismatch(in: $0)
        }
    }
}
