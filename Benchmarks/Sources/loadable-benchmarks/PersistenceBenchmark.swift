import Foundation
import Loadable
import LoadableCaching

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Persistence: `Loadable.persist(in:key:)` with a ``FileLoadableCache``, 1,000 entries of about
/// 1 KB of JSON each, in fresh directories under the temporary directory (`TMPDIR`), deleted
/// afterwards.
///
/// - Save + restore: 1,000 loadables persisted under `item-<i>`, each given its contents with
///   `setContents`, then `saved()` (the saves); then 1,000 new loadables persisted under the same
///   keys, then `saved()` (the restores), whose contents are checked. Against two floors, run on
///   the main actor one file after the other, into other directories: the issue's, `JSONEncoder` +
///   `Data.write(to:options: .atomic)` (which, in swift-foundation, also calls `fsync` on each
///   file), and the same JSON written with the system calls the library makes (`open`, `write`,
///   `close`, `rename`, no `fsync`); both restore with `Data(contentsOf:)` + `JSONDecoder`. For
///   where the time goes: the library's main-actor part (the `persist` and `setContents` calls),
///   the codec and the cache called directly from one task (no loadable, no queue), and one
///   round trip main actor → pool → main actor (each job of the cache queue makes one: a save, a
///   restore, and the restore that `persist` asks for before the save). They take turns; the
///   figures are the best run of each and the median.
/// - Main-actor stall: the longest time between two turns of a main-actor ticker (a task that
///   reads the clock and yields, in a loop) while 1,000 restores run, against the same 1,000 files
///   read and decoded in one go on the main actor (a restore done on the main actor), and against
///   the ticker alone (the machine's own noise).
/// - With a limit: the same save + restore through a `FileLoadableCache(maxBytes:)` whose limit is
///   never reached (the cost of counting usage and keeping file times in recency order), against
///   the same without a limit, taking turns. And eviction: one save that makes a cache holding
///   10,000 entries of 150 B evict all of them (its entry is as large as the limit), against
///   `remove(key:)` of the 10,000 by hand and then the same save in a cache without a limit; both
///   call the cache directly from one task.
@MainActor
func runPersistence(_ settings: Settings, into report: inout Report) async {
    let values = (0..<settings.persistenceEntries).map(PersistedItem.init(index:))
    let encoder = JSONEncoder()
    let bytes = values.reduce(0) { total, value in total + ((try? encoder.encode(value).count) ?? 0) }
    let averageBytes = bytes / max(values.count, 1)
    print("persistence: files in \(scratchDirectory.path) (TMPDIR moves them), deleted at the end")
    defer { try? FileManager.default.removeItem(at: scratchDirectory) }
    await runRoundTrips(values, averageBytes: averageBytes, settings, into: &report)
    await runStalls(values, settings, into: &report)
    await runEviction(settings, into: &report)
}

/// The contents of one entry: a post with its text, tags and counts, about 1 KB as JSON. (The
/// `sqlite-cache` scenario persists the same values.)
struct PersistedItem: Codable, Equatable, Sendable {
    var id: Int
    var title: String
    var author: String
    var body: String
    var tags: [String]
    var scores: [Int]
    var createdAt: Double
    var isPinned: Bool

    init(index: Int) {
        let words = ["loadable", "cache", "entry", "restore", "save", "main", "actor", "file", "bytes", "swift"]
        func text(_ count: Int, from start: Int) -> String {
            (0..<count).map { words[(start &+ $0 &* 7) % words.count] }.joined(separator: " ")
        }
        id = index
        title = "Post \(index): " + text(6, from: index)
        author = "author-\(index % 97)"
        body = text(100, from: index &* 3)
        tags = (0..<8).map { "tag-\((index &+ $0) % 50)" }
        scores = (0..<24).map { (index &* 31 &+ $0 &* 17) % 10_000 }
        createdAt = 700_000_000 + Double(index) * 61.5
        isPinned = index % 10 == 0
    }
}

