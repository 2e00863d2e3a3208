import Foundation
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

// Every sample of Docs/Syncing.md, compiled and run.

// MARK: - The syncer (guide types)

enum AuthError: Error { case revoked }

@MainActor
final class Session {
    let profile: AsyncLoadable<String>
    private let syncer: LoadableSyncer

    init(clock: any Clock<Duration> = ContinuousClock(), load: @escaping @MainActor () async throws -> String) {
        profile = AsyncLoadable(load: load)
        syncer = LoadableSyncer(
            profile,
            timeoutPolicy: BackoffTimeoutPolicy(period: .seconds(600), min: .seconds(1), max: .seconds(60)),
            clock: clock
        )
        syncer.shouldRetry = { !($0 is AuthError) }
    }

    func start() { profile.sync() }  // the first sync is ours; the syncer keeps it fresh
}

// MARK: - Retry-After and the activity monitor (guide types)

struct ServerBusy: RetryAfterProviding {
    var retryAfter: Duration?
}

func check(status: Int, retryAfterHeader: String?, now: Date) throws {
    guard status == 429 || status == 503 else { return }
    throw ServerBusy(retryAfter: retryAfterHeader.flatMap { RetryAfter.parse($0, now: now) })
}

@MainActor
final class UpstreamHealth {
    let activity: ActivityMonitor

    init(activity: ActivityMonitor = .system) { self.activity = activity }

    /// Called after each health check of the upstream API, however they are scheduled.
    func healthCheckFinished(reachable: Bool) {
        activity.connectivity = reachable ? .online : .offline
    }

    /// Called when the service starts draining: nothing syncs any more.
    func draining() { activity.isActive = false }
}

// MARK: - The access-token recipe (guide types)

protocol Transport: Sendable {
    func send(_ request: String, bearer: String) async throws -> String  // throws TransportError.unauthorized on 401
}

enum TransportError: Error { case unauthorized }

@MainActor
final class APIClient {
    private let token: AsyncLoadable<String>
    private let tokenWaiter: LoadableWaiter<AsyncLoadable<String>>
    private let transport: any Transport

    init(token: AsyncLoadable<String>, transport: any Transport, clock: any Clock<Duration> = ContinuousClock()) {
        self.token = token
        tokenWaiter = LoadableWaiter(token, timeout: .seconds(30), clock: clock)
        self.transport = transport
    }

    func profile() async throws -> String {
        try await send("GET /profile")
    }

    func feed() async throws -> String {
        try await send("GET /feed")
    }

    func send(_ request: String) async throws -> String {
        // Syncs the token if needed; throws timedOut after 30 s.
        let bearer = try await tokenWaiter.wait().contents ?? ""
        do {
            return try await transport.send(request, bearer: bearer)
        } catch TransportError.unauthorized {
            // Rejected: unless another request already had it replaced, or is having it replaced,
            // invalidate it; the next wait gets a new token.
            if token.contents == bearer, !token.isStale { token.invalidate() }
            let fresh = try await tokenWaiter.wait().contents ?? ""
            return try await transport.send(request, bearer: fresh)
        }
    }
}

// MARK: - Autosync (guide types)

@MainActor
final class WeatherLoadable: AutosyncLoadable<String> {
    private let forecast: @MainActor () -> String

    init(clock: any Clock<Duration> = ContinuousClock(), forecast: @escaping @MainActor () -> String) {
        self.forecast = forecast
        super.init(autosyncInterval: .seconds(300), clock: clock)
    }

    override func doSync() {
        setDidSyncSuccessfully(forecast())
    }
}

// MARK: - Stand-ins the samples refer to

/// The token endpoint of the recipe's usage sample.
@MainActor
final class FakeAuthServer {
    private(set) var issued = 0
    func newToken() async throws -> String {
        issued += 1
        return "token-\(issued)"
    }
}

/// The transport of the recipe's usage sample: echoes the request and the bearer.
struct URLSessionTransport: Transport {
    func send(_ request: String, bearer: String) async throws -> String {
        "\(request) as \(bearer)"
    }
}

