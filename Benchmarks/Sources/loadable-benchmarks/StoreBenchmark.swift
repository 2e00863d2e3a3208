import Foundation
import Loadable
import LoadableCaching
import LoadableTesting
import Observation

/// Store: a ``LoadableStore`` of `PendingLoadable`s with contents, on a `ManualClock` with the
/// default retention (300 s).
///
/// - Lease + release of a live key (one lease of every key is held elsewhere), with `release()`
///   and by letting the lease go, with `Int` and short `String` keys, against the floor: a
///   `Dictionary` lookup + insert of the same key over the same key sequence.
/// - N distinct keys leased, released, then expired by the store's one timer; for the smallest N
///   also on a store whose `count` a view read once beforehand (it then owns a registrar).
/// - `invalidate(where:)` over N retained entries, all matching.
/// - Bytes per retained entry beyond the loadable itself.
@MainActor
func runStore(_ settings: Settings, into report: inout Report) async {
    // Memory first, while the heap is fresh.
    runStoreMemory(settings, into: &report)
    runStoreLeases(settings, into: &report)
    await runStoreExpiry(settings, into: &report)
    runStoreInvalidation(settings, into: &report)
}

/// The store of these benchmarks: `Key` to a `PendingLoadable` with contents, on a manual clock,
/// so that nothing expires unless a benchmark advances it.
@MainActor
private func makeStore<Key: Hashable & Sendable>(
    _: Key.Type, clock: ManualClock = ManualClock()
) -> LoadableStore<Key, PendingLoadable> {
    LoadableStore(retention: .seconds(300), clock: clock) { _ in PendingLoadable(contents: 1) }
}

// MARK: - Lease + release of a live key

@MainActor
private func runStoreLeases(_ settings: Settings, into report: inout Report) {
    let keyCount = settings.storeLiveKeys
    let rounds = max(settings.storeLeaseOperations / keyCount, 1)
    let operations = rounds * keyCount
    let intKeys = Array(0..<keyCount)
    let stringKeys = (0..<keyCount).map { "post-\($0)" }

    func measure<Key: Hashable & Sendable>(_ keys: [Key], keyName: String) {
        // The three take turns, so that a busy moment of the machine slows each of them alike.
        var floor: Sample?
        var released: Sample?
        var letGo: Sample?
        func faster(_ sample: Sample, _ best: Sample?) -> Sample {
            guard let best, best.duration <= sample.duration else { return sample }
            return best
        }
        for _ in 0..<max(settings.runs, 1) {
            floor = faster(dictionaryFloor(keys, rounds: rounds), floor)
            released = faster(leaseLiveKeys(keys, rounds: rounds, byDeinit: false), released)
            letGo = faster(leaseLiveKeys(keys, rounds: rounds, byDeinit: true), letGo)
        }
        guard let floor, let released, let letGo else { return }
        let floorNanoseconds = floor.nanoseconds(per: operations)
        report.add(
            Row(
                scenario: "store: floor, Dictionary get + set (\(keyName))", value: floorNanoseconds, unit: "ns/op",
                allocationsPerOperation: floor.allocations(per: operations)))
        for (byDeinit, sample) in [(false, released), (true, letGo)] {
            let nanoseconds = sample.nanoseconds(per: operations)
            let allocations = sample.allocations(per: operations)
            let ratio = nanoseconds / floorNanoseconds
            let how = byDeinit ? "lease, let go" : "lease(k).release()"
            report.add(
                Row(
                    scenario: "store: \(how), live \(keyName) key", value: nanoseconds, unit: "ns/op",
                    allocationsPerOperation: allocations, baseline: "Dictionary get + set (\(keyName))",
                    baselineValue: floorNanoseconds, ratio: ratio))
            report.add(
                Goal(
                    name: "store \(how) of a live \(keyName) key vs Dictionary get + set", target: "<= 3x",
                    measured: String(
                        format: "%.2fx (%.1f ns vs %.1f ns), %.2f allocs/op", ratio, nanoseconds, floorNanoseconds,
                        allocations),
                    holds: ratio <= 3))
        }
    }
    measure(intKeys, keyName: "Int")
    measure(stringKeys, keyName: "String")
}

/// `rounds` passes over `keys`, each taking a lease of a key that has one already and ending it.
@MainActor
private func leaseLiveKeys<Key: Hashable & Sendable>(_ keys: [Key], rounds: Int, byDeinit: Bool) -> Sample {
    let store = makeStore(Key.self)
    let held = keys.map { store.lease($0) }
    let stopwatch = Stopwatch.start()
    if byDeinit {
        leaseAndLetGo(keys, rounds: rounds, in: store)
    } else {
        leaseAndRelease(keys, rounds: rounds, in: store)
    }
    let sample = stopwatch.stop()
    precondition(store.count == keys.count && held.allSatisfy { $0.loadable.isInUse })
    return sample
}

