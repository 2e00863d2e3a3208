import Foundation
import Loadable
import LoadableCaching
import LoadableGroup
import LoadableSyncer
import LoadableTesting

/// The tour: builds the objects, runs the script in simulated time, prints the summary.
@MainActor
final class Tour {
    let options: DemoOptions
    let clock: ManualClock
    let timeline: Timeline
    let stats = DemoStats()
    let auth: AuthService
    let server: APIServer
    let token: AsyncLoadable<String>
    let syncer: LoadableSyncer
    let api: APIClient
    let feeds: [(name: String, loadable: AsyncLoadable<[String]>)]
    let group: LoadableGroup
    /// The feed screen's lease on its group: while the screen is open the feeds are in use, so an
    /// invalidation refreshes them at once.
    let screen: LoadableLease<LoadableGroup>
    /// One shared loadable per API path, for the post screens: a list row and a detail page that
    /// show the same post lease the same entry, so they make one request and agree. The relaunch
    /// drops it, as a real relaunch would: a store owns its cache, so a second live store on the
    /// same folder would stop the program.
    var posts: LoadableStore<String, AsyncLoadable<[String]>>!
    /// Where the posts store keeps its entries between launches: files in a folder of its own,
    /// removed when the tour ends. The relaunch at the end restores from it.
    let postsCacheDirectory = FileManager.default.temporaryDirectory
        .appendingPathComponent("loadable-demo-\(ProcessInfo.processInfo.processIdentifier)", isDirectory: true)
    /// The wall-clock time of the simulation: a fixed date plus the simulated time, so that the
    /// ages of restored entries are the same in every replay.
    let simulatedDate: @Sendable () -> Date
    /// The leases of the open post screens, by screen.
    var postScreens: [String: LoadableLease<AsyncLoadable<[String]>>] = [:]
    private var tasks: [Task<Void, Never>] = []
    private var observations: [LoadableObservation] = []

    /// - Parameter clock: The simulated time; `--inspect` and `--events` pass the inspector's.
    init(options: DemoOptions, clock: ManualClock = ManualClock()) {
        self.options = options
        self.clock = clock
        timeline = Timeline(clock: clock)
        auth = AuthService(seed: options.seed, failureRate: options.failureRate, clock: clock)
        server = APIServer(seed: options.seed &+ 1, clock: clock)
        let auth = auth
        token = AsyncLoadable { try await auth.issueToken() }
        syncer = LoadableSyncer(
            token,
            timeoutPolicy: BackoffTimeoutPolicy(
                period: .seconds(10), min: .milliseconds(500), max: .seconds(8), jitter: .full,
                random: SeededRandomNumberGenerator(seed: options.seed &+ 2)),
            clock: clock,
            // Not the system monitor: a replay must not depend on the machine's network.
            activity: ActivityMonitor())
        api = APIClient(token: token, server: server, clock: clock, timeline: timeline, stats: stats)
        let api = api
        let clock = clock
        feeds = ["/profile", "/photos", "/notifications"].map { path in
            let feed = AsyncLoadable(clock: clock) { try await api.request(path) }
            // The watchdog: "still loading…" after 1 s, give up after 3 s (a lost answer must not
            // leave a spinner forever).
            feed.slowSyncAfter = .seconds(1)
            feed.syncTimeout = .seconds(3)
            return (String(path.dropFirst()), feed)
        }
        // Watch the token and the feeds before the group exists, so their lines come before the
        // group's (observers are called in the order they were added).
        let start = clock.now
        simulatedDate = {
            Date(timeIntervalSinceReferenceDate: 800_000_000 + Timeline.secondsValue(start.duration(to: clock.now)))
        }
        posts = LoadableStore(
            retention: .seconds(300), clock: clock,
            cache: FileLoadableCache(directory: postsCacheDirectory), cacheKey: { $0 }, now: simulatedDate
        ) { path in
            AsyncLoadable(clock: clock) { try await api.request(path) }
        }
        group = LoadableGroup([], policy: .strict)
        screen = group.lease()  // the members set below become in use with the group
        watchEverything()
        group.members = feeds.map(\.loadable)
        watchGroup()
    }

