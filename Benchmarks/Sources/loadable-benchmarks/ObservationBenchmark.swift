import Foundation
import Loadable
import LoadableCaching
import LoadableGroup
import LoadableSyncer
import LoadableTesting
import Observation

/// Observation: what a view's reads cost every observable type of the package, and what they leave
/// behind.
///
/// - Read once, then N changes: the same change on two instances of a type made alike, one never
///   read and one read once through `withObservationTracking` (so it owns a registrar) and changed
///   once since (so nothing tracks it any more). Each type's change is a cheap representative one:
///   `setContents` on a `PushLoadable`, a sync cycle of a `Loadable`, a lease + release + removal
///   of a new key on a store (two changes of `count`), an action's run, an enqueue + discard on an
///   offline outbox over an in-memory cache, a sync cycle under a syncer (its `nextSyncIn`), a
///   monitor's `isActive`; a proxy, lease, mapping or combination changes through what it follows.
///   The two instances take turns in chunks, so that a busy moment slows both alike; the figure
///   is the best run's time per change of each, and their ratio.
/// - Tracked read vs untracked read: K reads of a public observed property of one instance inside
///   one `withObservationTracking` scope (a view whose body reads it K times, in a list), against
///   the same K reads outside any scope, on the same instance, taking turns scope by scope; per
///   read, so the scope's own fixed cost is shared by the K reads. The floor is the same for a
///   plain non-generic `@Observable` final class with one `Int` property, and each type's tracked
///   read is also compared with the floor's, read in turn with it.
@MainActor
func runObservation(_ settings: Settings, into report: inout Report) async {
    await runChangesAfterRead(settings, into: &report)
    await runTrackedReads(settings, into: &report)
}

/// The floor of a tracked read: the Observation macro's code on a non-generic class.
@Observable
final class ObservedCounter {
    var value = 0
}

/// A change of 100 B for the outbox rows.
private struct ObservedChange: Codable, Sendable {
    var postID = 7
    var title = String(repeating: "a", count: 80)
}

// MARK: - Read once, then N changes

/// One instance of a type under test: how to change it, how a view reads it, and what to do
/// between two timed chunks.
@MainActor
private struct Instance {
    /// Makes the changes numbered by `indices` (a key, a value); each changes the observed
    /// property.
    var change: @MainActor (Range<Int>) async -> Void
    /// A view's read of the observed property.
    var read: @MainActor () -> Void
    /// Untimed work after each chunk (the saves an outbox queued, the timer tasks a syncer
    /// cancelled).
    var settle: @MainActor () async -> Void = {}
    /// What must live as long as the instance (its target, its store).
    var keep: [AnyObject] = []
}

/// A type of the package, with its representative change.
@MainActor
private struct ChangeCase {
    var type: String
    var change: String
    /// Changes of a few microseconds (a task, a store's entry, an outbox's item): fewer of them.
    var isHeavy = false
    var make: @MainActor () async -> Instance
}

/// Changes a push loadable numbered by `indices`.
@MainActor
private func setContents(_ loadable: PushLoadable<Int>, _ indices: Range<Int>) {
    for index in indices { loadable.setContents(index) }
}