// The timed loops, not inlined so that a profile shows them apart from their setup.

@inline(never)
@MainActor
private func leaseAndRelease<Key: Hashable & Sendable>(
    _ keys: [Key], rounds: Int, in store: LoadableStore<Key, PendingLoadable>
) {
    // The lease is kept in a screen's stored property (here a holder object), as an app's is:
    // a lease that never escapes the loop would be kept on the stack by the optimizer.
    let screen = Holder<LoadableLease<PendingLoadable>>()
    for _ in 0..<rounds {
        for key in keys {
            screen.value = store.lease(key)
            screen.value?.release()
        }
    }
    screen.value = nil
}

/// A screen's stored property.
private final class Holder<Value> {
    var value: Value?
}

@inline(never)
@MainActor
private func leaseAndLetGo<Key: Hashable & Sendable>(
    _ keys: [Key], rounds: Int, in store: LoadableStore<Key, PendingLoadable>
) {
    let screen = Holder<LoadableLease<PendingLoadable>>()
    for _ in 0..<rounds {
        for key in keys {
            screen.value = store.lease(key)  // the previous lease goes
        }
        screen.value = nil
    }
}

/// The floor of a lease of a live key: the store's own work is a lookup of the key's entry and a
/// change of it, here a lookup and an insert of the same key in a dictionary of objects.
private func dictionaryFloor<Key: Hashable>(_ keys: [Key], rounds: Int) -> Sample {
    var dictionary = Dictionary(uniqueKeysWithValues: keys.map { ($0, Counter()) })
    let stopwatch = Stopwatch.start()
    getAndSet(keys, rounds: rounds, in: &dictionary)
    let sample = stopwatch.stop()
    precondition(dictionary.count == keys.count)
    blackHole(dictionary)
    return sample
}

@inline(never)
private func getAndSet<Key: Hashable>(_ keys: [Key], rounds: Int, in dictionary: inout [Key: Counter]) {
    for _ in 0..<rounds {
        for key in keys {
            let value = dictionary[key]
            dictionary[key] = value
        }
    }
}

// MARK: - Lease, release, expire

/// One run of ``leaseReleaseExpire(_:)``: the whole and its phases.
private struct ExpiryRun {
    var total: Sample
    var lease: Duration
    var release: Duration
    var expire: Duration
}

