import Loadable
import LoadableTestSupport
import Testing

// The samples of Docs/Mutations.md, verbatim (`GuideSamplesTests` checks it), and tests that run
// them.

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

@MainActor
final class LoginViewModel {
    let logIn: LoadableAction<Credentials, Session>

    init(client: any AuthClient) {
        logIn = LoadableAction { credentials in
            try await client.logIn(credentials)
        }
    }

    /// What the screen shows under the button.
    var message: String? {
        switch logIn.loadableState {
        case .didFailToSync: "Check your username and password"
        case .syncing: "Logging in…"
        case .idle, .didSyncSuccessfully: nil
        }
    }

    func logInTapped(username: String, password: String) {
        logIn.send(Credentials(username: username, password: password))
    }

    func fieldsDidChange() {
        logIn.reset()  // the failure leaves the screen while the user types
    }
}

struct Post: Codable, Sendable, Equatable {
    var title: String
    var isLiked = false
    var likes = 0
}

protocol PostsAPI: Sendable {
    func setLiked(_ isLiked: Bool, postID: Int) async throws -> Post
}

@MainActor
final class PostViewModel {
    let post: Loadable<Post>
    let postID: Int
    let api: any PostsAPI
    var toast: String?

    init(post: Loadable<Post>, postID: Int, api: any PostsAPI) {
        self.post = post
        self.postID = postID
        self.api = api
    }

    func likeTapped() async {
        let isLiked = !(post.contents?.isLiked ?? false)
        let (api, postID) = (api, postID)
        do {
            try await post.mutate {
                $0.isLiked = isLiked
            } commit: {
                try await api.setLiked(isLiked, postID: postID)
            } reconcile: { post, answer in
                post = answer  // the server's post, with its like count
            }
        } catch {
            toast = "Couldn't update the like"  // the heart is already back as it was
        }
    }
}

@MainActor
final class HeldCommits {
    private var waiting: [String: CheckedContinuation<Void, any Error>] = [:]

    func commit(_ name: String) async throws {
        try await withCheckedThrowingContinuation { waiting[name] = $0 }
    }

    func isWaiting(_ name: String) -> Bool { waiting[name] != nil }

    func succeed(_ name: String) { waiting.removeValue(forKey: name)?.resume() }

    func fail(_ name: String, _ error: any Error) { waiting.removeValue(forKey: name)?.resume(throwing: error) }
}

// MARK: - Fakes

