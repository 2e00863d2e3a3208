import Dispatch
import Foundation
import Loadable
import LoadableHTTP
import LoadableSupport
import LoadableSyncer
import LoadableTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The HTTP tour (`loadable-demo --http`): `HTTPLoadable` against a `LoopbackHTTPServer` that the
/// demo starts on 127.0.0.1, in real time.
///
/// Each step prints what happened, stamped with the real time since the start, and checks it. A
/// step whose outcome is not the expected one ends the tour with `http tour: FAILED: <step>` on
/// standard error and exit status 1, so CI can run it as a smoke test. Nothing sleeps: the tour
/// waits for the loadables to end their syncs and for the server to see requests. A watchdog ends
/// a tour that hangs after ``timeLimit``, and the server stops by itself after ``serverLifetime``.
@MainActor
final class HTTPTour {
    /// The longest the tour may take; a step still under way then fails the tour.
    nonisolated static let timeLimit: Duration = .seconds(8)
    /// How long the server runs at most, even if the tour never gets to stop it.
    static let serverLifetime: Duration = .seconds(60)
    /// How long one request may go without an answer before `URLSession` gives up.
    static let requestTimeout: TimeInterval = 5

    private let clock = ContinuousClock()
    private let start: ContinuousClock.Instant
    /// The one session of the tour: every request goes through it.
    private let session = URLSession(configuration: .ephemeral)
    private let backend = HTTPTourBackend()
    /// The step under way, for the failure message; the watchdog reads it off the main actor.
    private let currentStep = Locked("starting the server")
    private var observations: [LoadableObservation] = []

    init() {
        start = clock.now
    }

    /// Runs the tour; returns the exit status: 0 when every step went as expected, 1 otherwise.
    func run() async -> Int32 {
        let watchdog = Self.startWatchdog(step: currentStep)
        defer {
            watchdog.cancel()
            session.invalidateAndCancel()
        }
        let server: LoopbackHTTPServer
        do {
            server = try LoopbackHTTPServer(lifetime: Self.serverLifetime) { [backend] request in
                backend.respond(to: request)
            }
        } catch {
            printToStandardError("http tour: FAILED: starting the server: \(error)\n")
            return 1
        }
        defer { server.stop() }
        print("LoadableHTTP tour: real requests to a server on 127.0.0.1:\(server.port), in real time\n")
        log("server", "listening: /token /feed /revoke /comments /busy /broken /huge /slow")
        do {
            try await tour(server)
        } catch {
            printToStandardError("http tour: FAILED: \(currentStep.withLock { $0 }): \(error)\n")
            return 1
        }
        print("\nhttp tour: \(server.requestCount) requests served on 127.0.0.1:\(server.port), all steps as expected")
        return 0
    }

    // MARK: - The steps