@MainActor
private func runStoreExpiry(_ settings: Settings, into report: inout Report) async {
    var milliseconds: [Int: Double] = [:]
    /// The loadables alone (made, leased, released and freed without a store), per count.
    var aloneMillisecondsByCount: [Int: Double] = [:]
    // The smallest count is also run on a store whose `count` a view read once.
    let readCount = settings.storeExpiryCounts.first
    for count in settings.storeExpiryCounts {
        var fastest = await leaseReleaseExpire(count)
        var alone = loadablesWithoutStore(count)
        var fastestRead = count == readCount ? await leaseReleaseExpire(count, readCountFirst: true) : nil
        for _ in 1..<max(settings.runs, 1) {
            let run = await leaseReleaseExpire(count)
            if run.total.duration < fastest.total.duration { fastest = run }
            let aloneRun = loadablesWithoutStore(count)
            if aloneRun.duration < alone.duration { alone = aloneRun }
            if let read = fastestRead {
                let readRun = await leaseReleaseExpire(count, readCountFirst: true)
                if readRun.total.duration < read.total.duration { fastestRead = readRun }
            }
        }
        let total = fastest.total.duration.nanoseconds / 1e6
        let aloneMilliseconds = alone.duration.nanoseconds / 1e6
        milliseconds[count] = total
        aloneMillisecondsByCount[count] = aloneMilliseconds
        report.add(
            Row(
                scenario: "store: \(count.formatted) keys lease+release+expire", value: total, unit: "ms",
                allocationsPerOperation: fastest.total.allocations(per: count),
                baseline: "make, lease, release, free; no store", baselineValue: aloneMilliseconds,
                ratio: total / aloneMilliseconds))
        for (phase, duration) in [
            ("lease all", fastest.lease), ("release all", fastest.release), ("expire all", fastest.expire),
        ] {
            report.add(
                Row(
                    scenario: "store:   of which \(phase)", value: duration.nanoseconds / 1e6, unit: "ms",
                    baseline: "the whole", baselineValue: total, ratio: duration.nanoseconds / 1e6 / total))
        }
        if let read = fastestRead {
            let readMilliseconds = read.total.duration.nanoseconds / 1e6
            report.add(
                Row(
                    scenario: "store: \(count.formatted) keys, count read once", value: readMilliseconds, unit: "ms",
                    allocationsPerOperation: read.total.allocations(per: count), baseline: "count never read",
                    baselineValue: total, ratio: readMilliseconds / total))
            if count == 100_000 {
                report.add(
                    Goal(
                        name: "store: 100,000 keys leased, released and expired, count read once by Observation",
                        target: "<= 150 ms",
                        measured: String(
                            format: "%.1f ms (%.2fx never read)", readMilliseconds, readMilliseconds / total),
                        holds: readMilliseconds <= 150))
                let ratio = readMilliseconds / aloneMilliseconds
                report.add(
                    Goal(
                        name:
                            "store: 100,000 keys, count read once, vs the same loadables made and dropped without a store",
                        target: "<= 1.3x",
                        measured: String(
                            format: "%.2fx (%.1f ms vs %.1f ms)", ratio, readMilliseconds, aloneMilliseconds),
                        holds: ratio <= 1.3))
            }
        }
    }
    for count in settings.storeExpiryCounts {
        guard let small = milliseconds[count], let large = milliseconds[count * 4] else { continue }
        report.add(
            Row(
                scenario: "store: \((count * 4).formatted) vs \(count.formatted) keys (4×)", value: large, unit: "ms",
                baseline: "\(count.formatted) keys", baselineValue: small, ratio: large / small))
    }

    if let time = milliseconds[100_000] {
        report.add(
            Goal(
                name: "store: 100,000 keys leased, released and expired", target: "<= 150 ms",
                measured: String(format: "%.1f ms", time), holds: time <= 150))
        if let alone = aloneMillisecondsByCount[100_000] {
            let ratio = time / alone
            report.add(
                Goal(
                    name: "store: 100,000 keys leased, released and expired vs the same loadables without a store",
                    target: "<= 1.3x",
                    measured: String(format: "%.2fx (%.1f ms vs %.1f ms)", ratio, time, alone),
                    holds: ratio <= 1.3))
        }
        if let large = milliseconds[400_000] {
            let ratio = large / time
            report.add(
                Goal(
                    name: "store: 400,000 vs 100,000 keys leased, released and expired", target: "<= 5x time",
                    measured: String(format: "%.2fx", ratio), holds: ratio <= 5))
        }
    }
}

/// Leases `count` distinct keys, releases every lease (and lets it go), then moves the store's
/// clock past the retention, so that its one timer drops every entry.
///
/// With `readCountFirst`, the store's `count` is read once through `withObservationTracking`
/// beforehand, as a view that shows it does: the store then owns an Observation registrar, and the
/// first new entry's change ends that tracking.
@MainActor
private func leaseReleaseExpire(_ count: Int, readCountFirst: Bool = false) async -> ExpiryRun {
    let clock = ManualClock()
    let store = makeStore(Int.self, clock: clock)
    if readCountFirst {
        withObservationTracking {
            _ = store.count
        } onChange: {
        }
    }
    var leases: [LoadableLease<PendingLoadable>] = []
    leases.reserveCapacity(count)
    let stopwatch = Stopwatch.start()
    for key in 0..<count { leases.append(store.lease(key)) }
    let leased = stopwatch.stop()
    for lease in leases { lease.release() }
    leases.removeAll()
    let released = stopwatch.stop()
    await clock.waitForSleepers()
    await clock.advance(by: .seconds(300) + .milliseconds(1))
    // `peek`, not `count`: a tracked read would make the store an Observation registrar, and
    // every later change of `count` would pay for it. The last key released is the last dropped.
    var spins = 0
    while store.peek(count - 1) != nil, spins < 1000 {
        await Task.yield()
        spins += 1
    }
    let total = stopwatch.stop()
    precondition(store.count == 0, "\(store.count) of \(count) entries left after the retention")
    precondition(clock.pendingSleepCount == 0)
    return ExpiryRun(
        total: total, lease: leased.duration, release: released.duration - leased.duration,
        expire: total.duration - released.duration)
}

/// The loadables of ``leaseReleaseExpire(_:)`` without a store: `count` of them made, leased
/// through `lease()`, released and freed.
@MainActor
private func loadablesWithoutStore(_ count: Int) -> Sample {
    var leases: [LoadableLease<PendingLoadable>] = []
    leases.reserveCapacity(count)
    let stopwatch = Stopwatch.start()
    for _ in 0..<count { leases.append(PendingLoadable(contents: 1).lease()) }
    for lease in leases { lease.release() }
    leases.removeAll()
    return stopwatch.stop()
}

