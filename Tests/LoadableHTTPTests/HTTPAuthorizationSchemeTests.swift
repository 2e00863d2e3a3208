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

/// The schemes an `HTTPAuthorization` sends credentials in, for the tests that run over each: the
/// secret of credentials `N` is `tN` (a token, or the password of user `u`).
enum CredentialScheme: String, CaseIterable, CustomTestStringConvertible, Sendable {
    /// `.bearer(waiter)`: `Authorization: Bearer tN`.
    case bearer
    /// `.basic(waiter)` over `HTTPBasicCredentials(user: "u", password: "tN")`:
    /// `Authorization: Basic <base64 of u:tN>`.
    case basic
    /// `.scheme("Token", waiter) { $0 }`: `Authorization: Token tN`.
    case token

    var testDescription: String { rawValue }

    /// The `Authorization` header of the credentials whose secret is `secret`.
    func header(_ secret: String) -> String {
        switch self {
        case .bearer: "Bearer \(secret)"
        case .basic: "Basic " + Data("u:\(secret)".utf8).base64EncodedString()
        case .token: "Token \(secret)"
        }
    }

    /// What a credentials endpoint answers for the credentials whose secret is `secret`: a JSON
    /// string, or Basic credentials as JSON.
    func endpointBody(_ secret: String) -> String {
        switch self {
        case .bearer, .token: "\"\(secret)\""
        case .basic: #"{"user":"u","password":"\#(secret)"}"#
        }
    }

    /// An authorization whose credentials loadable is an `HTTPLoadable` of a credentials
    /// endpoint, and what a test reads of it.
    @MainActor
    struct EndpointCredentials {
        let authorization: HTTPAuthorization
        /// The credentials loadable.
        let loadable: any SyncableLoadable
        /// The number of requests waiting in the waiter.
        let pendingWaitCount: @MainActor () -> Int
    }

    /// An authorization whose credentials an `HTTPLoadable` of `endpoint` loads through
    /// `transport` (see ``endpointBody(_:)``), with a waiter on `clock`.
    @MainActor
    func authorization(endpoint: URL, transport: any HTTPTransport, clock: ManualClock) -> EndpointCredentials {
        func make<Contents>(
            _ type: Contents.Type, _ authorize: (LoadableWaiter<HTTPLoadable<Contents>>) -> HTTPAuthorization
        ) -> EndpointCredentials {
            let loadable = HTTPLoadable<Contents>(
                request: URLRequest(url: endpoint), transport: transport, clock: clock)
            let waiter = LoadableWaiter(loadable, timeout: .seconds(30), clock: clock)
            return EndpointCredentials(
                authorization: authorize(waiter), loadable: loadable, pendingWaitCount: { waiter.pendingWaitCount })
        }
        switch self {
        case .bearer: return make(String.self) { .bearer($0) }
        case .basic: return make(HTTPBasicCredentials.self) { .basic($0) }
        case .token: return make(String.self) { .scheme("Token", $0) { $0 } }
        }
    }

    /// An authorization whose credentials loadable (an `AsyncLoadable`) asks `issuer` for each
    /// secret, with a waiter on `clock`.
    @MainActor
    func authorization(issuer: TokenIssuer, clock: ManualClock) -> (HTTPAuthorization, any SyncableLoadable) {
        switch self {
        case .bearer:
            let token = AsyncLoadable<String> { await issuer.next() }
            return (.bearer(LoadableWaiter(token, timeout: .seconds(10), clock: clock)), token)
        case .basic:
            let credentials = AsyncLoadable<HTTPBasicCredentials> {
                HTTPBasicCredentials(user: "u", password: await issuer.next())
            }
            return (.basic(LoadableWaiter(credentials, timeout: .seconds(10), clock: clock)), credentials)
        case .token:
            let token = AsyncLoadable<String> { await issuer.next() }
            return (.scheme("Token", LoadableWaiter(token, timeout: .seconds(10), clock: clock)) { $0 }, token)
        }
    }
}

