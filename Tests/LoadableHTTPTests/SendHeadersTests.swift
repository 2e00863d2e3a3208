import Foundation
import Loadable
import LoadableCaching
import LoadableHTTP
import LoadableSupport
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Every form of write: the four sends of a path and the two `response(to:)`.
enum WriteForm: String, CaseIterable, CustomTestStringConvertible {
    case jsonAs, json, bareAs, bare, responseJSON, response

    var testDescription: String { rawValue }

    var hasJSONBody: Bool { self == .jsonAs || self == .json || self == .responseJSON }

    func send(
        _ api: HTTPService, key: String? = nil, precondition: HTTPPrecondition? = nil, headers: [String: String] = [:]
    ) async throws {
        let body = Comment(text: "Hi")
        switch self {
        case .jsonAs:
            _ = try await api.send(
                .put, "c", json: body, as: Comment.self, idempotencyKey: key, precondition: precondition,
                headers: headers)
        case .json:
            try await api.send(
                .put, "c", json: body, idempotencyKey: key, precondition: precondition, headers: headers)
        case .bareAs:
            _ = try await api.send(
                .put, "c", as: Comment.self, idempotencyKey: key, precondition: precondition, headers: headers)
        case .bare:
            try await api.send(.put, "c", idempotencyKey: key, precondition: precondition, headers: headers)
        case .responseJSON:
            _ = try await api.response(
                to: .put, "c", json: body, as: Comment.self, idempotencyKey: key, precondition: precondition,
                headers: headers)
        case .response:
            _ = try await api.response(
                to: .put, "c", as: Comment.self, idempotencyKey: key, precondition: precondition, headers: headers)
        }
    }
}

