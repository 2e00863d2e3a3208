import Foundation
import LoadableHTTP
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The shared authorization of loadables and sends against a reference model: random sequences of
/// syncs of two `HTTPLoadable`s of an `HTTPService`, sends of the same service, cancels of sends,
/// revocations of every token issued so far, and answers (the server's: 200 for a token it
/// accepts, 401 for a revoked one; the token endpoint's: the next token, or the one held again),
/// in any order.
///
/// The model (`AuthorizedModel`) is written from `HTTPAuthorization`'s and `HTTPService`'s
/// documentation: every request waits for a token that is there and not stale; a 401 for the token
/// the token loadable still holds starts one refresh unless one runs, and the request waits for
/// its end; a 401 for an older token retries at once with the held one (or after the refresh that
/// runs); each request is retried once, and a second 401 fails it; a refresh that gives the
/// rejected token back is followed by one more, and when that one gives it back too the 401
/// stands (the rejected token is never sent again); a 401 during a sync of the token that the app
/// started waits for that sync, without a second one, and meanwhile the other requests wait for
/// it too instead of taking the rejected token; a cancelled send ends with
/// `CancellationError` and its request is cancelled. After every step the requests sent (path,
/// token, `Idempotency-Key`; the token endpoint's too, so every refresh counts), the outcome of
/// every send, the state and error of every loadable, whether the token syncs, and the number of
/// requests waiting for it must match. (The last also keeps a step from ending before a request
/// just started, whose task has not run yet, waits for the token: a later step would otherwise
/// find it starting, in another state of the token than the model's.)
///
/// The sequences run in each scheme (``CredentialScheme``): bearer tokens, Basic credentials
/// (`{"user":"u","password":"tN"}` from the token endpoint) and a custom scheme (`Token tN`), each
/// request matched by its scheme's header for token `N`: the rules are the same for all three.
extension HTTPLoadableModelTests {
    enum AuthorizedOperation: Equatable, CustomStringConvertible {
        /// `sync()` of loadable `index`.
        case sync(Int)
        /// A new send (a POST with a JSON body and an idempotency key), in a task of its own.
        case send
        /// Cancels the task of the running send at `index` (modulo their number), if any.
        case cancelSend(Int)
        /// The server refuses every token issued so far.
        case revoke
        /// Answers the open request at `index` (modulo the number open), if any.
        case answer(Int)
        /// The same, except that the token endpoint answers with the token held (if any) instead of
        /// a new one: the rejected token back.
        case answerWithTheSameToken(Int)
        /// The app syncs the token loadable itself (`sync()`, not an invalidation): the token held
        /// stays fresh while the new one loads.
        case syncToken

        var description: String {
            switch self {
            case .sync(let index): "sync(\(index))"
            case .send: "send"
            case .cancelSend(let index): "cancelSend(#\(index))"
            case .revoke: "revoke"
            case .answer(let index): "answer(#\(index))"
            case .answerWithTheSameToken(let index): "answerWithTheSameToken(#\(index))"
            case .syncToken: "syncToken"
            }
        }
    }

    static func outcome(of error: (any Error)?) -> String {
        switch error {
        case nil: "ok"
        case is CancellationError: "cancelled"
        default: errorKind(error) ?? "?"
        }
    }