/// A loadable of one ``PersistedItem``: its contents are set from outside, so it never syncs.
final class PersistedItemLoadable: Loadable<PersistedItem> {
    override func doSync() {}
}

/// The key of entry `index`, in the cache and as the floor's file name.
private func key(_ index: Int) -> String { "item-\(index)" }

/// The directory of every file of the scenario, under the system's temporary directory; deleted
/// at the end, so that no deletion runs between two timed parts.
private let scratchDirectory = FileManager.default.temporaryDirectory.appendingPathComponent(
    "loadable-benchmarks-persistence-\(UUID())")

/// A new directory in ``scratchDirectory``, not created yet.
private func temporaryDirectory(_ name: String) -> URL {
    scratchDirectory.appendingPathComponent("\(name)-\(UUID())")
}

/// Stops the benchmark with `error` when `body` throws: an input/output failure makes any figure
/// meaningless.
private func mustSucceed<Result>(_ what: String, _ body: () throws -> Result) -> Result {
    do {
        return try body()
    } catch {
        fatalError("persistence benchmark: \(what) failed: \(error)")
    }
}

// MARK: - Save + restore

/// One save + restore of every value: the saves, then the restores.
struct RoundTrip {
    var save: Sample
    var restore: Sample
    /// Of ``save`` and ``restore``, the time on the main actor before `saved()`: the library's
    /// `persist` and `setContents` calls (zero for the floors and the direct calls).
    var saveOnMain: Duration = .zero
    var restoreOnMain: Duration = .zero

    var total: Duration { save.duration + restore.duration }
    var allocations: Int { save.allocations + restore.allocations }
}

/// One run of the floors: the saves with `Data.write(to:options: .atomic)` (which calls `fsync`
/// on each file), the saves with the system calls the library makes (no `fsync`), and the
/// restores (`Data(contentsOf:)` + `JSONDecoder`), the same for both.
private struct FloorRun {
    var foundationSave: Sample
    var posixSave: Sample
    var restore: Sample

    /// The issue's floor: `Data.write(to:options: .atomic)`, then the restores.
    var foundation: RoundTrip { RoundTrip(save: foundationSave, restore: restore) }
    /// The floor without `fsync`, the library's durability.
    var posix: RoundTrip { RoundTrip(save: posixSave, restore: restore) }
}