/// Preconditions and headers of a send, `HTTPResponse`, the conflict properties of
/// `HTTPLoadableError`, and `HTTPLoadable.etag`/`lastModified`, through a scripted transport.
@MainActor
@Suite(.timeLimit(.minutes(3))) struct SendHeadersTests {
    let transport = ScriptedTransport()

    func service(headers: [String: String] = [:]) -> HTTPService {
        HTTPService(baseURL: URL(string: "http://127.0.0.1:9/v1")!, transport: transport, headers: headers)
    }

    /// Runs `work` until its request is out, answers it with a comment, and returns the request.
    func sent(_ work: @escaping @MainActor () async throws -> Void) async throws -> URLRequest {
        let task = Task { try await work() }
        let index = transport.requests.count
        await transport.waitForRequests(index + 1)
        transport.answer(index, body: #"{"id":1,"text":"Hi"}"#)
        try await task.value
        return transport.requests[index]
    }

    @Test(
        "a precondition goes out verbatim on every form of write",
        arguments: WriteForm.allCases,
        [
            (HTTPPrecondition.ifMatch(#""v7""#), "If-Match", #""v7""#),
            (.ifMatch(#"W/"a", "b""#), "If-Match", #"W/"a", "b""#),
            (.ifNoneMatchAny, "If-None-Match", "*"),
            (
                .ifUnmodifiedSince("Tue, 24 Nov 2026 10:00:00 GMT"), "If-Unmodified-Since",
                "Tue, 24 Nov 2026 10:00:00 GMT"
            ),
        ])
    func preconditionGoesOut(form: WriteForm, precondition: (HTTPPrecondition, String, String)) async throws {
        let api = service()
        let request = try await sent { try await form.send(api, precondition: precondition.0) }
        #expect(precondition.0.headerName == precondition.1)
        #expect(precondition.0.headerValue == precondition.2)
        #expect(request.value(forHTTPHeaderField: precondition.1) == precondition.2)
        #expect(request.httpMethod == "PUT")
    }

    @Test(
        "a send's own headers replace the service's of the same name in any case; the service's others still go",
        arguments: WriteForm.allCases)
    func ownHeadersWin(form: WriteForm) async throws {
        let api = service(headers: ["X-Client": "service", "Accept-Language": "en"])
        let request = try await sent {
            try await form.send(
                api, key: "k1", precondition: .ifMatch(#""2""#),
                headers: ["x-client": "send", "X-Trace": "t1", "Idempotency-Key": "mine", "If-Match": #""1""#])
        }
        #expect(request.value(forHTTPHeaderField: "X-Client") == "send")
        #expect(request.value(forHTTPHeaderField: "Accept-Language") == "en")
        #expect(request.value(forHTTPHeaderField: "X-Trace") == "t1")
        #expect(request.value(forHTTPHeaderField: "Idempotency-Key") == "k1", "the key wins over headers:")
        #expect(request.value(forHTTPHeaderField: "If-Match") == #""2""#, "the precondition wins over headers:")
        let fields = (request.allHTTPHeaderFields ?? [:]).keys.filter { $0.lowercased() == "x-client" }
        #expect(fields.count == 1)
        #expect(request.value(forHTTPHeaderField: "Content-Type") == (form.hasJSONBody ? "application/json" : nil))
    }

    @Test("a JSON send's Content-Type can be replaced: a merge patch")
    func contentTypeCanBeReplaced() async throws {
        let api = service()
        let request = try await sent {
            try await api.send(
                .patch, "c", json: Comment(text: "Hi"), headers: ["Content-Type": "application/merge-patch+json"])
        }
        #expect(request.value(forHTTPHeaderField: "Content-Type") == "application/merge-patch+json")
        #expect(request.httpBody == Data(#"{"text":"Hi"}"#.utf8))
    }

    @Test(
        "a precondition or a header a request cannot carry throws InvalidHeaderError naming it; nothing is sent",
        arguments: WriteForm.allCases)
    func invalidHeadersAreNeverDropped(form: WriteForm) async throws {
        let api = service()
        let cases: [(HTTPPrecondition?, [String: String], String)] = [
            (.ifMatch("\"a\"\r\nX-Injected: 1"), [:], "If-Match"),
            (.ifMatch(""), [:], "If-Match"),
            (.ifUnmodifiedSince("Tue, 24 Nov 2026 10:00:00 GMT\n"), [:], "If-Unmodified-Since"),
            (nil, ["X-Trace": "a\nb"], "X-Trace"),
            (nil, ["X-Trace": "tränen"], "X-Trace"),
            (nil, ["Bad Name": "v"], "Bad Name"),
            (nil, ["": "v"], ""),
            (nil, ["X:Y": "v"], "X:Y"),
        ]
        for (precondition, headers, name) in cases {
            let error = await failure { try await form.send(api, precondition: precondition, headers: headers) }
            let invalid = try #require(error as? HTTPService.InvalidHeaderError, "\(String(describing: error))")
            #expect(invalid.name == name)
            #expect(!(error is any RetryAfterProviding))
        }
        #expect(transport.requests.isEmpty)
    }

    @Test("HTTPResponse: the real 2xx, the headers in any case, nil validators when the answer has none")
    func responseWithoutValidators() async throws {
        let api = service()
        let task = Task { try await api.response(to: .post, "c", json: Comment(text: "Hi"), as: Comment.self) }
        await transport.waitForRequests(1)
        transport.answer(0, status: 202, headers: ["X-Request-Id": "r1"], body: #"{"id":1,"text":"Hi"}"#)
        let response = try await task.value
        #expect(response.status == 202)
        #expect(response.value.text == "Hi")
        #expect(response.etag == nil)
        #expect(response.lastModified == nil)
        #expect(response.header("x-request-id") == "r1")
        #expect(response.header("X-REQUEST-ID") == "r1")
        #expect(response.header("X-Other") == nil)
    }

    @Test("a send that fails with a 412 throws it; nothing is retried")
    func preconditionFailedThrows() async throws {
        let api = service()
        let task = Task { try await api.send(.put, "c", json: Comment(text: "Hi"), precondition: .ifMatch(#""1""#)) }
        await transport.waitForRequests(1)
        transport.answer(0, status: 412, body: "version mismatch")
        let error = try #require(await failure { try await task.value } as? HTTPLoadableError)
        #expect(error.isPreconditionFailed)
        #expect(error.isConflict)
        #expect(!error.isRetryable)
        #expect(transport.requests.count == 1)
    }

    struct StatusCase: CustomTestStringConvertible, Sendable {
        let error: HTTPLoadableError
        let isConflict: Bool
        let isPreconditionFailed: Bool
        let isRetryable: Bool
        var testDescription: String { "\(error)" }
    }

    @Test(
        "isConflict is a 409 or a 412; a 409 with Retry-After is retryable instead; other failures are neither",
        arguments: [
            StatusCase(
                error: .status(code: 409, headers: [:], bodyPrefix: Data()), isConflict: true,
                isPreconditionFailed: false, isRetryable: false),
            StatusCase(
                error: .status(code: 409, headers: ["retry-after": "3"], bodyPrefix: Data()),
                isConflict: false, isPreconditionFailed: false, isRetryable: true),
            StatusCase(
                error: .status(code: 412, headers: [:], bodyPrefix: Data()), isConflict: true,
                isPreconditionFailed: true, isRetryable: false),
            StatusCase(
                error: .status(code: 412, headers: ["Retry-After": "3"], bodyPrefix: Data()),
                isConflict: true, isPreconditionFailed: true, isRetryable: false),
            StatusCase(
                error: .status(code: 404, headers: [:], bodyPrefix: Data()), isConflict: false,
                isPreconditionFailed: false, isRetryable: false),
            StatusCase(
                error: .status(code: 503, headers: [:], bodyPrefix: Data()), isConflict: false,
                isPreconditionFailed: false, isRetryable: true),
            StatusCase(
                error: .transport(URLError(.timedOut)), isConflict: false, isPreconditionFailed: false,
                isRetryable: true),
            StatusCase(
                error: .tooLarge(maxBodySize: 1), isConflict: false, isPreconditionFailed: false,
                isRetryable: false),
        ])
    func conflictProperties(_ item: StatusCase) {
        #expect(item.error.isConflict == item.isConflict)
        #expect(item.error.isPreconditionFailed == item.isPreconditionFailed)
        #expect(item.error.isRetryable == item.isRetryable)
    }

    @Test("a 409 with Retry-After gives the syncer the server's delay")
    func conflictRetryAfter() {
        let error = HTTPLoadableError.status(code: 409, headers: ["Retry-After": "3"], bodyPrefix: Data())
        #expect(error.retryAfter == .seconds(3))
    }

    // MARK: - HTTPLoadable.etag and lastModified

    func loadable() -> HTTPLoadable<Comment> {
        HTTPLoadable<Comment>(request: URLRequest(url: URL(string: "http://127.0.0.1:9/c")!), transport: transport)
    }

    /// Syncs `loadable` and answers its request with `status` and `headers`.
    func sync(_ loadable: HTTPLoadable<Comment>, status: Int = 200, headers: [String: String]) async throws {
        let index = transport.requests.count
        loadable.sync()
        await transport.waitForRequests(index + 1)
        transport.answer(index, status: status, headers: headers, body: status == 304 ? "" : #"{"id":1,"text":"Hi"}"#)
        try await loadable.doneSyncing()
    }

    @Test(
        "etag and lastModified: nil before a sync, replaced by a 2xx (nil when it has none), kept or renewed by a 304")
    func validatorsFollowTheSyncs() async throws {
        let comment = loadable()
        #expect(comment.etag == nil)
        #expect(comment.lastModified == nil)
        try await sync(comment, headers: ["ETag": #""a""#, "Last-Modified": "Mon, 23 Nov 2026 10:00:00 GMT"])
        #expect(comment.etag == #""a""#)
        #expect(comment.lastModified == "Mon, 23 Nov 2026 10:00:00 GMT")
        try await sync(comment, status: 304, headers: [:])
        #expect(comment.etag == #""a""#, "a 304 keeps them")
        #expect(comment.lastModified == "Mon, 23 Nov 2026 10:00:00 GMT")
        try await sync(comment, status: 304, headers: ["ETag": #""b""#])
        #expect(comment.etag == #""b""#, "a 304 that sends a new ETag renews it")
        #expect(comment.lastModified == "Mon, 23 Nov 2026 10:00:00 GMT")
        try await sync(comment, headers: ["Last-Modified": "Tue, 24 Nov 2026 10:00:00 GMT"])
        #expect(comment.etag == nil, "a 2xx without an ETag leaves none")
        #expect(comment.lastModified == "Tue, 24 Nov 2026 10:00:00 GMT")
    }

    @Test("etag is observable: a sync that brings a new one tells Observation; a local write too")
    func etagIsObservable() async throws {
        let comment = loadable()
        try await sync(comment, headers: ["ETag": #""a""#])
        let changes = Locked(0)
        func observe() {
            withObservationTracking {
                _ = comment.etag
            } onChange: {
                changes.withLock { $0 += 1 }
            }
        }
        observe()
        try await sync(comment, headers: ["ETag": #""b""#])
        #expect(changes.withLock { $0 } >= 1)
        #expect(comment.etag == #""b""#)
        let afterSync = changes.withLock { $0 }
        observe()
        comment.setContents(Comment(id: 1, text: "local"))
        #expect(changes.withLock { $0 } == afterSync + 1)
        #expect(comment.etag == nil)
    }

    @Test("setContents of a write's answer shows it with its validators, saved with the persisted entry")
    func setContentsOfAResponse() async throws {
        let api = service()
        let comment = api.loadable(Comment.self, "c")
        let cache = InMemoryLoadableCache()
        let persistence = comment.persist(in: cache, key: "c")
        try await sync(comment, headers: ["ETag": #""1""#])

        let task = Task {
            try await api.response(
                to: .put, "c", json: Comment(id: 1, text: "edited"), as: Comment.self, precondition: .ifMatch(#""1""#))
        }
        await transport.waitForRequests(2)
        transport.answer(
            1, headers: ["ETag": #""2""#, "Last-Modified": "Tue, 24 Nov 2026 10:00:00 GMT"],
            body: #"{"id":1,"text":"edited"}"#)
        comment.setContents(try await task.value)
        #expect(comment.contents == Comment(id: 1, text: "edited"))
        #expect(comment.etag == #""2""#)
        #expect(comment.lastModified == "Tue, 24 Nov 2026 10:00:00 GMT")
        await persistence.saved()
        #expect(
            await cache.load(key: "c")?.metadata
                == ["ETag": #""2""#, "Last-Modified": "Tue, 24 Nov 2026 10:00:00 GMT"])

        // The next sync sends the new version; a plain setContents afterwards drops it again.
        try await sync(comment, status: 304, headers: [:])
        #expect(transport.requests[2].value(forHTTPHeaderField: "If-None-Match") == #""2""#)
        comment.setContents(Comment(id: 1, text: "local"))
        #expect(comment.etag == nil)
    }
}
