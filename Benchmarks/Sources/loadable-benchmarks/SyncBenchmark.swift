import Foundation
import LoadableCaching
import LoadableSQLite
import LoadableSync
import LoadableSyncer

/// Synced collections (`SyncedCollection`) on a `SQLiteLoadableCache` in a fresh file under the
/// temporary directory (`TMPDIR`), deleted afterwards, against an in-process remote whose pages
/// are made ahead of time (its own cost is a dictionary read).
///
/// - First pull: 100,000 records in pages of 1,000, from `sync()` until the collection succeeded
///   and `saved()` returned (everything on disk): records per second, against the same records
///   put into a `Dictionary` and their JSON saved as one entry by hand (`cache.save`).
/// - A page of 1,000 changed records applied to a collection of 100,000: `sync()` until it
///   succeeded (the main actor's part: the remote answers at once) and until `saved()` returned
///   (end to end), the median of 20 pages, against the same 1,000 records put into a `Dictionary`
///   of 100,000 and their JSON saved by hand.
/// - A local `update(_:_:)` of one record of 100,000, then a read of it from `contents`: the
///   call's own time on the main actor, the median of 2,000 updates of different records (pushes
///   to the in-process remote run between them, outside the timed part).
@MainActor
func runSync(_ settings: Settings, into report: inout Report) async {
    print("sync: SQLite files in \(syncScratch.path) (TMPDIR moves them), deleted at the end")
    defer { try? FileManager.default.removeItem(at: syncScratch) }
    let count = 100_000
    let remote = PagedRemote(
        (0..<count).map { SyncTask(id: "r\($0)", title: "Task \($0)", done: false, position: $0) }, pageSize: 1_000)

    // First pull.
    var pulls: [Duration] = []
    var byHand: [Duration] = []
    for _ in 0..<settings.runs {
        let cache = makeSyncCache()
        let tasks = SyncedCollection(remote: remote, cache: cache, conflicts: .serverWins, activity: ActivityMonitor())
        await tasks.restored()
        let start = ContinuousClock.now
        tasks.sync()
        while tasks.loadableState == .syncing { await Task.yield() }
        await tasks.saved()
        pulls.append(ContinuousClock.now - start)
        precondition(tasks.contents?.count == count, "the first pull showed \(tasks.contents?.count ?? 0) records")
        byHand.append(await saveByHand(remote.all, in: makeSyncCache()))
    }
    let pull = pulls.min()!
    let hand = byHand.min()!
    let rate = Double(count) / seconds(pull)
    report.add(
        Row(
            scenario: "sync: first pull of 100,000 records, best", value: pull.nanoseconds / 1e6, unit: "ms",
            baseline: "Dictionary + one cache.save by hand", baselineValue: hand.nanoseconds / 1e6,
            ratio: pull.nanoseconds / hand.nanoseconds))
    report.add(
        Goal(
            name: "sync: first pull of 100,000 records from an in-process remote, end to end (saved)",
            target: ">= 100,000 records/s",
            measured: String(
                format: "%.0f records/s (best of %d: %.0f ms; by hand %.0f ms, %.2fx)", rate, settings.runs,
                pull.nanoseconds / 1e6, hand.nanoseconds / 1e6, pull.nanoseconds / hand.nanoseconds),
            holds: rate >= 100_000))

    // Pages of 1,000 changes into 100,000.
    let cache = makeSyncCache()
    let tasks = SyncedCollection(remote: remote, cache: cache, conflicts: .serverWins, activity: ActivityMonitor())
    tasks.sync()
    while tasks.loadableState == .syncing { await Task.yield() }
    await tasks.saved()
    var mainParts: [Duration] = []
    var endToEnd: [Duration] = []
    var pageByHand: [Duration] = []
    var dictionary = Dictionary(uniqueKeysWithValues: remote.all.map { ($0.record.id, $0) })
    let handCache = makeSyncCache()
    for page in 0..<20 {
        remote.change(first: 1_000, offset: page * 1_000, round: page)
        let start = ContinuousClock.now
        tasks.sync()
        while tasks.loadableState == .syncing { await Task.yield() }
        let applied = ContinuousClock.now
        await tasks.saved()
        mainParts.append(applied - start)
        endToEnd.append(ContinuousClock.now - start)
        let changed = remote.lastChanged
        let handStart = ContinuousClock.now
        for record in changed { dictionary[record.record.id] = record }
        let data = mustEncode(changed)
        try? await handCache.save(CachedEntry(data: data, savedAt: .now, version: 1), key: "page")
        pageByHand.append(ContinuousClock.now - handStart)
    }
    let main = medianDuration(mainParts)
    let whole = medianDuration(endToEnd)
    let handPage = medianDuration(pageByHand)
    report.add(
        Row(
            scenario: "sync: 1,000 changes into 100,000, applied (main)", value: main.nanoseconds / 1e6, unit: "ms"))
    report.add(
        Row(
            scenario: "sync: 1,000 changes into 100,000, saved", value: whole.nanoseconds / 1e6, unit: "ms",
            baseline: "Dictionary + cache.save by hand", baselineValue: handPage.nanoseconds / 1e6,
            ratio: whole.nanoseconds / handPage.nanoseconds))
    report.add(
        Goal(
            name: "sync: a pulled page of 1,000 changed records applied to 100,000 (SQLite), end to end",
            target: "<= 50 ms",
            measured: String(
                format: "%.1f ms (median of 20; max %.1f ms; by hand %.1f ms)", whole.nanoseconds / 1e6,
                endToEnd.max()!.nanoseconds / 1e6, handPage.nanoseconds / 1e6),
            holds: whole <= .milliseconds(50)))
    report.add(
        Goal(
            name: "sync: the same page's main-actor part",
            target: "<= 10 ms",
            measured: String(
                format: "%.1f ms (median of 20; max %.1f ms)", main.nanoseconds / 1e6,
                mainParts.max()!.nanoseconds / 1e6),
            holds: main <= .milliseconds(10)))

    // The same pages with a live view of every record by title, which each page's records move
    // in (issue 44: the view merges a page in one pass).
    // Released before the local updates below, which it would move too.
    var viewParts: [Duration] = []
    do {
        let byTitle = tasks.view(sortedBy: { $0.title < $1.title })
        for page in 20..<30 {
            remote.change(first: 1_000, offset: page * 1_000, round: page)
            let start = ContinuousClock.now
            tasks.sync()
            while tasks.loadableState == .syncing { await Task.yield() }
            viewParts.append(ContinuousClock.now - start)
            precondition(byTitle.count == count, "the view lost records")
            await tasks.saved()
        }
    }
    report.add(
        Row(
            scenario: "sync: the same with a view of all by title (main)",
            value: medianDuration(viewParts).nanoseconds / 1e6, unit: "ms", baseline: "no view",
            baselineValue: main.nanoseconds / 1e6, ratio: medianDuration(viewParts).nanoseconds / main.nanoseconds))

    // Local updates.
    var updates: [Duration] = []
    for index in 0..<2_000 {
        let id = "r\(index * 37 % count)"
        let start = ContinuousClock.now
        tasks.update(id) { $0.title = "local \(index)" }
        let shown = tasks.contents?[id: id]
        updates.append(ContinuousClock.now - start)
        precondition(shown?.title == "local \(index)", "the update was not shown at once")
        if index % 100 == 99 {
            while tasks.status.pendingCount > 0 { await Task.yield() }
        }
    }
    let update = medianDuration(updates)
    report.add(
        Row(scenario: "sync: local update + read of 1 of 100,000", value: update.nanoseconds / 1e3, unit: "µs/op"))
    report.add(
        Goal(
            name: "sync: a local update of one record of 100,000, shown at once, main-actor time",
            target: "<= 20 µs",
            measured: String(
                format: "%.1f µs (median of %d; 90th percentile %.1f µs)", update.nanoseconds / 1e3, updates.count,
                updates.sorted()[updates.count * 9 / 10].nanoseconds / 1e3),
            holds: update <= .microseconds(20)))
    while tasks.status.pendingCount > 0 { await Task.yield() }
}