@MainActor
private func runRoundTrips(
    _ values: [PersistedItem], averageBytes: Int, _ settings: Settings, into report: inout Report
) async {
    let count = values.count
    let runs = max(settings.runs, 1)
    // They take turns, so that a busy moment of the machine slows each of them alike.
    var floors: [FloorRun] = []
    var library: [RoundTrip] = []
    var limited: [RoundTrip] = []
    var direct: [RoundTrip] = []
    var hops: [Sample] = []
    for _ in 0..<runs {
        let posix = posixFloorRoundTrip(values)
        library.append(await libraryRoundTrip(values))
        limited.append(await libraryRoundTrip(values, maxBytes: 1 << 40))
        direct.append(await directRoundTrip(values))
        hops.append(await hopRoundTrips(3 * count))
        // Last: its `fsync`s may slow the file system for a while after.
        floors.append(
            FloorRun(foundationSave: foundationFloorSave(values), posixSave: posix.save, restore: posix.restore))
    }
    let what = "\(count.formatted) × \(averageBytes.formatted) B"

    func microseconds(_ duration: Duration) -> Double { duration.nanoseconds / 1e3 / Double(count) }
    func milliseconds(_ duration: Duration) -> Double { duration.nanoseconds / 1e6 }
    func fastest(_ samples: [Sample]) -> Sample { samples.min { $0.duration < $1.duration }! }
    func fastest(_ trips: [RoundTrip]) -> RoundTrip { trips.min { $0.total < $1.total }! }
    func median(_ durations: [Duration]) -> Duration { durations.sorted()[durations.count / 2] }

    // Per entry, the fastest run of each part.
    func add(_ name: String, _ sample: Sample, allocations: Bool = true, against baseline: (String, Sample)? = nil) {
        let value = microseconds(sample.duration)
        let baselineValue = baseline.map { microseconds($0.1.duration) }
        report.add(
            Row(
                scenario: "persistence: \(name)", value: value, unit: "µs/entry",
                allocationsPerOperation: allocations ? sample.allocations(per: count) : nil, baseline: baseline?.0,
                baselineValue: baselineValue, ratio: baselineValue.map { value / $0 }))
    }
    let floorSave = ("floor save, open+write+rename", fastest(floors.map(\.posixSave)))
    let floorRestore = ("floor restore", fastest(floors.map(\.restore)))
    add("floor save, Data.write .atomic (fsync)", fastest(floors.map(\.foundationSave)))
    add(floorSave.0, floorSave.1)
    add("floor restore, Data(contentsOf:)+decode", floorRestore.1)
    add("save, FileLoadableCache", fastest(library.map(\.save)), against: floorSave)
    let saveOnMain = library.map(\.saveOnMain).min() ?? .zero
    add("  of which persist+setContents on main", Sample(duration: saveOnMain, allocations: 0), allocations: false)
    add("restore, FileLoadableCache", fastest(library.map(\.restore)), against: floorRestore)
    let restoreOnMain = library.map(\.restoreOnMain).min() ?? .zero
    add("  of which persist on main", Sample(duration: restoreOnMain, allocations: 0), allocations: false)
    add("direct: encode + cache.save, no queue", fastest(direct.map(\.save)), against: floorSave)
    add("direct: cache.load + decode, no queue", fastest(direct.map(\.restore)), against: floorRestore)
    let hop = fastest(hops)
    report.add(
        Row(
            scenario: "persistence: hop main → pool → main", value: hop.nanoseconds(per: 3 * count) / 1e3,
            unit: "µs/op", allocationsPerOperation: hop.allocations(per: 3 * count)))

    add("save, FileLoadableCache(maxBytes:), no eviction", fastest(limited.map(\.save)), against: floorSave)
    add("restore, FileLoadableCache(maxBytes:)", fastest(limited.map(\.restore)), against: floorRestore)
    let unlimitedBest = milliseconds(fastest(library).total)
    let limitedBest = milliseconds(fastest(limited).total)
    let limitedMedian = milliseconds(median(limited.map(\.total)))
    let unlimitedMedian = milliseconds(median(library.map(\.total)))
    report.add(
        Row(
            scenario: "persistence: \(what) save+restore with maxBytes, best", value: limitedBest, unit: "ms",
            allocationsPerOperation: Double(fastest(limited).allocations) / Double(count),
            baseline: "no limit, best", baselineValue: unlimitedBest, ratio: limitedBest / unlimitedBest))
    report.add(
        Goal(
            name: "persistence: save + restore of \(what) with maxBytes (never reached) vs without a limit",
            target: "<= 1.1x",
            measured: String(
                format: "%.2fx (best of %d: %.1f ms vs %.1f ms; median %.2fx: %.1f ms vs %.1f ms)",
                limitedBest / unlimitedBest, runs, limitedBest, unlimitedBest, limitedMedian / unlimitedMedian,
                limitedMedian, unlimitedMedian),
            holds: limitedBest / unlimitedBest <= 1.1))

    let libraryBest = fastest(library)
    let libraryMedian = milliseconds(median(library.map(\.total)))
    for (name, trips, isIssueFloor) in [
        ("Data.write .atomic", floors.map(\.foundation), true), ("open+write+rename", floors.map(\.posix), false),
    ] {
        let floorBest = milliseconds(fastest(trips).total)
        let floorMedian = milliseconds(median(trips.map(\.total)))
        let bestRatio = milliseconds(libraryBest.total) / floorBest
        report.add(
            Row(
                scenario: "persistence: \(what) save+restore, best", value: milliseconds(libraryBest.total),
                unit: "ms", allocationsPerOperation: Double(libraryBest.allocations) / Double(count),
                baseline: "floor (\(name)), best", baselineValue: floorBest, ratio: bestRatio))
        report.add(
            Row(
                scenario: "persistence: \(what) save+restore, median", value: libraryMedian, unit: "ms",
                baseline: "floor (\(name)), median", baselineValue: floorMedian, ratio: libraryMedian / floorMedian))
        let floorName =
            isIssueFloor
            ? "JSON + Data.write(.atomic) + Data(contentsOf:)"
            : "JSON + open/write/rename (no fsync) + Data(contentsOf:)"
        report.add(
            Goal(
                name: "persistence: save + restore of \(what) through FileLoadableCache vs \(floorName)",
                target: "<= 1.5x",
                measured: String(
                    format: "%.2fx (best of %d: %.1f ms vs %.1f ms; median %.2fx: %.1f ms vs %.1f ms)", bestRatio,
                    runs, milliseconds(libraryBest.total), floorBest, libraryMedian / floorMedian, libraryMedian,
                    floorMedian),
                holds: bestRatio <= 1.5))
    }
}