    static func authorizedMismatch(
        in operations: [AuthorizedOperation], scheme: CredentialScheme, reached: inout Set<String>
    ) async -> String? {
        let transport = ScriptedTransport()
        let clock = ManualClock()
        let credentials = scheme.authorization(endpoint: tokenURL, transport: transport, clock: clock)
        let token = credentials.loadable
        let service = HTTPService(
            baseURL: URL(string: "http://example.test/v1")!, transport: transport,
            authorization: credentials.authorization)
        let loadables = (0..<2).map { service.loadable(Int.self, "feed/\($0)", clock: clock) }
        var sends: [Task<Void, Never>] = []
        var outcomes: [String?] = []
        var answered: Set<Int> = []
        /// The transport's request for the model's request `index`: the one not answered yet with
        /// the same path and token.
        func sentRequest(for request: AuthorizedModel.Request) -> Int? {
            transport.requests.indices.first { index in
                let sent = transport.requests[index]
                return !answered.contains(index) && sent.url?.path == request.path
                    && sent.value(forHTTPHeaderField: "Authorization") == request.authorization
            }
        }
        func observed() -> [String] {
            let requests = transport.requests.map { request in
                "\(request.url?.path ?? "?") \(request.value(forHTTPHeaderField: "Authorization") ?? "-") "
                    + (request.value(forHTTPHeaderField: "Idempotency-Key") ?? "-")
            }
            return [
                "requests \(requests.sorted())", "sends \(outcomes)",
                "loadables \(loadables.map { "\($0.loadableState) \(errorKind($0.error) ?? "-")" })",
                "token \(token.loadableState == .syncing ? "syncing" : "not syncing")",
                "waiting \(credentials.pendingWaitCount())",
            ]
        }
        func expected(_ model: AuthorizedModel) -> [String] {
            [
                "requests \(model.requests.map(\.signature).sorted())", "sends \(model.sendOutcomes)",
                "loadables \(model.loadables.map { "\($0.state) \($0.error ?? "-")" })",
                "token \(model.isRefreshing ? "syncing" : "not syncing")",
                "waiting \(model.waitingCount)",
            ]
        }

        var model = AuthorizedModel(scheme: scheme)
        defer {
            reached.formUnion(model.reached)
            for task in sends { task.cancel() }
            for index in transport.requests.indices { transport.answer(index, status: 500) }
        }
        for (step, operation) in operations.enumerated() {
            switch (operation, model.apply(operation)) {
            case (.sync(let index), _):
                loadables[index].sync()
            case (.send, .startSend(let id)?):
                outcomes.append(nil)
                sends.append(
                    Task {
                        do {
                            _ = try await service.send(
                                .post, "sends/\(id)", json: ["id": id], as: Int.self, idempotencyKey: "k\(id)")
                            outcomes[id] = "ok"
                        } catch {
                            outcomes[id] = outcome(of: error)
                        }
                    })
            case (.cancelSend, .cancelSend(let id)?):
                sends[id].cancel()
            case (.syncToken, _):
                token.sync()
            case (.answer, .answer(let request, let status, let body)?),
                (.answerWithTheSameToken, .answer(let request, let status, let body)?):
                guard let index = sentRequest(for: model.requests[request]) else {
                    return "after step \(step) (\(operation)): no open request \(model.requests[request].signature)"
                }
                answered.insert(index)
                transport.answer(index, status: status, body: body)
            case (.revoke, _), (.answer, _), (.answerWithTheSameToken, _), (.cancelSend, _), (.send, _):
                break
            }
            // Bounded: when fewer requests go out than the model expects (a retry that waits for
            // a refresh too many), the step reports the difference instead of waiting for good.
            await settle { transport.requests.count >= model.requests.count }
            var isSettled = await settle { observed() == expected(model) }
            if isSettled, step == operations.count - 1 {
                // Nothing more may happen after the last step (a second refresh, a late retry).
                _ = await settle(rounds: 20) { false }
                isSettled = observed() == expected(model)
            }
            if !isSettled {
                let differences = zip(observed(), expected(model)).filter { $0 != $1 }
                    .map { "\($0.0) vs \($0.1)" }
                if !differences.isEmpty {
                    return "after step \(step) (\(operation)): " + differences.joined(separator: "; ")
                }
            }
        }
        return nil
    }

    static func randomAuthorizedOperation(_ random: inout SeededRandomNumberGenerator) -> AuthorizedOperation {
        switch random.next() % 20 {
        case 0, 1: .sync(0)
        case 2, 3: .sync(1)
        case 4, 5, 6: .send
        case 7: .cancelSend(Int(random.next() % 4))
        case 8, 9: .revoke
        case 10, 11: .answerWithTheSameToken(Int(random.next() % 4))
        case 12: .syncToken
        default: .answer(Int(random.next() % 4))
        }
    }

    @Test(
        "random sequences of syncs and sends sharing credentials, with revocations, cancels and answers, match the model",
        arguments: CredentialScheme.allCases)
    func randomAuthorizedSequences(scheme: CredentialScheme) async {
        var reached: Set<String> = []
        // Other sequences for each scheme.
        let seedOffset = UInt64(CredentialScheme.allCases.firstIndex(of: scheme) ?? 0) * 1_000
        let passed = await checkRandomSequences(count: 200, baseSeed: 0x4E7A_7000 + seedOffset) { seed in
            var random = SeededRandomNumberGenerator(seed: seed)
            return (0..<(Int(random.next() % 30) + 1)).map { _ in Self.randomAuthorizedOperation(&random) }
        } mismatch: {
            await Self.authorizedMismatch(in: $0, scheme: scheme, reached: &reached)
        }
        guard passed else { return }
        let rules: Set = [
            "a 401", "a second 401", "a 401 during a refresh", "a 401 for an older token",
            "cancel while waitingForToken",
            "cancel while requesting", "cancel while waitingForRefresh",
            "the same token back", "the same token back twice", "a new token after the same one back",
            "a 401 during a sync the app started", "a request waits for a sync the app started after a 401",
        ]
        #expect(rules.subtracting(reached).isEmpty, "never reached: \(rules.subtracting(reached).sorted())")
    }
}
