import Foundation
import GRDB
import Loadable
import LoadableCaching
import LoadableSQLite

/// SQLite cache: ``SQLiteLoadableCache`` (one database file, the system's SQLite) against the file
/// cache, against itself at 100,000 entries, and against GRDB 7 doing the same SQL. Every database
/// is a fresh file under the temporary directory (`TMPDIR`), all deleted at the end (none in
/// between, so that no deletion runs between two timed parts).
///
/// - Against the file cache: the `persistence` scenario's save + restore (1,000 loadables
///   persisted with `persist(in:key:)` + `setContents`, `saved()`, then 1,000 new loadables
///   restoring the same keys, `saved()`, contents checked; 963 B of JSON each) through a
///   `SQLiteLoadableCache` and through a `FileLoadableCache`, each in a fresh database or
///   directory per run; the two take turns, the first of each run alternating.
/// - At size: per-entry cost of a save that replaces an existing entry (about 1 KB) and of a load
///   of an existing entry, keys drawn at random, in a cache holding 1,000 entries and in one
///   holding 100,000 (under `a/`, with 10,000 more under `b/` and keys just outside `a/`'s range);
///   the two take turns in chunks of 100, from one task off the main actor, with SQLite's floor
///   on the same two files (``SizedCache/bareSaves(_:)``, ``SizedCache/bareLoads(_:)``) in the
///   same turns. Then `removeAll()` of `cache.scoped("a/")` over the 100,000 (one
///   `removeEntries(keyPrefix:)`, which marks the scope removed and leaves its rows to the
///   cache's batches), timed, the entries outside the scope checked by loads timed one by one
///   while the batches run; again on a freshly filled cache. Filling the 100,000 (one save per new
///   key) also gives the cost of the first and last 1,000 saves.
/// - Against GRDB 7.10.0 (`DatabaseQueue`, the same system SQLite): the same 1,000 keys with
///   about 1 KB each, upserted (each its own `BEGIN IMMEDIATE` transaction) and read back by key,
///   in random order, all sides taking turns in chunks of 100, each chunk from one task off the
///   main actor. See ``GRDBEntries`` for what each GRDB side does. A `FileLoadableCache` called
///   the same way runs beside them, for context: the cache's own share of the round trip above.
@MainActor
func runSQLiteCache(_ settings: Settings, into report: inout Report) async {
    print("sqlite-cache: databases in \(sqliteScratch.path) (TMPDIR moves them), deleted at the end")
    defer { try? FileManager.default.removeItem(at: sqliteScratch) }
    let values = (0..<settings.sqliteEntries).map(PersistedItem.init(index:))
    let encoder = JSONEncoder()
    let payloads = values.map { value in mustSucceed("encoding") { try encoder.encode(value) } }
    await runAgainstFiles(values, payloads: payloads, settings, into: &report)
    await runAgainstGRDB(payloads, settings, into: &report)
    await runAtSize(payloads, settings, into: &report)
}

/// The directory of every database of the scenario.
private let sqliteScratch = FileManager.default.temporaryDirectory.appendingPathComponent(
    "loadable-benchmarks-sqlite-\(UUID())")

/// A path for a new database file (or a new file cache directory) in ``sqliteScratch``.
private func scratchPath(_ name: String) -> URL {
    sqliteScratch.appendingPathComponent("\(name)-\(UUID())")
}

/// A `SQLiteLoadableCache` on a new file (its folder made by the cache).
private func makeSQLiteCache(_ name: String) -> SQLiteLoadableCache {
    makeSQLiteCacheAndPath(name).cache
}

/// A `SQLiteLoadableCache` on a new file, and the file's path.
private func makeSQLiteCacheAndPath(_ name: String) -> (cache: SQLiteLoadableCache, path: URL) {
    let path = scratchPath(name).appendingPathComponent("cache.sqlite")
    return (mustSucceed("opening \(path.path)") { try SQLiteLoadableCache(path: path) }, path)
}

/// Stops the benchmark when `body` throws: a failed save or load makes any figure meaningless.
private func mustSucceed<Result>(_ what: String, _ body: () throws -> Result) -> Result {
    do {
        return try body()
    } catch {
        fatalError("sqlite-cache benchmark: \(what) failed: \(error)")
    }
}

/// The entry the scenario saves for `payload`: the payload, a date `stamp` seconds after a fixed
/// one, version 1, no metadata (what `persist(in:key:)` saves for a plain loadable). Each timed
/// save has its own stamp, so that it changes its row: SQLite does not write a page whose cell
/// a save leaves byte for byte the same (a plain upsert of the same entry writes nothing).
private func cachedEntry(_ payload: Data, stamp: Int = 0) -> CachedEntry {
    CachedEntry(
        data: payload, savedAt: Date(timeIntervalSinceReferenceDate: 800_000_000 + Double(stamp)), version: 1)
}