// MARK: - Invalidation

@MainActor
private func runStoreInvalidation(_ settings: Settings, into report: inout Report) {
    let count = settings.storeInvalidateCount
    let store = best(of: settings.runs) {
        let store = makeStore(Int.self)
        for key in 0..<count { store.lease(key).release() }
        let stopwatch = Stopwatch.start()
        invalidateAll(in: store)
        let sample = stopwatch.stop()
        let loadable = store.peek(count - 1)
        precondition(store.count == count && loadable?.isStale == true && loadable?.loadableState == .idle)
        return sample
    }
    // The same loadables, not in a store, each invalidated.
    let alone = best(of: settings.runs) {
        let loadables = (0..<count).map { _ in PendingLoadable(contents: 1) }
        for loadable in loadables { loadable.lease().release() }
        let stopwatch = Stopwatch.start()
        for loadable in loadables { loadable.invalidate() }
        let sample = stopwatch.stop()
        precondition(loadables[count - 1].isStale && loadables[count - 1].loadableState == .idle)
        return sample
    }
    let milliseconds = store.duration.nanoseconds / 1e6
    let aloneMilliseconds = alone.duration.nanoseconds / 1e6
    report.add(
        Row(
            scenario: "store: invalidate(where:) \(count.formatted) retained", value: milliseconds, unit: "ms",
            allocationsPerOperation: store.allocations(per: count),
            baseline: "invalidate() each, no store", baselineValue: aloneMilliseconds,
            ratio: milliseconds / aloneMilliseconds))
    if count == 100_000 {
        report.add(
            Goal(
                name: "store: invalidate(where:) over 100,000 retained entries", target: "<= 30 ms",
                measured: String(format: "%.1f ms", milliseconds), holds: milliseconds <= 30))
    }
}

@inline(never)
@MainActor
private func invalidateAll(in store: LoadableStore<Int, PendingLoadable>) {
    store.invalidate { _ in true }
}

// MARK: - Memory

/// Bytes malloc'd by N retained entries of a store, less those of N identical loadables in an
/// array: every loadable with contents, leased and released once.
@MainActor
private func runStoreMemory(_ settings: Settings, into report: inout Report) {
    let count = settings.storeMemoryEntries

    let aloneBefore = MemoryUsage.now()
    let aloneStopwatch = Stopwatch.start()
    var loadables: [PendingLoadable] = []
    loadables.reserveCapacity(count)
    for _ in 0..<count {
        let loadable = PendingLoadable(contents: 1)
        loadable.lease().release()
        loadables.append(loadable)
    }
    let aloneSample = aloneStopwatch.stop()
    let aloneAfter = MemoryUsage.now()
    precondition(!loadables[count - 1].isInUse)
    loadables = []

    let clock = ManualClock()
    let storeBefore = MemoryUsage.now()
    let storeStopwatch = Stopwatch.start()
    let store = makeStore(Int.self, clock: clock)
    for key in 0..<count { store.lease(key).release() }
    let storeSample = storeStopwatch.stop()
    let storeAfter = MemoryUsage.now()
    precondition(store.count == count && store.peek(count - 1)?.isInUse == false)

    let alone = Double(aloneAfter.allocatedBytes - aloneBefore.allocatedBytes) / Double(count)
    let stored = Double(storeAfter.allocatedBytes - storeBefore.allocatedBytes) / Double(count)
    let overhead = stored - alone
    report.add(
        Row(
            scenario: "store memory: loadable in an array (malloc)", value: alone, unit: "bytes",
            allocationsPerOperation: aloneSample.allocations(per: count)))
    report.add(
        Row(
            scenario: "store memory: retained entry (malloc)", value: stored, unit: "bytes",
            allocationsPerOperation: storeSample.allocations(per: count), baseline: "loadable in an array",
            baselineValue: alone, ratio: stored / alone))
    report.add(
        Row(
            scenario: "store memory: overhead per retained entry", value: overhead, unit: "bytes",
            allocationsPerOperation: storeSample.allocations(per: count) - aloneSample.allocations(per: count)))
    report.add(
        Goal(
            name: "store overhead per retained entry (\(count.formatted) entries)", target: "<= 200 bytes",
            measured: String(format: "%.0f B (%.0f B per entry vs %.0f B per loadable)", overhead, stored, alone),
            holds: overhead <= 200))
    withExtendedLifetime(store) {}
}
