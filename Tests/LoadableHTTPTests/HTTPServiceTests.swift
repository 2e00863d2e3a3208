import Foundation
import LoadableHTTP
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A comment as the tests' server stores it.
struct Comment: Codable, Sendable, Equatable {
    var id: Int?
    var text: String
}

/// A body that `JSONEncoder` refuses: `NaN` is not JSON.
struct Reading: Encodable, Sendable {
    let value: Double
}

/// The rules of `HTTPService`'s requests and sends, through a transport the test answers by hand.
@MainActor
@Suite(.timeLimit(.minutes(5))) struct HTTPServiceTests {
    let transport = ScriptedTransport()
    let issuer = TokenIssuer()
    let token: AsyncLoadable<String>
    let waiter: LoadableWaiter<AsyncLoadable<String>>
    let clock = ManualClock()

    init() {
        let issuer = issuer
        token = AsyncLoadable<String> { await issuer.next() }
        waiter = LoadableWaiter(token, timeout: .seconds(10), clock: clock)
    }

    func makeService(authorized: Bool = true, headers: [String: String] = [:]) -> HTTPService {
        HTTPService(
            baseURL: URL(string: "http://example.test/v1")!,
            transport: transport,
            authorization: authorized ? .bearer(waiter) : nil,
            headers: headers
        )
    }

    func header(_ index: Int, _ name: String) -> String? {
        transport.requests[index].value(forHTTPHeaderField: name)
    }

    /// Runs `work` in a task of its own and returns it, once `count` requests were sent.
    func start<Value: Sendable>(
        waitingFor count: Int, _ work: @escaping @MainActor () async throws -> Value
    ) async -> Task<Value, any Error> {
        let task = Task { try await work() }
        await transport.waitForRequests(count)
        return task
    }

    // MARK: Requests

    @Test(
        "paths resolve under the base URL's path, with or without a trailing slash",
        arguments: ["http://example.test/v1", "http://example.test/v1/", "HTTP://example.test/v1//"])
    func pathsResolveUnderTheBase(base: String) {
        let service = HTTPService(baseURL: URL(string: base)!, transport: transport)
        #expect(service.request("posts").url?.absoluteString.lowercased() == "http://example.test/v1/posts")
        #expect(service.request("/posts/7").url?.absoluteString.lowercased() == "http://example.test/v1/posts/7")
        #expect(
            service.request(.delete, "tags/a b").url?.absoluteString.lowercased() == "http://example.test/v1/tags/a%20b"
        )
        #expect(service.request(.delete, "posts").httpMethod == "DELETE")
        #expect(service.request("posts").httpMethod == "GET")
    }

    @Test("a base URL without a path, with a port, and with a query of its own")
    func otherBases() {
        let root = HTTPService(baseURL: URL(string: "https://example.test")!, transport: transport)
        #expect(root.request("me").url?.absoluteString == "https://example.test/me")
        let port = HTTPService(baseURL: URL(string: "http://127.0.0.1:8080/")!, transport: transport)
        #expect(port.request("me").url?.absoluteString == "http://127.0.0.1:8080/me")
        let keyed = HTTPService(baseURL: URL(string: "https://example.test/api?key=k1")!, transport: transport)
        #expect(
            keyed.request("feed", query: [URLQueryItem(name: "page", value: "2")]).url?.absoluteString
                == "https://example.test/api/feed?key=k1&page=2")
    }

    @Test("query items are percent-encoded, separators and + included")
    func queryItemsAreEncoded() throws {
        let service = makeService(authorized: false)
        let query = [
            URLQueryItem(name: "q", value: "a&b=c+d e"), URLQueryItem(name: "flag", value: nil),
            URLQueryItem(name: "city", value: "Zürich"),
        ]
        let url = try #require(service.request(.get, "search", query: query).url)
        #expect(url.absoluteString == "http://example.test/v1/search?q=a%26b%3Dc%2Bd%20e&flag&city=Z%C3%BCrich")
        let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems
        #expect(items == query)
    }

    @Test("HTTPMethod: the five methods and any other by its name")
    func methods() {
        #expect(
            [HTTPMethod.get, .post, .put, .patch, .delete].map(\.rawValue) == ["GET", "POST", "PUT", "PATCH", "DELETE"])
        #expect(HTTPMethod(rawValue: "PURGE").description == "PURGE")
        #expect(HTTPMethod(rawValue: "POST") == .post)
    }

    @Test("the service's headers go on every request; a request's own header wins")
    func headers() async throws {
        let service = makeService(
            authorized: false, headers: ["X-Client": "app/1", "Content-Type": "text/plain", "Accept": "*/*"])
        let post = await start(waitingFor: 1) {
            try await service.send(.post, "comments", json: Comment(text: "Hi"), as: Comment.self)
        }
        #expect(header(0, "X-Client") == "app/1")
        #expect(header(0, "Accept") == "*/*")
        #expect(header(0, "Content-Type") == "application/json")
        transport.answer(0, body: #"{"id":1,"text":"Hi"}"#)
        #expect(try await post.value == Comment(id: 1, text: "Hi"))

        var own = service.request(.put, "avatar")
        own.setValue("image/png", forHTTPHeaderField: "Content-Type")
        own.setValue("app/2", forHTTPHeaderField: "X-Client")
        let upload = await start(waitingFor: 2) { try await service.send(own) }
        #expect(header(1, "Content-Type") == "image/png")
        #expect(header(1, "X-Client") == "app/2")
        #expect(header(1, "Accept") == "*/*")
        transport.answer(1, status: 201, body: "stored")
        let (response, data) = try await upload.value
        #expect(response.statusCode == 201)
        #expect(String(decoding: data, as: UTF8.self) == "stored")

        // A request made elsewhere gets the service's headers too.
        let foreign = await start(waitingFor: 3) { try await service.send(URLRequest(url: feedURL)) }
        #expect(header(2, "X-Client") == "app/1")
        transport.answer(2)
        _ = try await foreign.value
    }

    @Test("a loadable of the service has its settings: path, headers, decoder, limit, authorization")
    func loadableOfTheService() async throws {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        let service = HTTPService(
            baseURL: URL(string: "http://example.test/v1/")!, transport: transport, authorization: .bearer(waiter),
            decoder: decoder, maxBodySize: 64, headers: ["X-Client": "app/1"])
        struct Profile: Decodable, Sendable { let displayName: String }
        let profile = service.loadable(
            Profile.self, "me", query: [URLQueryItem(name: "full", value: "1")], clock: clock)
        #expect(profile.maxBodySize == 64)
        #expect(profile.transport is ScriptedTransport)
        profile.sync()
        await transport.waitForRequests(1)
        #expect(transport.requests[0].url?.absoluteString == "http://example.test/v1/me?full=1")
        #expect(header(0, "X-Client") == "app/1")
        #expect(header(0, "Authorization") == "Bearer t1")
        transport.answer(0, body: #"{"display_name":"Ann"}"#)
        try await profile.doneSyncing()
        #expect(profile.contents?.displayName == "Ann")

        let feed: HTTPLoadable<Feed> = service.loadable("feed")
        #expect(feed.request.url?.absoluteString == "http://example.test/v1/feed")
        #expect(feed.request.httpMethod == "GET")
    }

    // MARK: Sends

    @Test("a JSON send: method, path, Content-Type and body out, the answer decoded")
    func aJSONSend() async throws {
        let service = makeService(authorized: false)
        let send = await start(waitingFor: 1) {
            try await service.send(.post, "posts/7/comments", json: Comment(text: "Hi"), as: Comment.self)
        }
        let request = transport.requests[0]
        #expect(request.httpMethod == "POST")
        #expect(request.url?.absoluteString == "http://example.test/v1/posts/7/comments")
        #expect(header(0, "Content-Type") == "application/json")
        #expect(try JSONDecoder().decode(Comment.self, from: request.httpBody ?? Data()) == Comment(text: "Hi"))
        #expect(header(0, "Idempotency-Key") == nil)
        transport.answer(0, status: 201, body: #"{"id":3,"text":"Hi"}"#)
        #expect(try await send.value == Comment(id: 3, text: "Hi"))
    }

    @Test("sends without a body send none and no Content-Type; Void sends take any 2xx, body ignored")
    func sendsWithoutABodyAndVoidSends() async throws {
        let service = makeService(authorized: false)
        let decoded = await start(waitingFor: 1) { try await service.send(.post, "posts/7/like", as: Feed.self) }
        #expect(transport.requests[0].httpBody == nil)
        #expect(header(0, "Content-Type") == nil)
        transport.answer(0, body: #"{"items":[7]}"#)
        #expect(try await decoded.value == Feed(items: [7]))

        let deleted = await start(waitingFor: 2) { try await service.send(.delete, "posts/7/like") }
        #expect(transport.requests[1].httpMethod == "DELETE")
        transport.answer(1, status: 204)
        try await deleted.value

        let edited = await start(waitingFor: 3) { try await service.send(.patch, "posts/7", json: ["title": "T"]) }
        #expect(header(2, "Content-Type") == "application/json")
        transport.answer(2, status: 200, body: "not JSON at all")
        try await edited.value
    }

    @Test("statuses: a 503 on a POST comes back with its Retry-After, sent once; a 404 and a 304 throw")
    func statuses() async throws {
        let service = makeService(authorized: false)
        let post = await start(waitingFor: 1) { try await service.send(.post, "comments", json: Comment(text: "Hi")) }
        transport.answer(0, status: 503, headers: ["Retry-After": "120"], body: "busy")
        let error = try #require(await #expect(throws: HTTPLoadableError.self) { try await post.value })
        #expect(error.retryAfter == .seconds(120))
        #expect(error.isRetryable)
        #expect(statusCode(of: error) == 503)
        await settle(rounds: 50) { false }
        #expect(transport.requests.count == 1)

        let missing = await start(waitingFor: 2) { try await service.send(URLRequest(url: feedURL)) }
        transport.answer(1, status: 404)
        #expect(statusCode(of: await missing.result.failure) == 404)

        var conditional = URLRequest(url: feedURL)
        conditional.setValue("\"v1\"", forHTTPHeaderField: "If-None-Match")
        let notModified = await start(waitingFor: 3) { try await service.send(conditional) }
        transport.answer(2, status: 304)
        #expect(statusCode(of: await notModified.result.failure) == 304)
    }

    @Test("a body that does not decode, a body over the limit, a transport failure")
    func failures() async throws {
        let service = HTTPService(baseURL: URL(string: "http://example.test")!, transport: transport, maxBodySize: 8)
        let malformed = await start(waitingFor: 1) { try await service.send(.get, "a", as: Feed.self) }
        transport.answer(0, body: "{")
        guard case .decoding? = await malformed.result.failure as? HTTPLoadableError else {
            Issue.record("expected .decoding"); return
        }
        let large = await start(waitingFor: 2) { try await service.send(.get, "b") }
        transport.answer(1, body: "123456789")
        guard case .tooLarge(8)? = await large.result.failure as? HTTPLoadableError else {
            Issue.record("expected .tooLarge"); return
        }
        let offline = await start(waitingFor: 3) { try await service.send(.post, "c") }
        transport.fail(2, with: URLError(.notConnectedToInternet))
        guard case .transport(let error)? = await offline.result.failure as? HTTPLoadableError else {
            Issue.record("expected .transport"); return
        }
        #expect(error.code == .notConnectedToInternet)
    }

    @Test("a body that does not encode fails with its type's name, before anything is sent (the token too)")
    func anUnencodableBody() async throws {
        let service = makeService()
        let error = try #require(
            await #expect(throws: HTTPService.BodyEncodingError.self) {
                try await service.send(.post, "readings", json: Reading(value: .nan))
            })
        #expect(error.typeName == "Reading")
        #expect(error.description.hasPrefix("HTTPService: the JSON body of type Reading could not be encoded: value: "))
        await #expect(throws: HTTPService.BodyEncodingError.self) {
            try await service.send(.put, "readings", json: [Reading(value: .infinity)], as: Feed.self)
        }
        #expect(transport.requests.isEmpty)
        #expect(issuer.issuedCount == 0)
    }

    @Test("the answer is decoded off the main actor")
    func decodesOffTheMainActor() async throws {
        struct Probe: Decodable, Sendable {
            let onMainThread: Bool
            init(from decoder: any Decoder) throws { onMainThread = Thread.isMainThread }
        }
        let service = makeService(authorized: false)
        let send = await start(waitingFor: 1) { try await service.send(.post, "probe", as: Probe.self) }
        transport.answer(0, body: "{}")
        #expect(try await send.value.onMainThread == false)
    }

    // MARK: Authorization

    @Test("a send waits for the token, carries it, and its idempotency key survives the 401 retry")
    func authorizedSendRetriesOnceWithANewToken() async throws {
        let service = makeService()
        let send = await start(waitingFor: 1) {
            try await service.send(.post, "likes", json: ["post": 7], as: Feed.self, idempotencyKey: "k-1")
        }
        #expect(header(0, "Authorization") == "Bearer t1")
        #expect(header(0, "Idempotency-Key") == "k-1")
        transport.answer(0, status: 401)
        await transport.waitForRequests(2)
        #expect(header(1, "Authorization") == "Bearer t2")
        #expect(header(1, "Idempotency-Key") == "k-1")
        #expect(transport.requests[1].httpBody == transport.requests[0].httpBody)
        #expect(issuer.issuedCount == 2)
        transport.answer(1, body: #"{"items":[1]}"#)
        #expect(try await send.value == Feed(items: [1]))
    }

    @Test("a second 401 fails the send with it, after one refresh; without authorization a 401 is not retried")
    func aSecond401Fails() async throws {
        let service = makeService()
        let send = await start(waitingFor: 1) { try await service.send(.delete, "posts/7") }
        transport.answer(0, status: 401)
        await transport.waitForRequests(2)
        transport.answer(1, status: 401, body: "still bad")
        #expect(statusCode(of: await send.result.failure) == 401)
        #expect(issuer.issuedCount == 2)

        let plain = makeService(authorized: false)
        let unauthorized = await start(waitingFor: 3) { try await plain.send(.delete, "posts/7") }
        #expect(header(2, "Authorization") == nil)
        transport.answer(2, status: 401)
        #expect(statusCode(of: await unauthorized.result.failure) == 401)
        await settle(rounds: 50) { false }
        #expect(transport.requests.count == 3)
    }

    @Test("concurrent 401s of loadables and sends, before, during and after the refresh, cause one refresh")
    func oneRefreshForLoadablesAndSends() async throws {
        let service = makeService()
        let feeds = (0..<4).map { _ in service.loadable(Feed.self, "feed", clock: clock) }
        for feed in feeds { feed.sync() }
        var sends: [Task<Feed, any Error>] = []
        for index in 0..<4 {
            sends.append(Task { try await service.send(.post, "likes/\(index)", as: Feed.self) })
        }
        await transport.waitForRequests(8)
        #expect((0..<8).allSatisfy { header($0, "Authorization") == "Bearer t1" })
        issuer.isGated = true
        // Rejections before the refresh starts, while it runs, and after it ended.
        for index in [0, 4] { transport.answer(index, status: 401) }
        await settle(until: { issuer.pendingCount == 1 })
        for index in [1, 5, 6] { transport.answer(index, status: 401) }
        await settle(until: { transport.openCount == 3 })
        issuer.release()
        await transport.waitForRequests(13)
        for index in [2, 3, 7] { transport.answer(index, status: 401) }
        await transport.waitForRequests(16)
        #expect(issuer.issuedCount == 2)
        #expect((8..<16).allSatisfy { header($0, "Authorization") == "Bearer t2" })
        for index in 8..<16 { transport.answer(index, body: #"{"items":[\#(index)]}"#) }
        for feed in feeds { try await feed.doneSyncing() }
        for send in sends { _ = try await send.value }
        #expect(feeds.allSatisfy { $0.loadableState == .didSyncSuccessfully })
        #expect(issuer.issuedCount == 2)
    }

    // MARK: Cancellation

    @Test("cancelling the sending task while it waits for the token ends it; the token still comes for the others")
    func cancelWhileWaitingForTheToken() async throws {
        let service = makeService()
        issuer.isGated = true
        let cancelled = Task { try await service.send(.post, "a") }
        let other = Task { try await service.send(.post, "b") }
        await settle(until: { issuer.pendingCount == 1 })
        cancelled.cancel()
        #expect(await cancelled.result.failure is CancellationError)
        issuer.release()
        await transport.waitForRequests(1)
        #expect(transport.requests.map { $0.url?.path } == ["/v1/b"])
        transport.answer(0, status: 204)
        try await other.value
    }

    @Test("cancelling the sending task while its request is out cancels the request")
    func cancelWhileTheRequestIsOut() async throws {
        let service = makeService()
        let send = await start(waitingFor: 1) { try await service.send(.post, "a", as: Feed.self) }
        send.cancel()
        #expect(await send.result.failure is CancellationError)
        #expect(transport.cancelledCount == 1)
        #expect(!transport.answer(0, body: #"{"items":[]}"#))
    }

    @Test("cancelling while the refresh after a 401 runs, and while the retry is out")
    func cancelDuringTheRefreshAndTheRetry() async throws {
        let service = makeService()
        let first = await start(waitingFor: 1) { try await service.send(.post, "a") }
        issuer.isGated = true
        transport.answer(0, status: 401)
        await settle(until: { issuer.pendingCount == 1 })
        first.cancel()
        #expect(await first.result.failure is CancellationError)
        issuer.release()
        await settle(until: { token.loadableState == .didSyncSuccessfully })
        #expect(transport.requests.count == 1)
        #expect(token.contents == "t2")

        let second = await start(waitingFor: 2) { try await service.send(.post, "b") }
        #expect(header(1, "Authorization") == "Bearer t2")
        transport.answer(1, status: 401)
        await transport.waitForRequests(3)
        #expect(header(2, "Authorization") == "Bearer t3")
        second.cancel()
        #expect(await second.result.failure is CancellationError)
        #expect(transport.cancelledCount == 1)
    }

    @Test("a task cancelled before it sends sends nothing")
    func aCancelledTaskSendsNothing() async throws {
        let service = makeService()
        let send = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await service.send(.post, "a")
        }
        #expect(await send.result.failure is CancellationError)
        await settle(rounds: 50) { false }
        #expect(transport.requests.isEmpty)
    }
}

extension Result {
    /// The error of a failure; `nil` for a success.
    var failure: Failure? {
        if case .failure(let error) = self { error } else { nil }
    }
}