@MainActor
private let changeCases: [ChangeCase] = [
    // The floor, with no goal: the Observation macro's code, whose registrar exists from the start.
    ChangeCase(type: floorType, change: "value = i") {
        let counter = ObservedCounter()
        return Instance(
            change: { for index in $0 { counter.value = index } }, read: { _ = counter.value }, keep: [counter])
    },
    ChangeCase(type: "PushLoadable<Int>", change: "setContents") {
        let loadable = PushLoadable<Int>()
        return Instance(change: { setContents(loadable, $0) }, read: { _ = loadable.contents }, keep: [loadable])
    },
    ChangeCase(type: "Loadable<Int>", change: "sync cycle") {
        let loadable = ImmediateLoadable()
        return Instance(
            change: { for _ in $0 { loadable.sync() } }, read: { _ = loadable.loadableState }, keep: [loadable])
    },
    ChangeCase(type: "AsyncLoadable<Int>", change: "setDidSyncSuccessfully") {
        let loadable = AsyncLoadable<Int> { 1 }
        return Instance(
            change: { for index in $0 { loadable.setDidSyncSuccessfully(index) } },
            read: { _ = loadable.contents }, keep: [loadable])
    },
    ChangeCase(type: "PagedLoadable<Int, Int>", change: "setDidSyncSuccessfully") {
        let loadable = PagedLoadable<Int, Int> { _ in .init(items: [], nextCursor: nil) }
        return Instance(
            change: { for index in $0 { loadable.setDidSyncSuccessfully([index]) } },
            read: { _ = loadable.contents }, keep: [loadable])
    },
    ChangeCase(type: "LoadableLease<Loadable<Int>>", change: "target's setContents") {
        let target = PendingLoadable()
        let lease = target.lease()
        return Instance(change: { setContents(target, $0) }, read: { _ = lease.contents }, keep: [target, lease])
    },
    ChangeCase(type: "PureLoadableProxy<PushLoadable<Int>>", change: "target's setContents") {
        let target = PushLoadable<Int>()
        let proxy = PureLoadableProxy(target: target)
        return Instance(change: { setContents(target, $0) }, read: { _ = proxy.contents }, keep: [target, proxy])
    },
    ChangeCase(type: "LoadableProxy<Loadable<Int>>", change: "target's setContents") {
        let target = PendingLoadable()
        let proxy = LoadableProxy(target: target)
        return Instance(change: { setContents(target, $0) }, read: { _ = proxy.contents }, keep: [target, proxy])
    },
    ChangeCase(type: "MappedLoadable", change: "source's setContents") {
        let source = PushLoadable<Int>()
        let mapped = source.map { $0 * 2 }
        return Instance(change: { setContents(source, $0) }, read: { _ = mapped.contents }, keep: [source, mapped])
    },
    ChangeCase(type: "CombinedLoadable", change: "first member's setContents") {
        let first = PushLoadable<Int>()
        let second = PushLoadable<Int>(contents: 10)
        let combined = LoadableGroup.combine(first, second) { $0 + $1 }
        return Instance(
            change: { setContents(first, $0) }, read: { _ = combined.contents }, keep: [first, second, combined])
    },
    ChangeCase(type: "KeyedLoadableProxy", change: "entry's setContents") {
        let store = LoadableStore<Int, PendingLoadable>(clock: ManualClock()) { _ in PendingLoadable() }
        let proxy = KeyedLoadableProxy(store: store, key: 1)
        let entry = proxy.loadable!
        return Instance(change: { setContents(entry, $0) }, read: { _ = proxy.contents }, keep: [store, proxy])
    },
    ChangeCase(type: "LoadableStore", change: "lease + release + remove of a new key", isHeavy: true) {
        let store = LoadableStore<Int, PendingLoadable>(retention: .seconds(300), clock: ManualClock()) { _ in
            PendingLoadable(contents: 1)
        }
        return Instance(
            change: { indices in
                for key in indices {
                    store.lease(key).release()
                    store.remove(key)
                }
            },
            read: { _ = store.count }, keep: [store])
    },
    ChangeCase(type: "LoadableAction<Int, Int>", change: "run", isHeavy: true) {
        let action = LoadableAction<Int, Int> { $0 }
        return Instance(
            change: { indices in
                for index in indices { _ = try? await action.run(index) }
            },
            read: { _ = action.loadableState }, keep: [action])
    },
    ChangeCase(type: "LoadableOutbox", change: "enqueue + discard, offline", isHeavy: true) {
        let outbox = LoadableOutbox<ObservedChange>(
            cache: InMemoryLoadableCache(), activity: ActivityMonitor(connectivity: .offline)
        ) { _, _ in fatalError("observation benchmark: an offline outbox sent a change") }
        outbox.onError = { fatalError("observation benchmark: \($0)") }
        await outbox.restored()
        let change = ObservedChange()
        return Instance(
            change: { indices in
                for _ in indices { outbox.discard(outbox.enqueue(change)) }
            },
            read: { _ = outbox.items }, settle: { await outbox.saved() }, keep: [outbox])
    },
    ChangeCase(type: "LoadableSyncer", change: "sync cycle, refresh armed") {
        let loadable = ImmediateLoadable()
        let policy = BackoffTimeoutPolicy(period: .seconds(3600), min: .seconds(1), max: .seconds(60))
        let syncer = LoadableSyncer(loadable, timeoutPolicy: policy, activity: ActivityMonitor())
        return Instance(
            change: { for _ in $0 { loadable.sync() } }, read: { _ = syncer.nextSyncIn },
            // The timer tasks the syncer cancelled run (and end at once).
            settle: { await Task.yield() }, keep: [loadable, syncer])
    },
    ChangeCase(type: "ActivityMonitor", change: "isActive") {
        let monitor = ActivityMonitor()
        return Instance(
            change: { for index in $0 { monitor.isActive = index & 1 == 0 } }, read: { _ = monitor.isActive },
            keep: [monitor])
    },
]

