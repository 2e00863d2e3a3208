import LoadableSupport

/// A list that loads page by page: ``Loadable/sync()`` refreshes it from the first page and
/// ``loadNextPage()`` appends the next one.
///
/// Subclass it and override ``loadPage(after:)``, or pass the call as a closure. A page brings its
/// items and the cursor of the page after it (`nil` when it is the last one):
///
/// ```swift
/// let posts = PagedLoadable<Post, String> { cursor in
///     let response = try await api.posts(after: cursor)
///     return .init(items: response.posts, nextCursor: response.next)
/// }
/// posts.sync()           // loads the first page; the old items stay on screen until it succeeds
/// posts.loadNextPage()   // later, when the last row appears: appends the next page
/// ```
///
/// The test that drives it awaits each step instead of sleeping:
///
/// ```swift
/// @Test @MainActor func appendsTheSecondPage() async throws {
///     let posts = PagedLoadable<String, Int> { cursor in
///         cursor == nil ? .init(items: ["a", "b"], nextCursor: 2) : .init(items: ["c"], nextCursor: nil)
///     }
///     posts.sync()
///     try await posts.doneSyncing()
///     posts.loadNextPage()
///     #expect(posts.nextPageState == .syncing)
///     try await posts.doneLoadingNextPage()
///     #expect(posts.contents == ["a", "b", "c"])
///     #expect(posts.hasMorePages == false)
/// }
/// ```
///
/// Two loads with two states:
/// - The refresh is the loadable's own sync: ``Loadable/sync()`` moves to
///   ``LoadableState/syncing``, keeps the items already shown in ``PushLoadable/contents`` and
///   replaces them only when the first page arrives. An empty first page gives the snapshot phase
///   ``LoadableSnapshot/Phase/empty``. A failed refresh keeps the items (and the cursor to the page
///   after them). ``Loadable/cancelSync()`` cancels a refresh and restores the state from before it.
/// - The next page has its own ``nextPageState`` and ``nextPageError``, so a list can show a footer
///   spinner or a retry row while ``PushLoadable/loadableState`` stays as it is (usually
///   ``LoadableState/didSyncSuccessfully``). Observers are notified of every change of it.
///
/// Paging is not syncing: ``Loadable/age``, an invalidation, ``PushLoadable/lastError`` and
/// ``PushLoadable/consecutiveFailures`` describe the refresh alone. A loaded next page does not
/// make the list fresh (the age goes on from the last refresh, an invalidated list stays stale),
/// and neither a loaded nor a failed next page counts as a success or a failure of the list.
///
/// ``loadNextPage()`` does nothing before a first page was loaded, at the end of the list
/// (``hasMorePages`` is `false`), while a next page is loading and while a refresh runs. A refresh
/// cancels a next page in flight and resets ``nextPageState`` to ``LoadableState/idle`` when it
/// starts; a page that arrives late (after a refresh started) never lands in the contents.
///
/// Each load runs in a new task. Releasing a closure-based loadable cancels its loads; a subclass's
/// ``loadPage(after:)`` keeps its loadable alive until it returns.
///
/// Isolated to the main actor; observers are called on the main actor. It is `Observable`:
/// ``nextPageState``, ``nextPageError``, ``nextCursor`` and ``hasMorePages`` are tracked like the
/// loadable's own state.
@MainActor
open class PagedLoadable<Item, Cursor>: Loadable<[Item]> {
    /// One page of a paged list: its items and where the next page starts.
    ///
    /// `Sendable` when `Item` and `Cursor` are, so a page can come from any actor.
    ///
    /// ```swift
    /// return Page(items: response.posts, nextCursor: response.next)
    /// ```
    public struct Page {
        /// The items of this page, in list order.
        public var items: [Item]
        /// Where the page after this one starts; `nil` when this is the last page.
        public var nextCursor: Cursor?

        /// Creates a page.
        ///
        /// - Parameters:
        ///   - items: The items of the page, in list order.
        ///   - nextCursor: Where the next page starts, or `nil` if there are no more pages.
        public init(items: [Item], nextCursor: Cursor?) {
            self.items = items
            self.nextCursor = nextCursor
        }
    }

    private let pageLoader: (@MainActor (Cursor?) async throws -> Page)?
    private var storedNextPageState: LoadableState = .idle
    private var hasLoadedFirstPage = false
    private var storedNextPageError: (any Error)?
    private var refreshTask = LoadTask()
    private var nextPageTask = LoadTask()
    private var storedNextCursor: Cursor?

