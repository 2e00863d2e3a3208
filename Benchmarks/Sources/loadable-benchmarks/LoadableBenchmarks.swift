import Foundation

/// Sizes and repetitions of one run.
struct Settings {
    /// Runs of each side whose best figure a scenario reports (most scenarios; their rows say).
    var runs = 7
    /// Runs of each side of the group, waiter and sync cycle scenarios, which report the median of
    /// their runs and its range, the sides taking turns (`--runs N` sets it).
    var medianRuns = 5
    var syncCycles = 1_000_000
    var fanOutDeliveries = 1_000_000
    var groupSizes = [1_000, 4_000, 10_000, 40_000, 100_000, 400_000]
    var waitCounts = [10_000, 40_000]
    var expiryCounts = [10_000, 40_000]
    var memoryInstances = 200_000
    /// Keys that have a lease held elsewhere, leased and released in turn.
    var storeLiveKeys = 1_000
    var storeLeaseOperations = 1_000_000
    var storeExpiryCounts = [100_000, 400_000]
    var storeInvalidateCount = 100_000
    var storeMemoryEntries = 100_000
    /// Entries of about 1 KB saved and restored through a `FileLoadableCache`.
    var persistenceEntries = 1_000
    /// Optimistic changes made one after another.
    var mutations = 200_000
    /// Sync cycles of a loadable followed by a syncer.
    var syncerCycles = 200_000
    /// Syncers made and released.
    var syncerInstances = 100_000
    /// Sequential GETs per side and round of the HTTP scenario.
    var httpRequests = 1_000
    /// GETs per side before the HTTP scenario's rounds.
    var httpWarmUpRequests = 100
    /// GETs per side and round answered by a scripted transport, without a socket.
    var httpOverheadRequests = 20_000
    /// Entries of about 1 KB per side of the `sqlite-cache` scenario's round trips, its timed saves
    /// and loads per round, and the size of its small cache.
    var sqliteEntries = 1_000
    /// Entries of the `sqlite-cache` scenario's large cache (and of the scope it removes).
    var sqliteLargeEntries = 100_000
    /// Entries outside that scope in the same cache.
    var sqliteOutsideEntries = 10_000
    /// Scopes of `sqliteLargeEntries` removed (each but the first in a freshly filled cache).
    var sqliteScopeRemovals = 2
    /// Whether the `http-overhead` scenario runs every job on the main queue (for valgrind).
    var runsOnMainQueueOnly = false
    /// Changes of 200 B enqueued and saved per side and run of the outbox scenario.
    var outboxChanges = 1_000
    /// Changes enqueued into one outbox while the main-actor ticker runs.
    var outboxStallChanges = 500
    /// Changes per side and run of each type in the observation scenario (a tenth of them for the
    /// types whose change takes microseconds).
    var observationChanges = 100_000
    /// Reads of a property inside one tracking scope (and outside one) in the observation scenario.
    var observationReads = 1_000
    /// Tracking scopes per side and run in the observation scenario.
    var observationScopes = 100
    /// Tasks in each collection of the `views` scenario (the goals' size: 100,000).
    var viewRecords = 100_000
    /// Updates per side of the `views` scenario's timed parts.
    var viewUpdates = 2_000
    /// Views built per filter in the `views` scenario, and as many filters and sorts by hand.
    var viewBuilds = 7

    /// A run under a minute: fewer repetitions, the same sizes the goals need.
    static let quick = Settings(
        runs: 3, medianRuns: 3, syncCycles: 300_000, fanOutDeliveries: 300_000,
        groupSizes: [1_000, 4_000, 100_000, 400_000], storeLeaseOperations: 300_000, mutations: 50_000,
        syncerCycles: 50_000, syncerInstances: 30_000, httpRequests: 300, httpOverheadRequests: 5_000,
        observationChanges: 30_000, observationScopes: 30, viewUpdates: 500, viewBuilds: 3)

    /// One small run of each scenario, for profilers (`valgrind --tool=callgrind`); its figures
    /// are not the goals'.
    static let profile = Settings(
        runs: 1, medianRuns: 1, syncCycles: 20_000, fanOutDeliveries: 20_000, groupSizes: [10_000],
        waitCounts: [2_000], expiryCounts: [2_000], memoryInstances: 10_000, storeLeaseOperations: 20_000,
        storeExpiryCounts: [10_000], storeInvalidateCount: 10_000, storeMemoryEntries: 10_000, mutations: 10_000,
        syncerCycles: 10_000, syncerInstances: 10_000, httpRequests: 200, httpWarmUpRequests: 20,
        httpOverheadRequests: 2_000, sqliteEntries: 200, sqliteLargeEntries: 10_000, sqliteOutsideEntries: 1_000,
        sqliteScopeRemovals: 1, runsOnMainQueueOnly: true, outboxChanges: 100, outboxStallChanges: 100,
        observationChanges: 2_000, observationScopes: 5, viewRecords: 10_000, viewUpdates: 200, viewBuilds: 1)
}

