import Foundation
import LoadableHTTP
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// An `HTTPLoadable`'s syncs read the loadable without telling Observation, as every loadable's
/// bookkeeping does (the other kinds are checked in `LoadableCoreTests`'
/// `UntrackedBookkeepingTests`): a loadable that nothing reads through Observation never gets a
/// registrar, so its changes never pay for one.
@MainActor
@Suite("HTTPLoadable's bookkeeping reads without Observation", .timeLimit(.minutes(5)))
struct HTTPUntrackedBookkeepingTests {
    let transport = ScriptedTransport()

    /// Answers request `index` and waits, untracked, for the sync to end.
    func answer(
        _ feed: HTTPLoadable<Feed>, _ index: Int, status: Int, headers: [String: String] = [:], body: String
    )
        async
    {
        await transport.waitForRequests(index + 1)
        transport.answer(index, status: status, headers: headers, body: body)
        await settle { feed.core.state != .syncing }
    }

    @Test("syncs answered 200, 304 and 500, an invalidation and a cancel create no registrar")
    func syncs() async {
        let feed = HTTPLoadable<Feed>(request: URLRequest(url: feedURL), transport: transport)
        await observing(feed, { _ in }) {
            feed.syncIfNeeded()
            await answer(feed, 0, status: 200, headers: ["ETag": "\"a\""], body: #"{"items":[1]}"#)
            feed.sync()  // conditional: it has contents and a validator
            await answer(feed, 1, status: 304, body: "")
            feed.invalidate()
            feed.sync()
            await answer(feed, 2, status: 500, body: "down")
            feed.sync()
            await transport.waitForRequests(4)
            feed.cancelSync()
            transport.answer(3, status: 200, body: #"{"items":[2]}"#)  // late: dropped
            await settle { transport.openCount == 0 }
            #expect(transport.requests[1].value(forHTTPHeaderField: "If-None-Match") == "\"a\"")
            #expect(!feed.core.hasObservationRegistrar)
        }
    }

    @Test("a request that waits for a token, is refused with 401 and retried with a renewed one creates no registrar")
    func authorization() async {
        let clock = ManualClock()
        let accessToken = AnsweredToken()
        let waiter = LoadableWaiter(accessToken, timeout: .seconds(30), clock: clock)
        let feed = HTTPLoadable<Feed>(
            request: URLRequest(url: feedURL), transport: transport, authorization: .bearer(waiter))
        feed.sync()
        await settle { accessToken.core.state == .syncing }
        accessToken.answer("first")
        await transport.waitForRequests(1)
        transport.answer(0, status: 401, body: "")
        await settle { accessToken.core.state == .syncing }  // the renewal
        accessToken.answer("second")
        await answer(feed, 1, status: 200, body: #"{"items":[1]}"#)
        #expect(
            transport.requests.map { $0.value(forHTTPHeaderField: "Authorization") } == [
                "Bearer first", "Bearer second",
            ])
        #expect(!feed.core.hasObservationRegistrar)
        #expect(!accessToken.core.hasObservationRegistrar)
    }
}

/// An access token whose syncs the test answers.
private final class AnsweredToken: Loadable<String> {
    override func doSync() {}

    /// Ends the running sync with `token`.
    func answer(_ token: String) {
        guard core.state == .syncing else { return }
        setDidSyncSuccessfully(token)
    }
}