/// Indices in `0..<bound`, drawn with a fixed seed (SplitMix64), so that every side and run reads
/// the same keys.
private func randomIndices(_ count: Int, below bound: Int, seed: UInt64) -> [Int] {
    var state = seed
    return (0..<count).map { _ in
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        mixed ^= mixed >> 31
        return Int(mixed % UInt64(bound))
    }
}

/// The median of `values`.
private func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

/// `value` in milliseconds.
private func milliseconds(_ duration: Duration) -> Double { duration.nanoseconds / 1e6 }

// MARK: - Against the file cache

@MainActor
private func runAgainstFiles(
    _ values: [PersistedItem], payloads: [Data], _ settings: Settings, into report: inout Report
) async {
    let runs = max(settings.runs, 1)
    let count = values.count
    var files: [RoundTrip] = []
    var databases: [RoundTrip] = []
    for run in 0..<runs {
        let file = FileLoadableCache(directory: scratchPath("files"))
        let database = makeSQLiteCache("persist")
        if run.isMultiple(of: 2) {
            files.append(await persistRoundTrip(values, in: file))
            databases.append(await persistRoundTrip(values, in: database))
        } else {
            databases.append(await persistRoundTrip(values, in: database))
            files.append(await persistRoundTrip(values, in: file))
        }
    }
    let averageBytes = payloads.reduce(0) { $0 + $1.count } / max(count, 1)
    let what = "\(count.formatted) × \(averageBytes.formatted) B"
    func perEntry(_ duration: Duration) -> Double { duration.nanoseconds / 1e3 / Double(count) }
    func fastestTrip(_ trips: [RoundTrip]) -> RoundTrip { trips.min { $0.total < $1.total }! }

    let fileSave = fastest(files.map(\.save))
    let fileRestore = fastest(files.map(\.restore))
    for (name, sample, baseline) in [
        ("save, SQLiteLoadableCache", fastest(databases.map(\.save)), fileSave),
        ("restore, SQLiteLoadableCache", fastest(databases.map(\.restore)), fileRestore),
    ] {
        let value = perEntry(sample.duration)
        let baselineValue = perEntry(baseline.duration)
        report.add(
            Row(
                scenario: "sqlite-cache: persist \(name)", value: value, unit: "µs/entry",
                allocationsPerOperation: sample.allocations(per: count), baseline: "FileLoadableCache",
                baselineValue: baselineValue, ratio: value / baselineValue))
    }
    let databaseBest = milliseconds(fastestTrip(databases).total)
    let fileBest = milliseconds(fastestTrip(files).total)
    let ratios = zip(databases, files).map { milliseconds($0.total) / milliseconds($1.total) }
    let databaseMedian = median(databases.map { milliseconds($0.total) })
    let fileMedian = median(files.map { milliseconds($0.total) })
    report.add(
        Row(
            scenario: "sqlite-cache: persist \(what) save+restore, best", value: databaseBest, unit: "ms",
            allocationsPerOperation: Double(fastestTrip(databases).allocations) / Double(count),
            baseline: "FileLoadableCache, best", baselineValue: fileBest, ratio: databaseBest / fileBest))
    report.add(
        Goal(
            name:
                "sqlite-cache: save + restore of \(what) through persist(in:key:), SQLiteLoadableCache vs FileLoadableCache",
            target: "<= 0.7x",
            measured: String(
                format:
                    "%.2fx (median of %d runs' ratios, %.2f–%.2fx; medians %.1f ms vs %.1f ms; best %.1f ms vs %.1f ms)",
                median(ratios), runs, ratios.min()!, ratios.max()!, databaseMedian, fileMedian, databaseBest,
                fileBest),
            holds: median(ratios) <= 0.7))
}

// MARK: - At size

/// The cache holding 100,000 entries under `a/`: these are in scope, the others not.
private func scopedKey(_ index: Int) -> String { "a/item-\(index)" }

/// Keys just outside `a/`'s range (`/` is 0x2F: `a.` sorts before `a/`, `a0` after every `a/…`),
/// and 10,000 under `b/`.
private func outsideKeys(_ count: Int) -> [String] {
    ["a", "a.", "a.z", "a0", "a0/item-1", "`/item-1", "A/item-1"] + (0..<count).map { "b/item-\($0)" }
}

/// Saves an entry for each of `keys` (payloads in turn) from one task off the main actor; returns
/// the time of the first and last `edge` saves.
private func fill(
    _ cache: SQLiteLoadableCache, keys: [String], payloads: [Data], edge: Int = 0
) async -> (first: Duration, last: Duration) {
    await Task.detached {
        let clock = ContinuousClock()
        var first = Duration.zero
        var last = Duration.zero
        for (index, key) in keys.enumerated() {
            let start = clock.now
            do {
                try await cache.save(cachedEntry(payloads[index % payloads.count]), key: key)
            } catch {
                fatalError("sqlite-cache benchmark: saving \(key) failed: \(error)")
            }
            let took = clock.now - start
            if index < edge { first += took }
            if index >= keys.count - edge { last += took }
        }
        return (first, last)
    }.value
}

