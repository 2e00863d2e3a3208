import Foundation
import Loadable
import Testing

// The samples of Docs/Paging.md, verbatim (`GuideSamplesTests` checks it): the introduction, the
// subclass, and the article list's model and test.

// MARK: - Guide: introduction

@MainActor
@Suite struct PagingIntroductionTests {
    /// The introduction's posts.
    struct Post: Sendable {
        var title: String
    }

    /// The pages of the introduction's `api`, by cursor.
    struct PostsPager: Sendable {
        let pages: [String?: (titles: [String], next: String?)]

        func posts(after cursor: String?) async throws -> (posts: [Post], next: String?) {
            let page = pages[cursor] ?? ([], nil)
            return (page.titles.map { Post(title: $0) }, page.next)
        }
    }

    @Test("the introduction's list loads the first page, then appends the next")
    func introduction() async throws {
        let api = PostsPager(pages: [nil: (["one", "two"], "2"), "2": (["three"], nil)])

        let posts = PagedLoadable<Post, String> { cursor in
            let response = try await api.posts(after: cursor)
            return .init(items: response.posts, nextCursor: response.next)
        }
        posts.sync()  // loads the first page
        posts.loadNextPage()  // later, when the last row appears: appends the next page

        try await posts.doneSyncing()  // (the call above came during the refresh: it did nothing)
        #expect(posts.contents?.map(\.title) == ["one", "two"])
        posts.loadNextPage()
        try await posts.doneLoadingNextPage()
        #expect(posts.contents?.map(\.title) == ["one", "two", "three"])
        #expect(!posts.hasMorePages)
    }

    @Test("the subclass loads pages after the last comment's id while the server has more")
    func subclass() async throws {
        let comments = CommentsLoadable(api: FakeCommentsAPI(count: 120))
        comments.sync()
        try await comments.doneSyncing()
        #expect(comments.contents?.count == 50)
        comments.loadNextPage()
        try await comments.doneLoadingNextPage()
        comments.loadNextPage()
        try await comments.doneLoadingNextPage()
        #expect(comments.contents?.map(\.id) == Array(1...120))
        #expect(!comments.hasMorePages)
    }
}

// MARK: - Guide: subclass

struct Comment: Sendable, Identifiable {
    var id: Int
}

protocol CommentsAPI: Sendable {
    func comments(after lastID: Comment.ID?, limit: Int) async throws -> (comments: [Comment], hasMore: Bool)
}

final class CommentsLoadable: PagedLoadable<Comment, Comment.ID> {
    private let api: any CommentsAPI
    init(api: any CommentsAPI) {
        self.api = api
        super.init()
    }
    override func loadPage(after lastID: Comment.ID?) async throws -> Page {
        let response = try await api.comments(after: lastID, limit: 50)
        return Page(items: response.comments, nextCursor: response.hasMore ? response.comments.last?.id : nil)
    }
}

/// Comments 1 to `count`, in pages of `limit`.
private struct FakeCommentsAPI: CommentsAPI {
    let count: Int

    func comments(after lastID: Comment.ID?, limit: Int) async throws -> (comments: [Comment], hasMore: Bool) {
        let first = (lastID ?? 0) + 1
        let last = min(first + limit - 1, count)
        return ((first...last).map { Comment(id: $0) }, last < count)
    }
}

// MARK: - Guide: model

/// An article as the list shows it.
struct Article: Sendable, Hashable, Identifiable {
    var id: Int
    var title: String
}

/// One page of articles, as the server sends it.
struct ArticlePage: Sendable {
    var articles: [Article]
    /// Where the next page starts; `nil` on the last page.
    var nextPageToken: String?
}

/// The server: one call per page.
protocol ArticlesAPI: Sendable {
    func articles(pageToken: String?) async throws -> ArticlePage
}

/// What an article list screen shows, and what it does when the user scrolls, retries or pulls.
@MainActor
final class ArticleListModel {
    /// The row under the last article.
    enum Footer: Equatable {
        /// Nothing: the end of the list, or no next page asked for yet.
        case hidden
        /// A spinner: the next page is loading.
        case loading
        /// A retry row: the next page failed, for this reason.
        case retry(String)
    }

    let articles: PagedLoadable<Article, String>

    init(api: any ArticlesAPI) {
        articles = PagedLoadable { pageToken in
            let page = try await api.articles(pageToken: pageToken)
            return .init(items: page.articles, nextCursor: page.nextPageToken)
        }
    }

