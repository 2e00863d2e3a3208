import Foundation
import Loadable
import LoadableSyncer
import LoadableTesting

/// Waiters: N pending waits on one ``LoadableWaiter`` resolved by one success of the target, with
/// the callback form and with `wait()` from N tasks; and N waits expiring together on a
/// `ManualClock`. Each timing covers beginning the waits and ending them; for the async form, the
/// tasks that wait are made before the clock starts (they are the app's, not the waiter's), and
/// the timing covers each task's start, its `wait()`, the resolution and each task's end.
///
/// Every figure is the median of ``Settings/medianRuns`` runs, with its range, after one untimed
/// round (when there are several). The runs take turns: each round runs every form at every count,
/// in reverse order every other round, so that a busy moment of the machine slows the counts alike.
/// A run of a count under the largest is that many cycles of waits one after the other, timed
/// together, to as many waits in all (4 cycles of 10,000 against 1 of 40,000), and its figure is
/// the time of one cycle (see ``cycles(_:_:)``): 10,000 callback waits take about 3 ms, which a
/// busy machine preempts once or not at all. Each linearity goal is the ratio of two medians.
@MainActor
func runWaiters(_ settings: Settings, into report: inout Report) async {
    let forms: [(name: String, counts: [Int], run: @MainActor (Int) async -> Sample)] = [
        ("callback", settings.waitCounts, resolveCallbackWaits),
        ("async", settings.waitCounts, resolveAsyncWaits),
        ("expiry", settings.expiryCounts, expireWaits),
    ]
    var sides: [() async -> Sample] = []
    for form in forms {
        let largest = form.counts.max() ?? 0
        for count in form.counts {
            sides.append { await cycles(max(1, largest / count)) { await form.run(count) } }
        }
    }
    // One untimed round first: the first runs grow the heap and fault its pages in. (Not for a
    // single run: that is for profilers, which count instructions.)
    if settings.medianRuns > 1 { _ = await alternatingRuns(1, sides) }
    let samples = await alternatingRuns(settings.medianRuns, sides)

    var spreads: [String: [Int: Spread]] = [:]
    var side = 0
    for form in forms {
        for count in form.counts {
            let cycleCount = max(1, (form.counts.max() ?? 0) / count)
            let spread = Spread(milliseconds: samples[side], cycles: cycleCount)
            spreads[form.name, default: [:]][count] = spread
            let what =
                switch form.name {
                case "callback": "callback waits resolved"
                case "async": "async waits resolved"
                default: "waits expire (ManualClock)"
                }
            report.add(
                Row(
                    scenario: "waiters: \(count.formatted) \(what)", value: spread.median, unit: "ms",
                    allocationsPerOperation: median(samples[side]).allocations(per: count * cycleCount)))
            side += 1
        }
    }

    for form in forms {
        guard let figures = spreads[form.name] else { continue }
        for count in figures.keys.sorted() {
            guard let small = figures[count], let large = figures[count * 4] else { continue }
            report.add(
                Row(
                    scenario: "waiters (\(form.name)): \((count * 4).formatted) vs \(count.formatted) (4×)",
                    value: large.median, unit: "ms", baseline: "\(count.formatted) waits",
                    baselineValue: small.median, ratio: large.median / small.median))
        }
    }

    let resolving = ["callback", "async"].compactMap { name in spreads[name]?[40_000].map { (name, $0) } }
    if let (name, slowest) = resolving.max(by: { $0.1.median < $1.1.median }) {
        report.add(
            Goal(
                name: "40,000 waits resolved (slower of callback and async forms)", target: "<= 200 ms",
                measured: "\(slowest.formatted("%.1f", " ms")) (\(name)), median of \(slowest.runs) runs",
                holds: slowest.median <= 200))
    }
    for name in ["callback", "async"] {
        guard let small = spreads[name]?[10_000], let large = spreads[name]?[40_000] else { continue }
        let ratio = large.median / small.median
        report.add(
            Goal(
                name: "waits linear (\(name), 40k vs 10k)", target: "<= 5x time",
                measured: String(format: "%.2fx", ratio)
                    + " (\(large.formatted("%.2f", " ms")) vs \(small.formatted("%.2f", " ms")), "
                    + "median of \(large.runs) runs)",
                holds: ratio <= 5))
    }
}

/// One run of `count` callback waits resolved by one success.
@MainActor
private func resolveCallbackWaits(_ count: Int) -> Sample {
    let clock = ManualClock()
    let target = PendingLoadable()
    let waiter = LoadableWaiter(target, timeout: .seconds(60), clock: clock)
    let counter = Counter()
    let stopwatch = Stopwatch.start()
    for _ in 0..<count {
        waiter.wait { result in
            if case .success = result { counter.value &+= 1 }
        }
    }
    target.setDidSyncSuccessfully(1)
    let sample = stopwatch.stop()
    precondition(counter.value == count)
    return sample
}

/// The async waits that ended, and those that succeeded, counted by their tasks on the main actor.
@MainActor
private final class EndedWaits {
    var count = 0
    var succeeded = 0
}

/// One run of `count` tasks each awaiting `wait()`, resolved by one success.
///
/// The tasks are made before the clock starts, so that their making (an allocation and an enqueue
/// each) is not timed; they run only once this function yields, after the clock started. The clock
/// stops when the last task counted its end, before their handles are awaited.
@MainActor
private func resolveAsyncWaits(_ count: Int) async -> Sample {
    let clock = ManualClock()
    let target = PendingLoadable()
    let waiter = LoadableWaiter(target, timeout: .seconds(60), clock: clock)
    let ended = EndedWaits()
    var tasks: [Task<Void, Never>] = []
    tasks.reserveCapacity(count)
    for _ in 0..<count {
        tasks.append(
            Task { @MainActor in
                if (try? await waiter.wait()) != nil { ended.succeeded &+= 1 }
                ended.count &+= 1
            })
    }
    let stopwatch = Stopwatch.start()
    while waiter.pendingWaitCount < count { await Task.yield() }
    target.setDidSyncSuccessfully(1)
    while ended.count < count { await Task.yield() }
    let sample = stopwatch.stop()
    for task in tasks { await task.value }
    precondition(ended.succeeded == count, "only \(ended.succeeded) of \(count) waits succeeded")
    return sample
}

/// One run of `count` callback waits that expire together when a `ManualClock` passes their
/// timeout.
@MainActor
private func expireWaits(_ count: Int) async -> Sample {
    let clock = ManualClock()
    let target = PendingLoadable()
    let waiter = LoadableWaiter(target, timeout: .seconds(10), clock: clock)
    let counter = Counter()
    let stopwatch = Stopwatch.start()
    for _ in 0..<count {
        waiter.wait { result in
            if case .failure(LoadableWaiterError.timedOut) = result { counter.value &+= 1 }
        }
    }
    await clock.waitForSleepers(count: 1)
    await clock.advance(by: .seconds(10))
    var spins = 0
    while counter.value < count, spins < 1000 {
        await Task.yield()
        spins += 1
    }
    let sample = stopwatch.stop()
    precondition(counter.value == count, "only \(counter.value) of \(count) waits expired")
    return sample
}