/// One cache holding `size` entries under `a/`, and the cursor of its timed saves and loads.
///
/// SQLite's own floor runs on the same file: ``bareSaves(_:)`` and ``bareLoads(_:)`` step one
/// statement per entry through a GRDB `DatabaseQueue` opened on it (the same system SQLite, its
/// default 2 MB page cache and `synchronous = NORMAL`, as the library's connection), with nothing
/// of the cache around it.
private final class SizedCache: @unchecked Sendable {
    let cache: SQLiteLoadableCache
    let size: Int
    private let payloads: [Data]
    private let picks: [Int]
    private var cursor = 0
    /// A second connection to the cache's file, for SQLite's floor.
    private let bare: DatabaseQueue

    init(cache: SQLiteLoadableCache, path: URL, size: Int, payloads: [Data], picks: Int, seed: UInt64) {
        self.cache = cache
        self.size = size
        self.payloads = payloads
        self.picks = randomIndices(picks, below: size, seed: seed)
        // As the library's connection: a commit syncs nothing (NORMAL in WAL), checkpoints sync.
        var configuration = Configuration()
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
        bare = mustSucceed("opening a second connection to \(path.path)") {
            try DatabaseQueue(path: path.path, configuration: configuration)
        }
    }

    /// The next `count` random keys, each with the payload its fill saved there and a stamp of
    /// its own.
    private func next(_ count: Int) -> [(key: String, payload: Data, stamp: Int)] {
        (0..<count).map { _ in
            let index = picks[cursor % picks.count]
            cursor += 1
            return (scopedKey(index), payloads[index % payloads.count], cursor)
        }
    }

    /// `count` saves replacing existing entries, timed in one task off the main actor.
    func saves(_ count: Int) async -> Sample {
        let work = next(count)
        let cache = cache
        return await Task.detached {
            let watch = Stopwatch.start()
            for (key, payload, stamp) in work {
                do {
                    try await cache.save(cachedEntry(payload, stamp: stamp), key: key)
                } catch {
                    fatalError("sqlite-cache benchmark: saving \(key) failed: \(error)")
                }
            }
            return watch.stop()
        }.value
    }

    /// `count` loads of existing entries, timed in one task off the main actor; checks their sizes.
    func loads(_ count: Int) async -> Sample {
        let work = next(count)
        let cache = cache
        return await Task.detached {
            var bytes = 0
            let watch = Stopwatch.start()
            for (key, _, _) in work {
                do {
                    bytes += try await cache.load(key: key)?.data.count ?? 0
                } catch {
                    fatalError("sqlite-cache benchmark: loading \(key) failed: \(error)")
                }
            }
            let sample = watch.stop()
            precondition(bytes == work.reduce(0) { $0 + $1.payload.count }, "a load found another entry")
            return sample
        }.value
    }

    /// SQLite's floor of a save: `count` statements `UPDATE entries SET data, saved_at WHERE key`
    /// on the cache's file, each its own transaction (autocommit), timed in one task off the main
    /// actor. The row keeps its size (the same payload, a date of its own), so the cache's
    /// bookkeeping stays true.
    func bareSaves(_ count: Int) async -> Sample {
        let work = next(count)
        let bare = bare
        return await Task.detached {
            let watch = Stopwatch.start()
            mustSucceed("a bare save") {
                try bare.writeWithoutTransaction { db in
                    let statement = try db.cachedStatement(
                        sql: "UPDATE entries SET data = ?1, saved_at = ?2 WHERE key = ?3")
                    for (key, payload, stamp) in work {
                        let savedAt = cachedEntry(payload, stamp: stamp).savedAt.timeIntervalSinceReferenceDate
                        try statement.execute(arguments: [payload, savedAt, key])
                    }
                }
            }
            return watch.stop()
        }.value
    }

    /// SQLite's floor of a load: `count` statements `SELECT data FROM entries WHERE key` on the
    /// cache's file, timed in one task off the main actor; checks their sizes.
    func bareLoads(_ count: Int) async -> Sample {
        let work = next(count)
        let bare = bare
        return await Task.detached {
            var bytes = 0
            let watch = Stopwatch.start()
            mustSucceed("a bare load") {
                try bare.read { db in
                    let statement = try db.cachedStatement(sql: "SELECT data FROM entries WHERE key = ?1")
                    for (key, _, _) in work {
                        bytes += try Data.fetchOne(statement, arguments: [key])?.count ?? 0
                    }
                }
            }
            let sample = watch.stop()
            precondition(bytes == work.reduce(0) { $0 + $1.payload.count }, "a bare load found another entry")
            return sample
        }.value
    }
}