    func run() async {
        print(
            "Loadable tour: seed \(options.seed), auth failure rate \(options.failureRate), "
                + "\(Timeline.seconds(options.duration)) s of simulated app time\n")
        print(Timeline.header)

        // App launch: sign in, and open the feed screen (its feeds wait for the token).
        token.sync()
        group.sync()
        at(1.5) { self.sendMessage(1) }
        at(4.0) { self.sendMessage(2) }
        schedulePostScreens()
        scheduleMutations()
        at(7.5) { self.sendMessage(3) }
        at(9.0) {
            self.timeline.log("user", "pull to refresh", "")
            self.group.sync()
        }
        at(9.05) {
            // The server says the notifications changed while their refresh is on its way: that
            // refresh may carry the old list, so one more follows it (never a lost invalidation).
            self.timeline.log("server push", "notifications changed", "mid-sync: one more sync will follow")
            self.feeds[2].loadable.invalidate()
        }
        at(12.0) {
            self.timeline.log("user", "pull to refresh", "old items stay on screen while the feeds reload")
            self.group.sync()
        }
        at(16.0) { self.sendMessage(4) }
        at(17.0) {
            self.server.stalls.insert("/photos")
            self.timeline.log("user", "pull to refresh", "(the photos answer is going to get lost)")
            self.group.sync()
        }
        at(21.0) {
            self.server.glitches.insert("/photos")
            self.timeline.log("user", "pull to refresh", "(the photos request is going to fail)")
            self.group.sync()
        }
        at(24.0) {
            self.timeline.log("user", "tap retry", "")
            self.group.sync()
        }
        at(27.0) { self.sendMessage(5) }
        at(28.5) {
            // Not syncing, and the open screen holds a lease: the profile refreshes at once.
            self.timeline.log("server push", "profile changed", "the open screen refreshes it at once")
            self.feeds[0].loadable.invalidate()
        }

        // Let the work started at time zero run before time moves.
        await clock.advance(by: .zero)
        let end = clock.now.advanced(by: options.duration)
        while clock.now < end {
            await clock.advance(by: min(.milliseconds(100), clock.now.duration(to: end)))
        }
        for task in tasks { task.cancel() }
        await relaunch()
        await offlineEpisode()
        await syncEpisode()
        printSummary()
    }

    func at(_ seconds: Double, _ action: @escaping @MainActor () -> Void) {
        let deadline = clock.now.advanced(by: .milliseconds(Int64(seconds * 1000)))
        let clock = clock
        tasks.append(
            Task {
                guard (try? await clock.sleep(until: deadline)) != nil else { return }
                action()
            })
    }

    /// Runs `work` in a task that the end of the tour cancels.
    func spawn(_ work: @escaping @MainActor () async -> Void) {
        tasks.append(Task { await work() })
    }

    private func sendMessage(_ number: Int) {
        tasks.append(
            Task {
                _ = try? await self.api.request("/messages/\(number)")
            })
    }

    private func watchEverything() {
        timeline.watch(token, as: "access-token") { [weak self] token in
            self?.describe(token: token) ?? ""
        }
        for (name, feed) in feeds {
            timeline.watch(feed, as: "feed \(name)") { feed in
                Self.describe(feed: feed)
            }
        }
        // Counters for the summary.
        countSyncs(of: token, as: "access-token")
        for (name, feed) in feeds { countSyncs(of: feed, as: name) }
    }