/// The library's path: loadables persisted in a ``FileLoadableCache``, saved, then restored by new
/// loadables.
@MainActor
private func libraryRoundTrip(_ values: [PersistedItem], maxBytes: Int? = nil) async -> RoundTrip {
    let directory = temporaryDirectory("library")
    return await persistRoundTrip(values, in: FileLoadableCache(directory: directory, maxBytes: maxBytes))
}

/// Loadables persisted in `cache` under `item-<i>` (`persist(in:key:)` + `setContents`, then
/// `saved()`), then new loadables restoring the same keys (`saved()`), whose contents are checked.
/// Also used by the `sqlite-cache` scenario.
@MainActor
func persistRoundTrip(_ values: [PersistedItem], in cache: any LoadableCache) async -> RoundTrip {
    var errors = 0
    var saved: [PersistedItemLoadable] = []
    saved.reserveCapacity(values.count)
    var restored: [PersistedItemLoadable] = []
    restored.reserveCapacity(values.count)

    let saveWatch = Stopwatch.start()
    var persistence: LoadablePersistence?
    for (index, value) in values.enumerated() {
        let loadable = PersistedItemLoadable()
        persistence = loadable.persist(in: cache, key: key(index), onError: { _ in errors += 1 })
        loadable.setContents(value)
        saved.append(loadable)
    }
    let saveOnMain = saveWatch.stop().duration
    await persistence?.saved()
    let save = saveWatch.stop()

    let restoreWatch = Stopwatch.start()
    for index in values.indices {
        let loadable = PersistedItemLoadable()
        persistence = loadable.persist(in: cache, key: key(index), onError: { _ in errors += 1 })
        restored.append(loadable)
    }
    let restoreOnMain = restoreWatch.stop().duration
    await persistence?.saved()
    let restore = restoreWatch.stop()

    precondition(errors == 0, "\(errors) persistence errors")
    precondition(restored.map(\.contents) == values, "the restored contents differ from the saved ones")
    precondition(restored.allSatisfy { $0.loadableState == .idle })
    withExtendedLifetime(saved) {}
    return RoundTrip(save: save, restore: restore, saveOnMain: saveOnMain, restoreOnMain: restoreOnMain)
}

/// The codec and the cache without loadables or queue: one task off the main actor encodes each
/// value and saves it with `FileLoadableCache.save`, then loads and decodes each.
@MainActor
private func directRoundTrip(_ values: [PersistedItem]) async -> RoundTrip {
    let directory = temporaryDirectory("direct")
    let cache = FileLoadableCache(directory: directory)
    let (save, restore, restored) = await Task.detached { () -> (Sample, Sample, [PersistedItem]) in
        let encoder = JSONEncoder()
        let decoder = JSONDecoder()
        let savedAt = Date()
        var restored: [PersistedItem] = []
        restored.reserveCapacity(values.count)
        let saveWatch = Stopwatch.start()
        for (index, value) in values.enumerated() {
            let data = mustSucceed("encoding") { try encoder.encode(value) }
            do {
                try await cache.save(CachedEntry(data: data, savedAt: savedAt, version: 1), key: key(index))
            } catch {
                fatalError("persistence benchmark: saving \(key(index)) failed: \(error)")
            }
        }
        let save = saveWatch.stop()
        let restoreWatch = Stopwatch.start()
        for index in values.indices {
            do {
                guard let entry = try await cache.load(key: key(index)) else { fatalError("no entry \(key(index))") }
                restored.append(try decoder.decode(PersistedItem.self, from: entry.data))
            } catch {
                fatalError("persistence benchmark: loading \(key(index)) failed: \(error)")
            }
        }
        return (save, restoreWatch.stop(), restored)
    }.value
    precondition(restored == values, "the cache read back other values")
    return RoundTrip(save: save, restore: restore)
}