    /// Creates a paged list that loads each page with `loadPage`.
    ///
    /// - Parameters:
    ///   - contents: Items to start with (for example from a cache). They are shown until the first
    ///     refresh succeeds; ``hasMorePages`` stays `false` until then.
    ///   - clock: The clock of the list's freshness and watchdog (see ``Loadable``).
    ///   - loadPage: Loads the page after the given cursor (`nil`: the first page). Started on the
    ///     main actor in a new task, which is cancelled when the load is no longer wanted.
    public init(
        contents: [Item]? = nil,
        clock: any Clock<Duration> = ContinuousClock(),
        loadPage: @escaping @MainActor (Cursor?) async throws -> Page
    ) {
        pageLoader = loadPage
        super.init(contents: contents, clock: clock)
    }

    /// Creates a paged list for a subclass that overrides ``loadPage(after:)``.
    ///
    /// - Parameters:
    ///   - contents: Items to start with (for example from a cache). They are shown until the
    ///     first refresh succeeds; ``hasMorePages`` stays `false` until then.
    ///   - clock: The clock of the list's freshness and watchdog (see ``Loadable``).
    public override init(contents: [Item]? = nil, clock: any Clock<Duration> = ContinuousClock()) {
        pageLoader = nil
        super.init(contents: contents, clock: clock)
    }

    deinit {
        refreshTask.cancelTask()
        nextPageTask.cancelTask()
    }

    // MARK: - Reading

    /// How loading the next page is going, apart from the loadable's own state.
    ///
    /// ``LoadableState/idle`` when no next page is loading, ``LoadableState/syncing`` while one is,
    /// ``LoadableState/didFailToSync`` after one failed (see ``nextPageError``; ``loadNextPage()``
    /// retries). A loaded next page goes back to ``LoadableState/idle``: its items are in
    /// ``PushLoadable/contents``. A refresh resets it to ``LoadableState/idle`` when it starts.
    public final var nextPageState: LoadableState {
        core.trackAccess()
        return storedNextPageState
    }

    /// Why the last next page failed, while ``nextPageState`` is ``LoadableState/didFailToSync``;
    /// `nil` otherwise.
    public final var nextPageError: (any Error)? {
        core.trackAccess()
        return storedNextPageError
    }

    /// The cursor of the page after the items shown, as given by the last page that loaded;
    /// `nil` at the end of the list and before the first page.
    ///
    /// A failed refresh or a failed next page keeps it, so the list can go on from where it is.
    public final var nextCursor: Cursor? {
        core.trackAccess()
        return storedNextCursor
    }

    /// Whether there is a page after the items shown: a first page was loaded and the last page
    /// that loaded gave a ``nextCursor``.
    public final var hasMorePages: Bool {
        core.trackAccess()
        return hasLoadedFirstPage && storedNextCursor != nil
    }

    // MARK: - Loading

    /// Loads one page: returns its items and the cursor of the page after it, or throws why it
    /// failed.
    ///
    /// Called on the main actor, in a new task for each load, with `nil` for the first page (a
    /// refresh) and with ``nextCursor`` for a next page. The task is cancelled when the load is no
    /// longer wanted (a refresh cancels a next page, ``Loadable/cancelSync()`` cancels a refresh);
    /// whatever it returns then is ignored. By default it calls the closure given to
    /// ``init(contents:clock:loadPage:)``.
    ///
    /// - Parameter cursor: Where the page starts; `nil` for the first page.
    /// - Returns: The page.
    /// - Throws: Why the page could not be loaded.
    open func loadPage(after cursor: Cursor?) async throws -> Page {
        guard let pageLoader else {
            fatalError(
                "\(type(of: self)) must override loadPage(after:) or be created with init(loadPage:)"
            )
        }
        return try await pageLoader(cursor)
    }