/// A task record of the benchmark: about 100 bytes of JSON.
struct SyncTask: Identifiable, Codable, Sendable, Equatable {
    var id: String
    var title: String
    var done: Bool
    var position: Int
}

extension PagedRemote<SyncTask> {
    /// Renames `first` records from `offset` (round `round`): the next delta pull brings them.
    func change(first count: Int, offset: Int, round: Int) {
        change(offset..<offset + count) { record, index in record.title = "Task \(index), round \(round)" }
    }
}

private let syncScratch = FileManager.default.temporaryDirectory.appendingPathComponent(
    "loadable-benchmarks-sync-\(UUID())")

private func makeSyncCache() -> SQLiteLoadableCache {
    try? FileManager.default.createDirectory(at: syncScratch, withIntermediateDirectories: true)
    do {
        return try SQLiteLoadableCache(path: syncScratch.appendingPathComponent("\(UUID()).sqlite"))
    } catch {
        fatalError("sync: cannot open a SQLite cache: \(error)")
    }
}

private func saveByHand(_ records: [RemoteRecord<SyncTask>], in cache: SQLiteLoadableCache) async -> Duration {
    let start = ContinuousClock.now
    var dictionary: [String: RemoteRecord<SyncTask>] = [:]
    for record in records { dictionary[record.record.id] = record }
    let data = mustEncode(records)
    try? await cache.save(CachedEntry(data: data, savedAt: .now, version: 1), key: "records")
    blackHole(dictionary)
    return ContinuousClock.now - start
}

private func mustEncode(_ records: [RemoteRecord<SyncTask>]) -> Data {
    do {
        return try JSONEncoder().encode(records)
    } catch {
        fatalError("sync: cannot encode records: \(error)")
    }
}

private func medianDuration(_ durations: [Duration]) -> Duration { durations.sorted()[durations.count / 2] }

private func seconds(_ duration: Duration) -> Double { duration.nanoseconds / 1e9 }