@MainActor
private func runAtSize(_ payloads: [Data], _ settings: Settings, into report: inout Report) async {
    let runs = max(settings.runs, 1)
    let smallSize = settings.sqliteEntries
    let largeSize = settings.sqliteLargeEntries
    let operations = settings.sqliteEntries
    let chunk = max(operations / 10, 1)
    let edge = min(1_000, largeSize / 10)

    let (small, smallPath) = makeSQLiteCacheAndPath("small")
    _ = await fill(small, keys: (0..<smallSize).map(scopedKey), payloads: payloads)
    let (large, largePath) = makeSQLiteCacheAndPath("large")
    let filling = Stopwatch.start()
    let (firstSaves, lastSaves) = await fill(
        large, keys: (0..<largeSize).map(scopedKey), payloads: payloads, edge: edge)
    let fillTime = filling.stop().duration
    _ = await fill(large, keys: outsideKeys(settings.sqliteOutsideEntries), payloads: payloads)
    print(
        "sqlite-cache: filled \(largeSize.formatted) entries in \(String(format: "%.1f", milliseconds(fillTime))) ms")

    func perEntry(_ duration: Duration, _ count: Int) -> Double { duration.nanoseconds / 1e3 / Double(count) }
    let firstValue = perEntry(firstSaves, edge)
    let lastValue = perEntry(lastSaves, edge)
    report.add(
        Row(
            scenario: "sqlite-cache: save of a new key, last \(edge.formatted) of \(largeSize.formatted)",
            value: lastValue, unit: "µs/entry", baseline: "first \(edge.formatted)", baselineValue: firstValue,
            ratio: lastValue / firstValue))

    let smallSide = SizedCache(
        cache: small, path: smallPath, size: smallSize, payloads: payloads, picks: operations, seed: 1)
    let largeSide = SizedCache(
        cache: large, path: largePath, size: largeSize, payloads: payloads, picks: runs * operations, seed: 2)
    let sides = [smallSide, largeSide]
    // The library's two sides and SQLite's floor on the same two files take turns.
    let saves = await interleavedRounds(
        runs: runs, count: operations, chunk: chunk,
        sides: sides.map { side in { await side.saves($0) } } + sides.map { side in { await side.bareSaves($0) } })
    let loads = await interleavedRounds(
        runs: runs, count: operations, chunk: chunk,
        sides: sides.map { side in { await side.loads($0) } } + sides.map { side in { await side.bareLoads($0) } })
    for (name, rounds) in [("save replacing an entry", saves), ("load", loads)] {
        func figures(small: Int, large: Int) -> (small: Double, large: Double, ratios: [Double]) {
            let ratios = zip(rounds[large], rounds[small]).map { $0.duration.nanoseconds / $1.duration.nanoseconds }
            return (
                fastest(rounds[small]).nanoseconds(per: operations) / 1e3,
                fastest(rounds[large]).nanoseconds(per: operations) / 1e3, ratios
            )
        }
        let library = figures(small: 0, large: 1)
        let floor = figures(small: 2, large: 3)
        report.add(
            Row(
                scenario: "sqlite-cache: \(name) at \(largeSize.formatted)", value: library.large, unit: "µs/entry",
                allocationsPerOperation: fastest(rounds[1]).allocations(per: operations),
                baseline: "at \(smallSize.formatted)", baselineValue: library.small,
                ratio: library.large / library.small))
        report.add(
            Row(
                scenario: "sqlite-cache: \(name), SQLite's one statement, at \(largeSize.formatted)",
                value: floor.large, unit: "µs/entry", baseline: "at \(smallSize.formatted)", baselineValue: floor.small,
                ratio: floor.large / floor.small))
        report.add(
            Goal(
                name:
                    "sqlite-cache: \(name), per entry, at \(largeSize.formatted) entries vs at \(smallSize.formatted)",
                target: "<= 1.3x",
                measured: String(
                    format:
                        "%.2fx (median of %d rounds' ratios, %.2f–%.2fx; best %.1f µs vs %.1f µs); SQLite's one statement on the same files: %.2fx (%.2f–%.2fx; best %.1f µs vs %.1f µs)",
                    median(library.ratios), runs, library.ratios.min()!, library.ratios.max()!, library.large,
                    library.small, median(floor.ratios), floor.ratios.min()!, floor.ratios.max()!, floor.large,
                    floor.small),
                holds: median(library.ratios) <= 1.3))
    }

    // removeAll() of the scope, on this cache and on freshly filled ones.
    var removals: [(removal: Duration, longestLoad: Duration)] = [
        await timedScopeRemoval(large, size: largeSize, settings)
    ]
    for _ in 1..<max(settings.sqliteScopeRemovals, 1) {
        let fresh = makeSQLiteCache("scope")
        _ = await fill(fresh, keys: (0..<largeSize).map(scopedKey), payloads: payloads)
        _ = await fill(fresh, keys: outsideKeys(settings.sqliteOutsideEntries), payloads: payloads)
        removals.append(await timedScopeRemoval(fresh, size: largeSize, settings))
    }
    let values = removals.map { milliseconds($0.removal) }
    report.add(
        Row(
            scenario: "sqlite-cache: scoped(\"a/\").removeAll(), \(largeSize.formatted) in scope", value: values.min()!,
            unit: "ms", allocationsPerOperation: nil))
    // The loads that check the removal run while the rows are deleted in batches.
    report.add(
        Row(
            scenario: "sqlite-cache: longest load during the scope's batched deletion",
            value: removals.map { milliseconds($0.longestLoad) }.max()!, unit: "ms", allocationsPerOperation: nil))
    report.add(
        Goal(
            name:
                "sqlite-cache: removeAll() of a scope holding \(largeSize.formatted) entries (\(settings.sqliteOutsideEntries.formatted) outside it)",
            target: "< 200 ms",
            measured: String(
                format: "%.2f ms (the slowest of %d; all %@ ms)", values.max()!, values.count,
                values.map { String(format: "%.2f", $0) }.joined(separator: ", ")),
            holds: values.max()! < 200))
}

