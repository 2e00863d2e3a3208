import Foundation
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSQLite
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Crash safety of `SQLiteLoadableCache` with a real process: a child saves entries of 0 to
/// 30,000 bytes (many spanning overflow pages) under 9 keys, in a loop, with or without a limit
/// (every other seed: most saves then evict), and is killed with SIGKILL after a seeded number of
/// saves and a seeded spin of a killing thread, 20 times. The next open (a new object, as the next
/// launch) passes `PRAGMA integrity_check`, its kept total is the entries' sizes, every key loads
/// whole (the entry its key was given, by its version), at least the first save is there, and
/// with a limit the total is within it at once (eviction shares the save's transaction). The
/// children run one at a time, so that they never crowd out the rest of the test run.
@Suite(
    "SQLiteLoadableCache: a process killed while saving leaves whole entries and a sound database", .serialized)
struct SQLiteCacheCrashTests {
    static let keys = (0..<9).map { "crash/\($0)/ü" }
    static let limit = 60_000

    /// The entry of save `index`: its data depends on the index only, its version is the index.
    static func entry(_ index: Int) -> CachedEntry {
        let count = index &* 7_919 % 30_000
        var entry = CachedEntry(
            data: Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) }),
            savedAt: Date(timeIntervalSinceReferenceDate: Double(index) + 0.25), version: index)
        if index.isMultiple(of: 3) { entry.metadata = ["ETag": "\"\(index)\"", "é": "ü"] }
        return entry
    }

    /// The child: saves entry after entry until its killing thread kills it.
    static func saveUntilKilled(path: String, seed: UInt64) async throws {
        let cache = try SQLiteLoadableCache(
            path: URL(fileURLWithPath: path), maxBytes: seed.isMultiple(of: 2) ? limit : nil)
        var random = SeededRandomNumberGenerator(seed: seed)
        let saves = Int.random(in: 1...80, using: &random)
        let spins = Int.random(in: 0..<5_000, using: &random)
        let progress = SaveProgress()
        progress.killProcess(afterSaves: saves, spins: spins)
        var index = 0
        while true {
            try await cache.save(entry(index), key: keys[index % keys.count])
            progress.finishSave()
            index += 1
        }
    }

    @Test(
        "killed at a seeded moment while saving: the next open loads whole entries and passes integrity_check",
        arguments: 0..<20)
    func killedWhileSaving(iteration: Int) async throws {
        // Two kills under ThreadSanitizer, whose children start many times slower.
        guard iteration < StressScale.rounds(20) else { return }
        let seed = 0x5_0117_E &+ UInt64(iteration)
        let folder = FileCacheFixtures.temporaryDirectory("sqlite-cache-crash")
        defer { FileCacheFixtures.removeDirectory(folder) }
        let path = folder.appendingPathComponent("cache.sqlite")
        let context = "seed \(seed) (iteration \(iteration))"

        await #expect(processExitsWith: .signal(SIGKILL), "\(context)") {
            [path = path.path as String, seed = seed as UInt64] in
            try await SQLiteCacheCrashTests.saveUntilKilled(path: path, seed: seed)
        }

        // The next launch, without a limit: nothing is evicted by opening.
        let cache = try SQLiteLoadableCache(path: path)
        #expect(try await cache.integrityCheck() == ["ok"], "\(context)")
        var found = 0
        for key in Self.keys {
            do {
                guard let loaded = try await cache.load(key: key) else { continue }
                found += 1
                #expect(Self.keys[loaded.version % Self.keys.count] == key, "\(context): \(key)")
                #expect(loaded == Self.entry(loaded.version), "\(context): \(key) is not whole")
            } catch {
                Issue.record("\(context): \(key) does not load: \(error)")
            }
        }
        let usage = try await cache.usage()
        #expect(usage.keysLeastRecentFirst.count == found, "\(context)")
        if seed.isMultiple(of: 2) {
            #expect(usage.totalBytes <= Self.limit, "\(context): \(usage.totalBytes) bytes")
        } else {
            #expect(found >= 1, "\(context): the first save is lost")
        }
        // The database goes on: a save, a load, a removal.
        try await cache.save(Self.entry(1), key: "after")
        #expect(try await cache.load(key: "after") == Self.entry(1), "\(context)")
        try await cache.removeAll()
        #expect(try await cache.usage().totalBytes == 0, "\(context)")
    }
}