/// `swift run -c release --package-path Benchmarks loadable-benchmarks [--quick | --profile]
/// [--runs N] [--json FILE] [--only SCENARIO]...`
@main
@MainActor
struct LoadableBenchmarks {
    /// The scenarios, in the order a run runs them: memory first, while the heap is fresh.
    static let scenarios = [
        "memory", "sync-cycle", "fan-out", "group", "waiters", "store", "persistence", "mutation", "syncer",
        "http", "http-overhead", "http-send", "outbox", "observation", "sqlite-cache", "sync",
        "views",
    ]

    static func main() async throws {
        var arguments = CommandLine.arguments.dropFirst()
        var quick = false
        var profile = false
        var jsonPath: String?
        var only: Set<String> = []
        var medianRuns: Int?
        while let argument = arguments.popFirst() {
            switch argument {
            case "--quick": quick = true
            case "--profile": profile = true
            case "--json": jsonPath = arguments.popFirst()
            case "--only": only.insert(arguments.popFirst() ?? "")
            case "--runs":
                guard let runs = arguments.popFirst().flatMap({ Int($0) }), runs > 0 else {
                    print("--runs takes a positive number; see --help")
                    exit(2)
                }
                medianRuns = runs
            case "--help", "-h":
                print(
                    """
                    usage: loadable-benchmarks [--quick | --profile] [--runs N] [--json FILE] [--only SCENARIO]...
                      --quick          fewer repetitions and sizes: a run under a minute
                      --profile        one small run of each scenario, to run under valgrind
                      --runs N         runs of each side of group, waiters and sync-cycle, which report
                                       the median and the range of their runs, the sides taking turns
                                       (default 5; --quick 3; --profile 1); other scenarios report the
                                       best of 7 runs (--quick 3) or the median their rows name
                      --json FILE      also write the figures and goals as JSON to FILE
                      --only SCENARIO  run only SCENARIO (\(scenarios.joined(separator: ", "))); repeatable

                    Each scenario prints the machine's load average when it starts and ends; the run ends
                    with one line per goal of Docs/Performance.md that the scenarios run measured,
                    "goal holds" or "goal missed", with the 1-minute load average at the start and end of
                    its scenario.
                    """)
                return
            default:
                print("unknown argument \(argument); see --help")
                exit(2)
            }
        }
        for name in only where !scenarios.contains(name) {
            print("unknown scenario \(name); one of \(scenarios.joined(separator: ", "))")
            exit(2)
        }
        var settings = profile ? Settings.profile : quick ? Settings.quick : Settings()
        if let medianRuns { settings.medianRuns = medianRuns }
        // Under valgrind, the runtime's own drain of the main queue crashes it (see the function).
        if profile { drainMainQueueOnMainThread() }
        var report = Report(quick: quick)
        #if DEBUG
            print("warning: a debug build; measure with -c release")
        #endif
        print("loadable-benchmarks \(report.date), \(report.cores) cores\(quick ? ", quick" : "")")
        print("command: \(report.command)")
        print(
            "group, waiters, sync-cycle: median (range) of \(settings.medianRuns) runs, sides taking turns; "
                + "others: best of \(settings.runs) runs unless a row says; allocs/op counted by interposing malloc")
        print("")
        print(Report.header)

        for name in scenarios where only.isEmpty || only.contains(name) {
            report.beginScenario(name)
            await run(name, settings, into: &report)
            report.endScenario()
        }

        report.printGoals()
        if let jsonPath {
            try report.write(to: jsonPath)
            print("wrote \(jsonPath)")
        }
    }

    /// Runs the scenario `name`, one of ``scenarios``.
    static func run(_ name: String, _ settings: Settings, into report: inout Report) async {
        switch name {
        case "memory": runMemory(settings, into: &report)
        case "sync-cycle": runSyncCycle(settings, into: &report)
        case "fan-out": runFanOut(settings, into: &report)
        case "group": runGroup(settings, into: &report)
        case "waiters": await runWaiters(settings, into: &report)
        case "store": await runStore(settings, into: &report)
        case "persistence": await runPersistence(settings, into: &report)
        case "mutation": await runMutation(settings, into: &report)
        case "syncer": await runSyncer(settings, into: &report)
        case "http": await runHTTP(settings, into: &report)
        case "http-overhead": await runHTTPOverhead(settings, into: &report)
        case "http-send": await runHTTPSend(settings, into: &report)
        case "outbox": await runOutbox(settings, into: &report)
        case "observation": await runObservation(settings, into: &report)
        case "sqlite-cache": await runSQLiteCache(settings, into: &report)
        case "sync": await runSync(settings, into: &report)
        case "views": await runViews(settings, into: &report)
        default: preconditionFailure("no scenario \(name)")
        }
    }
}

extension Int {
    /// `1,000,000`-style digits.
    var formatted: String {
        let digits = String(self)
        var result = ""
        for (offset, digit) in digits.enumerated() {
            if offset > 0, (digits.count - offset) % 3 == 0 { result += "," }
            result.append(digit)
        }
        return result
    }
}
