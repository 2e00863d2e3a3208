import AllocationCounter
import Foundation

/// What one timed run cost: the time it took and the allocations it made.
struct Sample {
    var duration: Duration
    var allocations: Int
    /// The CPU time the whole process used meanwhile, all its threads
    /// (`CLOCK_PROCESS_CPUTIME_ID`): unlike ``duration``, it leaves out the time no thread of the
    /// process ran (waiting for a thread to wake up, or for a core on a busy machine).
    var cpuTime: Duration = .zero

    /// CPU nanoseconds for each of `operations`.
    func cpuNanoseconds(per operations: Int) -> Double {
        cpuTime.nanoseconds / Double(operations)
    }

    /// Nanoseconds for each of `operations`.
    func nanoseconds(per operations: Int) -> Double {
        duration.nanoseconds / Double(operations)
    }

    /// Allocations for each of `operations`.
    func allocations(per operations: Int) -> Double {
        Double(allocations) / Double(operations)
    }
}

/// Brackets the timed part of a run: started after the setup, stopped before the teardown.
struct Stopwatch {
    private static let clock = ContinuousClock()
    private let start: ContinuousClock.Instant
    private let allocationsAtStart: Int
    private let cpuTimeAtStart: Duration

    private init() {
        allocationsAtStart = Int(benchmark_allocation_count())
        cpuTimeAtStart = Self.processCPUTime()
        start = Self.clock.now
    }

    /// The CPU time the process has used so far, all its threads.
    static func processCPUTime() -> Duration {
        var time = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
        return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
    }

    /// Starts timing now.
    static func start() -> Stopwatch { Stopwatch() }

    /// The time and allocations since ``start()``.
    func stop() -> Sample {
        let end = Self.clock.now
        let cpuTime = Self.processCPUTime() - cpuTimeAtStart
        let allocations = Int(benchmark_allocation_count()) - allocationsAtStart
        return Sample(duration: end - start, allocations: allocations, cpuTime: cpuTime)
    }
}

/// The fastest of `runs` runs of `body`, each of which sets up, times itself and tears down.
@MainActor
func best(of runs: Int, _ body: () -> Sample) -> Sample {
    var best = body()
    for _ in 1..<max(runs, 1) {
        let sample = body()
        if sample.duration < best.duration { best = sample }
    }
    return best
}

/// The fastest of `runs` runs of an asynchronous `body`.
@MainActor
func best(of runs: Int, _ body: () async -> Sample) async -> Sample {
    var best = await body()
    for _ in 1..<max(runs, 1) {
        let sample = await body()
        if sample.duration < best.duration { best = sample }
    }
    return best
}

/// Keeps the optimizer from removing the computation of `value`.
@inline(never)
func blackHole<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

/// A counter that observers bump, so their calls cannot be optimized away.
final class Counter {
    var value = 0
}

/// How much memory the process holds.
struct MemoryUsage {
    /// Bytes handed out by malloc and not freed yet (`mallinfo2().uordblks`), chunk headers
    /// included.
    var allocatedBytes: Int
    /// Resident memory (`/proc/self/statm`, second field, times the page size).
    var residentBytes: Int

    /// The usage now.
    static func now() -> MemoryUsage {
        // statm: size resident shared text lib data dt, in pages.
        let statm = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? ""
        let fields = statm.split(separator: " ")
        let residentPages = fields.count > 1 ? Int(fields[1]) ?? 0 : 0
        return MemoryUsage(
            allocatedBytes: Int(benchmark_allocated_bytes()),
            residentBytes: residentPages * Int(sysconf(Int32(_SC_PAGESIZE))))
    }
}

extension Duration {
    /// The duration in nanoseconds.
    var nanoseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) * 1e9 + Double(attoseconds) / 1e9
    }
}

/// The fastest of `samples`.
func fastest(_ samples: [Sample]) -> Sample { samples.min { $0.duration < $1.duration }! }

/// The median of `samples` by duration.
func median(_ samples: [Sample]) -> Sample { samples.sorted { $0.duration < $1.duration }[samples.count / 2] }

/// Runs `sides` for `runs` rounds of `count` operations each, `chunk` operations at a time: in each
/// chunk every side runs once, in the given order and then in the reverse order at the next chunk,
/// so that a busy moment of the machine slows each side alike. `afterRound` runs after each round.
///
/// - Returns: For each side, in order, its sample of each round (the sum of its chunks).
@MainActor
func interleavedRounds(
    runs: Int, count: Int, chunk: Int, sides: [(Int) async -> Sample], afterRound: () async -> Void = {}
) async -> [[Sample]] {
    var samples = Array(repeating: [Sample](), count: sides.count)
    for _ in 0..<runs {
        var totals = Array(repeating: Sample(duration: .zero, allocations: 0), count: sides.count)
        for part in 0..<(count / chunk) {
            let order = part.isMultiple(of: 2) ? Array(sides.indices) : sides.indices.reversed()
            for side in order {
                let sample = await sides[side](chunk)
                totals[side].duration += sample.duration
                totals[side].allocations += sample.allocations
                totals[side].cpuTime += sample.cpuTime
            }
        }
        for side in sides.indices { samples[side].append(totals[side]) }
        await afterRound()
    }
    return samples
}