/// A file the system lets the cache only read, and a folder it may not write, need a user whose
/// permissions the system enforces: as root (where they are not), the child process takes the
/// `nobody` user first.
@Suite("SQLiteLoadableCache: a read-only file, a folder it may not write, and bad configuration")
struct SQLiteCachePermissionTests {
    /// In a child process: becomes `nobody` when running as root, so that permissions hold.
    static func dropRootPrivileges() -> Bool {
        guard geteuid() == 0 else { return true }
        return setgid(65_534) == 0 && setuid(65_534) == 0 && geteuid() == 65_534
    }

    /// The child: a read-only database file is moved aside and a fresh one started; a bad file in
    /// a folder the process may not write makes `init` throw, naming the path and the reason.
    static func checkReadOnly() async throws {
        guard dropRootPrivileges() else { return ChildReport.fail("could not become nobody") }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sqlite-ro-\(getpid())")
        defer { FileCacheFixtures.removeDirectory(folder) }
        let path = folder.appendingPathComponent("cache.sqlite")
        do {
            let cache = try SQLiteLoadableCache(path: path)
            try await cache.save(FileCacheFixtures.entry(count: 100), key: "k")
        }
        guard chmod(path.path, 0o444) == 0 else { return ChildReport.fail("chmod failed") }

        let cache = try SQLiteLoadableCache(path: path)
        let error = await FileCacheFixtures.caught { _ = try await cache.load(key: "k") }
        let text = error.map { "\($0)" } ?? "nil"
        guard case .corrupt? = error, text.contains(path.path), text.contains("reading only"),
            text.contains("moved to \(path.path).bad")
        else { return ChildReport.fail("read-only file: \(text)") }
        try await cache.save(FileCacheFixtures.entry(count: 7), key: "k")
        if try await cache.load(key: "k") != FileCacheFixtures.entry(count: 7) {
            ChildReport.fail("the fresh database does not keep a save")
        }

        // A bad file in a folder the process may not write: it cannot be moved aside.
        let locked = folder.appendingPathComponent("locked")
        try FileManager.default.createDirectory(at: locked, withIntermediateDirectories: true)
        let lockedPath = locked.appendingPathComponent("cache.sqlite")
        try FileCacheFixtures.write(Array(repeating: 0x41, count: 4_096), to: lockedPath)
        guard chmod(locked.path, 0o555) == 0 else { return ChildReport.fail("chmod of the folder failed") }
        do {
            _ = try SQLiteLoadableCache(path: lockedPath)
            ChildReport.fail("init did not throw for a bad file in a folder it may not write")
        } catch let error as SQLiteCacheError {
            if error.path != lockedPath.path || !error.message.contains("could not be moved aside")
                || !error.message.contains("Permission denied") || error.movedTo != nil
            {
                ChildReport.fail("unmovable file: \(error)")
            }
        }
        if try FileCacheFixtures.bytes(at: lockedPath) != Array(repeating: 0x41, count: 4_096) {
            ChildReport.fail("the file that could not be moved was changed")
        }
    }

    @Test("a read-only file is moved aside and reported; one that cannot be moved makes init throw")
    func readOnlyFile() async {
        let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
            try await SQLiteCachePermissionTests.checkReadOnly()
        }
        ChildReport.recordFailures(of: result, context: "read-only")
    }

    @Test("maxBytes 0 or negative stops the program naming maxBytes and the valid range", arguments: [0, -1])
    func invalidMaxBytes(maxBytes: Int) async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            [maxBytes = maxBytes as Int] in
            _ = try SQLiteLoadableCache(path: URL(fileURLWithPath: "/tmp/unused.sqlite"), maxBytes: maxBytes)
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("SQLiteLoadableCache: maxBytes must be > 0 or nil, got \(maxBytes)"))
        }
    }

    @Test("a path that is not a file URL stops the program naming path")
    func notAFileURL() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = try SQLiteLoadableCache(path: URL(string: "https://example.com/cache.sqlite")!)
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("SQLiteLoadableCache: path must be a file URL, got https://example.com/cache.sqlite"))
        }
    }
}

