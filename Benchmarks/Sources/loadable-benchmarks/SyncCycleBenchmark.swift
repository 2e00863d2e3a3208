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
        best(of: settings.runs) {
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
    }
    let loadable = syncCycles(readFirst: false)
    let readLoadable = syncCycles(readFirst: true)
    // Freshness: each success records the time (the same in every row); with `maxAge` it also
    // checks the stale timer, which stays armed for the earliest deadline and is not re-armed.
    let maxAgeLoadable = syncCycles(readFirst: false) { $0.maxAge = .seconds(3600) }
    let watchdogLoadable = syncCycles(readFirst: false) {
        $0.syncTimeout = .seconds(60)
        $0.slowSyncAfter = .seconds(5)
    }

    let combine = best(of: settings.runs) {
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

    let floor = best(of: settings.runs) {
        let counter = Counter()
        let subject = FloorSubject()
        subject.handler = { _ in counter.value &+= 1 }
        let stopwatch = Stopwatch.start()
        for _ in 0..<cycles { subject.cycle() }
        let sample = stopwatch.stop()
        precondition(counter.value == 2 * cycles)
        return sample
    }

    let loadableNanoseconds = loadable.nanoseconds(per: cycles)
    let combineNanoseconds = combine.nanoseconds(per: cycles)
    let floorNanoseconds = floor.nanoseconds(per: cycles)
    let name = "sync cycle (\(cycles.formatted) cycles)"
    report.add(
        Row(
            scenario: name, value: loadableNanoseconds, unit: "ns/op",
            allocationsPerOperation: loadable.allocations(per: cycles),
            baseline: "OpenCombine CurrentValueSubject ×2", baselineValue: combineNanoseconds,
            ratio: loadableNanoseconds / combineNanoseconds))
    let readNanoseconds = readLoadable.nanoseconds(per: cycles)
    report.add(
        Row(
            scenario: "sync cycle, loadable read by Observation", value: readNanoseconds, unit: "ns/op",
            allocationsPerOperation: readLoadable.allocations(per: cycles),
            baseline: "OpenCombine CurrentValueSubject ×2", baselineValue: combineNanoseconds,
            ratio: readNanoseconds / combineNanoseconds))
    let maxAgeNanoseconds = maxAgeLoadable.nanoseconds(per: cycles)
    report.add(
        Row(
            scenario: "sync cycle with maxAge set", value: maxAgeNanoseconds, unit: "ns/op",
            allocationsPerOperation: maxAgeLoadable.allocations(per: cycles),
            baseline: "sync cycle", baselineValue: loadableNanoseconds,
            ratio: maxAgeNanoseconds / loadableNanoseconds))
    let watchdogNanoseconds = watchdogLoadable.nanoseconds(per: cycles)
    report.add(
        Row(
            scenario: "sync cycle with syncTimeout + slowSyncAfter", value: watchdogNanoseconds, unit: "ns/op",
            allocationsPerOperation: watchdogLoadable.allocations(per: cycles),
            baseline: "sync cycle", baselineValue: loadableNanoseconds,
            ratio: watchdogNanoseconds / loadableNanoseconds))
    report.add(
        Row(
            scenario: "sync cycle: OpenCombine two sends", value: combineNanoseconds, unit: "ns/op",
            allocationsPerOperation: combine.allocations(per: cycles),
            baseline: "floor", baselineValue: floorNanoseconds, ratio: combineNanoseconds / floorNanoseconds))
    report.add(
        Row(
            scenario: "sync cycle: floor (2 closure calls + stores)", value: floorNanoseconds, unit: "ns/op",
            allocationsPerOperation: floor.allocations(per: cycles)))
    report.add(
        Row(
            scenario: "sync cycle vs floor", value: loadableNanoseconds, unit: "ns/op",
            baseline: "floor", baselineValue: floorNanoseconds, ratio: loadableNanoseconds / floorNanoseconds))

    let ratio = loadableNanoseconds / combineNanoseconds
    report.add(
        Goal(
            name: "sync cycle vs OpenCombine's two sends", target: "<= 0.50x",
            measured: String(format: "%.2fx (%.1f ns vs %.1f ns)", ratio, loadableNanoseconds, combineNanoseconds),
            holds: ratio <= 0.5))
    let maxAgeRatio = maxAgeNanoseconds / loadableNanoseconds
    report.add(
        Goal(
            name: "sync cycle with maxAge vs without", target: "<= 1.20x",
            measured: String(
                format: "%.2fx (%.1f ns vs %.1f ns)", maxAgeRatio, maxAgeNanoseconds, loadableNanoseconds),
            holds: maxAgeRatio <= 1.2))
    let allocations =
        [loadable, readLoadable, maxAgeLoadable, watchdogLoadable]
        .map { $0.allocations(per: cycles) }.max() ?? 0
    report.add(
        Goal(
            name: "sync cycle allocations (plain, observed, maxAge, watchdog)", target: "0 per cycle",
            measured: String(format: "%.2f per cycle", allocations), holds: allocations < 0.01))
}
