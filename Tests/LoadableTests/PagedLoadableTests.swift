import Loadable
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

@MainActor
@Suite struct PagedLoadableTests {
    // MARK: - First page and refresh

    @Test("sync loads the first page with a nil cursor")
    func firstPage() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        #expect(list.hasMorePages == false)

        list.sync()
        #expect(list.loadableState == .syncing)
        let first = await server.nextRequest()
        #expect(first.cursor == nil)

        await first.respond(["a", "b"], next: 2)
        #expect(list.loadableState == .didSyncSuccessfully)
        #expect(list.contents == ["a", "b"])
        #expect(list.nextCursor == 2)
        #expect(list.hasMorePages)
        #expect(list.nextPageState == .idle)
        #expect(server.requestCount == 1)
    }

    @Test("a refresh keeps the old items while it runs and replaces them on success")
    func refreshReplacesOnSuccess() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        await list.loadFirstPage(["a", "b"], next: 2, from: server)
        await list.loadNextPage(["c"], next: 3, from: server)
        #expect(list.contents == ["a", "b", "c"])

        list.sync()
        #expect(list.loadableState == .syncing)
        #expect(list.contents == ["a", "b", "c"])
        let refresh = await server.nextRequest()
        #expect(refresh.cursor == nil)
        #expect(list.contents == ["a", "b", "c"])

        await refresh.respond(["z"], next: nil)
        #expect(list.loadableState == .didSyncSuccessfully)
        #expect(list.contents == ["z"])
        #expect(list.nextCursor == nil)
        #expect(list.hasMorePages == false)
    }

    @Test("an empty first page gives the empty phase and no more pages")
    func emptyFirstPage() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        list.sync()
        await server.nextRequest().respond([], next: nil)

        #expect(list.loadableState == .didSyncSuccessfully)
        #expect(list.contents == [])
        guard case .empty = list.snapshot.phase else {
            Issue.record("expected the empty phase, got \(list.snapshot.phase)")
            return
        }
        #expect(list.hasMorePages == false)
    }

    @Test("items given at creation stay until the first refresh, with no more pages before it")
    func cachedContents() async {
        let server = PageServer()
        let list = TestPagedList(server: server, contents: ["cached"])
        #expect(list.contents == ["cached"])
        #expect(list.hasMorePages == false)
        list.loadNextPage()
        #expect(list.nextPageState == .idle)

        list.sync()
        let first = await server.nextRequest()
        #expect(list.contents == ["cached"])
        await first.respond(["fresh"], next: 1)
        #expect(list.contents == ["fresh"])
        #expect(list.hasMorePages)
        #expect(server.requestCount == 1)
    }

    @Test("a failed refresh keeps the items and the cursor, and the list can go on")
    func refreshFailureKeepsItems() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        await list.loadFirstPage(["a"], next: 2, from: server)

        list.sync()
        await server.nextRequest().fail(PageError(id: 1))
        #expect(list.loadableState == .didFailToSync)
        #expect(list.error as? PageError == PageError(id: 1))
        #expect(list.contents == ["a"])
        #expect(list.nextCursor == 2)
        #expect(list.hasMorePages)

        // The next page continues the list shown; the loadable's own state and error stay.
        list.loadNextPage()
        #expect(list.nextPageState == .syncing)
        let next = await server.nextRequest()
        #expect(next.cursor == 2)
        await next.respond(["b"], next: nil)
        #expect(list.contents == ["a", "b"])
        #expect(list.loadableState == .didFailToSync)
        #expect(list.error as? PageError == PageError(id: 1))
        #expect(list.nextPageState == .idle)
    }

    @Test("a failed first page leaves no contents and no more pages")
    func firstPageFailure() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        list.sync()
        await server.nextRequest().fail(PageError(id: 1))

        #expect(list.loadableState == .didFailToSync)
        #expect(list.contents == nil)
        #expect(list.hasMorePages == false)
        list.loadNextPage()
        #expect(list.nextPageState == .idle)
        #expect(list.needsSync)
    }

    // MARK: - Next page

    @Test("loadNextPage appends the page after the last cursor")
    func appendsPages() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        await list.loadFirstPage(["a", "b"], next: 2, from: server)

        list.loadNextPage()
        let second = await server.nextRequest()
        #expect(second.cursor == 2)
        #expect(list.contents == ["a", "b"])
        await second.respond(["c", "d"], next: 4)
        #expect(list.contents == ["a", "b", "c", "d"])
        #expect(list.nextCursor == 4)

        list.loadNextPage()
        let third = await server.nextRequest()
        #expect(third.cursor == 4)
        await third.respond(["e"], next: nil)
        #expect(list.contents == ["a", "b", "c", "d", "e"])
        #expect(list.hasMorePages == false)
        #expect(list.loadableState == .didSyncSuccessfully)
        #expect(server.requestCount == 3)
    }

    // MARK: - Paging is not syncing

    @Test("a next page keeps the age of the last refresh: it does not restart it")
    func nextPageKeepsAge() async {
        let clock = ManualClock()
        let server = PageServer()
        let list = TestPagedList(server: server, clock: clock)
        list.maxAge = .seconds(60)
        await list.loadFirstPage(["a"], next: 2, from: server)
        await clock.advance(by: .seconds(45))
        await list.loadNextPage(["b"], next: 3, from: server)
        #expect(list.contents == ["a", "b"])
        #expect(list.age == .seconds(45))
        #expect(!list.isStale)
        await clock.advance(by: .seconds(15))
        #expect(list.age == .seconds(60))
        #expect(list.isStale)
        #expect(list.needsSync)
    }

    @Test("a next page keeps an invalidation: the list stays stale and needs a sync")
    func nextPageKeepsInvalidation() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        await list.loadFirstPage(["a"], next: 2, from: server)
        list.invalidate()
        #expect(list.isStale)
        await list.loadNextPage(["b"], next: 3, from: server)
        #expect(list.contents == ["a", "b"])
        #expect(list.isStale)
        #expect(list.needsSync)
        list.syncIfNeeded()
        #expect(list.loadableState == .syncing)
    }

    @Test("next pages, loaded or failed, leave consecutiveFailures and lastError of the refresh alone")
    func nextPageKeepsFailureRecord() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        await list.loadFirstPage(["a"], next: 2, from: server)

        // After a success: a failed next page is not a failure of the list.
        list.loadNextPage()
        await server.nextRequest().fail(PageError(id: 1))
        #expect(list.nextPageState == .didFailToSync)
        #expect(list.consecutiveFailures == 0)
        #expect(list.lastError == nil)

        // After a failed refresh: a loaded next page is not a success, nor one more failure.
        list.sync()
        await server.nextRequest().fail(PageError(id: 2))
        #expect(list.consecutiveFailures == 1)
        await list.loadNextPage(["b"], next: 3, from: server)
        #expect(list.contents == ["a", "b"])
        #expect(list.loadableState == .didFailToSync)
        #expect(list.error as? PageError == PageError(id: 2))
        #expect(list.lastError as? PageError == PageError(id: 2))
        #expect(list.consecutiveFailures == 1)
        list.loadNextPage()
        await server.nextRequest().fail(PageError(id: 3))
        #expect(list.lastError as? PageError == PageError(id: 2))
        #expect(list.consecutiveFailures == 1)
        #expect(list.snapshot.consecutiveFailures == 1)
    }

    @Test("the next page state moves idle, syncing, idle with one notification per change")
    func nextPageNotifications() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        let recorder = PageRecorder(list)

        list.sync()
        await server.nextRequest().respond(["a"], next: 1)
        list.loadNextPage()
        let next = await server.nextRequest()
        await next.respond(["b"], next: 2)

        #expect(
            recorder.entries == [
                .init(.syncing, .idle, nil),
                .init(.didSyncSuccessfully, .idle, ["a"]),
                .init(.didSyncSuccessfully, .syncing, ["a"]),
                .init(.didSyncSuccessfully, .idle, ["a", "b"]),
            ]
        )
    }

    @Test("a failed next page keeps every item and is retried by loadNextPage")
    func nextPageFailureAndRetry() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        await list.loadFirstPage(["a", "b"], next: 2, from: server)
        let recorder = PageRecorder(list)

        list.loadNextPage()
        await server.nextRequest().fail(PageError(id: 7))
        #expect(list.nextPageState == .didFailToSync)
        #expect(list.nextPageError as? PageError == PageError(id: 7))
        #expect(list.contents == ["a", "b"])
        #expect(list.loadableState == .didSyncSuccessfully)
        #expect(list.error == nil)
        #expect(list.nextCursor == 2)
        #expect(list.hasMorePages)

        list.loadNextPage()
        #expect(list.nextPageState == .syncing)
        #expect(list.nextPageError == nil)
        let retry = await server.nextRequest()
        #expect(retry.cursor == 2)
        await retry.respond(["c"], next: nil)
        #expect(list.contents == ["a", "b", "c"])
        #expect(list.nextPageState == .idle)

        #expect(
            recorder.entries == [
                .init(.didSyncSuccessfully, .syncing, ["a", "b"]),
                .init(.didSyncSuccessfully, .didFailToSync, ["a", "b"]),
                .init(.didSyncSuccessfully, .syncing, ["a", "b"]),
                .init(.didSyncSuccessfully, .idle, ["a", "b", "c"]),
            ]
        )
    }

    @Test("a next page appends to the contents as they are when it arrives")
    func appendsToCurrentContents() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        await list.loadFirstPage(["a", "b"], next: 2, from: server)

        list.loadNextPage()
        let next = await server.nextRequest()
        list.setDidSyncSuccessfully(["b"])  // the owner removed a row meanwhile
        await next.respond(["c"], next: nil)
        #expect(list.contents == ["b", "c"])
    }

    // MARK: - No-ops

    @Test("loadNextPage does nothing while a next page is loading")
    func noOpWhileLoading() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        await list.loadFirstPage(["a"], next: 1, from: server)
        list.loadNextPage()
        let recorder = PageRecorder(list)

        list.loadNextPage()
        list.loadNextPage()
        #expect(recorder.entries.isEmpty)
        #expect(list.nextPageState == .syncing)

        await server.nextRequest().respond(["b"], next: 2)
        #expect(list.contents == ["a", "b"])
        #expect(server.requestCount == 2)
        #expect(server.pendingCount == 0)
    }

    @Test("loadNextPage does nothing before the first page, even while it loads")
    func noOpBeforeFirstPage() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        let recorder = PageRecorder(list)

        list.loadNextPage()
        #expect(recorder.entries.isEmpty)
        #expect(list.nextPageState == .idle)

        list.sync()
        list.loadNextPage()
        #expect(list.nextPageState == .idle)
        let first = await server.nextRequest()
        #expect(first.cursor == nil)
        await first.respond(["a"], next: 1)
        #expect(server.requestCount == 1)
        #expect(recorder.entries.count == 2)
    }

    @Test("loadNextPage does nothing at the end of the list")
    func noOpAtTheEnd() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        await list.loadFirstPage(["a"], next: 1, from: server)
        await list.loadNextPage(["b"], next: nil, from: server)
        #expect(list.hasMorePages == false)
        let recorder = PageRecorder(list)

        list.loadNextPage()
        #expect(recorder.entries.isEmpty)
        #expect(list.nextPageState == .idle)
        #expect(list.contents == ["a", "b"])

        // A refresh that finds more pages makes loadNextPage work again.
        list.sync()
        await server.nextRequest().respond(["a"], next: 1)
        list.loadNextPage()
        #expect(list.nextPageState == .syncing)
        let next = await server.nextRequest()
        #expect(next.cursor == 1)
        await next.respond(["b"], next: nil)
        #expect(server.requestCount == 4)
    }

    @Test("loadNextPage does nothing while a refresh runs")
    func noOpWhileRefreshing() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        await list.loadFirstPage(["a"], next: 1, from: server)

        list.sync()
        let recorder = PageRecorder(list)
        list.loadNextPage()
        #expect(recorder.entries.isEmpty)
        #expect(list.nextPageState == .idle)

        let refresh = await server.nextRequest()
        #expect(refresh.cursor == nil)
        await refresh.respond(["x"], next: 5)
        #expect(list.contents == ["x"])
        #expect(server.requestCount == 2)
    }

    // MARK: - Cancellation and late results

    @Test("the sample of Docs/Paging.md: a next page that arrives after a refresh began is dropped")
    func guideSample() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        await list.loadFirstPage(["a"], next: 1, from: server)

        list.loadNextPage()
        let stale = await server.nextRequest()  // the next page is in flight
        list.sync()  // a refresh cancels it
        let refresh = await server.nextRequest()
        await stale.respond(["late"], next: 99)  // the late page arrives...
        #expect(list.contents == ["a"])  // ...and is dropped
        await refresh.respond(["x"], next: 2)
        #expect(list.contents == ["x"])
    }

    @Test("a refresh cancels a next page in flight and drops it when it arrives before the refresh")
    func refreshCancelsNextPageArrivingEarly() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        await list.loadFirstPage(["a"], next: 1, from: server)
        list.loadNextPage()
        let stale = await server.nextRequest()
        let recorder = PageRecorder(list)

        list.sync()
        #expect(list.nextPageState == .idle)
        let refresh = await server.nextRequest()

        await stale.respond(["late"], next: 99)
        #expect(stale.wasCancelled == true)
        #expect(list.contents == ["a"])
        #expect(list.nextPageState == .idle)
        #expect(list.loadableState == .syncing)

        await refresh.respond(["x"], next: 2)
        #expect(list.contents == ["x"])
        #expect(list.nextCursor == 2)

        #expect(
            recorder.entries == [
                // One notification: the refresh starts and the footer's next page is gone.
                .init(.syncing, .idle, ["a"]),
                .init(.didSyncSuccessfully, .idle, ["x"]),
            ]
        )
    }

    @Test("a next page that arrives after the refresh succeeded never lands in the contents")
    func lateNextPageAfterRefresh() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        await list.loadFirstPage(["a"], next: 1, from: server)
        list.loadNextPage()
        let stale = await server.nextRequest()

        list.sync()
        await server.nextRequest().respond(["x", "y"], next: 2)
        #expect(list.contents == ["x", "y"])
        let recorder = PageRecorder(list)

        await stale.respond(["late"], next: 99)
        #expect(stale.wasCancelled == true)
        #expect(list.contents == ["x", "y"])
        #expect(list.nextCursor == 2)
        #expect(list.nextPageState == .idle)
        #expect(recorder.entries.isEmpty)

        // The list goes on from the refreshed cursor.
        list.loadNextPage()
        let next = await server.nextRequest()
        #expect(next.cursor == 2)
        await next.respond(["z"], next: nil)
        #expect(list.contents == ["x", "y", "z"])
    }

    @Test("a next page that fails after a refresh started is dropped too")
    func lateNextPageFailure() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        await list.loadFirstPage(["a"], next: 1, from: server)
        list.loadNextPage()
        let stale = await server.nextRequest()

        list.sync()
        let refresh = await server.nextRequest()
        await stale.fail(CancellationError())
        #expect(list.nextPageState == .idle)
        #expect(list.nextPageError == nil)
        await refresh.respond(["x"], next: nil)
        #expect(list.contents == ["x"])
    }

    @Test("a refresh resets a failed next page in the same notification as syncing")
    func refreshResetsFailedNextPage() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        await list.loadFirstPage(["a"], next: 1, from: server)
        list.loadNextPage()
        await server.nextRequest().fail(PageError(id: 3))
        #expect(list.nextPageState == .didFailToSync)
        let recorder = PageRecorder(list)

        list.sync()
        #expect(list.nextPageState == .idle)
        #expect(list.nextPageError == nil)
        #expect(recorder.entries == [.init(.syncing, .idle, ["a"])])
        await server.nextRequest().respond(["x"], next: nil)
    }

    @Test("a refresh with no next page loading or failed notifies only syncing")
    func refreshWithoutFooterNotifiesOnce() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        await list.loadFirstPage(["a"], next: 1, from: server)
        let recorder = PageRecorder(list)

        list.sync()
        #expect(recorder.entries == [.init(.syncing, .idle, ["a"])])
        await server.nextRequest().respond(["x"], next: nil)
        #expect(recorder.entries.last == .init(.didSyncSuccessfully, .idle, ["x"]))
    }

    @Test("cancelSync cancels a refresh, restores the state and ignores the late first page")
    func cancelRefresh() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        await list.loadFirstPage(["a"], next: 1, from: server)

        list.sync()
        let refresh = await server.nextRequest()
        list.cancelSync()
        #expect(list.loadableState == .didSyncSuccessfully)
        #expect(list.contents == ["a"])
        let recorder = PageRecorder(list)

        await refresh.respond(["late"], next: 50)
        #expect(refresh.wasCancelled == true)
        #expect(list.contents == ["a"])
        #expect(list.nextCursor == 1)
        #expect(recorder.entries.isEmpty)

        // The list goes on where it was.
        list.loadNextPage()
        let next = await server.nextRequest()
        #expect(next.cursor == 1)
        await next.respond(["b"], next: nil)
        #expect(list.contents == ["a", "b"])
    }

    @Test("cancelSync during the first page goes back to idle")
    func cancelFirstPage() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        list.sync()
        let first = await server.nextRequest()
        list.cancelSync()
        #expect(list.loadableState == .idle)

        await first.fail(CancellationError())
        #expect(list.loadableState == .idle)
        #expect(list.contents == nil)
        #expect(list.hasMorePages == false)

        list.sync()
        await server.nextRequest().respond(["a"], next: nil)
        #expect(list.contents == ["a"])
    }

    @Test("an observer that refreshes when the next page starts stops that next page")
    func observerRefreshesDuringNextPageNotification() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        await list.loadFirstPage(["a"], next: 1, from: server)
        await observing(
            list,
            { list in
                if list.nextPageState == .syncing { list.sync() }
            }
        ) {

            list.loadNextPage()
            #expect(list.loadableState == .syncing)
            #expect(list.nextPageState == .idle)
            let refresh = await server.nextRequest()
            #expect(refresh.cursor == nil)
            await refresh.respond(["x"], next: nil)
            #expect(list.contents == ["x"])
            #expect(server.requestCount == 2)
        }
    }

    // MARK: - Closure initializer, waiting, observation

    @Test("the closure initializer loads pages through the closure")
    func closureInitializer() async throws {
        let list = PagedLoadable<Int, Int> { cursor in
            let start = cursor ?? 0
            return .init(items: Array(start..<start + 2), nextCursor: start < 4 ? start + 2 : nil)
        }
        list.sync()
        try await list.doneSyncing()
        #expect(list.contents == [0, 1])

        while list.hasMorePages {
            list.loadNextPage()
            try await list.doneLoadingNextPage()
        }
        #expect(list.contents == [0, 1, 2, 3, 4, 5])
        #expect(list.loadableState == .didSyncSuccessfully)
    }

    @Test("the example in the PagedLoadable documentation appends the second page")
    func documentationExample() async throws {
        let posts = PagedLoadable<String, Int> { cursor in
            cursor == nil ? .init(items: ["a", "b"], nextCursor: 2) : .init(items: ["c"], nextCursor: nil)
        }
        posts.sync()
        try await posts.doneSyncing()
        posts.loadNextPage()
        #expect(posts.nextPageState == .syncing)
        try await posts.doneLoadingNextPage()
        #expect(posts.contents == ["a", "b", "c"])
        #expect(posts.hasMorePages == false)
    }

    @Test("doneLoadingNextPage returns at once when no next page is loading")
    func doneLoadingNextPageWhenIdle() async throws {
        let list = PagedLoadable<Int, Int> { _ in .init(items: [], nextCursor: nil) }
        try await list.doneLoadingNextPage()
        #expect(list.nextPageState == .idle)
    }

    @Test("doneLoadingNextPage waits for a failing next page")
    func doneLoadingNextPageAfterFailure() async throws {
        let list = PagedLoadable<Int, Int> { cursor in
            if cursor == nil { return .init(items: [1], nextCursor: 2) }
            throw PageError(id: 2)
        }
        _ = try await list.syncedContents()
        list.loadNextPage()
        try await list.doneLoadingNextPage()
        #expect(list.nextPageState == .didFailToSync)
        #expect(list.nextPageError as? PageError == PageError(id: 2))
        #expect(list.contents == [1])
    }

    @Test("Observation tracks the next page state")
    func observationTracksNextPageState() async {
        let server = PageServer()
        let list = TestPagedList(server: server)
        await list.loadFirstPage(["a"], next: 1, from: server)

        let (changes, continuation) = AsyncStream.makeStream(of: Void.self)
        withObservationTracking {
            _ = list.nextPageState
        } onChange: {
            continuation.yield()
        }
        list.loadNextPage()
        continuation.finish()
        var count = 0
        for await _ in changes { count += 1 }
        #expect(count == 1)
        await server.nextRequest().respond([], next: nil)
    }

    @Test("pages compare by items and cursor")
    func pageEquality() {
        typealias Page = PagedLoadable<String, Int>.Page
        #expect(Page(items: ["a"], nextCursor: 1) == Page(items: ["a"], nextCursor: 1))
        #expect(Page(items: ["a"], nextCursor: 1) != Page(items: ["a"], nextCursor: nil))
        let page: any Sendable = Page(items: [], nextCursor: nil)
        #expect(page is Page)
    }

    // MARK: - Release

    @Test("a subclass stays alive until its page returns, then is released")
    func releaseSubclassWhilePageInFlight() async {
        let server = PageServer()
        var list: TestPagedList? = TestPagedList(server: server)
        let weakList = WeakReference(list)
        list?.sync()
        let first = await server.nextRequest()

        list = nil
        #expect(weakList.object != nil)  // the running loadPage(after:) holds it
        await first.respond(["a"], next: nil)
        #expect(weakList.object == nil)
    }

    @Test("releasing a closure-based list cancels its page in flight")
    func releaseClosureListWhilePageInFlight() async {
        let server = PageServer()
        var list: PagedLoadable<String, Int>? = PagedLoadable { [server] cursor in
            try await server.load(after: cursor)
        }
        let weakList = WeakReference(list)
        list?.sync()
        await server.nextRequest().respond(["a"], next: 1)
        list?.loadNextPage()
        let next = await server.nextRequest()

        list = nil
        #expect(weakList.object == nil)
        await next.respond(["late"], next: nil)
        #expect(next.wasCancelled == true)
    }
}