    private func tour(_ server: LoopbackHTTPServer) async throws {
        let token = HTTPLoadable<String>(request: request(server, "/token"), transport: session)
        let auth = HTTPAuthorization.bearer(LoadableWaiter(token, timeout: .seconds(5)))
        watch(token)
        let decodes = DecodeCounter()
        let feed = HTTPLoadable<TourFeed>(
            request: request(server, "/feed"), transport: session, decoder: decodes.decoder(), authorization: auth)

        try await step("token through the waiter, then feed 200 with an ETag") {
            log("feed", "syncing: its request waits for the access token")
            try await sync(feed)
            let exchanges = backend.exchanges(of: "/feed")
            try expect(token.contents == "t1", "the token is \(String(describing: token.contents))")
            try expect(feed.loadableState == .didSyncSuccessfully, describe(feed))
            try expect(
                exchanges.map(\.summary) == ["Bearer t1 -> 200"], "the server saw \(exchanges.map(\.summary))")
            log("feed", "200 with Bearer t1, ETag \"v1\": \(items(feed)) (decoded: \(decodes.count))")
        }

        try await step("feed again: 304, no decode, contents kept") {
            log("feed", "syncing again: sends If-None-Match \"v1\"")
            try await sync(feed)
            let last = backend.exchanges(of: "/feed").last
            try expect(
                last?.ifNoneMatch == "\"v1\"" && last?.status == 304,
                "the server saw \(String(describing: last?.summary)), If-None-Match \(last?.ifNoneMatch ?? "none")")
            try expect(feed.loadableState == .didSyncSuccessfully && feed.contents?.items.count == 3, describe(feed))
            try expect(decodes.count == 1, "\(decodes.count) decodes")
            log("feed", "304 Not Modified: no decode (decoded: \(decodes.count)), the \(items(feed)) kept")
        }

        try await step("revoked token: 401, one token refresh, retry with t2, 200") {
            backend.addFeedItem("dates")
            log("server", "the feed changes (ETag now \"v2\")")
            try await revoke(server, "t1")
            let seen = backend.exchanges(of: "/feed").count
            log("feed", "syncing with t1")
            try await sync(feed)
            let exchanges = backend.exchanges(of: "/feed").dropFirst(seen)
            try expect(
                exchanges.map(\.summary) == ["Bearer t1 -> 401", "Bearer t2 -> 200"],
                "the server saw \(exchanges.map(\.summary))")
            try expect(feed.loadableState == .didSyncSuccessfully && feed.contents?.items.count == 4, describe(feed))
            log("feed", "401 with t1 -> one token refresh -> retry with t2 -> 200: \(items(feed))")
            let tokenRequests = backend.exchanges(of: "/token").count
            try expect(tokenRequests == 2, "\(tokenRequests) token requests")
            log("server", "token requests so far: \(tokenRequests)")
        }

        try await step("5 concurrent loadables after another revoke: one refresh") {
            let feeds = (1...5).map { _ in
                HTTPLoadable<TourFeed>(request: request(server, "/feed"), transport: session, authorization: auth)
            }
            try await revoke(server, "t2")
            let seen = backend.exchanges(of: "/feed").count
            for feed in feeds { feed.sync() }
            log("5 feeds", "syncing at once, each with t2")
            for feed in feeds { try await feed.doneSyncing() }
            let exchanges = backend.exchanges(of: "/feed").dropFirst(seen)
            let rejected = exchanges.filter { $0.status == 401 }
            let accepted = exchanges.filter { $0.status == 200 }
            try expect(
                feeds.allSatisfy { $0.loadableState == .didSyncSuccessfully && $0.contents?.items.count == 4 },
                feeds.map { describe($0) }.joined(separator: "; "))
            try expect(
                !rejected.isEmpty && rejected.allSatisfy { $0.authorization == "Bearer t2" },
                "the server saw \(exchanges.map(\.summary))")
            try expect(
                accepted.count == 5 && accepted.allSatisfy { $0.authorization == "Bearer t3" },
                "the server saw \(exchanges.map(\.summary))")
            let tokenRequests = backend.exchanges(of: "/token").count
            try expect(tokenRequests == 3, "\(tokenRequests) token requests, expected 3")
            log("5 feeds", "\(rejected.count) x 401 with t2 -> one token refresh -> 5 x 200 with t3")
            log("server", "token requests so far: \(tokenRequests) (one more for all five)")
        }

        try await step("a write: an authorized POST whose token was revoked, one refresh, one retry") {
            let api = HTTPService(baseURL: server.url("/"), transport: session, authorization: auth)
            try await revoke(server, "t3")
            log("comment", "POST /comments through HTTPService, with t3 and Idempotency-Key c-1")
            let comment = try await api.send(
                .post, "comments", json: TourComment(id: nil, text: "Looks good"), as: TourComment.self,
                idempotencyKey: "c-1")
            let exchanges = backend.exchanges(of: "/comments")
            try expect(
                exchanges.map(\.summary) == ["Bearer t3 -> 401", "Bearer t4 -> 201"],
                "the server saw \(exchanges.map(\.summary))")
            try expect(
                exchanges.allSatisfy { $0.idempotencyKey == "c-1" },
                "Idempotency-Key sent: \(exchanges.map { $0.idempotencyKey ?? "none" })")
            try expect(comment.id == 1 && comment.text == "Looks good", "the answer is \(comment)")
            let tokenRequests = backend.exchanges(of: "/token").count
            try expect(tokenRequests == 4, "\(tokenRequests) token requests, expected 4")
            log("comment", "401 with t3 -> one token refresh -> retry with t4, same Idempotency-Key -> 201: comment #1")
            log("server", "token requests so far: \(tokenRequests)")
        }

        try await step("503 with Retry-After 1 under a syncer, then 200") {
            let busy = HTTPLoadable<TourFeed>(request: request(server, "/busy"), transport: session)
            let syncer = LoadableSyncer(
                busy,
                timeoutPolicy: BackoffTimeoutPolicy(min: .milliseconds(100), max: .seconds(2)),
                // Not the system monitor: the tour must not depend on the machine's network.
                activity: ActivityMonitor())
            log("busy", "syncing, kept up by a LoadableSyncer (backoff from 0.1 s)")
            try await sync(busy)
            let error = busy.error as? HTTPLoadableError
            try expect(
                error?.retryAfter == .seconds(1), "error \(busy.error.map { "\($0)" } ?? "none"), expected a 503")
            guard let retryIn = syncer.nextSyncIn, retryIn > .milliseconds(800), retryIn <= .seconds(1) else {
                throw HTTPTourFailure("the syncer's nextSyncIn is \(String(describing: syncer.nextSyncIn)), not ~1 s")
            }
            let failedAt = clock.now
            log(
                "busy",
                "\(busy.error.map { "\($0)" } ?? ""); the syncer retries in \(Self.tenths(retryIn)) s, not 0.1 s")
            await server.waitForRequests(server.requestCount + 1)
            try await busy.doneSyncing()
            let waited = failedAt.duration(to: clock.now)
            try expect(busy.loadableState == .didSyncSuccessfully, describe(busy))
            try expect(waited >= .milliseconds(900), "the retry came \(Self.tenths(waited)) s after the 503")
            try expect(syncer.nextSyncIn == nil, "a refresh is scheduled in \(String(describing: syncer.nextSyncIn))")
            log("busy", "the syncer's retry \(Self.tenths(waited)) s later: 200, \(items(busy))")
        }

        try await step("malformed JSON: a decoding error, contents kept") {
            let broken = HTTPLoadable<TourFeed>(request: request(server, "/broken"), transport: session)
            try await sync(broken)
            try expect(broken.loadableState == .didSyncSuccessfully, describe(broken))
            log("broken", "200: \(items(broken))")
            try await sync(broken)
            guard let error = broken.error as? HTTPLoadableError, case .decoding = error else {
                throw HTTPTourFailure(describe(broken))
            }
            try expect(broken.contents?.items == ["fine"], describe(broken))
            log("broken", "malformed JSON -> \(broken.loadableState) (\(error)); the \(items(broken)) kept")
        }

        try await step("a body over maxBodySize: tooLarge") {
            let huge = HTTPLoadable<TourFeed>(
                request: request(server, "/huge"), transport: session, maxBodySize: 1_024)
            log("huge", "syncing with maxBodySize 1 KB (the body is \(HTTPTourBackend.hugeBody.count / 1_024) KB)")
            try await sync(huge)
            guard case .tooLarge(maxBodySize: 1_024)? = huge.error as? HTTPLoadableError else {
                throw HTTPTourFailure(describe(huge))
            }
            log("huge", "\(huge.loadableState): \(huge.error.map { "\($0)" } ?? "")")
        }

        try await step("cancelSync() while the server holds the request: idle") {
            let slow = HTTPLoadable<TourFeed>(request: request(server, "/slow"), transport: session)
            let seen = server.requestCount
            slow.sync()
            log("slow", "syncing: the server holds the request without answering")
            await server.waitForRequests(seen + 1)
            try expect(slow.loadableState == .syncing, describe(slow))
            try expect(server.heldConnectionCount == 1, "\(server.heldConnectionCount) held connections")
            slow.cancelSync()
            try expect(slow.loadableState == .idle && slow.error == nil, describe(slow))
            log("slow", "cancelSync() -> idle, no error")
            await server.waitUntilNoConnectionIsHeld()
            try expect(server.heldConnectionCount == 0, "\(server.heldConnectionCount) held connections")
            log("server", "the client closed the held connection")
        }
    }

