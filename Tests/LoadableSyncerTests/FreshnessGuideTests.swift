import Loadable
import LoadableTestSupport
import LoadableTesting
import Testing

// The samples of Docs/Syncing.md's freshness sections ("Freshness", "Invalidation", "The sync
// watchdog", "Status that survives a retry"), verbatim (`GuideSamplesTests` checks it), compiled
// and run.

/// A server whose answers the test releases one at a time.
@MainActor
final class HeldServer {
    private var pending: [CheckedContinuation<Void, Never>] = []
    private(set) var requests = 0
    var version = 1

    var waiting: Int { pending.count }

    func posts() async throws -> [String] {
        requests += 1
        await withCheckedContinuation { pending.append($0) }
        return ["posts v\(version)"]
    }

    func report() async throws -> String {
        requests += 1
        await withCheckedContinuation { pending.append($0) }
        return "report"
    }

    /// Answers the oldest request.
    func answer() {
        guard !pending.isEmpty else { return }
        pending.removeFirst().resume()
    }
}

@MainActor
@Suite struct FreshnessGuideTests {
    @Test("Freshness sample: age, maxAge, isStale and needsSync on a ManualClock")
    func freshnessSample() async throws {
        let clock = ManualClock()
        let feed = AsyncLoadable(clock: clock) { ["first post"] }
        feed.maxAge = .seconds(60)
        try await feed.synced()
        #expect(feed.age == .zero && !feed.isStale && !feed.needsSync)
        await clock.advance(by: .seconds(60))
        #expect(feed.age == .seconds(60) && feed.isStale && feed.needsSync)

        let created = "second post"  // what the server answered to "create"
        feed.updateContents { $0.insert(created, at: 0) }
        // feed.contents == ["second post", "first post"], feed.age == .zero
        #expect(feed.contents == ["second post", "first post"])
        #expect(feed.age == .zero)
        #expect(!feed.isStale)
        #expect(feed.loadableState == .didSyncSuccessfully)
    }

    @Test("Invalidation sample: two invalidations during a fetch give exactly one more fetch")
    func invalidationSample() async throws {
        let clock = ManualClock()
        let server = HeldServer()
        let posts = AsyncLoadable(clock: clock) { try await server.posts() }
        let lease = posts.lease()  // a screen shows it: in use
        posts.sync()  // a fetch starts...
        posts.invalidate()  // ...and a push says the posts changed: one more fetch will follow
        posts.invalidate()  // still one

        var seen: [(LoadableState, [String]?)] = []
        try await observing(posts, { seen.append(($0.loadableState, $0.contents)) }) {
            await yield(until: { server.waiting == 1 })
            server.version = 2  // the server changed after the first fetch read it
            server.answer()
            await yield(until: { server.requests == 2 })
            // The first answer landed while the second fetch began, in one notification.
            #expect(seen.count == 1)
            #expect(seen.last?.0 == .syncing)
            #expect(seen.last?.1 == ["posts v2"])
            #expect(posts.isStale)
            await yield(until: { server.waiting == 1 })
            server.answer()
            try await posts.doneSyncing()
            #expect(posts.loadableState == .didSyncSuccessfully)
            #expect(!posts.isStale)
            #expect(server.requests == 2)
        }
        withExtendedLifetime(lease) {}  // in use (a screen shows it) until the end
    }

    @Test("Watchdog sample: slow after 5 s, timed out after 30 s, contents kept")
    func watchdogSample() async {
        let clock = ManualClock()
        let server = HeldServer()
        let slow = AsyncLoadable(clock: clock) { try await server.report() }
        slow.slowSyncAfter = .seconds(5)
        slow.syncTimeout = .seconds(30)
        slow.sync()
        await clock.waitForSleepers()  // the watchdog's timer is armed
        await clock.advance(by: .seconds(5))
        #expect(slow.isSlowSync)  // one notification, the state still syncing
        await clock.advance(by: .seconds(25))
        #expect(slow.error as? LoadableError == .timedOut)  // the sync failed, contents kept

        #expect(slow.loadableState == .didFailToSync)
        #expect(!slow.isSlowSync)
        // The late answer is dropped: the failure stays.
        server.answer()
        await settle(rounds: 100) { slow.loadableState != .didFailToSync }
        #expect(slow.loadableState == .didFailToSync)
    }

    @Test("Watchdog: one notification for the slow mark, one for the timeout, contents kept")
    func watchdogNotifications() async {
        let clock = ManualClock()
        let server = HeldServer()
        let slow = AsyncLoadable(contents: "old report", clock: clock) { try await server.report() }
        slow.slowSyncAfter = .seconds(5)
        slow.syncTimeout = .seconds(30)
        var notifications = 0
        await observing(slow, { _ in notifications += 1 }) {
            slow.sync()
            #expect(notifications == 1)
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(5))
            #expect(slow.isSlowSync)
            #expect(slow.loadableState == .syncing)
            #expect(notifications == 2)
            await clock.advance(by: .seconds(25))
            #expect(slow.loadableState == .didFailToSync)
            #expect(slow.error as? LoadableError == .timedOut)
            #expect(!slow.isSlowSync)
            #expect(slow.contents == "old report")
            #expect(notifications == 3)
        }
    }

    @Test("Status sample: refreshing, retrying after a failure, failed")
    func statusSample() {
        let feed = PushLoadable<[String]>()
        var shown: [String] = []
        func showRefreshing() { shown.append("refreshing") }
        func showRetrying(after error: (any Error)?) { shown.append("retrying after \(error.map { "\($0)" } ?? "-")") }
        func showError(_ error: (any Error)?) { shown.append("error \(error.map { "\($0)" } ?? "-")") }
        func showContents() { shown.append("contents") }
        func show() {
            switch (feed.loadableState, feed.consecutiveFailures) {
            case (.syncing, 0): showRefreshing()
            case (.syncing, _): showRetrying(after: feed.lastError)  // the error stays on screen
            case (.didFailToSync, _): showError(feed.error)
            default: showContents()
            }
        }

        feed.setSyncing()
        show()
        feed.setDidFailToSync(TestError("offline"))
        show()
        feed.setSyncing()
        show()
        #expect(feed.snapshot.isRetrying)
        #expect(feed.error == nil)
        feed.setDidSyncSuccessfully(["post"])
        show()
        #expect(shown == ["refreshing", "error offline", "retrying after offline", "contents"])
        #expect(feed.lastError == nil)
        #expect(feed.consecutiveFailures == 0)
    }
}