/// Times `cache.scoped("a/").removeAll()` from one task off the main actor, then checks that the
/// scope is empty and the entries outside it are there; returns the removal's time and the
/// longest of those checking loads, which run while the cache deletes the scope's rows in batches
/// (a call waits for at most one batch).
@MainActor
private func timedScopeRemoval(
    _ cache: SQLiteLoadableCache, size: Int, _ settings: Settings
) async -> (removal: Duration, longestLoad: Duration) {
    let outside = outsideKeys(settings.sqliteOutsideEntries)
    return await Task.detached {
        let scope = cache.scoped("a/")
        let watch = Stopwatch.start()
        do {
            try await scope.removeAll()
        } catch {
            fatalError("sqlite-cache benchmark: removeAll() of the scope failed: \(error)")
        }
        let duration = watch.stop().duration
        let clock = ContinuousClock()
        var longest = Duration.zero
        do {
            for index in randomIndices(100, below: size, seed: 3) {
                let start = clock.now
                let found = try await cache.load(key: scopedKey(index))
                longest = max(longest, clock.now - start)
                precondition(found == nil, "removeAll() of the scope left \(scopedKey(index))")
            }
            for key in outside {
                let start = clock.now
                let found = try await cache.load(key: key)
                longest = max(longest, clock.now - start)
                precondition(found != nil, "removeAll() of the scope removed \(key), outside it")
            }
        } catch {
            fatalError("sqlite-cache benchmark: checking the scope's removal failed: \(error)")
        }
        return (duration, longest)
    }.value
}

// MARK: - Against GRDB

/// One side of the GRDB comparison: a database, the same 1,000 keys in random order, and what
/// one save and one load do.
private protocol EntrySide: AnyObject, Sendable {
    /// `count` upserts, timed in one task off the main actor.
    func saves(_ count: Int) async -> Sample
    /// `count` reads by key, timed in one task off the main actor.
    func loads(_ count: Int) async -> Sample
}

/// The keys and payloads of the GRDB comparison, in the order a side saves and reads them.
private final class Workload: @unchecked Sendable {
    let keys: [String]
    let payloads: [Data]
    private let order: [Int]
    private var cursor = 0

    init(payloads: [Data], picks: Int) {
        self.payloads = payloads
        keys = payloads.indices.map { "item-\($0)" }
        order = randomIndices(picks, below: payloads.count, seed: 4)
    }

    /// The next `count` indices, each with a stamp of its own (each side has its own workload,
    /// and all draw the same sequence).
    func next(_ count: Int) -> [(index: Int, stamp: Int)] {
        (0..<count).map { _ in
            cursor += 1
            return (order[(cursor - 1) % order.count], cursor)
        }
    }
}

/// A `LoadableCache` called from one task: `save(_:key:)` and `load(key:)` awaited in turn.
///
/// - `SQLiteLoadableCache` (the library's side): per save (see `SQLiteCacheDatabase.save`) the key
///   made NFC (an ASCII check here), `BEGIN IMMEDIATE`, `SELECT size … WHERE key = ?`, the upsert
///   (`INSERT … ON CONFLICT (key) DO UPDATE`, `used` from `SELECT max(used)` through its index),
///   `UPDATE usage … RETURNING bytes`, `COMMIT`; per load, without a limit, `SELECT data,
///   saved_at, version, metadata … WHERE key = ?` in autocommit, the row's types checked and
///   copied into a `CachedEntry`.
/// - `FileLoadableCache` (context): a file per key, `open`, `write`, `rename` per save, `open`,
///   `read` per load: where the cache's own part of the persistence round trip stands.
private final class CacheSide: EntrySide {
    let cache: any LoadableCache
    let workload: Workload