@MainActor
@Suite struct SyncingGuideTests {
    @Test("Backoff sample: the reference sequence, the period, and the reset")
    func backoffSample() {
        var policy = BackoffTimeoutPolicy(period: .seconds(300), min: .seconds(1), max: .seconds(15))
        let retries = (0..<10).map { _ in policy.nextTimeout(afterFailure: true)! }
        // 1, 1.414, 2, 2.828, 4, 5.657, 8, 11.31, 15, 15 seconds
        let refresh = policy.nextTimeout(afterFailure: false)  // 300 s, and the backoff starts over
        let next = policy.nextTimeout(afterFailure: true)  // 1 s again

        expectDurations(retries, approximately: referenceBackoffSeconds)
        #expect(refresh == .seconds(300))
        #expect(next == .seconds(1))
    }

    @Test("Jitter sample: equal jitter from a seeded generator")
    func jitterSample() {
        var jittered = BackoffTimeoutPolicy(
            min: .seconds(1),
            max: .seconds(30),
            jitter: .equal,
            random: SeededRandomNumberGenerator(seed: 42)
        )
        let first = jittered.nextTimeout(afterFailure: true)!  // somewhere in 0.5...1 s, the same every run

        #expect(first >= .milliseconds(500) && first <= .seconds(1))
        var again = BackoffTimeoutPolicy(
            min: .seconds(1),
            max: .seconds(30),
            jitter: .equal,
            random: SeededRandomNumberGenerator(seed: 42)
        )
        #expect(again.nextTimeout(afterFailure: true) == first)
    }

