import Loadable
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

// MARK: - Helpers

struct PageError: Error, Equatable {
    var id: Int
}

/// Holds an object weakly, to tell whether it was released.
struct WeakReference<Object: AnyObject> {
    weak var object: Object?

    init(_ object: Object?) {
        self.object = object
    }
}

/// A paged list whose pages come from a ``PageServer`` that the test answers one by one.
final class TestPagedList: PagedLoadable<String, Int> {
    let server: PageServer

    init(server: PageServer, contents: [String]? = nil, clock: any Clock<Duration> = ContinuousClock()) {
        self.server = server
        super.init(contents: contents, clock: clock)
    }

    override func loadPage(after cursor: Int?) async throws -> Page {
        try await server.load(after: cursor)
    }

    /// Syncs and answers the first page.
    func loadFirstPage(_ items: [String], next: Int?, from server: PageServer) async {
        sync()
        await server.nextRequest().respond(items, next: next)
    }

    /// Loads and answers the next page.
    func loadNextPage(_ items: [String], next: Int?, from server: PageServer) async {
        loadNextPage()
        await server.nextRequest().respond(items, next: next)
    }
}

/// Page requests that wait until the test answers them, in the order they were made.
@MainActor
final class PageServer {
    typealias Page = PagedLoadable<String, Int>.Page

    /// One call of `load(after:)`, waiting for its answer.
    @MainActor
    final class Request {
        /// The cursor the page was asked after.
        let cursor: Int?
        /// Whether the loading task was cancelled when the answer arrived; `nil` before that.
        private(set) var wasCancelled: Bool?
        fileprivate var continuation: CheckedContinuation<Page, any Error>?
        private var isFinished = false
        private var finishWaiter: CheckedContinuation<Void, Never>?

        fileprivate init(cursor: Int?) {
            self.cursor = cursor
        }

        /// Answers with a page, and returns once the loadable has handled it.
        func respond(_ items: [String], next: Int?) async {
            await answer(.success(Page(items: items, nextCursor: next)))
        }

        /// Answers with an error, and returns once the loadable has handled it.
        func fail(_ error: any Error) async {
            await answer(.failure(error))
        }

        private func answer(_ result: Result<Page, any Error>) async {
            guard let continuation else {
                Issue.record("request after \(String(describing: cursor)) answered twice")
                return
            }
            self.continuation = nil
            continuation.resume(with: result)
            if !isFinished {
                await withCheckedContinuation { finishWaiter = $0 }
            }
        }

        /// Called by `load(after:)` as it returns: the loading task handles the result right
        /// after, in the same main-actor job, before the waiting test resumes.
        fileprivate func finish(cancelled: Bool) {
            isFinished = true
            wasCancelled = cancelled
            finishWaiter?.resume()
            finishWaiter = nil
        }
    }

    /// How many pages were asked for.
    private(set) var requestCount = 0
    private var unclaimed: [Request] = []
    private var waiters: [CheckedContinuation<Request, Never>] = []

    /// How many requests were made that the test has not taken with `nextRequest()`.
    var pendingCount: Int { unclaimed.count }

    /// Suspends until the test answers the request.
    func load(after cursor: Int?) async throws -> Page {
        let request = Request(cursor: cursor)
        requestCount += 1
        defer { request.finish(cancelled: Task.isCancelled) }
        return try await withCheckedThrowingContinuation { continuation in
            request.continuation = continuation
            if waiters.isEmpty {
                unclaimed.append(request)
            } else {
                waiters.removeFirst().resume(returning: request)
            }
        }
    }

    /// The oldest request not yet taken, waiting for one if there is none.
    func nextRequest() async -> Request {
        if !unclaimed.isEmpty { return unclaimed.removeFirst() }
        return await withCheckedContinuation { waiters.append($0) }
    }
}

/// Records what observers saw at each notification.
@MainActor
final class PageRecorder {
    struct Entry: Equatable, CustomStringConvertible {
        var state: LoadableState
        var nextPageState: LoadableState
        var items: [String]?

        init(_ state: LoadableState, _ nextPageState: LoadableState, _ items: [String]?) {
            self.state = state
            self.nextPageState = nextPageState
            self.items = items
        }

        var description: String { "(\(state), next page \(nextPageState), \(items ?? []))" }
    }

    private(set) var entries: [Entry] = []
    private var observation: LoadableObservation?

    init(_ list: PagedLoadable<String, Int>) {
        observation = list.observe { [weak self] list in
            self?.entries.append(Entry(list.loadableState, list.nextPageState, list.contents))
        }
    }
}
