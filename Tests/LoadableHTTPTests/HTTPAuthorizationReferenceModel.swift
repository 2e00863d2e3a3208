import Foundation
import Loadable

// The reference model that `HTTPLoadableModelTests`' authorized sequences run against, written
// from the documentation of `HTTPAuthorization` and `HTTPService` alone. Its rules are the same
// for every scheme (bearer, Basic, a custom one); only the header a token goes in differs.
extension HTTPLoadableModelTests {
    struct AuthorizedModel {
        /// Who sends API requests: a loadable's sync, or a send.
        enum Client: Hashable, Comparable, CustomStringConvertible {
            case loadable(Int), send(Int)

            var path: String {
                switch self {
                case .loadable(let index): "/v1/feed/\(index)"
                case .send(let id): "/v1/sends/\(id)"
                }
            }

            var idempotencyKey: String? {
                if case .send(let id) = self { "k\(id)" } else { nil }
            }

            var description: String {
                switch self {
                case .loadable(let index): "loadable \(index)"
                case .send(let id): "send \(id)"
                }
            }
        }

        enum Phase: Equatable {
            /// Waits for a token to send its first request.
            case waitingForToken
            /// Its request is out.
            case requesting(Int)
            /// After a 401 for token `rejected`, waits for the refresh to end to send its retry;
            /// in round 2 after a refresh that gave the rejected token back, for one more.
            case waitingForRefresh(rejected: Int, round: Int)
            /// Ended: `"ok"`, `"status 401"`, `"cancelled"`.
            case ended(String)
        }

        /// A request sent: to the token endpoint (no client), or a client's.
        struct Request: Equatable {
            let client: Client?
            /// The token number in its `Authorization`, if any.
            let token: Int?
            let attempt: Int
            /// Its `Authorization` header: token `N`'s in the scheme of the sequence.
            let authorization: String?
            var isOpen = true

            var path: String { client?.path ?? "/token" }
            /// What the test compares with the requests the transport saw.
            var signature: String {
                "\(path) \(authorization ?? "-") \(client?.idempotencyKey ?? "-")"
            }
        }

        /// What the driver does for an operation, beyond applying it to the model.
        enum Effect {
            case startSend(Int), cancelSend(Int), answer(request: Int, status: Int, body: String)
        }

        /// The scheme the credentials go in: token `N` is `tN` (a token, or the password of user
        /// `u`), sent with the scheme's `Authorization` header.
        let scheme: CredentialScheme
        /// The token the token loadable holds, by number (`t1` is 1).
        var token: Int?
        /// Whether the token loadable was invalidated after a 401 and not synced since.
        var isStale = false
        /// Whether a request to the token endpoint is out.
        var isRefreshing = false
        var issued = 0
        /// The server refuses tokens up to this number.
        var revokedThrough = 0
        var requests: [Request] = []
        var phases: [Client: Phase] = [:]
        var sendCount = 0
        /// What the sequence reached, for the test to check that its sequences cover the rules.
        var reached: Set<String> = []

        /// The state and error kind of each loadable.
        var loadables: [(state: LoadableState, error: String?)] = Array(repeating: (.idle, nil), count: 2)

        init(scheme: CredentialScheme) {
            self.scheme = scheme
        }

        var openRequests: [Int] { requests.indices.filter { requests[$0].isOpen } }
        var activeSends: [Int] {
            phases.compactMap { client, phase in
                guard case .send(let id) = client else { return nil }
                if case .ended = phase { return nil }
                return id
            }.sorted()
        }
        /// The number of requests waiting for a token: for their first, or for their retry.
        var waitingCount: Int {
            phases.values.count { phase in
                switch phase {
                case .waitingForToken, .waitingForRefresh: true
                case .requesting, .ended: false
                }
            }
        }
        /// The outcome of each send so far (`nil` while it runs).
        var sendOutcomes: [String?] {
            (0..<sendCount).map { id in
                if case .ended(let outcome)? = phases[.send(id)] { outcome } else { nil }
            }
        }