/// Gives other tasks turns until `condition` holds (never sleeps); records an issue if it never
/// does.
@MainActor
private func until(_ condition: () async -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async {
    for _ in 0..<10_000 {
        if await condition() { return }
        await Task.yield()
    }
    Issue.record("the condition never held", sourceLocation: sourceLocation)
}

/// An auth client that answers as the test scripts it, holding each call until told.
private actor ScriptedAuth: AuthClient {
    private var waiting: CheckedContinuation<Session, any Error>?

    func logIn(_ credentials: Credentials) async throws -> Session {
        try await withCheckedThrowingContinuation { waiting = $0 }
    }

    var isWaiting: Bool { waiting != nil }

    func answer(_ result: Result<Session, any Error>) {
        waiting?.resume(with: result)
        waiting = nil
    }
}

/// A posts API whose calls the test holds and answers.
private actor ScriptedPosts: PostsAPI {
    private var waiting: CheckedContinuation<Post, any Error>?
    private(set) var calls: [Bool] = []

    func setLiked(_ isLiked: Bool, postID: Int) async throws -> Post {
        calls.append(isLiked)
        return try await withCheckedThrowingContinuation { waiting = $0 }
    }

    var isWaiting: Bool { waiting != nil }

    func answer(_ result: Result<Post, any Error>) {
        waiting?.resume(with: result)
        waiting = nil
    }
}

private final class PostLoadable: Loadable<Post> {
    override func doSync() {}
}

@Suite("Docs/Mutations.md samples")
@MainActor
struct MutationsGuideTests {
    @Test("the login view model: a run, a failure, reset while typing, a success")
    func login() async throws {
        let auth = ScriptedAuth()
        let model = LoginViewModel(client: auth)
        #expect(model.message == nil)
        #expect(model.logIn.canRun)

        model.logInTapped(username: "ada", password: "wrong")
        #expect(model.message == "Logging in…")
        #expect(!model.logIn.canRun)  // a double tap is refused
        model.logInTapped(username: "ada", password: "wrong")
        await until { await auth.isWaiting }
        await auth.answer(.failure(TestError("401")))
        await yield(until: { model.logIn.loadableState == .didFailToSync })
        #expect(model.message == "Check your username and password")

        model.fieldsDidChange()
        #expect(model.message == nil)
        #expect(model.logIn.loadableState == .idle)

        model.logInTapped(username: "ada", password: "right")
        await until { await auth.isWaiting }
        await auth.answer(.success(Session(token: "t1")))
        await yield(until: { model.logIn.loadableState == .didSyncSuccessfully })
        #expect(model.logIn.contents == Session(token: "t1"))
    }

    @Test("the like button: the heart fills at once, the server's post replaces it")
    func likeSucceeds() async {
        let api = ScriptedPosts()
        let post = PostLoadable()
        post.setDidSyncSuccessfully(Post(title: "Hello", likes: 4))
        let model = PostViewModel(post: post, postID: 7, api: api)
        let tap = Task { await model.likeTapped() }
        await until { await api.isWaiting }
        #expect(post.contents == Post(title: "Hello", isLiked: true, likes: 4))
        await api.answer(.success(Post(title: "Hello", isLiked: true, likes: 5)))
        await tap.value
        #expect(post.contents == Post(title: "Hello", isLiked: true, likes: 5))
        #expect(model.toast == nil)
    }

    @Test("the like button: a failed commit empties the heart again and shows the toast")
    func likeFails() async {
        let api = ScriptedPosts()
        let post = PostLoadable()
        post.setDidSyncSuccessfully(Post(title: "Hello", likes: 4))
        let model = PostViewModel(post: post, postID: 7, api: api)
        let tap = Task { await model.likeTapped() }
        await until { await api.isWaiting }
        #expect(post.contents?.isLiked == true)
        await api.answer(.failure(TestError("offline")))
        await tap.value
        #expect(post.contents == Post(title: "Hello", likes: 4))
        #expect(model.toast == "Couldn't update the like")
        #expect(post.loadableState == .didSyncSuccessfully)  // the state is not the change's
    }

    @Test("a counter change applied again on a refreshed base counts twice until the commit answers")
    func counterChangeCountsTwice() async {
        let post = PostLoadable()
        post.setDidSyncSuccessfully(Post(title: "Hello", likes: 4))
        let commits = HeldCommits()
        let task = Task {
            try await post.mutate {
                $0.likes += 1
            } commit: {
                try await commits.commit("like")
            }
        }
        await yield(until: { commits.isWaiting("like") })
        #expect(post.contents?.likes == 5)
        // A refresh that already has the server's count.
        post.sync()
        post.setDidSyncSuccessfully(Post(title: "Hello", likes: 5))
        #expect(post.contents?.likes == 6)  // the documented hazard
        commits.fail("like", TestError("conflict"))
        _ = await task.result
        #expect(post.contents?.likes == 5)
    }

    @Test("the testing recipe: changes held on continuations, resolved in any order")
    func heldCommitsRecipe() async {
        let post = PostLoadable()
        post.setDidSyncSuccessfully(Post(title: "Hello"))
        let commits = HeldCommits()
        let like = Task {
            try await post.mutate {
                $0.isLiked = true
            } commit: {
                try await commits.commit("like")
            }
        }
        await yield(until: { commits.isWaiting("like") })
        let rename = Task {
            try await post.mutate {
                $0.title = "Hi"
            } commit: {
                try await commits.commit("rename")
            }
        }
        await yield(until: { commits.isWaiting("rename") })
        #expect(post.contents == Post(title: "Hi", isLiked: true))
        commits.fail("like", TestError("offline"))
        _ = await like.result
        #expect(post.contents == Post(title: "Hi"))
        commits.succeed("rename")
        _ = await rename.result
        #expect(post.contents == Post(title: "Hi"))
        #expect(post.baseContents == Post(title: "Hi"))
    }
}
