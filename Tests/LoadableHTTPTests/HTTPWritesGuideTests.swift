import Foundation
import LoadableHTTP
import LoadableSupport
import LoadableTestSupport
import LoadableTesting
import Testing

// The samples of `Docs/HTTP.md`, "Writes: `HTTPService`", verbatim (`GuideSamplesTests` checks
// it), and tests that run them against a `LoopbackHTTPServer`.

/// The types and models of the samples, apart from the other tests' types of the same names.
enum WritesGuide {
    struct AccessToken: Decodable, Sendable {
        let value: String
    }

    typealias Feed = Guide.Feed

    /// The service sample, compiled but not run: it would ask api.example.com.
    @MainActor static func aService(token: HTTPLoadable<AccessToken>) -> (HTTPService, HTTPLoadable<Feed>) {
        let api = HTTPService(
            baseURL: URL(string: "https://api.example.com/v1")!,
            authorization: .bearer(LoadableWaiter(token, timeout: .seconds(30))) { $0.value },
            headers: ["Accept-Language": "en"]
        )
        let feed = api.loadable(Feed.self, "feed")  // an HTTPLoadable of GET /v1/feed, authorized
        return (api, feed)
    }

    struct Credentials: Encodable, Sendable {
        var username: String
        var password: String
    }

    struct Session: Decodable, Sendable, Equatable {
        var name: String
    }

    @MainActor
    final class LoginModel {
        let logIn: LoadableAction<Credentials, Session>

        init(accounts: HTTPService) {
            logIn = LoadableAction { credentials in
                try await accounts.send(.post, "login", json: credentials, as: Session.self)
            }
        }
    }

    struct Post: Codable, Sendable, Equatable {
        var id: Int
        var isLiked: Bool
        var likes: Int
    }

    @MainActor
    final class PostModel {
        let post: HTTPLoadable<Post>
        let api: HTTPService

        init(id: Int, api: HTTPService) {
            self.api = api
            post = api.loadable("posts/\(id)")
        }

        func like() async throws {
            guard let id = post.contents?.id else { return }
            try await post.mutate {
                $0.isLiked = true
            } commit: {
                try await api.send(.put, "posts/\(id)/like", as: Post.self)
            } reconcile: { post, answer in
                post = answer  // the server's post, with its like count
            }
        }
    }

    struct NewComment: Encodable, Sendable {
        var text: String
    }

    struct Comment: Decodable, Sendable, Equatable {
        var id: Int
        var text: String
    }

    @MainActor
    final class CommentComposer {
        let post: LoadableAction<String, Comment>

        /// One composer per comment written: its key stays the same however often the user taps
        /// "Send" again after a failure, so the server keeps the comment once.
        init(postID: Int, api: HTTPService, idempotencyKey: String = UUID().uuidString) {
            post = LoadableAction { text in
                try await api.send(
                    .post, "posts/\(postID)/comments", json: NewComment(text: text), as: Comment.self,
                    idempotencyKey: idempotencyKey)
            }
        }

        /// What the screen says after a failed send.
        var failureMessage: String? {
            guard let error = post.error else { return nil }
            guard let httpError = error as? HTTPLoadableError else { return "Couldn't send" }
            if let wait = httpError.retryAfter {
                return "The server is busy: try again in \(wait.components.seconds) s"
            }
            return httpError.isRetryable ? "Couldn't send: try again" : "The comment was refused"
        }
    }
}