    // MARK: - Helpers

    /// Runs one step under `name`: a failure inside it is reported with that name.
    private func step(_ name: String, _ body: () async throws -> Void) async throws {
        currentStep.withLock { $0 = name }
        try await body()
    }

    /// Fails the step with `detail` unless `condition` holds.
    private func expect(_ condition: Bool, _ detail: @autoclosure () -> String) throws {
        guard condition else { throw HTTPTourFailure(detail()) }
    }

    /// Starts a sync of `loadable` and waits for it to end.
    private func sync(_ loadable: some SyncableLoadable) async throws {
        loadable.sync()
        try await loadable.doneSyncing()
    }

    /// A GET of `path` on `server`, with a timeout well inside the tour's own limit.
    private func request(_ server: LoopbackHTTPServer, _ path: String) -> URLRequest {
        URLRequest(url: server.url(path), timeoutInterval: Self.requestTimeout)
    }

    /// Has the server revoke `token`, through the session like any client.
    private func revoke(_ server: LoopbackHTTPServer, _ token: String) async throws {
        let (_, response) = try await session.data(for: request(server, "/revoke"))
        let status = (response as? HTTPURLResponse)?.statusCode
        try expect(status == 204, "GET /revoke answered \(status.map(String.init) ?? "no status")")
        log("server", "revoked \(token)")
    }