/// Runs each of `sides` `runs` times, taking turns: every round runs each side once, in the given
/// order, and the next round in the reverse order, so that a busy moment of the machine slows each
/// side alike and no side always follows the same other one.
///
/// - Returns: For each side, in order, its sample of each round.
@MainActor
func alternatingRuns(_ runs: Int, _ sides: [() -> Sample]) -> [[Sample]] {
    var samples = Array(repeating: [Sample](), count: sides.count)
    for round in 0..<max(runs, 1) {
        let order = round.isMultiple(of: 2) ? Array(sides.indices) : sides.indices.reversed()
        for side in order { samples[side].append(sides[side]()) }
    }
    return samples
}

/// ``alternatingRuns(_:_:)`` for asynchronous sides.
@MainActor
func alternatingRuns(_ runs: Int, _ sides: [() async -> Sample]) async -> [[Sample]] {
    var samples = Array(repeating: [Sample](), count: sides.count)
    for round in 0..<max(runs, 1) {
        let order = round.isMultiple(of: 2) ? Array(sides.indices) : sides.indices.reversed()
        for side in order { samples[side].append(await sides[side]()) }
    }
    return samples
}

/// `cycles` runs of `body` as one sample: their durations and allocations summed.
///
/// A scenario that compares a size with four times that size times the smaller one over as many
/// cycles as make the same work: a run of a few milliseconds on a busy machine is preempted once
/// or not at all, a lottery that a longer run averages out.
@MainActor
func cycles(_ cycles: Int, _ body: () -> Sample) -> Sample {
    var total = Sample(duration: .zero, allocations: 0)
    for _ in 0..<max(cycles, 1) {
        let sample = body()
        total.duration += sample.duration
        total.allocations += sample.allocations
    }
    return total
}

/// ``cycles(_:_:)`` of an asynchronous `body`.
@MainActor
func cycles(_ cycles: Int, _ body: () async -> Sample) async -> Sample {
    var total = Sample(duration: .zero, allocations: 0)
    for _ in 0..<max(cycles, 1) {
        let sample = await body()
        total.duration += sample.duration
        total.allocations += sample.allocations
    }
    return total
}

/// The median of several runs' figures, with the fastest and the slowest: what the group, waiter
/// and sync cycle goals report, so that one run slowed (or spared) by the machine's load neither
/// passes nor fails a goal.
struct Spread: Codable {
    var median: Double
    var minimum: Double
    var maximum: Double
    var runs: Int

    /// The spread of `values` (at least one); the median of an even count is the mean of the middle
    /// two.
    init(_ values: [Double]) {
        precondition(!values.isEmpty, "a spread of no runs")
        let sorted = values.sorted()
        let middle = sorted.count / 2
        median = sorted.count.isMultiple(of: 2) ? (sorted[middle - 1] + sorted[middle]) / 2 : sorted[middle]
        minimum = sorted[0]
        maximum = sorted[sorted.count - 1]
        runs = sorted.count
    }

    /// The spread of the durations of `samples` in milliseconds, each divided by `cycles` (see
    /// ``cycles(_:_:)``).
    init(milliseconds samples: [Sample], cycles: Int = 1) {
        self.init(samples.map { $0.duration.nanoseconds / 1e6 / Double(max(cycles, 1)) })
    }

    /// The spread of the durations of `samples` in nanoseconds per each of `operations`.
    init(_ samples: [Sample], nanosecondsPer operations: Int) {
        self.init(samples.map { $0.nanoseconds(per: operations) })
    }

    /// `12.3 ms (11.9–13.1)` for `format` `%.1f` and `unit` ` ms`: the median, then the range.
    func formatted(_ format: String, _ unit: String = "") -> String {
        let median = String(format: format, self.median)
        guard runs > 1 else { return median + unit }
        return median + unit + " (" + String(format: format, minimum) + "–" + String(format: format, maximum) + ")"
    }
}

/// The machine's load average: the mean number of runnable tasks over the last 1, 5 and 15 minutes,
/// from `getloadavg` (which reads `/proc/loadavg` on Linux). Read at the start and end of every
/// scenario and printed with its goals, so that a figure measured on a busy machine says so.
struct LoadAverage: Codable {
    var oneMinute: Double
    var fiveMinutes: Double
    var fifteenMinutes: Double

    /// The load average now; `nil` where the system does not tell.
    static func now() -> LoadAverage? {
        var values = [Double](repeating: 0, count: 3)
        guard getloadavg(&values, 3) == 3 else { return nil }
        return LoadAverage(oneMinute: values[0], fiveMinutes: values[1], fifteenMinutes: values[2])
    }

    /// `1.23 0.98 0.75`, as `/proc/loadavg` shows it.
    var description: String { String(format: "%.2f %.2f %.2f", oneMinute, fiveMinutes, fifteenMinutes) }
}