/// `count` round trips from the main actor to the global pool and back, one after the other: what
/// each job of the cache queue pays to run its work off the main actor.
@MainActor
private func hopRoundTrips(_ count: Int) async -> Sample {
    let counter = Counter()
    let stopwatch = Stopwatch.start()
    for _ in 0..<count {
        counter.value &+= await offMainWork()
    }
    let sample = stopwatch.stop()
    precondition(counter.value == count)
    return sample
}

/// Work that runs on the global pool: returns 1. (It calls a function the optimizer cannot see
/// through, so that the switch to the pool is kept.)
@inline(never)
private nonisolated func offMainWork() async -> Int {
    blackHole(0)
    return 1
}

/// The floor of the library's durability: each value encoded and written to its own file with
/// `open` + `write` + `rename` (no `fsync`), then each file read and decoded; on the main actor,
/// one after the other.
@MainActor
private func posixFloorRoundTrip(_ values: [PersistedItem]) -> RoundTrip {
    let directory = makeDirectory("floor-posix")
    var restored: [PersistedItem] = []
    restored.reserveCapacity(values.count)

    let saveWatch = Stopwatch.start()
    writeFloorFilesWithoutSync(values, in: directory)
    let save = saveWatch.stop()

    let restoreWatch = Stopwatch.start()
    let decoder = JSONDecoder()
    for index in values.indices {
        restored.append(readFloorFile(index, in: directory, decoder: decoder))
    }
    let restore = restoreWatch.stop()

    precondition(restored == values, "the floor read back other values")
    return RoundTrip(save: save, restore: restore)
}

/// The issue's floor for saving: each value encoded and written with
/// `Data.write(to:options: .atomic)`.
@MainActor
private func foundationFloorSave(_ values: [PersistedItem]) -> Sample {
    let directory = makeDirectory("floor-foundation")
    let watch = Stopwatch.start()
    writeFloorFiles(values, in: directory)
    let sample = watch.stop()
    precondition(readFloorFile(values.count - 1, in: directory, decoder: JSONDecoder()) == values[values.count - 1])
    return sample
}

/// A new, empty directory in ``scratchDirectory``.
private func makeDirectory(_ name: String) -> URL {
    let directory = temporaryDirectory(name)
    mustSucceed("creating \(directory.path)") {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }
    return directory
}

/// Writes each value, encoded as JSON, to `directory/item-<i>` with `Data.write(to:options: .atomic)`.
private func writeFloorFiles(_ values: [PersistedItem], in directory: URL) {
    let encoder = JSONEncoder()
    for (index, value) in values.enumerated() {
        let url = directory.appendingPathComponent(key(index))
        mustSucceed("writing \(url.path)") { try encoder.encode(value).write(to: url, options: .atomic) }
    }
}

/// Writes each value, encoded as JSON, to `directory/item-<i>` as the library does, without
/// `fsync`: to a new temporary file, then renamed.
private func writeFloorFilesWithoutSync(_ values: [PersistedItem], in directory: URL) {
    let encoder = JSONEncoder()
    let folder = directory.path
    for (index, value) in values.enumerated() {
        let path = folder + "/" + key(index)
        let temporary = path + ".tmp"
        let data = mustSucceed("encoding") { try encoder.encode(value) }
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        precondition(descriptor >= 0, "open(\(temporary)) failed, errno \(errno)")
        let written = data.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        precondition(written == data.count, "write(\(temporary)) wrote \(written) of \(data.count) bytes")
        precondition(close(descriptor) == 0 && rename(temporary, path) == 0, "close or rename failed, errno \(errno)")
    }
}