    /// Logs the changes of the access token: each fetch, each refresh, each new token.
    private func watch(_ token: HTTPLoadable<String>) {
        var last: (state: LoadableState, contents: String?)?
        observations.append(
            token.observe { [weak self] token in
                guard let self else { return }
                let now = (state: token.loadableState, contents: token.contents)
                defer { last = now }
                guard last.map({ $0 != now }) ?? true else { return }
                switch now.state {
                case .idle: log("token", "idle")
                case .syncing:
                    log(
                        "token",
                        now.contents.map { "refreshing: \"\($0)\" was rejected (GET /token)" }
                            ?? "fetching, for the waiter (GET /token)")
                case .didSyncSuccessfully: log("token", "\"\(now.contents ?? "")\"")
                case .didFailToSync: log("token", "failed: \(token.error.map { "\($0)" } ?? "unknown error")")
                }
            })
    }

    /// Prints `[elapsed] subject: text`, the elapsed real time rounded to 0.1 s.
    private func log(_ subject: String, _ text: String) {
        print("[\(Self.tenths(start.duration(to: clock.now)))s] \(subject): \(text)")
    }

    /// `duration` in seconds with one decimal, as in `1.2`.
    static func tenths(_ duration: Duration) -> String {
        let tenths = Int((Timeline.secondsValue(duration) * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }

    private func items(_ loadable: HTTPLoadable<TourFeed>) -> String {
        let items = loadable.contents?.items ?? []
        return (items.count == 1 ? "1 item" : "\(items.count) items") + " \(items)"
    }

    private func describe(_ loadable: HTTPLoadable<TourFeed>) -> String {
        let error = loadable.error.map { ", error: \($0)" } ?? ""
        return "\(loadable.loadableState), contents: \(loadable.contents.map { "\($0.items)" } ?? "none")\(error)"
    }

    /// Ends the program with a failure if the tour is still running after ``timeLimit``.
    ///
    /// On a queue of its own, so that it fires even if the main actor were stuck.
    private nonisolated static func startWatchdog(step: Locked<String>) -> DispatchWorkItem {
        let watchdog = DispatchWorkItem {
            let step = step.withLock { $0 }
            printToStandardError("http tour: FAILED: \(step): no outcome after \(timeLimit)\n")
            exit(1)
        }
        let seconds = Double(timeLimit.components.seconds)
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: watchdog)
        return watchdog
    }
}

/// Why a step of the HTTP tour failed: what it saw instead of what it expected.
struct HTTPTourFailure: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// The feed of the HTTP tour: `{"items":[…]}`. Decoding it counts in the decoder's
/// ``DecodeCounter``, if it has one.
struct TourFeed: Decodable, Sendable {
    let items: [String]

    private enum CodingKeys: String, CodingKey {
        case items
    }

    init(from decoder: any Decoder) throws {
        items = try decoder.container(keyedBy: CodingKeys.self).decode([String].self, forKey: .items)
        (decoder.userInfo[DecodeCounter.key] as? DecodeCounter)?.increment()
    }
}

/// A comment of the HTTP tour's write step: sent without an `id`, answered with one.
struct TourComment: Codable, Sendable {
    let id: Int?
    let text: String
}

/// Counts the feeds its decoder decoded, to show that a 304 decodes nothing.
final class DecodeCounter: Sendable {
    static let key = CodingUserInfoKey(rawValue: "loadable-demo.decode-counter")!
    private let decodes = Locked(0)

    /// How many feeds were decoded so far.
    var count: Int { decodes.withLock { $0 } }

    func increment() {
        decodes.withLock { $0 += 1 }
    }

    /// A JSON decoder whose feeds count here.
    func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.userInfo[Self.key] = self
        return decoder
    }
}