/// What one side of a change case cost over a run.
private struct ChangeTotals {
    var duration = Duration.zero
    var allocations = 0

    mutating func add(_ sample: Sample) {
        duration += sample.duration
        allocations += sample.allocations
    }
}

@MainActor
private func runChangesAfterRead(_ settings: Settings, into report: inout Report) async {
    for changeCase in changeCases {
        let count = changeCase.isHeavy ? max(settings.observationChanges / 10, 1) : settings.observationChanges
        let chunk = max(count / 20, 1)
        var never: ChangeTotals?
        var read: ChangeTotals?
        for _ in 0..<max(settings.runs, 1) {
            let unread = await changeCase.make()
            let readOnce = await changeCase.make()
            // A view's read, then the change it is told of: the registrar stays, nothing tracks.
            withObservationTracking {
                readOnce.read()
            } onChange: {
            }
            for instance in [unread, readOnce] {
                await instance.change(count..<(count + 1))
                await instance.settle()
            }
            var run = (never: ChangeTotals(), read: ChangeTotals())
            var done = 0
            var turn = 0
            while done < count {
                let indices = done..<min(done + chunk, count)
                // The order alternates too, so that neither side always follows the other's settle.
                for side in turn.isMultiple(of: 2) ? [0, 1] : [1, 0] {
                    let instance = side == 0 ? unread : readOnce
                    let stopwatch = Stopwatch.start()
                    await instance.change(indices)
                    let sample = stopwatch.stop()
                    await instance.settle()
                    if side == 0 { run.never.add(sample) } else { run.read.add(sample) }
                }
                done = indices.upperBound
                turn += 1
            }
            if never.map({ run.never.duration < $0.duration }) ?? true { never = run.never }
            if read.map({ run.read.duration < $0.duration }) ?? true { read = run.read }
            withExtendedLifetime((unread.keep, readOnce.keep)) {}
        }
        guard let never, let read else { continue }
        let neverNanoseconds = never.duration.nanoseconds / Double(count)
        let readNanoseconds = read.duration.nanoseconds / Double(count)
        let ratio = readNanoseconds / neverNanoseconds
        report.add(
            Row(
                scenario: "observation: \(changeCase.type), \(changeCase.change), read once", value: readNanoseconds,
                unit: "ns/op", allocationsPerOperation: Double(read.allocations) / Double(count),
                baseline: "never read (\(Report.format(never.allocations, per: count)) allocs/op)",
                baselineValue: neverNanoseconds, ratio: ratio))
        guard changeCase.type != floorType else { continue }
        report.add(
            Goal(
                name: "observation: \(changeCase.type) \(changeCase.change), read once vs never read",
                target: "<= 1.2x",
                measured: String(format: "%.2fx (%.1f ns vs %.1f ns)", ratio, readNanoseconds, neverNanoseconds),
                holds: ratio <= 1.2))
    }
}

// MARK: - Tracked read vs untracked read

/// A type of the package and a view's read of one of its observed properties.
@MainActor
private struct ReadCase {
    var type: String
    var property: String
    /// Makes an instance and returns its read loop: `reads` reads of the property, and a value
    /// made of what they returned (so that no read can be left out).
    var make: @MainActor () async -> (keep: [AnyObject], loop: @MainActor (_ reads: Int) -> Int)
}

// The read loops, not inlined, so that both sides run the same code and a profile shows them.

@inline(never)
@MainActor
private func readValue(_ counter: ObservedCounter, _ reads: Int) -> Int {
    var sum = 0
    for _ in 0..<reads { sum &+= counter.value }
    return sum
}

@inline(never)
@MainActor
private func readContents(_ loadable: some ContentsLoadable<Int>, _ reads: Int) -> Int {
    var sum = 0
    for _ in 0..<reads { sum &+= loadable.contents ?? 0 }
    return sum
}

@inline(never)
@MainActor
private func readState(_ loadable: some PureLoadable, _ reads: Int) -> Int {
    var sum = 0
    for _ in 0..<reads where loadable.loadableState == .didSyncSuccessfully { sum &+= 1 }
    return sum
}

