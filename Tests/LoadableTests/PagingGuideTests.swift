import Foundation
import Loadable
import Testing

// Docs/Paging.md shows the model and the test below verbatim; `PagingGuideDocumentTests` checks
// that the two stay in step.

@Suite struct PagingGuideDocumentTests {
    @Test("Docs/Paging.md shows the model and the test of this file verbatim")
    func guideMatchesThisFile() throws {
        let thisFile = URL(fileURLWithPath: #filePath)
        let source = try String(contentsOf: thisFile, encoding: .utf8)
        let guideURL = thisFile.deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Docs/Paging.md")
        let guide = try String(contentsOf: guideURL, encoding: .utf8)

        let modelStart = try #require(source.range(of: "// MARK: - Guide: model\n\n"))
        let testStart = try #require(source.range(of: "// MARK: - Guide: test\n\n"))
        let model = source[modelStart.upperBound..<testStart.lowerBound]
            .trimmingCharacters(in: .newlines)
        let test = source[testStart.upperBound...].trimmingCharacters(in: .newlines)
        #expect(guide.contains(model))
        #expect(guide.contains(test))
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
