import Foundation
import Loadable

/// Memory: bytes per idle `Loadable<Int>` with one observer (a closure holding its screen
/// weakly, as views do), over many instances, measured as the growth of malloc's allocated bytes
/// (`mallinfo2().uordblks`) and of resident memory (`/proc/self/statm`). Also without observer,
/// and the allocations of each.
@MainActor
func runMemory(_ settings: Settings, into report: inout Report) {
    let count = settings.memoryInstances
    for observed in [true, false] {
        var loadables: [Loadable<Int>] = []
        var tokens: [LoadableObservation] = []
        loadables.reserveCapacity(count)
        tokens.reserveCapacity(count)
        let screen = Counter()
        let before = MemoryUsage.now()
        let stopwatch = Stopwatch.start()
        for _ in 0..<count {
            let loadable = Loadable<Int>()
            if observed {
                tokens.append(loadable.addObserver { [weak screen] _ in screen?.value &+= 1 })
            }
            loadables.append(loadable)
        }
        let sample = stopwatch.stop()
        let after = MemoryUsage.now()
        let allocated = Double(after.allocatedBytes - before.allocatedBytes) / Double(count)
        let resident = Double(after.residentBytes - before.residentBytes) / Double(count)
        let what = observed ? "with one observer" : "without observer"
        report.add(
            Row(
                scenario: "memory: idle Loadable<Int> \(what) (malloc)", value: allocated, unit: "bytes",
                allocationsPerOperation: sample.allocations(per: count)))
        report.add(
            Row(
                scenario: "memory: idle Loadable<Int> \(what) (resident)", value: resident, unit: "bytes",
                allocationsPerOperation: sample.allocations(per: count)))
        if observed {
            report.add(
                Goal(
                    name: "bytes per observed idle loadable (\(count.formatted) instances)", target: "<= 300 bytes",
                    measured: String(format: "%.0f B malloc'd, %.0f B resident", allocated, resident),
                    holds: max(allocated, resident) <= 300))
        }
        withExtendedLifetime((loadables, tokens)) {}
    }
}