/// Credentials that a header cannot carry, in each scheme.
enum UnsendableCredentials: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case basicUserWithColon
    case basicUserWithTab
    case basicPasswordWithLineBreak
    case basicPasswordWithDelete
    case schemeCredentialWithNonASCII
    case schemeCredentialEmpty
    case schemeCredentialWithLeadingSpace
    case schemeCredentialWithTrailingSpace
    case schemeCredentialWithLineBreak
    case bearerTokenEmpty
    case bearerTokenWithLeadingSpace

    var testDescription: String { rawValue }

    /// An authorization whose credentials loadable loads these credentials.
    @MainActor
    func authorization(clock: ManualClock) -> HTTPAuthorization {
        func basic(_ user: String, _ password: String) -> HTTPAuthorization {
            let credentials = AsyncLoadable<HTTPBasicCredentials> {
                HTTPBasicCredentials(user: user, password: password)
            }
            return .basic(LoadableWaiter(credentials, timeout: .seconds(10), clock: clock))
        }
        func scheme(_ credential: String) -> HTTPAuthorization {
            let token = AsyncLoadable<String> { credential }
            return .scheme("ApiKey", LoadableWaiter(token, timeout: .seconds(10), clock: clock)) { $0 }
        }
        func bearer(_ token: String) -> HTTPAuthorization {
            .bearer(LoadableWaiter(AsyncLoadable<String> { token }, timeout: .seconds(10), clock: clock))
        }
        switch self {
        case .basicUserWithColon: return basic("ana:admin", "secret")
        case .basicUserWithTab: return basic("ana\t", "secret")
        case .basicPasswordWithLineBreak: return basic("ana", "secret\r\nX-Injected: 1")
        case .basicPasswordWithDelete: return basic("ana", "sec\u{7F}ret")
        case .schemeCredentialWithNonASCII: return scheme("kéy")
        case .schemeCredentialEmpty: return scheme("")
        case .schemeCredentialWithLeadingSpace: return scheme(" key")
        case .schemeCredentialWithTrailingSpace: return scheme("key ")
        case .schemeCredentialWithLineBreak: return scheme("key\r\nX-Injected: 1")
        case .bearerTokenEmpty: return bearer("")
        case .bearerTokenWithLeadingSpace: return bearer(" t1")
        }
    }
}

/// A credentials loadable whose sync asks the user for a new password: it stays syncing until the
/// test answers with `setDidSyncSuccessfully(_:)`.
@MainActor
final class PasswordPrompt: Loadable<HTTPBasicCredentials> {
    private(set) var promptCount = 0

    override func doSync() { promptCount += 1 }
}