/// Reads and decodes `directory/item-<index>`.
private func readFloorFile(_ index: Int, in directory: URL, decoder: JSONDecoder) -> PersistedItem {
    let url = directory.appendingPathComponent(key(index))
    return mustSucceed("reading \(url.path)") { try decoder.decode(PersistedItem.self, from: Data(contentsOf: url)) }
}

// MARK: - Main-actor stall

/// Measures the gaps between turns of the main actor: a task on it that reads the clock and
/// yields, in a loop, as long as it runs. A gap is the time the main actor spent on other work
/// between two of its turns (or the thread spent off the processor). Used by the persistence and
/// outbox scenarios.
@MainActor
final class MainActorTicker {
    private(set) var gaps: [Int64] = []
    private var isRunning = true
    private var task: Task<Void, Never>?

    init() {
        gaps.reserveCapacity(1 << 20)
        task = Task { @MainActor in
            let clock = ContinuousClock()
            var last = clock.now
            while self.isRunning {
                await Task.yield()
                let now = clock.now
                let gap = now - last
                self.gaps.append(Int64(gap.nanoseconds))
                last = now
            }
        }
    }

    /// Waits until the ticker has had `count` turns.
    func waitForTicks(_ count: Int) async {
        while gaps.count < count { await Task.yield() }
    }

    /// Stops the ticker and returns the gaps it measured, in nanoseconds.
    func stop() async -> [Int64] {
        isRunning = false
        await task?.value
        return gaps
    }
}

/// What one ticker run measured.
private struct Stall {
    /// The longest gap, in microseconds.
    var longest: Double
    /// The 99.9th percentile gap, in microseconds.
    var p999: Double
    /// Gaps longer than 1 ms.
    var overOneMillisecond: Int
    /// How long the work took, in milliseconds.
    var work: Double

    init(gaps: [Int64], work: Duration) {
        let sorted = gaps.sorted()
        longest = Double(sorted.last ?? 0) / 1e3
        p999 = sorted.isEmpty ? 0 : Double(sorted[min(sorted.count - 1, sorted.count * 999 / 1000)]) / 1e3
        overOneMillisecond = sorted.count - (sorted.firstIndex { $0 > 1_000_000 } ?? sorted.count)
        self.work = work.nanoseconds / 1e6
    }
}

