import Foundation
import LoadableHTTP
import LoadableSupport
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

struct Feed: Decodable, Sendable, Equatable {
    let items: [Int]
}

let feedURL = URL(string: "http://example.test/feed")!

/// The rules of `HTTPLoadable`, through a transport the test answers by hand.
@MainActor
@Suite(.timeLimit(.minutes(5))) struct HTTPLoadableTests {
    let transport = ScriptedTransport()

    func makeFeed(clock: any Clock<Duration> = ContinuousClock(), maxBodySize: Int = 1_000) -> HTTPLoadable<Feed> {
        HTTPLoadable<Feed>(
            request: URLRequest(url: feedURL), transport: transport, maxBodySize: maxBodySize, clock: clock)
    }

    /// Answers request `index` and waits for the sync to end.
    func answer(
        _ feed: HTTPLoadable<Feed>,
        _ index: Int,
        status: Int = 200,
        headers: [String: String] = [:],
        body: String = ""
    ) async {
        await transport.waitForRequests(index + 1)
        transport.answer(index, status: status, headers: headers, body: body)
        try? await feed.doneSyncing()
    }

    @Test func aSuccessDecodesTheBody() async {
        let feed = makeFeed()
        feed.sync()
        await answer(feed, 0, body: #"{"items":[1,2]}"#)
        #expect(feed.loadableState == .didSyncSuccessfully)
        #expect(feed.contents == Feed(items: [1, 2]))
        let request = transport.requests[0]
        #expect(request.url == feedURL)
        #expect(request.cachePolicy == .reloadIgnoringLocalCacheData)
        #expect(request.value(forHTTPHeaderField: "If-None-Match") == nil)
        #expect(request.value(forHTTPHeaderField: "Authorization") == nil)
    }

    @Test func aBodyThatDoesNotDecodeFailsAndKeepsTheContents() async throws {
        let feed = makeFeed()
        feed.sync()
        await answer(feed, 0, body: #"{"items":[1]}"#)
        feed.sync()
        await answer(feed, 1, body: #"{"items":["#)
        #expect(feed.loadableState == .didFailToSync)
        #expect(feed.contents == Feed(items: [1]))
        let error = try #require(feed.error as? HTTPLoadableError)
        guard case .decoding = error else { Issue.record("expected .decoding, got \(error)"); return }
        #expect(!error.isRetryable)
        #expect(error.description.hasPrefix("decoding failed: "))
    }

    @Test func theValidatorsOfASuccessAreSentBackAndA304ConfirmsTheContents() async throws {
        let clock = ManualClock()
        let feed = makeFeed(clock: clock)
        feed.sync()
        await answer(
            feed, 0,
            headers: ["ETag": #""v1""#, "Last-Modified": "Sun, 06 Nov 1994 08:49:37 GMT"],
            body: #"{"items":[1]}"#
        )
        await clock.advance(by: .seconds(30))
        #expect(feed.age == .seconds(30))
        let recorder = Recorder(feed)
        feed.sync()
        await answer(feed, 1, status: 304)
        let second = transport.requests[1]
        #expect(second.value(forHTTPHeaderField: "If-None-Match") == #""v1""#)
        #expect(second.value(forHTTPHeaderField: "If-Modified-Since") == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(feed.loadableState == .didSyncSuccessfully)
        #expect(feed.contents == Feed(items: [1]))
        #expect(feed.error == nil)
        #expect(recorder.states == [.syncing, .didSyncSuccessfully])
        #expect(feed.age == .zero)
        // A 304 may carry a new ETag; the next request sends it.
        feed.sync()
        await answer(feed, 2, status: 304, headers: ["ETag": #""v2""#])
        feed.sync()
        await transport.waitForRequests(4)
        #expect(transport.requests[3].value(forHTTPHeaderField: "If-None-Match") == #""v2""#)
        #expect(transport.requests[3].value(forHTTPHeaderField: "If-Modified-Since") == "Sun, 06 Nov 1994 08:49:37 GMT")
        transport.answer(3, status: 304)
        try? await feed.doneSyncing()
    }

    @Test func a304LeavesPendingOptimisticChangesOnTheSameBase() async throws {
        struct Never: Error {}
        let feed = HTTPLoadable<[Int]>(request: URLRequest(url: feedURL), transport: transport)
        feed.sync()
        await transport.waitForRequests(1)
        transport.answer(0, headers: ["ETag": "a"], body: "[1]")
        try? await feed.doneSyncing()
        let gate = AsyncStream<Void>.makeStream()
        let change = Task { @MainActor in
            try await feed.mutate(
                optimistic: { $0.append(2) },
                commit: {
                    for await _ in gate.stream {}; throw Never()
                })
        }
        await yield(until: { feed.contents == [1, 2] })
        feed.sync()
        await transport.waitForRequests(2)
        transport.answer(1, status: 304)
        try? await feed.doneSyncing()
        #expect(feed.contents == [1, 2])
        gate.continuation.finish()
        _ = await change.result
        #expect(feed.contents == [1])
    }

    @Test func a304WithoutValidatorsSentIsAnError() async throws {
        let feed = makeFeed()
        feed.sync()
        await answer(feed, 0, status: 304, headers: ["ETag": "x"])
        #expect(feed.loadableState == .didFailToSync)
        let error = try #require(feed.error as? HTTPLoadableError)
        guard case .status(304, _, _) = error else { Issue.record("expected .status(304), got \(error)"); return }
    }

    @Test func aConditionalHeaderTheRequestSetsIsKept() async throws {
        // A request with its own If-None-Match keeps it; the loadable adds none of its own.
        var request = URLRequest(url: feedURL)
        request.setValue("mine", forHTTPHeaderField: "If-None-Match")
        let feed = HTTPLoadable<Feed>(request: request, transport: transport)
        feed.sync()
        await transport.waitForRequests(1)
        transport.answer(0, headers: ["ETag": "theirs", "Last-Modified": "x"], body: #"{"items":[]}"#)
        try? await feed.doneSyncing()
        feed.sync()
        await transport.waitForRequests(2)
        #expect(transport.requests[1].value(forHTTPHeaderField: "If-None-Match") == "mine")
        #expect(transport.requests[1].value(forHTTPHeaderField: "If-Modified-Since") == "x")
        transport.answer(1, status: 304)
        try? await feed.doneSyncing()
        #expect(feed.loadableState == .didSyncSuccessfully)
    }

    @Test(
        "a 304 to the request's own validators confirms contents the loadable got without a sync",
        arguments: [
            ["If-None-Match": #""v1""#], ["If-Modified-Since": "Wed, 25 Nov 2026 10:00:00 GMT"],
            ["If-None-Match": #""v1""#, "If-Modified-Since": "Wed, 25 Nov 2026 10:00:00 GMT"],
        ]
    )
    func a304ToTheRequestsOwnValidatorConfirmsTheContents(validators: [String: String]) async throws {
        // An app kept the ETag beside contents it restored: the loadable has no validators of its own.
        var request = URLRequest(url: feedURL)
        for (name, value) in validators { request.setValue(value, forHTTPHeaderField: name) }
        let clock = ManualClock()
        let feed = HTTPLoadable<Feed>(request: request, transport: transport, clock: clock)
        feed.setContents(Feed(items: [7]))
        feed.maxAge = .seconds(60)
        await clock.advance(by: .seconds(90))
        #expect(feed.isStale)
        feed.sync()
        await answer(feed, 0, status: 304)
        #expect(feed.loadableState == .didSyncSuccessfully)
        #expect(feed.error == nil)
        #expect(feed.contents == Feed(items: [7]))
        #expect(feed.age == .zero)
        #expect(!feed.isStale)
    }

    @Test func a304ToTheRequestsOwnValidatorWithoutContentsIsAnError() async throws {
        // Nothing to confirm: the request's validator came from somewhere the loadable cannot see.
        var request = URLRequest(url: feedURL)
        request.setValue(#""v1""#, forHTTPHeaderField: "If-None-Match")
        let feed = HTTPLoadable<Feed>(request: request, transport: transport)
        feed.sync()
        await answer(feed, 0, status: 304)
        #expect(feed.loadableState == .didFailToSync)
        let error = try #require(feed.error as? HTTPLoadableError)
        guard case .status(304, _, _) = error else { Issue.record("expected .status(304), got \(error)"); return }
    }

    @Test func otherStatusesFailWithTheStatusHeadersAndABodyPrefix() async throws {
        let feed = makeFeed(maxBodySize: 100_000)
        feed.sync()
        let body = String(repeating: "x", count: 10_000)
        await answer(feed, 0, status: 404, headers: ["X-Request-Id": "42"], body: body)
        let error = try #require(feed.error as? HTTPLoadableError)
        guard case .status(let code, let headers, let prefix) = error else {
            Issue.record("expected .status, got \(error)")
            return
        }
        #expect(code == 404)
        #expect(headers["X-Request-Id"] == "42")
        #expect(error.header("x-request-id") == "42")
        #expect(prefix.count == HTTPLoadableError.bodyPrefixLimit)
        #expect(!error.isRetryable)
        #expect(error.retryAfter == nil)
        #expect(error.description.hasPrefix("HTTP 404: xxx"))
        #expect(feed.contents == nil)
    }

    @Test(arguments: [
        (408, true), (425, true), (429, true), (500, true), (503, true), (599, true),
        (400, false), (401, false), (403, false), (404, false), (410, false), (422, false), (600, false),
    ])
    func retryableStatuses(code: Int, isRetryable: Bool) {
        #expect(HTTPLoadableError.status(code: code, headers: [:], bodyPrefix: Data()).isRetryable == isRetryable)
    }

    @Test func retryabilityOfTheOtherFailures() {
        #expect(HTTPLoadableError.transport(URLError(.timedOut)).isRetryable)
        #expect(HTTPLoadableError.transport(URLError(.notConnectedToInternet)).isRetryable)
        #expect(!HTTPLoadableError.tooLarge(maxBodySize: 1).isRetryable)
        let decoding = DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "bad"))
        #expect(!HTTPLoadableError.decoding(decoding).isRetryable)
        #expect(HTTPLoadableError.decoding(decoding).description == "decoding failed: bad")
        #expect(HTTPLoadableError.transport(URLError(.timedOut)).retryAfter == nil)
        #expect(
            HTTPLoadableError.transport(URLError(.timedOut)).description
                == "transport failed: URLError -1001 (timed out)")
        #expect(
            HTTPLoadableError.transport(URLError(.zeroByteResource)).description == "transport failed: URLError -1014")
        #expect(HTTPLoadableError.transport(URLError(.timedOut)).header("Retry-After") == nil)
    }

    @Test(
        arguments: [
            (["Retry-After": "120"], Duration.seconds(120)),
            (["retry-after": " 7 "], .seconds(7)),
            (["Retry-After": "-5"], nil),
            (["Retry-After": "soon"], nil),
            (["Retry-After": "1.5"], nil),
            (["Retry-After": ""], nil),
            ([:], nil),
            // An HTTP-date is measured from the response's own Date header.
            (["Retry-After": "Sun, 06 Nov 1994 08:51:37 GMT", "Date": "Sun, 06 Nov 1994 08:49:37 GMT"], .seconds(120)),
            (["Retry-After": "Sun, 06 Nov 1994 08:00:00 GMT", "Date": "Sun, 06 Nov 1994 08:49:37 GMT"], .zero),
            (["Retry-After": "Sun, 06 Nov 1994 08:51:37 GMT"], nil),
            (["Retry-After": "Sun, 06 Nov 1994 08:51:37 GMT", "Date": "yesterday"], nil),
        ] as [([String: String], Duration?)])
    func retryAfterComesFromTheHeader(headers: [String: String], expected: Duration?) {
        let error = HTTPLoadableError.status(code: 429, headers: headers, bodyPrefix: Data())
        #expect(error.retryAfter == expected)
    }

    @Test func aTransportFailureIsATransportError() async throws {
        let feed = makeFeed()
        feed.sync()
        await transport.waitForRequests(1)
        transport.fail(0, with: URLError(.notConnectedToInternet))
        try? await feed.doneSyncing()
        let error = try #require(feed.error as? HTTPLoadableError)
        guard case .transport(let urlError) = error else { Issue.record("expected .transport, got \(error)"); return }
        #expect(urlError.code == .notConnectedToInternet)
        #expect(error.isRetryable)
    }

    @Test func anotherErrorOfTheTransportIsReportedAsItIs() async throws {
        let feed = makeFeed()
        feed.sync()
        await transport.waitForRequests(1)
        transport.fail(0, with: TestError(code: 7))
        try? await feed.doneSyncing()
        #expect(feed.error as? TestError == TestError(code: 7))
    }

    @Test func aBodyOverTheLimitFailsEvenIfTheTransportLetItThrough() async throws {
        let feed = makeFeed(maxBodySize: 10)
        feed.sync()
        await answer(feed, 0, body: #"{"items":[1,2,3,4]}"#)
        let error = try #require(feed.error as? HTTPLoadableError)
        guard case .tooLarge(10) = error else { Issue.record("expected .tooLarge(10), got \(error)"); return }
        #expect(error.description == "response body over maxBodySize (10 bytes)")
    }

    @Test func cancelSyncCancelsTheRequestAndRestoresTheState() async throws {
        let feed = makeFeed()
        feed.sync()
        await answer(feed, 0, body: #"{"items":[1]}"#)
        feed.sync()
        await transport.waitForRequests(2)
        feed.cancelSync()
        #expect(feed.loadableState == .didSyncSuccessfully)
        await yield(until: { transport.cancelledCount == 1 })
        #expect(transport.openCount == 0)
        #expect(feed.contents == Feed(items: [1]))
    }

    @Test func aLateAnswerIsDroppedWithItsValidators() async throws {
        let transport = ScriptedTransport(ignoresCancellation: true)
        let feed = HTTPLoadable<Feed>(request: URLRequest(url: feedURL), transport: transport)
        feed.sync()
        await transport.waitForRequests(1)
        transport.answer(0, headers: ["ETag": "first"], body: #"{"items":[1]}"#)
        try? await feed.doneSyncing()
        feed.sync()
        await transport.waitForRequests(2)
        feed.cancelSync()
        // The cancelled request answers anyway, with new contents and a new ETag: both dropped.
        transport.answer(1, headers: ["ETag": "late"], body: #"{"items":[2]}"#)
        await settle(until: { transport.openCount == 0 })
        feed.sync()
        await transport.waitForRequests(3)
        #expect(feed.contents == Feed(items: [1]))
        #expect(transport.requests[2].value(forHTTPHeaderField: "If-None-Match") == "first")
        transport.answer(2, status: 304)
        try? await feed.doneSyncing()
        #expect(feed.contents == Feed(items: [1]))
    }

    @Test func releasingTheLoadableCancelsItsRequest() async {
        weak var weakFeed: HTTPLoadable<Feed>?
        do {
            let feed = makeFeed()
            weakFeed = feed
            feed.sync()
            await transport.waitForRequests(1)
        }
        #expect(weakFeed == nil)
        await yield(until: { transport.cancelledCount == 1 })
        #expect(transport.openCount == 0)
    }

    @Test func releasingTheLoadableOnAnotherThreadCancelsItsRequest() async {
        let box = Locked<HTTPLoadable<Feed>?>(makeFeed())
        weak let weakFeed = box.withLock { $0 }
        weakFeed?.sync()
        await transport.waitForRequests(1)
        releaseOnAnotherThread(box)
        #expect(weakFeed == nil)
        await settle(until: { transport.cancelledCount == 1 })
        #expect(transport.cancelledCount == 1)
    }

    @Test func theConfigurationIsReadable() {
        let decoder = JSONDecoder()
        let feed = HTTPLoadable<Feed>(
            request: URLRequest(url: feedURL), transport: transport, decoder: decoder, maxBodySize: 5)
        #expect(feed.request.url == feedURL)
        #expect(feed.decoder === decoder)
        #expect(feed.maxBodySize == 5)
        #expect(feed.authorization == nil)
        #expect(feed.transport is ScriptedTransport)
        #expect(HTTPLoadable<Feed>(request: URLRequest(url: feedURL)).maxBodySize == 10 * 1_024 * 1_024)
        #expect(
            HTTPLoadable<Feed>(request: URLRequest(url: URL(string: "HTTPS://example.test")!)).transport is URLSession)
    }

    @Test func aURLThatIsNotHTTPStopsTheProgram() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                _ = HTTPLoadable<Feed>(request: URLRequest(url: URL(string: "ftp://example.test/feed")!))
            }
        }
        #expect(
            bytes(
                result?.standardErrorContent ?? [],
                contain: "request.url must be an http or https URL, got ftp://example.test/feed"))
    }

    @Test func aMaxBodySizeOfZeroStopsTheProgram() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                _ = HTTPLoadable<Feed>(request: URLRequest(url: URL(string: "http://example.test")!), maxBodySize: 0)
            }
        }
        #expect(bytes(result?.standardErrorContent ?? [], contain: "maxBodySize must be > 0, got 0"))
    }
}

/// Whether `bytes` (captured standard error) contain `text`.
func bytes(_ bytes: [UInt8], contain text: String) -> Bool {
    String(decoding: bytes, as: UTF8.self).contains(text)
}