    private init(cache: any LoadableCache, workload: Workload) async {
        self.cache = cache
        self.workload = workload
        let (keys, payloads) = (workload.keys, workload.payloads)
        await Task.detached {
            for (key, payload) in zip(keys, payloads) {
                do {
                    try await cache.save(cachedEntry(payload), key: key)
                } catch {
                    fatalError("sqlite-cache benchmark: saving \(key) failed: \(error)")
                }
            }
        }.value
    }

    /// The library's side, in a fresh database.
    static func library(workload: Workload) async -> CacheSide {
        await CacheSide(cache: makeSQLiteCache("library"), workload: workload)
    }

    /// The file cache's side, in a fresh folder.
    static func files(workload: Workload) async -> CacheSide {
        await CacheSide(cache: FileLoadableCache(directory: scratchPath("file-side")), workload: workload)
    }

    func saves(_ count: Int) async -> Sample {
        let indices = workload.next(count)
        let (cache, keys, payloads) = (cache, workload.keys, workload.payloads)
        return await Task.detached {
            let watch = Stopwatch.start()
            for (index, stamp) in indices {
                do {
                    try await cache.save(cachedEntry(payloads[index], stamp: stamp), key: keys[index])
                } catch {
                    fatalError("sqlite-cache benchmark: saving \(keys[index]) failed: \(error)")
                }
            }
            return watch.stop()
        }.value
    }

    func loads(_ count: Int) async -> Sample {
        let indices = workload.next(count)
        let (cache, keys, payloads) = (cache, workload.keys, workload.payloads)
        return await Task.detached {
            var bytes = 0
            let watch = Stopwatch.start()
            for (index, _) in indices {
                do {
                    bytes += try await cache.load(key: keys[index])?.data.count ?? 0
                } catch {
                    fatalError("sqlite-cache benchmark: loading \(keys[index]) failed: \(error)")
                }
            }
            let sample = watch.stop()
            precondition(bytes == indices.reduce(0) { $0 + payloads[$1.index].count }, "a load found another entry")
            return sample
        }.value
    }
}

/// GRDB 7's `DatabaseQueue` on its own file, opened with `journalMode = .wal` (GRDB then sets
/// `journal_mode = WAL` and `synchronous = NORMAL`) and a 10 s busy timeout, as the library does.
/// Statements are GRDB's cached statements, with `StatementArguments`.
///
/// - `.sameStatements`: the library's file setup (`auto_vacuum = INCREMENTAL` before the first
///   table, `journal_size_limit = 4194304`) and schema (`entries` with its `used` index, `usage`),
///   and per save the same four statements in one `BEGIN IMMEDIATE` transaction
///   (`writeWithoutTransaction` + `inTransaction(.immediate)`): the old size, the upsert with
///   `max(used) + 1`, the usage update `RETURNING bytes`. Per load the same `SELECT` in autocommit
///   (`inDatabase`, no transaction), its row read through a cursor (no row copy) into a
///   `CachedEntry`. The same SQL work as the library: the difference is the Swift around it.
/// - `.plain`: the issue's minimum, a table `(key TEXT PRIMARY KEY, data BLOB, saved_at REAL,
///   version INTEGER)` and nothing else, one upsert per `BEGIN IMMEDIATE` transaction, the same
///   read. What the library's bookkeeping (sizes, recency, usage) costs on top.
/// - `.idiomatic`: the same statements as `.sameStatements`, called as an app calls GRDB from
///   Swift concurrency: `try await queue.write { }` (a deferred transaction) and `try await
///   queue.read { }` (which adds `PRAGMA query_only` on and off and a savepoint around the read),
///   each a hop to GRDB's queue and back.
private final class GRDBEntries: EntrySide {
    enum Kind {
        case sameStatements, plain, idiomatic
    }

    let queue: DatabaseQueue
    let kind: Kind
    let workload: Workload