/// Calls started together: on one object (its actor takes them one at a time), and on two
/// objects on one file (SQLite's locking).
@Suite("SQLiteLoadableCache: calls started together, and two objects on one file")
struct SQLiteCacheConcurrencyTests {
    static func entry(key: Int, round: Int) -> CachedEntry {
        CachedEntry(
            data: Data((0..<(key * 37 % 3_000)).map { UInt8(truncatingIfNeeded: $0 ^ round) }),
            savedAt: Date(timeIntervalSinceReferenceDate: Double(round)), version: key)
    }

    /// Whether `loaded` is one of the entries saved under key `key`.
    static func isWhole(_ loaded: CachedEntry?, key: Int, rounds: Int) -> Bool {
        guard let loaded else { return true }
        return (0..<rounds).contains { loaded == entry(key: key, round: $0) }
    }

    @Test("500 saves and loads started together from a task group: every load is whole, every last save lands")
    func fiveHundredTogether() async throws {
        let folder = FileCacheFixtures.temporaryDirectory("sqlite-cache-together")
        defer { FileCacheFixtures.removeDirectory(folder) }
        let cache = try SQLiteLoadableCache(path: folder.appendingPathComponent("cache.sqlite"))
        let keys = 50
        let rounds = 5
        let torn = try await withThrowingTaskGroup(of: Bool.self) { group in
            for operation in 0..<500 {
                let key = operation / 2 % keys
                let round = operation / (2 * keys) % rounds
                group.addTask {
                    if operation.isMultiple(of: 2) {
                        try await cache.save(Self.entry(key: key, round: round), key: "k\(key)")
                        return false
                    }
                    return !Self.isWhole(try await cache.load(key: "k\(key)"), key: key, rounds: rounds)
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(torn == 0)
        for key in 0..<keys {
            let loaded = try await cache.load(key: "k\(key)")
            #expect(loaded != nil && Self.isWhole(loaded, key: key, rounds: rounds), "k\(key)")
        }
        #expect(try await cache.integrityCheck() == ["ok"])
    }

    @Test("two objects on one file: each reads the other's saves, together they keep one total within the limit")
    func twoObjectsOnOneFile() async throws {
        let folder = FileCacheFixtures.temporaryDirectory("sqlite-cache-two")
        defer { FileCacheFixtures.removeDirectory(folder) }
        let path = folder.appendingPathComponent("cache.sqlite")
        let limit = 40_000
        let first = try SQLiteLoadableCache(path: path, maxBytes: limit)
        let second = try SQLiteLoadableCache(path: path, maxBytes: limit)

        // One after the other: a save through one is read through the other.
        try await first.save(Self.entry(key: 1, round: 1), key: "shared")
        #expect(try await second.load(key: "shared") == Self.entry(key: 1, round: 1))
        try await second.save(Self.entry(key: 1, round: 2), key: "shared")
        #expect(try await first.load(key: "shared") == Self.entry(key: 1, round: 2))
        try await second.remove(key: "shared")
        #expect(try await first.load(key: "shared") == nil)

        // Together: 400 calls through both, saves of their own keys and loads of the other's.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for operation in 0..<400 {
                let (cache, other) = operation.isMultiple(of: 2) ? (first, "b") : (second, "a")
                let name = operation.isMultiple(of: 2) ? "a" : "b"
                let key = operation / 2 % 60
                group.addTask {
                    if operation % 4 < 2 {
                        try await cache.save(Self.entry(key: key, round: operation % 3), key: "\(name)\(key)")
                    } else {
                        let loaded = try await cache.load(key: "\(other)\(key)")
                        #expect(Self.isWhole(loaded, key: key, rounds: 3), "\(other)\(key)")
                    }
                }
            }
            try await group.waitForAll()
        }
        let usage = try await first.usage()
        #expect(usage.totalBytes <= limit)
        #expect(try await second.usage().totalBytes == usage.totalBytes)
        #expect(try await second.integrityCheck() == ["ok"])
        for key in usage.keysLeastRecentFirst {
            let loaded = try await second.load(key: key)
            #expect(loaded != nil && Self.isWhole(loaded, key: loaded?.version ?? -1, rounds: 3), "\(key)")
        }
    }
}

/// The crash story of a scope's removal with a real process: a child marks the scope `a/`
/// (1,500 entries) removed, saves an entry under it after the mark, then deletes the rows in
/// batches of 100, and is killed with SIGKILL after a seeded number of batches and a seeded spin
/// of a killing thread (so at any moment of the next batch), 10 times. The next open, in this
/// process, finds a sound file whose scope is still removed (no key of it loads, but the entry
/// saved after the mark), the entries outside it whole, the total the rows' sizes, and the
/// batches left to finish; they finish, and the usage is the entries outside plus the one saved
/// after the mark.
@Suite("SQLiteLoadableCache: a process killed between a scope's mark and its last batch", .serialized)
struct SQLiteCacheRemovalCrashTests {
    static let count = 1_500
    static let outside = 20
    static let batchRows = 100

