import Loadable
import OpenCombine

/// Fan-out: one change (`setDidSyncSuccessfully(_:)`) delivered to 1, 10 and 100 observers,
/// against a `CurrentValueSubject` with as many subscribers sending one value.
@MainActor
func runFanOut(_ settings: Settings, into report: inout Report) {
    for observers in [1, 10, 100] {
        let changes = settings.fanOutDeliveries / observers

        let loadable = best(of: settings.runs) {
            let counter = Counter()
            let loadable = PushLoadable<Int>()
            let tokens = (0..<observers).map { _ in loadable.addObserver { _ in counter.value &+= 1 } }
            let stopwatch = Stopwatch.start()
            for change in 0..<changes { loadable.setDidSyncSuccessfully(change) }
            let sample = stopwatch.stop()
            precondition(counter.value == changes * observers)
            withExtendedLifetime(tokens) {}
            return sample
        }

        let combine = best(of: settings.runs) {
            let counter = Counter()
            let subject = CurrentValueSubject<Int, Never>(0)
            let subscriptions = (0..<observers).map { _ in subject.sink { _ in counter.value &+= 1 } }
            let stopwatch = Stopwatch.start()
            for change in 0..<changes { subject.send(change) }
            let sample = stopwatch.stop()
            precondition(counter.value == (changes + 1) * observers)
            for subscription in subscriptions { subscription.cancel() }
            return sample
        }

        let loadableNanoseconds = loadable.nanoseconds(per: changes)
        let combineNanoseconds = combine.nanoseconds(per: changes)
        report.add(
            Row(
                scenario: "fan-out: 1 change → \(observers) observer\(observers == 1 ? "" : "s")",
                value: loadableNanoseconds, unit: "ns/op",
                allocationsPerOperation: loadable.allocations(per: changes),
                baseline: "CurrentValueSubject, 1 send", baselineValue: combineNanoseconds,
                ratio: loadableNanoseconds / combineNanoseconds))
    }
}