@inline(never)
@MainActor
private func readCount(_ store: LoadableStore<Int, PendingLoadable>, _ reads: Int) -> Int {
    var sum = 0
    for _ in 0..<reads { sum &+= store.count }
    return sum
}

@inline(never)
@MainActor
private func readItems(_ outbox: LoadableOutbox<ObservedChange>, _ reads: Int) -> Int {
    var sum = 0
    for _ in 0..<reads { sum &+= outbox.items.count }
    return sum
}

@inline(never)
@MainActor
private func readPendingCount(_ outbox: LoadableOutbox<ObservedChange>, _ reads: Int) -> Int {
    var sum = 0
    for _ in 0..<reads { sum &+= outbox.pendingCount }
    return sum
}

@inline(never)
@MainActor
private func readNextSyncIn(_ syncer: LoadableSyncer, _ reads: Int) -> Int {
    var sum = 0
    for _ in 0..<reads where syncer.nextSyncIn != nil { sum &+= 1 }
    return sum
}

@inline(never)
@MainActor
private func readIsActive(_ monitor: ActivityMonitor, _ reads: Int) -> Int {
    var sum = 0
    for _ in 0..<reads where monitor.isActive { sum &+= 1 }
    return sum
}

/// The name of the floor's row.
private let floorType = "@Observable final class"

/// An outbox that never sends, over an in-memory cache, holding one pending item.
@MainActor
private func makeOfflineOutbox() async -> LoadableOutbox<ObservedChange> {
    let outbox = LoadableOutbox<ObservedChange>(
        cache: InMemoryLoadableCache(), activity: ActivityMonitor(connectivity: .offline)
    ) { _, _ in fatalError("observation benchmark: an offline outbox sent a change") }
    await outbox.restored()
    outbox.enqueue(ObservedChange())
    await outbox.saved()
    return outbox
}

@MainActor
private let readCases: [ReadCase] = [
    ReadCase(type: floorType, property: "value") {
        let counter = ObservedCounter()
        return ([counter], { readValue(counter, $0) })
    },
    ReadCase(type: "PushLoadable<Int>", property: "contents") {
        let loadable = PushLoadable<Int>(contents: 1)
        return ([loadable], { readContents(loadable, $0) })
    },
    ReadCase(type: "Loadable<Int>", property: "loadableState") {
        let loadable = ImmediateLoadable()
        loadable.sync()
        return ([loadable], { readState(loadable, $0) })
    },
    ReadCase(type: "AsyncLoadable<Int>", property: "contents") {
        let loadable = AsyncLoadable<Int> { 1 }
        loadable.setContents(1)
        return ([loadable], { readContents(loadable, $0) })
    },
    ReadCase(type: "LoadableLease<Loadable<Int>>", property: "contents") {
        let target = PendingLoadable(contents: 1)
        let lease = target.lease()
        return ([target, lease], { readContents(lease, $0) })
    },
    ReadCase(type: "LoadableProxy<Loadable<Int>>", property: "contents") {
        let target = PendingLoadable(contents: 1)
        let proxy = LoadableProxy(target: target)
        return ([target, proxy], { readContents(proxy, $0) })
    },
    ReadCase(type: "MappedLoadable", property: "contents") {
        let source = PushLoadable<Int>(contents: 1)
        let mapped = source.map { $0 * 2 }
        return ([source, mapped], { readContents(mapped, $0) })
    },
    ReadCase(type: "LoadableAction<Int, Int>", property: "loadableState") {
        let action = LoadableAction<Int, Int> { $0 }
        _ = try? await action.run(1)
        return ([action], { readState(action, $0) })
    },
    ReadCase(type: "LoadableStore", property: "count") {
        let store = LoadableStore<Int, PendingLoadable>(clock: ManualClock()) { _ in PendingLoadable(contents: 1) }
        store.lease(1).release()
        return ([store], { readCount(store, $0) })
    },
    ReadCase(type: "LoadableOutbox", property: "items") {
        let outbox = await makeOfflineOutbox()
        return ([outbox], { readItems(outbox, $0) })
    },
    ReadCase(type: "LoadableOutbox", property: "pendingCount") {
        let outbox = await makeOfflineOutbox()
        return ([outbox], { readPendingCount(outbox, $0) })
    },
    ReadCase(type: "LoadableSyncer", property: "nextSyncIn") {
        let loadable = ImmediateLoadable()
        let policy = BackoffTimeoutPolicy(period: .seconds(3600), min: .seconds(1), max: .seconds(60))
        let syncer = LoadableSyncer(loadable, timeoutPolicy: policy, activity: ActivityMonitor())
        loadable.sync()
        return ([loadable, syncer], { readNextSyncIn(syncer, $0) })
    },
    ReadCase(type: "ActivityMonitor", property: "isActive") {
        let monitor = ActivityMonitor()
        return ([monitor], { readIsActive(monitor, $0) })
    },
]

