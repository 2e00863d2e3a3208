import Loadable
import LoadableGroup
import LoadableSyncer
import LoadableTesting

/// Why a simulated request failed.
enum DemoError: Error, CustomStringConvertible {
    case authUnavailable
    case serverGlitch(String)

    var description: String {
        switch self {
        case .authUnavailable: "auth service unavailable"
        case .serverGlitch(let path): "server error on \(path)"
        }
    }
}

/// Counts what happened, for the summary.
@MainActor
final class DemoStats {
    var syncs: [String: Int] = [:]
    var failures: [String: Int] = [:]
    var retries = 0
    var waits: [Duration] = []
    var waitsThatWaited: [Duration] { waits.filter { $0 > .zero } }
    var timeouts = 0
    var requests = 0
    var postLeases = 0
    var relaunchSummary = "not run"
    /// The posts store's entries when the app was relaunched (the store is dropped then).
    var postEntriesAtRelaunch: Int?
    var mutationSummary: [String] = []
    /// The items the offline episode's outbox sent, in order.
    var offlineSent: [String] = []
    var offlineSummary = "not run"
    var syncSummary = "not run"
}

/// A simulated auth service: answers after a random latency and fails at `failureRate`.
@MainActor
final class AuthService {
    private var random: SeededRandomNumberGenerator
    private let failureRate: Double
    private let clock: ManualClock
    private var issued = 0

    init(seed: UInt64, failureRate: Double, clock: ManualClock) {
        random = SeededRandomNumberGenerator(seed: seed)
        self.failureRate = failureRate
        self.clock = clock
    }

    func issueToken() async throws -> String {
        let latency = Duration.microseconds(Int64.random(in: 150_000...600_000, using: &random))
        let fails = Double.random(in: 0..<1, using: &random) < failureRate
        try await clock.sleep(for: latency)
        if fails { throw DemoError.authUnavailable }
        issued += 1
        return "token-\(issued)"
    }
}

/// A simulated API server: answers after a random latency; a path can be made to fail once, or to
/// hang once (its answer never comes: only a timeout ends that request).
@MainActor
final class APIServer {
    private var random: SeededRandomNumberGenerator
    private let clock: ManualClock
    var glitches: Set<String> = []
    var stalls: Set<String> = []
    /// Items added to a resource by accepted changes: its later answers include them.
    private var added: [String: [String]] = [:]
    /// The idempotency keys of the changes applied: a change sent again with one is applied once.
    private var appliedKeys: Set<String> = []

    init(seed: UInt64, clock: ManualClock) {
        random = SeededRandomNumberGenerator(seed: seed)
        self.clock = clock
    }

    func get(_ path: String, token: String) async throws -> [String] {
        let latency = Duration.microseconds(Int64.random(in: 80_000...300_000, using: &random))
        let count = Int.random(in: 1...9, using: &random)
        let fails = glitches.remove(path) != nil
        if stalls.remove(path) != nil { try await clock.sleep(for: .seconds(3600)) }
        try await clock.sleep(for: latency)
        if fails { throw DemoError.serverGlitch(path) }
        return (1...count).map { "\(path.dropFirst()) #\($0)" } + added[path, default: []]
    }

    /// A change: adds `item` to `resource` after a latency longer than a read's (a write), or
    /// fails when `path` glitches. A change sent again with the same `idempotencyKey` is applied
    /// once.
    func post(
        _ path: String, adding item: String, to resource: String, token: String, idempotencyKey: String
    ) async throws {
        let latency = Duration.microseconds(Int64.random(in: 400_000...700_000, using: &random))
        let fails = glitches.remove(path) != nil
        try await clock.sleep(for: latency)
        if fails { throw DemoError.serverGlitch(path) }
        guard appliedKeys.insert(idempotencyKey).inserted else { return }
        if !added[resource, default: []].contains(item) { added[resource, default: []].append(item) }
    }
}

/// An API client whose every request first waits for the access token.
@MainActor
final class APIClient {
    private let waiter: LoadableWaiter<AsyncLoadable<String>>
    private let server: APIServer
    private let clock: ManualClock
    private let timeline: Timeline
    private let stats: DemoStats

    init(
        token: AsyncLoadable<String>, server: APIServer, clock: ManualClock, timeline: Timeline,
        stats: DemoStats
    ) {
        waiter = LoadableWaiter(token, timeout: .seconds(5), clock: clock)
        self.server = server
        self.clock = clock
        self.timeline = timeline
        self.stats = stats
    }

    func request(_ path: String) async throws -> [String] {
        let token = try await authorize(path)
        return try await server.get(path, token: token)
    }

    /// Sends a change: adds `item` to `resource`, after waiting for the token like a read.
    func send(_ path: String, adding item: String, to resource: String, idempotencyKey: String) async throws {
        let token = try await authorize(path)
        try await server.post(path, adding: item, to: resource, token: token, idempotencyKey: idempotencyKey)
    }

    /// Waits for the access token, logging the wait, and returns it.
    private func authorize(_ path: String) async throws -> String {
        let started = clock.now
        let name = "api \(path)"
        let token: AsyncLoadable<String>
        do {
            if !waiter.isConditionMet { timeline.log(name, "waiting", "request waits for the access token") }
            token = try await waiter.wait()
        } catch {
            stats.timeouts += 1
            timeline.log(name, "gave up", "request failed: \(error)")
            throw error
        }
        let waited = started.duration(to: clock.now)
        stats.waits.append(waited)
        stats.requests += 1
        timeline.log(
            name, "sent",
            waited > .zero ? "after waiting \(Timeline.seconds(waited)) s for the token" : "the token was ready")
        return token.contents ?? ""
    }
}