    init(_ kind: Kind, workload: Workload) {
        self.kind = kind
        self.workload = workload
        let path = scratchPath("grdb-\(kind)")
        mustSucceed("creating \(path.path)") {
            try FileManager.default.createDirectory(at: path, withIntermediateDirectories: true)
        }
        var configuration = Configuration()
        configuration.journalMode = .wal
        configuration.busyMode = .timeout(10)
        if kind != .plain {
            // Runs before GRDB sets up WAL, on an empty file: as the library's first open.
            configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL") }
        }
        queue = mustSucceed("opening GRDB at \(path.path)") {
            try DatabaseQueue(path: path.appendingPathComponent("grdb.sqlite").path, configuration: configuration)
        }
        mustSucceed("creating GRDB's schema") {
            try queue.writeWithoutTransaction { db in
                if kind == .plain {
                    try db.execute(
                        sql: """
                            CREATE TABLE entries (
                                key TEXT NOT NULL PRIMARY KEY,
                                data BLOB NOT NULL,
                                saved_at REAL NOT NULL,
                                version INTEGER NOT NULL
                            )
                            """)
                } else {
                    try db.execute(sql: "PRAGMA journal_size_limit = 4194304")
                    try db.execute(
                        sql: """
                            CREATE TABLE entries (
                                key TEXT NOT NULL PRIMARY KEY,
                                data BLOB NOT NULL,
                                saved_at REAL NOT NULL,
                                version INTEGER NOT NULL,
                                metadata BLOB,
                                size INTEGER NOT NULL,
                                used INTEGER NOT NULL
                            );
                            CREATE INDEX entries_by_use ON entries (used);
                            CREATE TABLE usage (id INTEGER PRIMARY KEY CHECK (id = 0), bytes INTEGER NOT NULL);
                            INSERT INTO usage (id, bytes) VALUES (0, 0);
                            """)
                    let autoVacuum = try Int.fetchOne(db, sql: "PRAGMA auto_vacuum")
                    precondition(autoVacuum == 2, "GRDB's file is not in incremental auto-vacuum")
                }
                let journal = try String.fetchOne(db, sql: "PRAGMA journal_mode")
                let synchronous = try Int.fetchOne(db, sql: "PRAGMA synchronous")
                precondition(journal == "wal" && synchronous == 1, "GRDB's file is not in WAL with synchronous NORMAL")
            }
            // The same entries as the other sides before the clock starts.
            for index in workload.payloads.indices {
                try save(cachedEntry(workload.payloads[index]), key: workload.keys[index])
            }
        }
    }

    static let upsertSQL = """
        INSERT INTO entries (key, data, saved_at, version, metadata, size, used)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, coalesce((SELECT max(used) FROM entries), 0) + 1)
        ON CONFLICT (key) DO UPDATE SET data = excluded.data, saved_at = excluded.saved_at,
            version = excluded.version, metadata = excluded.metadata, size = excluded.size,
            used = excluded.used
        """
    static let plainUpsertSQL = """
        INSERT INTO entries (key, data, saved_at, version) VALUES (?1, ?2, ?3, ?4)
        ON CONFLICT (key) DO UPDATE SET data = excluded.data, saved_at = excluded.saved_at,
            version = excluded.version
        """
    static let selectSQL = "SELECT data, saved_at, version FROM entries WHERE key = ?1"

    /// The library's four statements, inside a transaction the caller opened.
    private static func upsertAsTheLibraryDoes(_ entry: CachedEntry, key: String, in db: Database) throws {
        let size = Int64(key.utf8.count) + Int64(entry.data.count)
        let oldSize =
            try Int64.fetchOne(db.cachedStatement(sql: "SELECT size FROM entries WHERE key = ?1"), arguments: [key])
            ?? 0
        try db.cachedStatement(sql: upsertSQL).execute(
            arguments: [
                key, entry.data, entry.savedAt.timeIntervalSinceReferenceDate, entry.version, nil as Data?, size,
            ])
        let total = try Int64.fetchOne(
            db.cachedStatement(sql: "UPDATE usage SET bytes = bytes + ?1 WHERE id = 0 RETURNING bytes"),
            arguments: [size - oldSize])
        precondition(total != nil, "no usage row")
    }

    /// The entry of `key`, read through a cursor over the cached statement.
    private static func read(key: String, in db: Database) throws -> CachedEntry? {
        let rows = try GRDB.Row.fetchCursor(db.cachedStatement(sql: selectSQL), arguments: [key])
        guard let row = try rows.next() else { return nil }
        return CachedEntry(
            data: row[0], savedAt: Date(timeIntervalSinceReferenceDate: row[1]), version: row[2])
    }

    func save(_ entry: CachedEntry, key: String) throws {
        switch kind {
        case .sameStatements, .idiomatic:
            try queue.writeWithoutTransaction { db in
                try db.inTransaction(.immediate) {
                    try Self.upsertAsTheLibraryDoes(entry, key: key, in: db)
                    return .commit
                }
            }
        case .plain:
            try queue.writeWithoutTransaction { db in
                try db.inTransaction(.immediate) {
                    try db.cachedStatement(sql: Self.plainUpsertSQL).execute(
                        arguments: [key, entry.data, entry.savedAt.timeIntervalSinceReferenceDate, entry.version])
                    return .commit
                }
            }
        }
    }

