import Foundation
import Loadable
import LoadableHTTP
import LoadableSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A server of Basic auth on a `LoopbackHTTPServer`: it accepts only user `ana` with its current
/// password, and refuses anything else with `401` and `WWW-Authenticate: Basic realm="x"`, as
/// every server of Basic auth does.
final class BasicAuthBackend: Sendable {
    private let password: Locked<String>
    let server: LoopbackHTTPServer

    init(password: String) throws {
        let current = Locked(password)
        self.password = current
        server = try LoopbackHTTPServer { request in
            let expected = "Basic " + Data("ana:\(current.withLock { $0 })".utf8).base64EncodedString()
            guard request.header("Authorization") == expected else {
                return .status(
                    401, headers: [.init("WWW-Authenticate", #"Basic realm="x""#)], body: Data("wrong password".utf8))
            }
            return request.path == "/api/feed" ? .json(#"{"items":[1]}"#) : .json("1")
        }
    }

    /// The `Authorization` header of each request the server received, in order.
    var authorizations: [String?] { server.requests.map { $0.header("Authorization") } }

    /// The Basic header of user `ana` with `password`.
    static func header(_ password: String) -> String {
        "Basic " + Data("ana:\(password)".utf8).base64EncodedString()
    }
}

/// `HTTPAuthorization.basic` through `URLSession` against a real server on 127.0.0.1: the header on
/// the wire, a wrong password refused with the server's challenge, and the new one accepted.
@MainActor
@Suite(.timeLimit(.minutes(5))) struct BasicAuthServerTests {
    let clock = ManualClock()
    /// What the credentials loadable reads on each sync, like a keychain the user's input updates.
    final class Keychain {
        var password: String
        private(set) var reads = 0

        init(password: String) { self.password = password }

        func credentials() -> HTTPBasicCredentials {
            reads += 1
            return HTTPBasicCredentials(user: "ana", password: password)
        }
    }

    @Test("a wrong password: the 401 stands with its challenge; after a sync of the new one the server accepts it")
    func aWrongPasswordThenTheNewOne() async throws {
        let backend = try BasicAuthBackend(password: "pässwörd")
        let keychain = Keychain(password: "old")
        let credentials = AsyncLoadable<HTTPBasicCredentials>(clock: clock) { keychain.credentials() }
        let api = HTTPService(
            baseURL: backend.server.url("/api"),
            authorization: .basic(LoadableWaiter(credentials, timeout: .seconds(30), clock: clock)))
        let feed = api.loadable(Feed.self, "feed", clock: clock)
        try await withRealTimeLimit("a sync refused with a Basic challenge") { try? await feed.synced() }
        // The renewal read the same password again: the 401 stands, with the server's challenge.
        guard let error = feed.error as? HTTPLoadableError, case .status(401, _, let body) = error else {
            Issue.record("expected .status(401), got \(String(describing: feed.error))")
            return
        }
        #expect(error.header("WWW-Authenticate") == #"Basic realm="x""#)
        #expect(body == Data("wrong password".utf8))
        #expect(backend.authorizations == [BasicAuthBackend.header("old")])
        #expect((2...3).contains(keychain.reads))
        // The user types the new password in: a sync of the credentials, nothing rebuilt.
        keychain.password = "pässwörd"
        try await withRealTimeLimit("the sync of the credentials") { try await credentials.synced(forceSync: true) }
        try await withRealTimeLimit("a sync with the new password") { try await feed.synced() }
        #expect(feed.contents == Feed(items: [1]))
        let liked = try await withRealTimeLimit("a send with the new password") {
            try await api.send(.post, "likes", as: Int.self)
        }
        #expect(liked == 1)
        #expect(
            backend.authorizations == [
                BasicAuthBackend.header("old"), BasicAuthBackend.header("pässwörd"),
                BasicAuthBackend.header("pässwörd"),
            ])
        #expect(backend.authorizations[1] == "Basic YW5hOnDDpHNzd8O2cmQ=")
    }

    @Test("a request refused with the old password is sent once more with the one the renewal reads")
    func aRefusedRequestGoesAgainWithTheRenewedPassword() async throws {
        let backend = try BasicAuthBackend(password: "pässwörd")
        // The app holds the old password; the keychain has the new one already.
        let keychain = Keychain(password: "pässwörd")
        let credentials = AsyncLoadable<HTTPBasicCredentials>(
            contents: HTTPBasicCredentials(user: "ana", password: "old"), clock: clock
        ) { keychain.credentials() }
        let api = HTTPService(
            baseURL: backend.server.url("/api"),
            authorization: .basic(LoadableWaiter(credentials, timeout: .seconds(30), clock: clock)))
        let liked = try await withRealTimeLimit("a send refused, then sent again") {
            try await api.send(.post, "likes", json: ["post": 7], as: Int.self)
        }
        #expect(liked == 1)
        #expect(backend.authorizations == [BasicAuthBackend.header("old"), BasicAuthBackend.header("pässwörd")])
        #expect(backend.server.requests.allSatisfy { $0.body == Data(#"{"post":7}"#.utf8) })
        #expect(keychain.reads == 1)
    }
}
