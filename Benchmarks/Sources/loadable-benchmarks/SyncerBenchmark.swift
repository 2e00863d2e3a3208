import Foundation
import Loadable
import LoadableSyncer

/// A loadable whose sync fails at once: one cycle is two state changes, two notifications.
final class ImmediatelyFailingLoadable: Loadable<Int> {
    struct Failure: Error {}

    override func doSync() {
        setDidFailToSync(Failure())
    }
}

/// Syncers: the cost a ``LoadableSyncer`` adds to a sync cycle (the timer it cancels when the sync
/// starts and arms when it ends), after successes (a refresh) and after failures (a retry), and the
/// cost of making and releasing a syncer, each against the same work without a syncer, run in the
/// same process.
///
/// The syncers follow a monitor that never changes (the system one), so the figures show what
/// pausing and catch-up cost when nothing pauses. The goal (no slower than before pausing existed)
/// compares two builds, so it is kept in `Docs/Performance.md` rather than checked here: a run
/// measures one build.
@MainActor
func runSyncer(_ settings: Settings, into report: inout Report) async {
    let cycles = settings.syncerCycles
    let policy = BackoffTimeoutPolicy(period: .seconds(3600), min: .seconds(1), max: .seconds(60))

    /// `cycles` syncs of `makeLoadable()`'s loadable, with one observer, and a syncer when
    /// `withSyncer` is set.
    func cycleSample(
        withSyncer: Bool,
        policy: BackoffTimeoutPolicy = policy,
        _ makeLoadable: () -> Loadable<Int>
    ) async -> Sample {
        await best(of: settings.runs) {
            let counter = Counter()
            let loadable = makeLoadable()
            let token = loadable.addObserver { _ in counter.value &+= 1 }
            let syncer = withSyncer ? LoadableSyncer(loadable, timeoutPolicy: policy) : nil
            let stopwatch = Stopwatch.start()
            for _ in 0..<cycles { loadable.sync() }
            let sample = stopwatch.stop()
            precondition(counter.value == 2 * cycles)
            precondition(!withSyncer || (syncer?.nextSyncIn != nil) == (policy.period != nil))
            withExtendedLifetime((token, syncer)) {}
            // The timer tasks the syncer cancelled run (and end at once) before the next run.
            await Task.yield()
            return sample
        }
    }

    let plainSuccess = await cycleSample(withSyncer: false) { ImmediateLoadable() }
    // Without a refresh period a success arms nothing: what is left is the syncer's own work on
    // each transition (its observer, its decisions), with no timer task to blur it.
    let unarmedPolicy = BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(60))
    let syncerUnarmed = await cycleSample(withSyncer: true, policy: unarmedPolicy) { ImmediateLoadable() }
    let syncerSuccess = await cycleSample(withSyncer: true) { ImmediateLoadable() }
    let plainFailure = await cycleSample(withSyncer: false) { ImmediatelyFailingLoadable() }
    let syncerFailure = await cycleSample(withSyncer: true) { ImmediatelyFailingLoadable() }

    // Making and releasing: a loadable alone, then a loadable with a syncer.
    let instances = settings.syncerInstances
    func lifetimeSample(withSyncer: Bool) async -> Sample {
        await best(of: settings.runs) {
            let stopwatch = Stopwatch.start()
            for _ in 0..<instances {
                let loadable = ImmediateLoadable()
                if withSyncer {
                    let syncer = LoadableSyncer(loadable, timeoutPolicy: policy)
                    blackHole(syncer)
                }
                blackHole(loadable)
            }
            let sample = stopwatch.stop()
            await Task.yield()
            return sample
        }
    }
    let plainLifetime = await lifetimeSample(withSyncer: false)
    let syncerLifetime = await lifetimeSample(withSyncer: true)

    func add(_ name: String, _ sample: Sample, _ baseline: Sample, _ baselineName: String, per count: Int) {
        let value = sample.nanoseconds(per: count)
        let baselineValue = baseline.nanoseconds(per: count)
        report.add(
            Row(
                scenario: name, value: value, unit: "ns/op", allocationsPerOperation: sample.allocations(per: count),
                baseline: baselineName, baselineValue: baselineValue, ratio: value / baselineValue))
    }
    add(
        "syncer: sync cycle, success, no timer (\(cycles.formatted))", syncerUnarmed, plainSuccess,
        "the same without a syncer", per: cycles)
    add(
        "syncer: sync cycle, success, refresh armed (\(cycles.formatted))", syncerSuccess, plainSuccess,
        "the same without a syncer", per: cycles)
    add(
        "syncer: sync cycle, failure, retry armed (\(cycles.formatted))", syncerFailure, plainFailure,
        "the same without a syncer", per: cycles)
    add(
        "syncer: make and release a loadable with a syncer (\(instances.formatted))", syncerLifetime,
        plainLifetime, "a loadable alone", per: instances)
}
