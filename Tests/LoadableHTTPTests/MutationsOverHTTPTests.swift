import Foundation
import LoadableHTTP
import LoadableTesting
import Testing

// The `HTTPService` samples of `Docs/Mutations.md`, verbatim (`GuideSamplesTests` checks it), with
// the guide's types they conform to (the same text as in `MutationsGuideTests.swift`), run against
// a `LoopbackHTTPServer`.

struct Credentials: Encodable, Sendable {
    var username: String
    var password: String
}

struct Session: Codable, Sendable, Equatable {
    var token: String
}

protocol AuthClient: Sendable {
    func logIn(_ credentials: Credentials) async throws -> Session
}

struct Post: Codable, Sendable, Equatable {
    var title: String
    var isLiked = false
    var likes = 0
}

protocol PostsAPI: Sendable {
    func setLiked(_ isLiked: Bool, postID: Int) async throws -> Post
}

extension HTTPService: AuthClient {
    func logIn(_ credentials: Credentials) async throws -> Session {
        try await send(.post, "login", json: credentials, as: Session.self)
    }
}

extension HTTPService: PostsAPI {
    func setLiked(_ isLiked: Bool, postID: Int) async throws -> Post {
        try await send(isLiked ? .put : .delete, "posts/\(postID)/like", as: Post.self)
    }
}

@MainActor
@Suite(.timeLimit(.minutes(5))) struct MutationsOverHTTPTests {
    @Test("the guide's AuthClient and PostsAPI over HTTPService send what the guide says")
    func clientsOverTheService() async throws {
        let server = try LoopbackHTTPServer { request in
            switch (request.method, request.path) {
            case ("POST", "/api/login"): .json(#"{"token":"s1"}"#)
            case ("PUT", "/api/posts/7/like"): .json(#"{"title":"Hi","isLiked":true,"likes":4}"#)
            case ("DELETE", "/api/posts/7/like"): .json(#"{"title":"Hi","isLiked":false,"likes":3}"#)
            default: .status(404)
            }
        }
        let api = HTTPService(baseURL: server.url("/api"))
        let client: any AuthClient = api
        #expect(try await client.logIn(Credentials(username: "ann", password: "pw")) == Session(token: "s1"))
        #expect(server.requests[0].header("Content-Type") == "application/json")
        #expect(String(decoding: server.requests[0].body, as: UTF8.self).contains(#""username":"ann""#))
        let posts: any PostsAPI = api
        #expect(try await posts.setLiked(true, postID: 7) == Post(title: "Hi", isLiked: true, likes: 4))
        #expect(try await posts.setLiked(false, postID: 7) == Post(title: "Hi", isLiked: false, likes: 3))
        #expect(server.requests.map(\.method) == ["POST", "PUT", "DELETE"])
    }
}