/// The server side of the HTTP tour: what each endpoint answers, and a record of the answers.
///
/// Called on the server's connection threads, so its state sits behind a lock.
final class HTTPTourBackend: Sendable {
    typealias Request = LoopbackHTTPServer.Request
    typealias Response = LoopbackHTTPServer.Response

    /// One answered request, as the tour checks it.
    struct Exchange: Sendable {
        let path: String
        let authorization: String?
        let ifNoneMatch: String?
        let idempotencyKey: String?
        let status: Int

        /// `Bearer t1 -> 401`.
        var summary: String { "\(authorization ?? "no token") -> \(status)" }
    }

    private struct State {
        var tokensIssued = 0
        var validToken: String?
        var feedItems = ["apples", "bread", "coffee"]
        var feedVersion = 1
        var busyAnswers = 0
        var brokenAnswers = 0
        var comments = 0
        var exchanges: [Exchange] = []
    }

    /// The body of `/huge`: valid JSON of 8 KB.
    static let hugeBody =
        #"{"items":["#
        + Array(repeating: #""xxxxxxxxxxxxxxxxxxxxxxxxxxxxx""#, count: 256)
        .joined(separator: ",") + "]}"

    private let state = Locked(State())

    /// The answers so far to requests for `path`, in the order they were answered.
    func exchanges(of path: String) -> [Exchange] {
        state.withLock { $0.exchanges.filter { $0.path == path } }
    }

    /// Adds `item` to the feed, which gets a new ETag.
    func addFeedItem(_ item: String) {
        state.withLock { state in
            state.feedItems.append(item)
            state.feedVersion += 1
        }
    }

    /// The answer to `request`, recorded unless the server holds it.
    func respond(to request: Request) -> Response {
        state.withLock { state in
            let (status, response) = Self.answer(request, &state)
            if let status {
                state.exchanges.append(
                    Exchange(
                        path: request.path,
                        authorization: request.header("Authorization"),
                        ifNoneMatch: request.header("If-None-Match"),
                        idempotencyKey: request.header("Idempotency-Key"),
                        status: status))
            }
            return response
        }
    }

    private static func answer(_ request: Request, _ state: inout State) -> (status: Int?, response: Response) {
        switch request.path {
        case "/token":
            // "t1", "t2", …: each request issues a new token and retires the one before.
            state.tokensIssued += 1
            let token = "t\(state.tokensIssued)"
            state.validToken = token
            return (200, .json("\"\(token)\""))
        case "/revoke":
            state.validToken = nil
            return (204, .status(204))
        case "/feed":
            guard let token = state.validToken, request.header("Authorization") == "Bearer \(token)" else {
                return (401, .status(401, headers: [.init("WWW-Authenticate", #"Bearer error="invalid_token""#)]))
            }
            let entityTag = "\"v\(state.feedVersion)\""
            if request.header("If-None-Match") == entityTag {
                return (304, .status(304, headers: [.init("ETag", entityTag)]))
            }
            let items = state.feedItems.map { "\"\($0)\"" }.joined(separator: ",")
            return (200, .json(#"{"items":[\#(items)]}"#, headers: [.init("ETag", entityTag)]))
        case "/comments":
            guard let token = state.validToken, request.header("Authorization") == "Bearer \(token)" else {
                return (401, .status(401, headers: [.init("WWW-Authenticate", #"Bearer error="invalid_token""#)]))
            }
            guard request.method == "POST",
                let comment = try? JSONDecoder().decode(TourComment.self, from: request.body)
            else { return (400, .status(400)) }
            state.comments += 1
            return (201, .json(#"{"id":\#(state.comments),"text":"\#(comment.text)"}"#, status: 201))
        case "/busy":
            state.busyAnswers += 1
            if state.busyAnswers == 1 {
                return (503, .status(503, headers: [.init("Retry-After", "1")], body: Data("come back later".utf8)))
            }
            return (200, .json(#"{"items":["done"]}"#))
        case "/broken":
            // Valid once, so that the loadable has contents to keep; malformed from then on.
            state.brokenAnswers += 1
            return (200, .json(state.brokenAnswers == 1 ? #"{"items":["fine"]}"# : #"{"items":["fine","#))
        case "/huge":
            return (200, .json(hugeBody))
        case "/slow":
            return (nil, .hold)
        default:
            return (404, .status(404))
        }
    }
}