    @Test("Session sample: a failed first sync is retried; an AuthError is not")
    func sessionSample() async {
        let clock = ManualClock()
        var attempts = 0
        let session = Session(clock: clock) {
            attempts += 1
            if attempts == 1 { throw TestError() }
            if attempts == 3 { throw AuthError.revoked }
            return "profile \(attempts)"
        }
        session.start()
        await yield { session.profile.loadableState == .didFailToSync }
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(1))
        await yield { session.profile.loadableState == .didSyncSuccessfully }
        #expect(session.profile.contents == "profile 2")
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(600))  // the refresh fails with AuthError
        await yield { session.profile.loadableState == .didFailToSync }
        #expect(clock.pendingSleepCount == 0)
        #expect(clock.requestedSleeps == [.seconds(1), .seconds(600)])
    }

    @Test("Syncer testing sample: the schedule as the clock's requested sleeps")
    func syncerTestingSample() async {
        let clock = ManualClock()
        let feed = TestLoadable<[String]>()
        let syncer = LoadableSyncer(
            feed,
            timeoutPolicy: BackoffTimeoutPolicy(period: .seconds(60), min: .seconds(1), max: .seconds(4)),
            clock: clock
        )
        feed.sync()
        feed.setDidFailToSync(nil)  // retry in 1 s
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(1))  // the syncer called sync()
        feed.setDidFailToSync(nil)  // retry in 1.414 s
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(1) * 2.0.squareRoot())
        feed.setDidSyncSuccessfully(["news"])  // refresh in 60 s
        await clock.waitForSleepers()
        #expect(clock.requestedSleeps == [.seconds(1), .seconds(1) * 2.0.squareRoot(), .seconds(60)])
        #expect(syncer.nextSyncIn == .seconds(60))
    }

    @Test("Access-token recipe: two calls wait for one token sync")
    func accessTokenRecipe() async throws {
        let authServer = FakeAuthServer()

        let token = AsyncLoadable<String> { try await authServer.newToken() }
        let api = APIClient(token: token, transport: URLSessionTransport())
        async let profile = api.profile()
        async let feed = api.feed()  // both wait for one token sync
        let (p, f) = try await (profile, feed)

        #expect(p == "GET /profile as token-1")
        #expect(f == "GET /feed as token-1")
        #expect(authServer.issued == 1)
    }

    @Test("Access-token recipe: calls time out after 30 s while the token endpoint keeps failing")
    func accessTokenTimeout() async {
        let clock = ManualClock()
        var attempts = 0
        let token = AsyncLoadable<String> {
            attempts += 1
            throw TestError()
        }
        let api = APIClient(token: token, transport: URLSessionTransport(), clock: clock)
        let call = Task { try await api.profile() }
        await clock.waitForSleepers(count: 2)  // the call's timeout and the first retry
        await clock.advance(by: .seconds(30))
        await #expect(throws: LoadableWaiterError.timedOut) { try await call.value }
        #expect(attempts > 1)
    }

    @Test("Callback sample: cancelling the handle runs the completion with CancellationError")
    func callbackSample() {
        let clock = ManualClock()
        let waiter = LoadableWaiter(TestLoadable<String>(), timeout: .seconds(30), clock: clock)
        var printed: [String] = []
        func print(_ items: Any...) { printed.append(items.map { "\($0)" }.joined(separator: " ")) }

        let handle = waiter.wait { result in
            switch result {
            case .success(let token): print("token:", token.contents ?? "")
            case .failure(let error): print("no token:", error)
            }
        }
        handle.cancel()  // the completion runs now with CancellationError

        #expect(printed.count == 1)
        #expect(printed.first?.hasPrefix("no token:") == true)
    }

    @Test("Simple waiter sample: one completion after the sync ends")
    func simpleWaiterSample() {
        let feed = TestLoadable<[String]>()
        var printed: [String] = []
        func print(_ items: Any...) { printed.append(items.map { "\($0)" }.joined(separator: " ")) }

        feed.sync()
        SimpleLoadableWaiter.whenDoneSyncing(feed) {
            print("done:", feed.loadableState)  // runs once, after the sync ends
        }

        #expect(printed.isEmpty)
        feed.setDidSyncSuccessfully(["news"])
        #expect(printed == ["done: did-sync-successfully"])
    }

    @Test("Autosync sample: syncs on the first observer, every 5 minutes while observed, then stops")
    func autosyncSample() async {
        let clock = ManualClock()
        var printed: [String] = []
        func print(_ items: Any...) { printed.append(items.map { "\($0)" }.joined(separator: " ")) }
        var forecasts = 0

        let weather = WeatherLoadable(clock: clock) {
            forecasts += 1
            return "sunny \(forecasts)"
        }
        let observation = weather.observe { print($0.contents ?? "…") }  // syncs now, then every 5 minutes
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(300))
        observation.cancel()  // the refreshes stop

        #expect(forecasts == 2)
        #expect(printed == ["…", "sunny 1", "sunny 1", "sunny 2"])
        await clock.advance(by: .seconds(600))
        #expect(forecasts == 2)
    }

    @Test("Autosync sample as written: the first observer syncs it, cancelling stops the refreshes")
    func autosyncSampleAsWritten() {
        var printed: [String] = []
        func print(_ items: Any...) { printed.append(items.map { "\($0)" }.joined(separator: " ")) }

        let weather = WeatherLoadable { "sunny" }
        let observation = weather.observe { print($0.contents ?? "…") }  // syncs now, then every 5 minutes
        observation.cancel()  // the refreshes stop

        #expect(printed == ["…", "sunny"])
        #expect(weather.contents == "sunny")
        #expect(!weather.hasObservers)
    }

    @Test("Retry budget sample: two retries, then nil, then a reset")
    func retryBudgetSample() {
        var capped = BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(8), maxRetries: 2)
        let first = capped.nextTimeout(afterFailure: true)  // 1 s: the first attempt failed
        let second = capped.nextTimeout(afterFailure: true)  // 1.414 s: retry 1 failed
        let third = capped.nextTimeout(afterFailure: true)  // nil: retry 2 failed too
        capped.reset()  // what the syncer does on a catch-up or a manual sync
        let again = capped.nextTimeout(afterFailure: true)  // 1 s

        #expect(first == .seconds(1))
        #expect(second == .seconds(1) * 2.0.squareRoot())
        #expect(third == nil)
        #expect(again == .seconds(1))
    }

    @Test("Retry-After sample: a 429 with a header becomes a hinted error the syncer waits for")
    func retryAfterSample() async {
        let now = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT
        #expect(throws: Never.self) { try check(status: 200, retryAfterHeader: "120", now: now) }
        for (header, expected) in [
            ("120", Duration.seconds(120)), ("Sun, 06 Nov 1994 08:50:37 GMT", .seconds(60)), ("soon", nil),
        ] as [(String, Duration?)] {
            #expect(
                performing: { try check(status: 429, retryAfterHeader: header, now: now) },
                throws: { error in
                    (error as? ServerBusy)?.retryAfter == expected
                })
        }

        let clock = ManualClock()
        let feed = TestLoadable<Int>()
        let syncer = LoadableSyncer(
            feed,
            timeoutPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(15)),
            clock: clock,
            activity: ActivityMonitor()
        )
        feed.sync()
        feed.setDidFailToSync(ServerBusy(retryAfter: .seconds(120)))
        await clock.waitForSleepers()
        #expect(clock.requestedSleeps == [.seconds(120)])
        #expect(syncer.nextSyncIn == .seconds(120))
    }

    @Test("Retry-After deadline sample: a trip to the background does not retry before the server's moment")
    func retryAfterDeadlineSample() async {
        let clock = ManualClock()
        let activity = ActivityMonitor()
        let feed = TestLoadable<[String]>()
        let syncer = LoadableSyncer(
            feed,
            timeoutPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(60)),
            clock: clock,
            activity: activity
        )
        feed.sync()
        feed.setDidFailToSync(ServerBusy(retryAfter: .seconds(600)))  // a 429: "come back in 600 s"
        await clock.advance(by: .seconds(10))
        activity.isActive = false  // to the background...
        activity.isActive = true  // ...and back: no sync now
        // syncer.nextSyncIn == .seconds(590): the retry comes at the server's deadline

        #expect(feed.syncCount == 1)
        #expect(syncer.nextSyncIn == .seconds(590))
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(590))
        #expect(feed.syncCount == 2)
    }

    @Test("Health check sample: the service's checks pause and resume a syncer")
    func healthCheckSample() async {
        let clock = ManualClock()
        let health = UpstreamHealth(activity: ActivityMonitor())
        let feed = TestLoadable<Int>()
        let syncer = LoadableSyncer(
            feed,
            timeoutPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(15)),
            clock: clock,
            activity: health.activity
        )
        health.healthCheckFinished(reachable: false)
        feed.sync()
        feed.setDidFailToSync(nil)
        #expect(syncer.isWaitingForNetwork)
        health.healthCheckFinished(reachable: true)
        #expect(feed.syncCount == 2)
        health.draining()
        feed.setDidFailToSync(nil)
        #expect(syncer.nextSyncIn == nil)
        #expect(!syncer.isWaitingForNetwork)
        #expect(UpstreamHealth().activity === ActivityMonitor.system)
    }

    @Test("Monitor testing sample: pausing, catching up and waiting for the network on a ManualClock")
    func monitorTestingSample() async {
        let clock = ManualClock()
        let activity = ActivityMonitor()
        let feed = TestLoadable<[String]>()
        let syncer = LoadableSyncer(
            feed,
            timeoutPolicy: BackoffTimeoutPolicy(period: .seconds(60), min: .seconds(1), max: .seconds(4)),
            clock: clock,
            activity: activity
        )
        feed.sync()
        feed.setDidSyncSuccessfully(["news"])  // refresh in 60 s
        await clock.waitForSleepers()
        activity.isActive = false  // the app goes to the background: the timer stops
        await clock.advance(by: .seconds(100))  // nothing syncs
        activity.isActive = true  // the refresh fell due: it runs now
        #expect(feed.syncCount == 2)

        activity.connectivity = .offline
        feed.setDidFailToSync(nil)  // no retry armed
        #expect(syncer.isWaitingForNetwork)
        activity.connectivity = .online  // one sync at once, backoff at its minimum
        #expect(feed.syncCount == 3)
        #expect(clock.requestedSleeps == [.seconds(60)])
    }
}