    func saves(_ count: Int) async -> Sample {
        let indices = workload.next(count)
        let (keys, payloads) = (workload.keys, workload.payloads)
        return await Task.detached { [self] in
            let watch = Stopwatch.start()
            for (index, stamp) in indices {
                do {
                    if kind == .idiomatic {
                        let (entry, key) = (cachedEntry(payloads[index], stamp: stamp), keys[index])
                        try await queue.write { db in try Self.upsertAsTheLibraryDoes(entry, key: key, in: db) }
                    } else {
                        try save(cachedEntry(payloads[index], stamp: stamp), key: keys[index])
                    }
                } catch {
                    fatalError("sqlite-cache benchmark: GRDB saving \(keys[index]) failed: \(error)")
                }
            }
            return watch.stop()
        }.value
    }

    func loads(_ count: Int) async -> Sample {
        let indices = workload.next(count)
        let (keys, payloads) = (workload.keys, workload.payloads)
        return await Task.detached { [self] in
            var bytes = 0
            let watch = Stopwatch.start()
            for (index, _) in indices {
                do {
                    let key = keys[index]
                    let found: CachedEntry?
                    if kind == .idiomatic {
                        found = try await queue.read { db in try Self.read(key: key, in: db) }
                    } else {
                        found = try queue.inDatabase { db in try Self.read(key: key, in: db) }
                    }
                    bytes += found?.data.count ?? 0
                } catch {
                    fatalError("sqlite-cache benchmark: GRDB loading \(keys[index]) failed: \(error)")
                }
            }
            let sample = watch.stop()
            precondition(bytes == indices.reduce(0) { $0 + payloads[$1.index].count }, "a load found another entry")
            return sample
        }.value
    }
}

@MainActor
private func runAgainstGRDB(_ payloads: [Data], _ settings: Settings, into report: inout Report) async {
    let runs = max(settings.runs, 1)
    let count = payloads.count
    let chunk = max(count / 10, 1)
    func workload() -> Workload { Workload(payloads: payloads, picks: count) }
    let names = [
        "SQLiteLoadableCache", "GRDB, the library's statements", "GRDB, plain upsert (the issue's schema)",
        "GRDB, same statements, async write/read", "FileLoadableCache (context)",
    ]
    let sides: [any EntrySide] = [
        await CacheSide.library(workload: workload()), GRDBEntries(.sameStatements, workload: workload()),
        GRDBEntries(.plain, workload: workload()), GRDBEntries(.idiomatic, workload: workload()),
        await CacheSide.files(workload: workload()),
    ]
    let saves = await interleavedRounds(
        runs: runs, count: count, chunk: chunk, sides: sides.map { side in { await side.saves($0) } })
    let loads = await interleavedRounds(
        runs: runs, count: count, chunk: chunk, sides: sides.map { side in { await side.loads($0) } })

    func perEntry(_ sample: Sample) -> Double { sample.nanoseconds(per: count) / 1e3 }
    for (what, rounds) in [("upsert", saves), ("read by key", loads)] {
        let baseline = perEntry(fastest(rounds[1]))
        for side in sides.indices {
            let best = fastest(rounds[side])
            report.add(
                Row(
                    scenario: "sqlite-cache: \(what), \(names[side])", value: perEntry(best), unit: "µs/entry",
                    allocationsPerOperation: best.allocations(per: count),
                    baseline: side == 1 ? nil : names[1], baselineValue: side == 1 ? nil : baseline,
                    ratio: side == 1 ? nil : perEntry(best) / baseline))
        }
    }
    // Upsert + read of each round, against each GRDB side of the same round.
    func totals(_ side: Int) -> [Double] {
        zip(saves[side], loads[side]).map { ($0.duration + $1.duration).nanoseconds / 1e3 / Double(count) }
    }
    let library = totals(0)
    for side in 1..<sides.count {
        let grdb = totals(side)
        let ratios = zip(library, grdb).map { $0 / $1 }
        report.add(
            Row(
                scenario: "sqlite-cache: upsert + read, median round, vs \(names[side])", value: median(library),
                unit: "µs/entry", baseline: names[side], baselineValue: median(grdb), ratio: median(ratios)))
        guard side == 1 else { continue }
        report.add(
            Goal(
                name:
                    "sqlite-cache: upsert + read by key of \(count.formatted) × 1 KB entries, SQLiteLoadableCache vs GRDB 7 doing the same statements",
                target: "<= 1.2x",
                measured: String(
                    format:
                        "%.2fx (median of %d rounds' ratios, %.2f–%.2fx; median round %.1f µs vs %.1f µs per entry)",
                    median(ratios), runs, ratios.min()!, ratios.max()!, median(library), median(grdb)),
                holds: median(ratios) <= 1.2))
    }
}