@MainActor
private func runStalls(_ values: [PersistedItem], _ settings: Settings, into report: inout Report) async {
    // The library's files and the floor's, written once; both stay in the page cache.
    let libraryDirectory = temporaryDirectory("stall-library")
    let floorDirectory = makeDirectory("stall-floor")
    let cache = FileLoadableCache(directory: libraryDirectory)
    var writers: [PersistedItemLoadable] = []
    var persistence: LoadablePersistence?
    for (index, value) in values.enumerated() {
        let loadable = PersistedItemLoadable()
        persistence = loadable.persist(in: cache, key: key(index))
        loadable.setContents(value)
        writers.append(loadable)
    }
    await persistence?.saved()
    writers = []
    writeFloorFilesWithoutSync(values, in: floorDirectory)

    let runs = max(settings.runs, 1)
    var idle: [Stall] = []
    var library: [Stall] = []
    var onMain: [Stall] = []
    for _ in 0..<runs {
        let restore = await restoreWithTicker(values, cache: cache)
        library.append(restore)
        onMain.append(await readOnMainWithTicker(values, in: floorDirectory))
        idle.append(await idleTicker(for: .milliseconds(max(restore.work, 1))))
    }

    // The median run of each, by its longest gap; and the worst of all runs.
    func middle(_ stalls: [Stall]) -> Stall { stalls.sorted { $0.longest < $1.longest }[stalls.count / 2] }
    func worst(_ stalls: [Stall]) -> Double { stalls.map(\.longest).max() ?? 0 }
    let count = values.count.formatted
    let idleStall = middle(idle)
    let libraryStall = middle(library)
    let onMainStall = middle(onMain)
    report.add(
        Row(
            scenario: "main-actor stall: ticker alone (noise)", value: idleStall.longest, unit: "µs",
            baseline: "worst of \(runs) runs", baselineValue: worst(idle)))
    report.add(
        Row(
            scenario: "main-actor stall: \(count) restores, longest", value: libraryStall.longest, unit: "µs",
            baseline: "read + decode on main, longest", baselineValue: onMainStall.longest,
            ratio: libraryStall.longest / onMainStall.longest))
    report.add(
        Row(
            scenario: "main-actor stall: \(count) restores, worst run", value: worst(library), unit: "µs",
            baseline: "read + decode on main, worst", baselineValue: worst(onMain),
            ratio: worst(library) / worst(onMain)))
    report.add(
        Row(
            scenario: "main-actor stall: \(count) restores, 99.9th pct", value: libraryStall.p999, unit: "µs",
            baseline: "ticker alone, 99.9th pct", baselineValue: idleStall.p999,
            ratio: libraryStall.p999 / idleStall.p999))
    report.add(
        Row(
            scenario: "main-actor stall: \(count) restores, gaps > 1 ms",
            value: Double(libraryStall.overOneMillisecond),
            unit: "gaps", baseline: "ticker alone", baselineValue: Double(idleStall.overOneMillisecond)))
    report.add(
        Row(
            scenario: "main-actor stall: \(count) restores, duration", value: libraryStall.work, unit: "ms",
            baseline: "read + decode on main", baselineValue: onMainStall.work,
            ratio: libraryStall.work / onMainStall.work))
    let ratio = libraryStall.longest / onMainStall.longest
    report.add(
        Goal(
            name:
                "persistence: restoring \(count) entries does not block the main actor (longest stall, median of \(runs) runs)",
            target: "<= 0.1x the on-main restore",
            measured: String(
                format: "%.0f µs vs %.0f µs on main (%.3fx); ticker alone %.0f µs", libraryStall.longest,
                onMainStall.longest, ratio, idleStall.longest),
            holds: ratio <= 0.1))
}

/// 1,000 restores through the library while the ticker runs; the loadables are made and persisted
/// before the ticker starts, so that the gaps are the restores' own.
@MainActor
private func restoreWithTicker(_ values: [PersistedItem], cache: FileLoadableCache) async -> Stall {
    var loadables: [PersistedItemLoadable] = []
    loadables.reserveCapacity(values.count)
    var persistence: LoadablePersistence?
    for index in values.indices {
        let loadable = PersistedItemLoadable()
        persistence = loadable.persist(in: cache, key: key(index))
        loadables.append(loadable)
    }
    let ticker = MainActorTicker()
    let watch = Stopwatch.start()
    await persistence?.saved()
    let work = watch.stop().duration
    let gaps = await ticker.stop()
    precondition(loadables.map(\.contents) == values, "the restored contents differ from the saved ones")
    return Stall(gaps: gaps, work: work)
}

/// The same files read and decoded in one go on the main actor while the ticker runs.
@MainActor
private func readOnMainWithTicker(_ values: [PersistedItem], in directory: URL) async -> Stall {
    let ticker = MainActorTicker()
    await ticker.waitForTicks(100)
    let watch = Stopwatch.start()
    let decoder = JSONDecoder()
    let restored = values.indices.map { readFloorFile($0, in: directory, decoder: decoder) }
    let work = watch.stop().duration
    let ticked = ticker.gaps.count
    await ticker.waitForTicks(ticked + 100)
    let gaps = await ticker.stop()
    precondition(restored == values, "the floor read back other values")
    return Stall(gaps: gaps, work: work)
}

/// The ticker alone for `duration`: the gaps the machine makes by itself.
@MainActor
private func idleTicker(for duration: Duration) async -> Stall {
    Stall(gaps: await idleTickerGaps(for: duration), work: duration)
}