/// The samples of "Writes" run against a backend whose token `t1` is revoked after the first
/// request, so that every write meets a 401, one refresh and one retry.
@MainActor
@Suite(.timeLimit(.minutes(5))) struct HTTPWritesGuideTests {
    typealias Post = WritesGuide.Post

    let backend: TokenBackend
    let api: HTTPService
    let accounts: HTTPService
    /// The comments posted so far, by idempotency key: a key seen again is answered with the
    /// same comment, not a new one.
    let comments = Locked([String: Int]())
    let isBusy = Locked(false)

    init() throws {
        let (comments, isBusy) = (comments, isBusy)
        let liked = Locked(false)
        backend = try TokenBackend { request in
            switch (request.method, request.path) {
            case ("GET", "/v1/posts/7"):
                let isLiked = liked.withLock { $0 }
                return .json(#"{"id":7,"isLiked":\#(isLiked),"likes":\#(isLiked ? 4 : 3)}"#)
            case ("PUT", "/v1/posts/7/like"):
                liked.withLock { $0 = true }
                return .json(#"{"id":7,"isLiked":true,"likes":4}"#)
            case ("POST", "/v1/posts/7/comments"):
                if isBusy.withLock({ $0 }) { return .status(503, headers: [.init("Retry-After", "20")]) }
                let key = request.header("Idempotency-Key") ?? ""
                let id = comments.withLock { comments in
                    if let id = comments[key] { return id }
                    comments[key] = comments.count + 1
                    return comments.count
                }
                return .json(#"{"id":\#(id),"text":"Hi"}"#, status: 201)
            case ("POST", "/v1/posts/8/comments"):
                return .status(422)
            default:
                return nil
            }
        }
        let token = HTTPLoadable<String>(request: URLRequest(url: backend.server.url("/token")))
        api = HTTPService(
            baseURL: backend.server.url("/v1"),
            authorization: .bearer(LoadableWaiter(token, timeout: .seconds(30), clock: ManualClock())))
        accounts = HTTPService(baseURL: backend.server.url("/v1"), transport: LoginTransport())
    }

    @Test("log in: the action posts the credentials and shows the session")
    func logIn() async throws {
        let model = WritesGuide.LoginModel(accounts: accounts)
        let session = try await model.logIn.run(WritesGuide.Credentials(username: "ann", password: "secret"))
        #expect(session == WritesGuide.Session(name: "ann"))
        #expect(model.logIn.contents == session)
    }

    @Test("like: the heart fills at once; after a 401, one refresh and one retry, the server's post")
    func like() async throws {
        let model = WritesGuide.PostModel(id: 7, api: api)
        try await model.post.synced()
        #expect(model.post.contents == Post(id: 7, isLiked: false, likes: 3))
        backend.revoke()
        let like = Task { try await model.like() }
        await settle { model.post.contents?.isLiked == true }
        try await like.value
        #expect(model.post.contents == Post(id: 7, isLiked: true, likes: 4))
        let likes = backend.server.requests.filter { $0.path == "/v1/posts/7/like" }
        #expect(likes.map { $0.header("Authorization") } == ["Bearer t1", "Bearer t2"])
        #expect(backend.tokenRequests == 2)
    }

    @Test("comment: a 503 comes back with its Retry-After; the next tap sends the same key, kept once")
    func comment() async throws {
        let composer = WritesGuide.CommentComposer(postID: 7, api: api, idempotencyKey: "c-1")
        isBusy.withLock { $0 = true }
        _ = try? await composer.post.run("Hi")
        #expect(composer.failureMessage == "The server is busy: try again in 20 s")
        isBusy.withLock { $0 = false }
        let first = try await composer.post.run("Hi")
        let again = try await composer.post.run("Hi")
        #expect(first == WritesGuide.Comment(id: 1, text: "Hi"))
        #expect(again == first)
        let keys = backend.server.requests.filter { $0.path == "/v1/posts/7/comments" }.map {
            $0.header("Idempotency-Key")
        }
        #expect(keys == ["c-1", "c-1", "c-1"])
        #expect(composer.failureMessage == nil)
        let refused = WritesGuide.CommentComposer(postID: 8, api: api)
        _ = try? await refused.post.run("Hi")
        #expect(refused.failureMessage == "The comment was refused")  // a 422
    }
}

/// The login endpoint of the guide's backend, scripted: answers a POST with the session of the
/// user named in the body.
struct LoginTransport: HTTPTransport {
    func send(_ request: URLRequest, maxBodySize: Int) async throws -> (HTTPURLResponse, Data) {
        struct Body: Decodable { let username: String }
        let name = try JSONDecoder().decode(Body.self, from: request.httpBody ?? Data()).username
        let response = HTTPURLResponse(
            url: request.url!, statusCode: request.httpMethod == "POST" ? 200 : 405, httpVersion: "HTTP/1.1",
            headerFields: [:])!
        return (response, Data(#"{"name":"\#(name)"}"#.utf8))
    }
}