    /// What the whole screen shows: a spinner, the list, an empty state, or an error.
    var phase: LoadableSnapshot<[Article]>.Phase { articles.snapshot.phase }

    /// The rows of the list; kept on screen while a refresh runs or after it fails.
    var rows: [Article] { articles.contents ?? [] }

    var footer: Footer {
        switch articles.nextPageState {
        case .syncing: .loading
        case .didFailToSync: .retry("\(articles.nextPageError ?? LoadableError.unspecified)")
        case .idle, .didSyncSuccessfully: .hidden
        }
    }

    func screenDidAppear() {
        articles.syncIfNeeded()
    }

    /// For `.refreshable`: reloads from the first page and returns when that is done.
    func pullToRefresh() async {
        articles.sync()
        try? await articles.doneSyncing()
    }

    func rowDidAppear(_ article: Article) {
        if article.id == rows.last?.id { articles.loadNextPage() }
    }

    func retryTapped() {
        articles.loadNextPage()
    }
}

// MARK: - Guide: test

@MainActor
@Suite struct PagingGuideTests {
    @Test("the article list loads, appends, retries a failed page, refreshes, and stops at the end")
    func articleList() async throws {
        let one = Article(id: 1, title: "One"), two = Article(id: 2, title: "Two")
        let three = Article(id: 3, title: "Three"), four = Article(id: 4, title: "Four")
        let api = FakeArticlesAPI(pages: [
            nil: ArticlePage(articles: [one, two], nextPageToken: "2"),
            "2": ArticlePage(articles: [three], nextPageToken: "3"),
            "3": ArticlePage(articles: [four], nextPageToken: nil),
        ])
        let model = ArticleListModel(api: api)

        // The screen appears: the first page loads.
        model.screenDidAppear()
        guard case .syncing(cached: nil) = model.phase else {
            Issue.record("expected a first load, got \(model.phase)")
            return
        }
        try await model.articles.doneSyncing()
        #expect(model.rows.map(\.title) == ["One", "Two"])
        #expect(model.footer == .hidden)

        // Rows above the last one do not load more.
        model.rowDidAppear(model.rows[0])
        #expect(model.footer == .hidden)

        // The last row appears: the next page loads under a footer spinner.
        model.rowDidAppear(model.rows[1])
        #expect(model.footer == .loading)
        #expect(model.articles.loadableState == .didSyncSuccessfully)
        try await model.articles.doneLoadingNextPage()
        #expect(model.rows.map(\.title) == ["One", "Two", "Three"])
        #expect(model.footer == .hidden)

        // The next page fails: every row stays and the footer offers a retry.
        await api.failNextCall(with: OfflineError())
        model.rowDidAppear(model.rows[2])
        try await model.articles.doneLoadingNextPage()
        #expect(model.footer == .retry("offline"))
        #expect(model.rows.map(\.title) == ["One", "Two", "Three"])

        model.retryTapped()
        try await model.articles.doneLoadingNextPage()
        #expect(model.rows.map(\.title) == ["One", "Two", "Three", "Four"])

        // The end of the list: the last row appearing asks for nothing.
        model.rowDidAppear(model.rows[3])
        #expect(model.footer == .hidden)
        #expect(await api.callCount == 4)

        // Pull to refresh: back to the first page.
        await model.pullToRefresh()
        #expect(model.rows.map(\.title) == ["One", "Two"])
        #expect(await api.callCount == 5)
    }

    @Test("an article list with no articles shows its empty state")
    func emptyList() async throws {
        let model = ArticleListModel(api: FakeArticlesAPI(pages: [:]))
        model.screenDidAppear()
        try await model.articles.doneSyncing()
        guard case .empty = model.phase else {
            Issue.record("expected the empty phase, got \(model.phase)")
            return
        }
        #expect(model.footer == .hidden)
    }
}

private struct OfflineError: Error, CustomStringConvertible {
    var description: String { "offline" }
}

/// Answers from a table of pages at once; can fail the next call.
private actor FakeArticlesAPI: ArticlesAPI {
    private let pages: [String?: ArticlePage]
    private var nextError: (any Error)?
    private(set) var callCount = 0

    init(pages: [String?: ArticlePage]) {
        self.pages = pages
    }

    func failNextCall(with error: any Error) {
        nextError = error
    }

    func articles(pageToken: String?) async throws -> ArticlePage {
        callCount += 1
        if let error = nextError {
            nextError = nil
            throw error
        }
        return pages[pageToken] ?? ArticlePage(articles: [], nextPageToken: nil)
    }
}