/// The gaps, in nanoseconds, of a ``MainActorTicker`` that runs alone for `duration`. Used by the
/// persistence and outbox scenarios.
@MainActor
func idleTickerGaps(for duration: Duration) async -> [Int64] {
    let ticker = MainActorTicker()
    let clock = ContinuousClock()
    let end = clock.now + duration
    while clock.now < end { await Task.yield() }
    return await ticker.stop()
}

// MARK: - Eviction

/// Entries in the eviction part.
private let evictedEntries = 10_000

/// The key of evicted entry `index`: 8 bytes, so that each file is 40 + 8 + 102 = 150 B.
private func evictionKey(_ index: Int) -> String { "e-" + String(index + 100_000) }

/// A cache in a new directory holding ``evictedEntries`` entries of 150 B, with `maxBytes` (or none).
private func filledCache(maxBytes: Int?) async -> FileLoadableCache {
    let cache = FileLoadableCache(directory: temporaryDirectory("eviction"), maxBytes: maxBytes)
    let entry = CachedEntry(
        data: Data(repeating: 7, count: 102), savedAt: Date(timeIntervalSinceReferenceDate: 0), version: 1)
    for index in 0..<evictedEntries {
        do {
            try await cache.save(entry, key: evictionKey(index))
        } catch {
            fatalError("persistence benchmark: saving \(evictionKey(index)) failed: \(error)")
        }
    }
    return cache
}

/// One save that evicts every entry, against removing them by hand and then the same save.
private func evictionRun() async -> (evict: Sample, byHand: Sample) {
    let limit = evictedEntries * 150
    let big = CachedEntry(
        data: Data(repeating: 9, count: limit - 40 - 3), savedAt: Date(timeIntervalSinceReferenceDate: 0), version: 1)
    let bounded = await filledCache(maxBytes: limit)
    let unbounded = await filledCache(maxBytes: nil)
    do {
        let evictWatch = Stopwatch.start()
        try await bounded.save(big, key: "big")
        let evict = evictWatch.stop()
        let handWatch = Stopwatch.start()
        for index in 0..<evictedEntries { try await unbounded.remove(key: evictionKey(index)) }
        try await unbounded.save(big, key: "big")
        let byHand = handWatch.stop()
        let names = try FileManager.default.contentsOfDirectory(atPath: bounded.entriesDirectory.path)
        precondition(names == [FileLoadableCache.fileName(forKey: "big")], "eviction left \(names.count) files")
        return (evict, byHand)
    } catch {
        fatalError("persistence benchmark: eviction failed: \(error)")
    }
}

@MainActor
private func runEviction(_ settings: Settings, into report: inout Report) async {
    let runs = max(settings.runs / 2, 1)
    var samples: [(evict: Sample, byHand: Sample)] = []
    for _ in 0..<runs {
        samples.append(await Task.detached { await evictionRun() }.value)
    }
    func milliseconds(_ sample: Sample) -> Double { sample.duration.nanoseconds / 1e6 }
    let evict = samples.map(\.evict).min { $0.duration < $1.duration }!
    let byHand = samples.map(\.byHand).min { $0.duration < $1.duration }!
    let ratios = samples.map { milliseconds($0.evict) / milliseconds($0.byHand) }.sorted()
    let ratio = milliseconds(evict) / milliseconds(byHand)
    let count = evictedEntries.formatted
    report.add(
        Row(
            scenario: "persistence: a save evicting \(count) entries", value: milliseconds(evict), unit: "ms",
            allocationsPerOperation: evict.allocations(per: evictedEntries),
            baseline: "\(count) × remove(key:) + the save", baselineValue: milliseconds(byHand), ratio: ratio))
    report.add(
        Goal(
            name: "persistence: one save that evicts \(count) entries vs remove(key:) of each by hand and the save",
            target: "<= 1.5x",
            measured: String(
                format: "%.2fx (best of %d: %.1f ms vs %.1f ms; ratios of the runs %.2f–%.2fx)", ratio, runs,
                milliseconds(evict), milliseconds(byHand), ratios.first!, ratios.last!),
            holds: ratio <= 1.5))
}