/// `HTTPAuthorization.basic` and `.scheme`: the header on the wire, the 401 rules they share with
/// the bearer's, and credentials a header cannot carry, through a transport the test answers by
/// hand.
@MainActor
@Suite(.timeLimit(.minutes(5))) struct HTTPAuthorizationSchemeTests {
    let transport = ScriptedTransport()
    let issuer = TokenIssuer()
    let clock = ManualClock()
    let apiURL = URL(string: "http://example.test/v1")!

    func makeService(_ authorization: HTTPAuthorization, headers: [String: String] = [:]) -> HTTPService {
        HTTPService(baseURL: apiURL, transport: transport, authorization: authorization, headers: headers)
    }

    func authorization(_ index: Int) -> String? {
        transport.requests[index].value(forHTTPHeaderField: "Authorization")
    }

    /// Answers request `index` with a 200 its sender decodes: a feed for a loadable, `1` for a send.
    func answerOK(_ index: Int) {
        let isFeed = transport.requests[index].url?.path.contains("/feed") == true
        transport.answer(index, body: isFeed ? #"{"items":[]}"# : "1")
    }

    /// Checks that `error` is the failure of credentials a header cannot carry.
    func expectUnsendable(_ error: (any Error)?, sourceLocation: SourceLocation = #_sourceLocation) {
        guard case .transport(let urlError)? = error as? HTTPLoadableError else {
            Issue.record("expected .transport, got \(String(describing: error))", sourceLocation: sourceLocation)
            return
        }
        #expect(urlError.code == .userAuthenticationRequired, sourceLocation: sourceLocation)
    }

    // MARK: - The header on the wire

    @Test(
        "Basic sends base64 of user:password in UTF-8",
        arguments: [
            ("Aladdin", "open sesame", "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="),  // RFC 7617, section 2
            ("test", "123£", "Basic dGVzdDoxMjPCow=="),  // RFC 7617, section 2.1
            ("ana", "pässwörd", "Basic YW5hOnDDpHNzd8O2cmQ="),
        ])
    func basicSendsBase64OfUserColonPasswordInUTF8(user: String, password: String, header: String) async throws {
        let credentials = AsyncLoadable<HTTPBasicCredentials> { HTTPBasicCredentials(user: user, password: password) }
        let api = makeService(.basic(LoadableWaiter(credentials, timeout: .seconds(10), clock: clock)))
        let feed = api.loadable(Feed.self, "feed", clock: clock)
        feed.sync()
        await transport.waitForRequests(1)
        #expect(authorization(0) == header)
        answerOK(0)
        try await feed.doneSyncing()
        let send = Task { try await api.send(.post, "likes", as: Int.self) }
        await transport.waitForRequests(2)
        #expect(authorization(1) == header)
        answerOK(1)
        #expect(try await send.value == 1)
    }

    @Test(
        "A custom scheme sends the scheme, a space and the credential",
        arguments: [
            ("Token", "abc", "Token abc"),
            ("ApiKey", "k-1 2", "ApiKey k-1 2"),
            ("ApiKey", #"id="7", sig="x/y+z=""#, #"ApiKey id="7", sig="x/y+z=""#),
        ])
    func aCustomSchemeSendsTheSchemeAndTheCredential(scheme: String, credential: String, header: String) async throws {
        let token = AsyncLoadable<String> { credential }
        let api = makeService(.scheme(scheme, LoadableWaiter(token, timeout: .seconds(10), clock: clock)) { $0 })
        let feed = api.loadable(Feed.self, "feed", clock: clock)
        feed.sync()
        await transport.waitForRequests(1)
        #expect(authorization(0) == header)
        answerOK(0)
        try await feed.doneSyncing()
    }

    @Test("A custom scheme reads its credential from the loadable's contents with the closure")
    func aCustomSchemeReadsTheCredentialWithTheClosure() async throws {
        struct APIKey: Sendable { let id: String }
        let key = AsyncLoadable<APIKey> { APIKey(id: "key-7") }
        let api = makeService(.scheme("ApiKey", LoadableWaiter(key, timeout: .seconds(10), clock: clock)) { $0.id })
        let send = Task { try await api.send(.post, "likes", as: Int.self) }
        await transport.waitForRequests(1)
        #expect(authorization(0) == "ApiKey key-7")
        answerOK(0)
        #expect(try await send.value == 1)
    }

    // MARK: - The 401 rules

    @Test(
        "A 401 renews the credentials once and the request goes once more with the new ones",
        arguments: CredentialScheme.allCases)
    func a401RetriesOnceWithTheNewCredentials(scheme: CredentialScheme) async throws {
        let (auth, _) = scheme.authorization(issuer: issuer, clock: clock)
        let feed = makeService(auth).loadable(Feed.self, "feed", clock: clock)
        feed.sync()
        await transport.waitForRequests(1)
        #expect(authorization(0) == scheme.header("t1"))
        transport.answer(0, status: 401)
        await transport.waitForRequests(2)
        #expect(authorization(1) == scheme.header("t2"))
        answerOK(1)
        try await feed.doneSyncing()
        #expect(feed.loadableState == .didSyncSuccessfully)
        #expect(issuer.issuedCount == 2)
    }

    @Test(
        "Concurrent 401s of loadables and sends, before, during and after the renewal, cause one renewal",
        arguments: CredentialScheme.allCases)
    func concurrent401sOfLoadablesAndSendsCauseOneRenewal(scheme: CredentialScheme) async throws {
        let (auth, credentials) = scheme.authorization(issuer: issuer, clock: clock)
        let api = makeService(auth)
        let feeds = (0..<3).map { api.loadable(Feed.self, "feed/\($0)", clock: clock) }
        for feed in feeds { feed.sync() }
        let sends = (0..<3).map { index in
            Task { try await api.send(.post, "likes", json: ["post": index], as: Int.self) }
        }
        await transport.waitForRequests(6)
        #expect((0..<6).allSatisfy { authorization($0) == scheme.header("t1") })
        issuer.isGated = true
        // Two 401s before the renewal starts, two while it runs, two after it ended.
        for index in 0..<2 { transport.answer(index, status: 401) }
        await settle(until: { issuer.pendingCount == 1 })
        #expect(credentials.loadableState == .syncing)
        for index in 2..<4 { transport.answer(index, status: 401) }
        await settle(until: { transport.openCount == 2 })
        #expect(transport.requests.count == 6)
        issuer.release()
        await transport.waitForRequests(10)
        for index in 4..<6 { transport.answer(index, status: 401) }
        await transport.waitForRequests(12)
        #expect((6..<12).allSatisfy { authorization($0) == scheme.header("t2") })
        for index in 6..<12 { answerOK(index) }
        for feed in feeds { try await feed.doneSyncing() }
        for send in sends { #expect(try await send.value == 1) }
        #expect(feeds.allSatisfy { $0.loadableState == .didSyncSuccessfully })
        await settle(until: { credentials.loadableState != .syncing })
        #expect(issuer.issuedCount == 2)
        #expect(transport.requests.count == 12)
    }

    @Test(
        "A 401 during a sync of the credentials that the app started waits for it, without a second one",
        arguments: CredentialScheme.allCases)
    func a401DuringASyncTheAppStartedWaitsForIt(scheme: CredentialScheme) async throws {
        let (auth, credentials) = scheme.authorization(issuer: issuer, clock: clock)
        let feed = makeService(auth).loadable(Feed.self, "feed", clock: clock)
        feed.sync()
        await transport.waitForRequests(1)
        issuer.isGated = true
        credentials.sync()  // not an invalidation: the credentials held stay fresh while it runs
        await settle(until: { issuer.pendingCount == 1 })
        transport.answer(0, status: 401)
        await settle(until: { transport.openCount == 0 })
        #expect(transport.requests.count == 1)
        issuer.release()
        await transport.waitForRequests(2)
        #expect(authorization(1) == scheme.header("t2"))
        answerOK(1)
        try await feed.doneSyncing()
        await settle(until: { credentials.loadableState != .syncing && issuer.issuedCount > 2 })
        #expect(issuer.issuedCount == 2)
    }

    @Test(
        "A second 401 stands: the sync fails with it after one retry, nothing loops",
        arguments: CredentialScheme.allCases)
    func aSecond401StandsAfterOneRetry(scheme: CredentialScheme) async throws {
        let (auth, _) = scheme.authorization(issuer: issuer, clock: clock)
        let api = makeService(auth)
        let send = Task { try await api.send(.post, "likes", as: Int.self) }
        await transport.waitForRequests(1)
        transport.answer(0, status: 401, body: "bad")
        await transport.waitForRequests(2)
        #expect(authorization(1) == scheme.header("t2"))
        transport.answer(1, status: 401, body: "still bad")
        // Nothing more goes out; a third request, which nobody answers, would make the test fail
        // rather than wait.
        await settle(until: { transport.requests.count > 2 })
        #expect(transport.requests.count == 2)
        send.cancel()
        let error = await failure { _ = try await send.value }
        guard case .status(401, _, let body)? = error as? HTTPLoadableError else {
            Issue.record("expected .status(401), got \(String(describing: error))")
            return
        }
        #expect(String(decoding: body, as: UTF8.self) == "still bad")
        #expect(issuer.issuedCount == 2)
    }

    @Test(
        "The same credentials back from the renewal: the 401 stands, they are not sent again",
        arguments: CredentialScheme.allCases)
    func theSameCredentialsBackMeanThe401Stands(scheme: CredentialScheme) async throws {
        issuer.tokens = { _ in "same" }
        let (auth, _) = scheme.authorization(issuer: issuer, clock: clock)
        let api = makeService(auth)
        let feed = api.loadable(Feed.self, "feed", clock: clock)
        feed.sync()
        await transport.waitForRequests(1)
        #expect(authorization(0) == scheme.header("same"))
        transport.answer(0, status: 401)
        // The rejected credentials are not sent again (nobody would answer them: the test fails
        // rather than waits).
        await settle(until: { transport.requests.count > 1 })
        #expect(transport.requests.count == 1)
        #expect(feed.loadableState == .didFailToSync)
        #expect(statusCode(of: feed.error) == 401)
        feed.cancelSync()
        // The first load, and one or two for the 401: never more.
        #expect((2...3).contains(issuer.issuedCount))
        // A send's 401 stands the same way.
        let loads = issuer.issuedCount
        let send = Task { try await api.send(.post, "likes", as: Int.self) }
        await transport.waitForRequests(2)
        #expect(authorization(1) == scheme.header("same"))
        transport.answer(1, status: 401)
        await settle(until: { transport.requests.count > 2 })
        #expect(transport.requests.count == 2)
        send.cancel()
        #expect(statusCode(of: await failure { _ = try await send.value }) == 401)
        #expect((1...2).contains(issuer.issuedCount - loads))
    }

    @Test(
        "A credentials loadable that fails for good fails loadables and sends with targetFailed, nothing sent",
        arguments: CredentialScheme.allCases)
    func aCredentialsLoadableThatFailsForGoodFailsWithTargetFailed(scheme: CredentialScheme) async throws {
        let api = makeService(
            scheme.authorization(endpoint: tokenURL, transport: transport, clock: clock).authorization)
        let feed = api.loadable(Feed.self, "feed", clock: clock)
        feed.sync()
        await transport.waitForRequests(1)
        #expect(transport.requests[0].url == tokenURL)
        transport.answer(0, status: 401, body: "unknown user")
        await settle(until: { feed.loadableState != .syncing })
        guard case .targetFailed(let credentialsError)? = feed.error as? LoadableWaiterError else {
            Issue.record("expected targetFailed, got \(String(describing: feed.error))")
            await clock.advance(by: .seconds(30))
            return
        }
        #expect(statusCode(of: credentialsError) == 401)
        // A send fails at once too, without asking the credentials endpoint again.
        let sendError = await failure { try await api.send(.post, "likes") }
        guard case .targetFailed? = sendError as? LoadableWaiterError else {
            Issue.record("expected targetFailed, got \(String(describing: sendError))")
            return
        }
        #expect(transport.requests.count == 1)
        #expect(clock.now.offset == .zero)
    }

    @Test(
        "A renewal after a 401 that the credentials endpoint refuses fails the request with targetFailed",
        arguments: CredentialScheme.allCases)
    func aRefusedRenewalFailsWithTargetFailed(scheme: CredentialScheme) async throws {
        let api = makeService(
            scheme.authorization(endpoint: tokenURL, transport: transport, clock: clock).authorization)
        let send = Task { try await api.send(.post, "likes", as: Int.self) }
        await transport.waitForRequests(1)
        transport.answer(0, body: scheme.endpointBody("t1"))
        await transport.waitForRequests(2)
        #expect(authorization(1) == scheme.header("t1"))
        transport.answer(1, status: 401)
        await transport.waitForRequests(3)
        #expect(transport.requests[2].url == tokenURL)
        transport.answer(2, status: 403, body: "account locked")
        let error = await failure { _ = try await send.value }
        guard case .targetFailed(let credentialsError)? = error as? LoadableWaiterError else {
            Issue.record("expected targetFailed, got \(String(describing: error))")
            await clock.advance(by: .seconds(30))
            return
        }
        #expect(statusCode(of: credentialsError) == 403)
        #expect(transport.requests.count == 3)
        #expect(clock.now.offset == .zero)
    }

    // MARK: - A new password

    /// A service authorized with Basic credentials `ana:old`, held already (as typed in), whose
    /// loadable's sync would read another password; `loads` counts those syncs.
    func serviceHoldingOldPassword() -> (HTTPService, AsyncLoadable<HTTPBasicCredentials>, loads: Locked<Int>) {
        let loads = Locked(0)
        let credentials = AsyncLoadable<HTTPBasicCredentials>(
            contents: HTTPBasicCredentials(user: "ana", password: "old"), clock: clock
        ) {
            loads.withLock { $0 += 1 }
            return HTTPBasicCredentials(user: "ana", password: "from the keychain")
        }
        let api = makeService(.basic(LoadableWaiter(credentials, timeout: .seconds(10), clock: clock)))
        return (api, credentials, loads)
    }

    @Test("A new password set on the credentials loadable goes with the next request, nothing rebuilt")
    func aNewPasswordReachesTheNextRequest() async throws {
        let (api, credentials, loads) = serviceHoldingOldPassword()
        let feed = api.loadable(Feed.self, "feed", clock: clock)
        feed.sync()
        await transport.waitForRequests(1)
        #expect(authorization(0) == "Basic " + Data("ana:old".utf8).base64EncodedString())
        answerOK(0)
        try await feed.doneSyncing()
        credentials.setContents(HTTPBasicCredentials(user: "ana", password: "nëw"))
        feed.sync()
        let send = Task { try await api.send(.post, "likes", as: Int.self) }
        await transport.waitForRequests(3)
        let newHeader = "Basic " + Data("ana:nëw".utf8).base64EncodedString()
        #expect(authorization(1) == newHeader && authorization(2) == newHeader)
        answerOK(1)
        answerOK(2)
        try await feed.doneSyncing()
        #expect(try await send.value == 1)
        #expect(loads.withLock { $0 } == 0)
    }

    @Test("A request refused with the old password is sent again with the new one set meanwhile")
    func aRequestRefusedWithTheOldPasswordIsSentAgainWithTheNewOne() async throws {
        let (api, credentials, loads) = serviceHoldingOldPassword()
        let feed = api.loadable(Feed.self, "feed", clock: clock)
        feed.sync()
        let send = Task { try await api.send(.put, "password", json: ["new": "nëw"], as: Int.self) }
        await transport.waitForRequests(2)
        let oldHeader = "Basic " + Data("ana:old".utf8).base64EncodedString()
        #expect(authorization(0) == oldHeader && authorization(1) == oldHeader)
        // The server took the new password: the app stores it, then the old one is refused.
        credentials.setContents(HTTPBasicCredentials(user: "ana", password: "nëw"))
        transport.answer(0, status: 401)
        transport.answer(1, status: 401)
        await transport.waitForRequests(4)
        let newHeader = "Basic " + Data("ana:nëw".utf8).base64EncodedString()
        #expect(authorization(2) == newHeader && authorization(3) == newHeader)
        answerOK(2)
        answerOK(3)
        try await feed.doneSyncing()
        #expect(try await send.value == 1)
        #expect(loads.withLock { $0 } == 0)
    }

    @Test("A 401 for the password held syncs the credentials loadable once; the retry carries its answer")
    func a401ForThePasswordHeldAsksForANewOne() async throws {
        let prompt = PasswordPrompt(contents: HTTPBasicCredentials(user: "ana", password: "old"), clock: clock)
        let api = makeService(.basic(LoadableWaiter(prompt, timeout: .seconds(10), clock: clock)))
        let feed = api.loadable(Feed.self, "feed", clock: clock)
        feed.sync()
        let send = Task { try await api.send(.post, "likes", as: Int.self) }
        await transport.waitForRequests(2)
        transport.answer(0, status: 401)
        transport.answer(1, status: 401)
        await settle(until: { prompt.promptCount == 1 && transport.openCount == 0 })
        #expect(prompt.promptCount == 1)
        #expect(transport.requests.count == 2)
        prompt.setDidSyncSuccessfully(HTTPBasicCredentials(user: "ana", password: "pässwörd"))
        await transport.waitForRequests(4)
        #expect(authorization(2) == "Basic YW5hOnDDpHNzd8O2cmQ=" && authorization(3) == "Basic YW5hOnDDpHNzd8O2cmQ=")
        answerOK(2)
        answerOK(3)
        try await feed.doneSyncing()
        #expect(try await send.value == 1)
        #expect(prompt.promptCount == 1)
    }

    // MARK: - Credentials a header cannot carry

    @Test("Credentials a header cannot carry are never sent", arguments: UnsendableCredentials.allCases)
    func credentialsAHeaderCannotCarryAreNeverSent(credentials: UnsendableCredentials) async throws {
        let api = makeService(credentials.authorization(clock: clock))
        let feed = api.loadable(Feed.self, "feed", clock: clock)
        feed.sync()
        try? await feed.doneSyncing()
        #expect(feed.loadableState == .didFailToSync)
        expectUnsendable(feed.error)
        expectUnsendable(await failure { try await api.send(.post, "likes") })
        #expect(transport.requests.isEmpty)
    }

    @Test(
        "A renewal to credentials a header cannot carry fails the request without a retry",
        arguments: CredentialScheme.allCases)
    func aRenewalToUnsendableCredentialsIsNotSent(scheme: CredentialScheme) async throws {
        issuer.tokens = { $0 == 1 ? "t1" : "t2\r\nX-Injected: 1" }
        let (auth, _) = scheme.authorization(issuer: issuer, clock: clock)
        let send = Task { try await makeService(auth).send(.post, "likes", as: Int.self) }
        await transport.waitForRequests(1)
        transport.answer(0, status: 401)
        expectUnsendable(await failure { _ = try await send.value })
        #expect(transport.requests.count == 1)
        #expect(issuer.issuedCount == 2)
    }

    // MARK: - What the retry keeps

    @Test(
        "The retry after a 401 keeps the body, Idempotency-Key, precondition and headers of a send",
        arguments: CredentialScheme.allCases)
    func theRetryKeepsTheWholeSend(scheme: CredentialScheme) async throws {
        struct Edit: Encodable, Sendable { let title: String }
        let (auth, _) = scheme.authorization(issuer: issuer, clock: clock)
        let api = makeService(auth, headers: ["X-Client": "app", "Accept-Language": "en"])
        let send = Task {
            try await api.send(
                .patch, "posts/7", json: Edit(title: "Hï"), as: Int.self, idempotencyKey: "k-7",
                precondition: .ifMatch("\"1\""),
                headers: ["Accept-Language": "de", "X-Trace": "tr-1", "Content-Type": "application/merge-patch+json"])
        }
        await transport.waitForRequests(1)
        transport.answer(0, status: 401)
        await transport.waitForRequests(2)
        let (first, retry) = (transport.requests[0], transport.requests[1])
        #expect(first.value(forHTTPHeaderField: "Authorization") == scheme.header("t1"))
        #expect(retry.value(forHTTPHeaderField: "Authorization") == scheme.header("t2"))
        let expected = [
            "accept-language": "de", "content-type": "application/merge-patch+json", "idempotency-key": "k-7",
            "if-match": "\"1\"", "x-client": "app", "x-trace": "tr-1",
        ]
        for request in [first, retry] {
            var headers: [String: String] = [:]
            for (name, value) in request.allHTTPHeaderFields ?? [:] where name.lowercased() != "authorization" {
                headers[name.lowercased()] = value
            }
            #expect(headers == expected)
            #expect(request.httpMethod == "PATCH")
            #expect(request.url == URL(string: "http://example.test/v1/posts/7"))
            #expect(request.httpBody == Data(#"{"title":"Hï"}"#.utf8))
        }
        answerOK(1)
        #expect(try await send.value == 1)
    }

    @Test("The retry after a 401 of a send without a body keeps its precondition and headers")
    func theRetryKeepsABodylessSend() async throws {
        let (auth, _) = CredentialScheme.basic.authorization(issuer: issuer, clock: clock)
        let api = makeService(auth)
        let send = Task {
            try await api.send(.delete, "posts/7", precondition: .ifMatch("\"1\""), headers: ["X-Trace": "tr-2"])
        }
        await transport.waitForRequests(1)
        transport.answer(0, status: 401)
        await transport.waitForRequests(2)
        let retry = transport.requests[1]
        #expect(retry.httpMethod == "DELETE")
        #expect(retry.value(forHTTPHeaderField: "If-Match") == "\"1\"")
        #expect(retry.value(forHTTPHeaderField: "X-Trace") == "tr-2")
        #expect(retry.value(forHTTPHeaderField: "Authorization") == CredentialScheme.basic.header("t2"))
        #expect(retry.httpBody == nil)
        transport.answer(1, status: 204)
        try await send.value
    }
}

/// A custom scheme that is not an HTTP token stops the program with a message naming it.
@Suite("HTTPAuthorization.scheme's name is checked")
struct HTTPAuthorizationSchemeExitTests {
    @Test("a scheme that is not an HTTP token stops the program, naming it", arguments: ["Api Key", "", "Token:"])
    func aSchemeThatIsNotAToken(scheme: String) async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) { [scheme] in
            await MainActor.run {
                let token = AsyncLoadable<String> { "t1" }
                _ = HTTPAuthorization.scheme(scheme, LoadableWaiter(token, timeout: .seconds(1))) { $0 }
            }
        }
        #expect(
            bytes(
                result?.standardErrorContent ?? [],
                contain: "HTTPAuthorization.scheme: scheme must be a non-empty HTTP token (letters, digits and "
                    + "!#$%&'*+-.^_`|~), got \"\(scheme)\""))
    }
}