    /// Counts the syncs and failures of `loadable` under `name`, for the summary.
    func countSyncs(of loadable: any PureLoadable, as name: String) {
        var before = loadable.loadableState
        observations.append(
            loadable.addObserver { [weak self] loadable in
                guard let self else { return }
                let now = loadable.loadableState
                defer { before = now }
                guard before != now else { return }
                if now == .syncing {
                    stats.syncs[name, default: 0] += 1
                    if before == .didFailToSync, name == "access-token" { stats.retries += 1 }
                }
                if now == .didFailToSync { stats.failures[name, default: 0] += 1 }
            })
    }

    private func watchGroup() {
        timeline.watch(group, as: "feed screen") { group in
            switch group.loadableState {
            case .idle: "nothing yet"
            case .syncing: group.isContentsAvailable ? "content + refresh spinner" : "full-screen spinner"
            case .didSyncSuccessfully: "content"
            case .didFailToSync:
                group.isContentsAvailable ? "old content + error banner" : "error screen with a retry button"
            }
        }
    }

    private func describe(token: AsyncLoadable<String>) -> String {
        switch token.loadableState {
        case .idle: return "signed out"
        case .syncing: return token.contents == nil ? "signing in…" : "signed in (refreshing the session)"
        case .didSyncSuccessfully:
            let refresh = syncer.nextSyncIn.map { ", next refresh in \(Timeline.seconds($0)) s" } ?? ""
            return "signed in\(refresh)"
        case .didFailToSync:
            let retry = syncer.nextSyncIn.map { "; retrying in \(Timeline.seconds($0)) s" } ?? ""
            let error = token.error.map { "\($0)" } ?? "unknown error"
            return token.contents == nil
                ? "can't sign in (\(error))\(retry)" : "still signed in, refresh failed (\(error))\(retry)"
        }
    }

    static func describe(feed: AsyncLoadable<[String]>) -> String {
        let count = feed.contents?.count ?? 0
        switch feed.snapshot.phase {
        case .idle: return "nothing yet"
        case .syncing(let cached) where feed.isSlowSync:
            return cached == nil ? "spinner + \"still loading…\"" : "\(items(count)) + \"still loading…\""
        case .syncing(let cached): return cached == nil ? "spinner" : "\(items(count)) (stale) + spinner"
        case .loaded: return feed.isStale ? "\(items(count)) (stale)" : items(count)
        case .empty: return "empty state"
        case .failed(let error, let cached):
            return cached == nil ? "error: \(error)" : "\(items(count)) kept + error: \(error)"
        }
    }

    private static func items(_ count: Int) -> String {
        count == 1 ? "1 item" : "\(count) items"
    }

    private func printSummary() {
        let tokenSyncs = stats.syncs["access-token", default: 0]
        let tokenFailures = stats.failures["access-token", default: 0]
        print("\nSummary")
        print("  access token: \(tokenSyncs) syncs, \(tokenFailures) failed, \(stats.retries) retried by the syncer")
        for (name, _) in feeds {
            print("  feed \(name): \(stats.syncs[name, default: 0]) syncs, \(stats.failures[name, default: 0]) failed")
        }
        let waited = stats.waitsThatWaited
        let longest = waited.max() ?? .zero
        let total = waited.reduce(Duration.zero, +)
        let average = waited.isEmpty ? Duration.zero : total / waited.count
        print(
            "  posts store: \(stats.postEntriesAtRelaunch ?? posts?.count ?? 0) entries for \(stats.postLeases) screen leases, "
                + "\(stats.syncs["posts", default: 0]) syncs in all")
        print("  persistence: \(stats.relaunchSummary)")
        print(
            "  optimistic changes on /posts/42: "
                + (stats.mutationSummary.isEmpty ? "none ended" : stats.mutationSummary.joined(separator: ", ")))
        print("  offline outbox: \(stats.offlineSummary)")
        print("  synced list: \(stats.syncSummary)")
        print(
            "  requests: \(stats.requests) sent; \(waited.count) waited for the token "
                + "(average \(Timeline.seconds(average)) s, longest \(Timeline.seconds(longest)) s), "
                + "\(stats.timeouts) timed out")
    }
}