@MainActor
private func runTrackedReads(_ settings: Settings, into report: inout Report) async {
    let reads = settings.observationReads
    let scopes = settings.observationScopes
    let count = reads * scopes
    var checksum = 0
    for readCase in readCases {
        let isFloor = readCase.type == floorType
        // Three sides take turns scope by scope: the tracked reads, the same reads untracked, and
        // the floor's tracked reads (so that the ratio to the floor is made under the same load).
        var best: [ChangeTotals?] = [nil, nil, nil]
        for _ in 0..<max(settings.runs, 1) {
            let (keep, loop) = await readCase.make()
            let counter = ObservedCounter()
            var loops: [@MainActor (Int) -> Int] = [loop, loop, { readValue(counter, $0) }]
            if isFloor { loops.removeLast() }
            // The first tracked read makes the registrar: not timed.
            checksum &+= withObservationTracking {
                loop(1)
            } onChange: {
            }
            var run = Array(repeating: ChangeTotals(), count: loops.count)
            for scope in 0..<scopes {
                let sides = Array(loops.indices)
                for side in sides[(scope % sides.count)...] + sides[..<(scope % sides.count)] {
                    let stopwatch = Stopwatch.start()
                    if side == 1 {
                        checksum &+= loops[side](reads)
                    } else {
                        // One view body that reads the property `reads` times.
                        checksum &+= withObservationTracking {
                            loops[side](reads)
                        } onChange: {
                        }
                    }
                    run[side].add(stopwatch.stop())
                }
            }
            for side in run.indices where best[side].map({ run[side].duration < $0.duration }) ?? true {
                best[side] = run[side]
            }
            withExtendedLifetime((keep, counter)) {}
        }
        guard let tracked = best[0], let untracked = best[1] else { continue }
        let trackedNanoseconds = tracked.duration.nanoseconds / Double(count)
        let untrackedNanoseconds = untracked.duration.nanoseconds / Double(count)
        let ratio = trackedNanoseconds / untrackedNanoseconds
        let name = "\(readCase.type).\(readCase.property)"
        report.add(
            Row(
                scenario: "observation: tracked read, \(name)", value: trackedNanoseconds, unit: "ns/op",
                allocationsPerOperation: Double(tracked.allocations) / Double(count),
                baseline: "untracked read, same instance", baselineValue: untrackedNanoseconds, ratio: ratio))
        guard let floor = best[2] else { continue }
        let floorNanoseconds = floor.duration.nanoseconds / Double(count)
        let floorRatio = trackedNanoseconds / floorNanoseconds
        report.add(
            Row(
                scenario: "observation:   the same against the floor", value: trackedNanoseconds, unit: "ns/op",
                baseline: "tracked read, \(floorType)", baselineValue: floorNanoseconds, ratio: floorRatio))
        report.add(
            Goal(
                name: "observation: tracked vs untracked read of \(name) (\(reads.formatted) reads per scope)",
                target: "<= 1.2x",
                measured: String(
                    format: "%.2fx (%.1f ns vs %.1f ns per read)", ratio, trackedNanoseconds, untrackedNanoseconds),
                holds: ratio <= 1.2))
        report.add(
            Goal(
                name: "observation: tracked read of \(name) vs \(floorType) floor", target: "<= 1.2x",
                measured: String(
                    format: "%.2fx (%.1f ns vs %.1f ns per read)", floorRatio, trackedNanoseconds, floorNanoseconds),
                holds: floorRatio <= 1.2))
    }
    blackHole(checksum)
}

extension Report {
    /// `count` allocations per `operations`, as the table prints them.
    static func format(_ count: Int, per operations: Int) -> String {
        String(format: "%.2f", Double(count) / Double(max(operations, 1)))
    }
}