    static func entry(_ index: Int) -> CachedEntry {
        contractEntry(index % 200 + 100, first: UInt8(truncatingIfNeeded: index), savedAt: Double(index))
    }

    /// The child: marks `a/` removed, saves `a/after`, then runs batches until killed.
    static func removeUntilKilled(path: String, seed: UInt64) async throws {
        let url = URL(fileURLWithPath: path)
        SQLiteLoadableCache.setRemovals(atPath: url, batchRows: batchRows, directRows: 0, isHeld: true)
        let cache = try SQLiteLoadableCache(path: url)
        var random = SeededRandomNumberGenerator(seed: seed)
        let steps = Int.random(in: 1...(count / batchRows), using: &random)
        let spins = Int.random(in: 0..<5_000, using: &random)
        let progress = SaveProgress()
        progress.killProcess(afterSaves: steps, spins: spins)
        try await cache.scoped("a/").removeAll()
        try await cache.save(entry(-1), key: "a/after")
        progress.finishSave()
        while try await cache.removeNextBatchNow() { progress.finishSave() }
        while true { progress.finishSave() }
    }

    @Test(
        "killed between the mark and the last batch: the next open still hides the scope and finishes",
        arguments: 0..<10)
    func killedWhileDeleting(iteration: Int) async throws {
        guard iteration < StressScale.rounds(10) else { return }
        let seed = 0x5C0_9E &+ UInt64(iteration)
        let folder = FileCacheFixtures.temporaryDirectory("sqlite-cache-removal-crash")
        defer { FileCacheFixtures.removeDirectory(folder) }
        let path = folder.appendingPathComponent("cache.sqlite")
        let context = "seed \(seed) (iteration \(iteration))"
        do {
            let cache = try SQLiteLoadableCache(path: path)
            for index in 0..<Self.count { try await cache.save(Self.entry(index), key: "a/\(index)") }
            for index in 0..<Self.outside { try await cache.save(Self.entry(index), key: "b/\(index)") }
        }

        await #expect(processExitsWith: .signal(SIGKILL), "\(context)") {
            [path = path.path as String, seed = seed as UInt64] in
            try await SQLiteCacheRemovalCrashTests.removeUntilKilled(path: path, seed: seed)
        }

        // The next launch, its batches held to look at the state the child left.
        SQLiteLoadableCache.setRemovals(atPath: path, isHeld: true)
        defer { SQLiteLoadableCache.setRemovals(atPath: path, isHeld: false) }
        let cache = try SQLiteLoadableCache(path: path)
        #expect(try await cache.integrityCheck() == ["ok"], "\(context)")
        let pending = try await cache.pendingRemovals()
        #expect(pending.ranges == 1 || pending == (0, 0, 0), "\(context): \(pending)")
        for index in 0..<Self.count {
            guard try await cache.load(key: "a/\(index)") != nil else { continue }
            Issue.record("\(context): a/\(index) is back")
            break
        }
        #expect(try await cache.load(key: "a/after") == Self.entry(-1), "\(context)")
        for index in 0..<Self.outside {
            #expect(try await cache.load(key: "b/\(index)") == Self.entry(index), "\(context): b/\(index)")
        }
        let kept = (0..<Self.outside).map { "b/\($0)" } + ["a/after"]
        let keptBytes = 7 + 99 + (0..<Self.outside).reduce(0) { $0 + "b/\($1)".utf8.count + $1 % 200 + 100 }
        #expect(try await cache.usage() == (keptBytes, kept), "\(context)")

        try await cache.finishRemovals()
        #expect(try await cache.pendingRemovals() == (0, 0, 0), "\(context)")
        #expect(try await cache.usage() == (keptBytes, kept), "\(context)")
        #expect(try await cache.integrityCheck() == ["ok"], "\(context)")
    }
}