        mutating func apply(_ operation: AuthorizedOperation) -> Effect? {
            switch operation {
            case .sync(let index):
                guard !isActive(.loadable(index)) else { return nil }
                loadables[index] = (.syncing, nil)
                start(.loadable(index))
            case .send:
                let id = sendCount
                sendCount += 1
                start(.send(id))
                return .startSend(id)
            case .cancelSend(let index):
                let active = activeSends
                guard !active.isEmpty else { return nil }
                let id = active[index % active.count]
                if case .requesting(let request)? = phases[.send(id)] { requests[request].isOpen = false }
                reached.insert(
                    "cancel while \(phases[.send(id)].map { "\($0)" } ?? "?")".prefix { $0 != "(" }.description)
                phases[.send(id)] = .ended("cancelled")
                return .cancelSend(id)
            case .revoke:
                revokedThrough = issued
            case .syncToken:
                // A sync of the token loadable, not an invalidation: the token held stays fresh.
                guard !isRefreshing else { return nil }
                isRefreshing = true
                requests.append(Request(client: nil, token: nil, attempt: 1, authorization: nil))
            case .answer(let index), .answerWithTheSameToken(let index):
                let open = openRequests
                guard !open.isEmpty else { return nil }
                let request = open[index % open.count]
                requests[request].isOpen = false
                guard let client = requests[request].client else {
                    if case .answerWithTheSameToken = operation, token != nil {
                        // The token endpoint hands back the token held (which a 401 may have
                        // rejected): fresh again, the same.
                        (isStale, isRefreshing) = (false, false)
                    } else {
                        issued += 1
                        (token, isStale, isRefreshing) = (issued, false, false)
                    }
                    let body = scheme.endpointBody("t\(token ?? 0)")
                    tokenArrived()
                    return .answer(request: request, status: 200, body: body)
                }
                let sent = requests[request]
                guard let used = sent.token, used <= revokedThrough else {
                    end(client, "ok")
                    return .answer(request: request, status: 200, body: "1")
                }
                reached.insert(sent.attempt == 2 ? "a second 401" : "a 401")
                if sent.attempt == 2 {
                    end(client, "status 401")
                } else if token == used || isStale || isHeldTokenRejectedDuringRefresh {
                    // The rejected token is still the one held (or a refresh runs): one refresh,
                    // unless one runs already, and the retry waits for its end.
                    if token == used, !isRefreshing {
                        refresh()
                    } else {
                        reached.insert(isStale ? "a 401 during a refresh" : "a 401 during a sync the app started")
                    }
                    phases[client] = .waitingForRefresh(rejected: used, round: 1)
                } else {
                    reached.insert("a 401 for an older token")
                    sendRequest(client, attempt: 2)
                }
                return .answer(request: request, status: 401, body: "")
            }
            return nil
        }

        private func isActive(_ client: Client) -> Bool {
            switch phases[client] {
            case nil, .ended?: false
            case .waitingForToken?, .requesting?, .waitingForRefresh?: true
            }
        }

        /// Whether a sync of the token runs while a request that the held token was refused for waits
        /// for its end: then every request waits for that end (the waiter's wait after a sync), even
        /// when the held token is not stale (a sync the app started).
        private var isHeldTokenRejectedDuringRefresh: Bool {
            isRefreshing
                && phases.values.contains { phase in
                    if case .waitingForRefresh(let rejected, _) = phase { rejected == token } else { false }
                }
        }

        private mutating func start(_ client: Client) {
            if token != nil, !isStale, !isHeldTokenRejectedDuringRefresh {
                sendRequest(client, attempt: 1)
            } else {
                if token != nil, !isStale { reached.insert("a request waits for a sync the app started after a 401") }
                phases[client] = .waitingForToken
                if !isRefreshing { refresh() }
            }
        }

        private mutating func refresh() {
            if token != nil { isStale = true }
            isRefreshing = true
            requests.append(Request(client: nil, token: nil, attempt: 1, authorization: nil))
        }

        /// A refresh ended with `token`. A request waiting for a token sends it; a retry goes with
        /// it unless it is the rejected token: then, after the first refresh, one more refresh
        /// (unless one runs) and the retry waits for its end; after the second, the 401 stands.
        private mutating func tokenArrived() {
            for (client, phase) in phases.sorted(by: { $0.key < $1.key }) {
                switch phase {
                case .waitingForToken:
                    sendRequest(client, attempt: 1)
                case .waitingForRefresh(let rejected, let round) where token != rejected:
                    if round == 2 { reached.insert("a new token after the same one back") }
                    sendRequest(client, attempt: 2)
                case .waitingForRefresh(let rejected, 1):
                    reached.insert("the same token back")
                    if !isRefreshing { refresh() }
                    phases[client] = .waitingForRefresh(rejected: rejected, round: 2)
                case .waitingForRefresh:
                    reached.insert("the same token back twice")
                    end(client, "status 401")
                case .requesting, .ended:
                    break
                }
            }
        }

        private mutating func sendRequest(_ client: Client, attempt: Int) {
            requests.append(
                Request(
                    client: client, token: token, attempt: attempt,
                    authorization: token.map { scheme.header("t\($0)") }))
            phases[client] = .requesting(requests.count - 1)
        }

        private mutating func end(_ client: Client, _ outcome: String) {
            phases[client] = .ended(outcome)
            if case .loadable(let index) = client {
                loadables[index] = outcome == "ok" ? (.didSyncSuccessfully, nil) : (.didFailToSync, outcome)
            }
        }
    }
}