    /// Appends the next page.
    ///
    /// Moves ``nextPageState`` to ``LoadableState/syncing`` (clearing ``nextPageError``), notifies
    /// observers, and loads the page after ``nextCursor``. On success the page's items are appended
    /// to the contents, ``nextCursor`` moves on and ``nextPageState`` goes back to
    /// ``LoadableState/idle``, all in one notification. On failure every item stays,
    /// ``nextPageState`` becomes ``LoadableState/didFailToSync`` with ``nextPageError``, and
    /// observers are notified; calling this method again retries.
    ///
    /// Paging is not syncing: whatever the next page brings, the loadable's own state and error,
    /// ``PushLoadable/lastError``, ``PushLoadable/consecutiveFailures``, ``Loadable/age`` and an
    /// invalidation (``Loadable/isStale``) stay as the last refresh left them, and a persisted
    /// list does not save the appended items (it saves what refreshes and writes confirm).
    ///
    /// Does nothing while a next page is loading, while a refresh runs, before a first page was
    /// loaded and at the end of the list (when ``hasMorePages`` is `false`). Call it when the last
    /// row appears, and from a retry button.
    public final func loadNextPage() {
        guard hasLoadedFirstPage, let cursor = storedNextCursor,
            storedNextPageState != .syncing, storedState != .syncing
        else { return }
        nextPageTask.cancel()
        let generation = nextPageTask.generationNumber
        changePaging {
            storedNextPageState = .syncing
            storedNextPageError = nil
        }
        // An observer may have started a refresh meanwhile, which cancels this load.
        guard generation == nextPageTask.generationNumber else { return }
        nextPageTask.start(for: self, closure: pageLoader.map { load in { try await load(cursor) } }) {
            try await $0.loadPage(after: cursor)
        } finish: { paged, generation, result in
            paged.finishNextPage(generation, with: result)
        }
    }

    /// Returns once no next page is loading (``nextPageState`` is not ``LoadableState/syncing``);
    /// at once if none is loading now.
    ///
    /// Never starts a load. Use it where an `async` context waits for ``loadNextPage()``, in tests
    /// for example.
    ///
    /// - Throws: `CancellationError` if the waiting task is cancelled.
    public final func doneLoadingNextPage() async throws {
        try await wait { $0.nextPageState != .syncing }
    }

    /// A refresh is about to start: cancels a next page in flight and resets ``nextPageState``
    /// and ``nextPageError``, which observers then see in the notification for `syncing`.
    override func willBeginSync() {
        discardNextPageLoad()
    }

    /// Starts a refresh: loads the first page in a task. (``Loadable/sync()`` has already
    /// cancelled a next page in flight.) Not meant to be overridden further.
    public final override func doSync() {
        refreshTask.start(for: self, closure: pageLoader.map { load in { try await load(nil) } }) {
            try await $0.loadPage(after: nil)
        } finish: { paged, generation, result in
            paged.finishRefresh(generation, with: result)
        }
    }

    /// Cancels the refresh task. Not meant to be overridden further.
    public final override func doCancelSync() {
        refreshTask.cancel()
    }

    // MARK: - Private

    /// Changes paging fields with one Observation mutation and one notification; the loadable's
    /// own state, error and contents stay.
    private func changePaging(_ body: () -> Void) {
        core.willChange()
        body()
        core.didChange(NotificationSubject(self))
    }

    /// Cancels a next page in flight so that its result is ignored, and resets ``nextPageState``
    /// and ``nextPageError`` without notifying (the `syncing` notification that follows tells).
    private func discardNextPageLoad() {
        nextPageTask.cancel()
        storedNextPageState = .idle
        storedNextPageError = nil
    }

    private func finishRefresh(_ generation: Int, with result: Result<Page, any Error>) {
        // A late result (after a cancel or a newer sync) is dropped.
        guard refreshTask.finish(generation), storedState == .syncing else { return }
        switch result {
        case .success(let page):
            // A next page started meanwhile would continue the old list: drop it too.
            discardNextPageLoad()
            hasLoadedFirstPage = true
            storedNextCursor = page.nextCursor
            setDidSyncSuccessfully(page.items)
        case .failure(let error):
            setDidFailToSync(error)
        }
    }

    private func finishNextPage(_ generation: Int, with result: Result<Page, any Error>) {
        // A late result (after a refresh started) is dropped.
        guard nextPageTask.finish(generation), storedNextPageState == .syncing else { return }
        switch result {
        case .success(let page):
            // One notification for the new items and the footer. Paging is not syncing: the
            // state, the error, the failure record, the age and an invalidation stay.
            storedNextPageState = .idle
            storedNextPageError = nil
            storedNextCursor = page.nextCursor
            storeUnconfirmedContents((baseContents ?? []) + page.items)
        case .failure(let error):
            changePaging {
                storedNextPageState = .didFailToSync
                storedNextPageError = error
            }
        }
    }
}

extension PagedLoadable.Page: Sendable where Item: Sendable, Cursor: Sendable {}
extension PagedLoadable.Page: Equatable where Item: Equatable, Cursor: Equatable {}
extension PagedLoadable.Page: Hashable where Item: Hashable, Cursor: Hashable {}
