import Foundation
import Loadable
import OpenCombine

/// A loadable whose sync finishes at once: one cycle is two state changes, two notifications.
final class ImmediateLoadable: Loadable<Int> {
    private var next = 0

    override func doSync() {
        next &+= 1
        setDidSyncSuccessfully(next)
    }
}

/// The least a cycle can cost: two stores and two calls of a stored closure.
final class FloorSubject {
    var state: LoadableState = .idle
    var handler: (FloorSubject) -> Void = { _ in }

    @inline(never)
    func cycle() {
        state = .syncing
        handler(self)
        state = .didSyncSuccessfully
        handler(self)
    }
}

/// Sync cycle: `sync()` on a loadable whose `doSync` succeeds synchronously, with one observer,
/// against OpenCombine's `CurrentValueSubject` sending the same two states to one subscriber, and
/// against the floor.
///
/// Every figure is the median of ``Settings/medianRuns`` runs, with its range; the runs take turns
/// (each round runs every side once, in reverse order every other round), and each ratio is the
/// ratio of two medians.
@MainActor
func runSyncCycle(_ settings: Settings, into report: inout Report) {
    let cycles = settings.syncCycles

    /// Syncs one loadable `cycles` times; `readFirst` reads it once through a tracked getter
    /// beforehand, as a SwiftUI view or `withObservationTracking` does, so that it owns an
    /// Observation registrar and each of the two changes pays its one registrar mutation
    /// (`willSet` + `didSet`).
    ///
    /// `configure` sets freshness options (`maxAge`, the watchdog) before the cycles.
    func syncCycles(readFirst: Bool, configure: (ImmediateLoadable) -> Void = { _ in }) -> Sample {
        let counter = Counter()
        let loadable = ImmediateLoadable()
        configure(loadable)
        if readFirst { _ = loadable.loadableState }
        let token = loadable.addObserver { _ in counter.value &+= 1 }
        let stopwatch = Stopwatch.start()
        for _ in 0..<cycles { loadable.sync() }
        let sample = stopwatch.stop()
        precondition(counter.value == 2 * cycles)
        withExtendedLifetime(token) {}
        return sample
    }

    func combineCycles() -> Sample {
        let counter = Counter()
        let subject = CurrentValueSubject<LoadableState, Never>(.idle)
        let subscription = subject.sink { _ in counter.value &+= 1 }
        let stopwatch = Stopwatch.start()
        for _ in 0..<cycles {
            subject.send(.syncing)
            subject.send(.didSyncSuccessfully)
        }
        let sample = stopwatch.stop()
        precondition(counter.value == 2 * cycles + 1)
        subscription.cancel()
        return sample
    }

    func floorCycles() -> Sample {
        let counter = Counter()
        let subject = FloorSubject()
        subject.handler = { _ in counter.value &+= 1 }
        let stopwatch = Stopwatch.start()
        for _ in 0..<cycles { subject.cycle() }
        let sample = stopwatch.stop()
        precondition(counter.value == 2 * cycles)
        return sample
    }

    let samples = alternatingRuns(
        settings.medianRuns,
        [
            { syncCycles(readFirst: false) },
            { syncCycles(readFirst: true) },
            // Freshness: each success records the time (the same in every row); with `maxAge` it
            // also checks the stale timer, which stays armed for the earliest deadline and is not
            // re-armed.
            { syncCycles(readFirst: false) { $0.maxAge = .seconds(3600) } },
            {
                syncCycles(readFirst: false) {
                    $0.syncTimeout = .seconds(60)
                    $0.slowSyncAfter = .seconds(5)
                }
            },
            combineCycles,
            floorCycles,
        ])
    let (loadable, readLoadable, maxAgeLoadable, watchdogLoadable, combine, floor) = (
        samples[0], samples[1], samples[2], samples[3], samples[4], samples[5]
    )
    func nanoseconds(_ side: [Sample]) -> Spread { Spread(side, nanosecondsPer: cycles) }
    func allocations(_ side: [Sample]) -> Double { side.map { $0.allocations(per: cycles) }.max() ?? 0 }

    let loadableNanoseconds = nanoseconds(loadable)
    let combineNanoseconds = nanoseconds(combine)
    let floorNanoseconds = nanoseconds(floor)
    let readNanoseconds = nanoseconds(readLoadable)
    let maxAgeNanoseconds = nanoseconds(maxAgeLoadable)
    let watchdogNanoseconds = nanoseconds(watchdogLoadable)
    let name = "sync cycle (\(cycles.formatted) cycles)"
    report.add(
        Row(
            scenario: name, value: loadableNanoseconds.median, unit: "ns/op",
            allocationsPerOperation: allocations(loadable),
            baseline: "OpenCombine CurrentValueSubject ×2", baselineValue: combineNanoseconds.median,
            ratio: loadableNanoseconds.median / combineNanoseconds.median))
    report.add(
        Row(
            scenario: "sync cycle, loadable read by Observation", value: readNanoseconds.median, unit: "ns/op",
            allocationsPerOperation: allocations(readLoadable),
            baseline: "OpenCombine CurrentValueSubject ×2", baselineValue: combineNanoseconds.median,
            ratio: readNanoseconds.median / combineNanoseconds.median))
    report.add(
        Row(
            scenario: "sync cycle with maxAge set", value: maxAgeNanoseconds.median, unit: "ns/op",
            allocationsPerOperation: allocations(maxAgeLoadable),
            baseline: "sync cycle", baselineValue: loadableNanoseconds.median,
            ratio: maxAgeNanoseconds.median / loadableNanoseconds.median))
    report.add(
        Row(
            scenario: "sync cycle with syncTimeout + slowSyncAfter", value: watchdogNanoseconds.median,
            unit: "ns/op", allocationsPerOperation: allocations(watchdogLoadable),
            baseline: "sync cycle", baselineValue: loadableNanoseconds.median,
            ratio: watchdogNanoseconds.median / loadableNanoseconds.median))
    report.add(
        Row(
            scenario: "sync cycle: OpenCombine two sends", value: combineNanoseconds.median, unit: "ns/op",
            allocationsPerOperation: allocations(combine),
            baseline: "floor", baselineValue: floorNanoseconds.median,
            ratio: combineNanoseconds.median / floorNanoseconds.median))
    report.add(
        Row(
            scenario: "sync cycle: floor (2 closure calls + stores)", value: floorNanoseconds.median,
            unit: "ns/op", allocationsPerOperation: allocations(floor)))
    report.add(
        Row(
            scenario: "sync cycle vs floor", value: loadableNanoseconds.median, unit: "ns/op",
            baseline: "floor", baselineValue: floorNanoseconds.median,
            ratio: loadableNanoseconds.median / floorNanoseconds.median))

    let runs = "median of \(loadableNanoseconds.runs) runs"
    let ratio = loadableNanoseconds.median / combineNanoseconds.median
    report.add(
        Goal(
            name: "sync cycle vs OpenCombine's two sends", target: "<= 0.50x",
            measured: String(format: "%.2fx", ratio)
                + " (\(loadableNanoseconds.formatted("%.1f", " ns")) vs \(combineNanoseconds.formatted("%.1f", " ns")), \(runs))",
            holds: ratio <= 0.5))
    let maxAgeRatio = maxAgeNanoseconds.median / loadableNanoseconds.median
    report.add(
        Goal(
            name: "sync cycle with maxAge vs without", target: "<= 1.20x",
            measured: String(format: "%.2fx", maxAgeRatio)
                + " (\(maxAgeNanoseconds.formatted("%.1f", " ns")) vs \(loadableNanoseconds.formatted("%.1f", " ns")), \(runs))",
            holds: maxAgeRatio <= 1.2))
    let mostAllocations = [loadable, readLoadable, maxAgeLoadable, watchdogLoadable].map(allocations).max() ?? 0
    report.add(
        Goal(
            name: "sync cycle allocations (plain, observed, maxAge, watchdog)", target: "0 per cycle",
            measured: String(format: "%.2f per cycle (the most of any run)", mostAllocations),
            holds: mostAllocations < 0.01))
}
