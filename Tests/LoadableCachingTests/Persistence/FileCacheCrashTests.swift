import Foundation
import LoadableCaching
import LoadableCachingTestSupport
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

/// Crash safety of `FileLoadableCache` with a real process: a child process saves two entries of
/// very different sizes (10 bytes and 200 KB) under one key, one after the other, and is killed
/// with SIGKILL at a random moment chosen by a seed. 20 times, the file left behind loads (with a
/// new `FileLoadableCache`, as the next launch would) as one of the two entries, whole; temporary
/// files a kill leaves behind are named `.tmp-<pid>-<random>` and removed by the next start (the
/// killed process is not running); a torn one made by the test afterwards does not disturb loads
/// or later saves, and `removeAll()` deletes it.
///
/// The child picks its moment in one of three ways (by the seed): after a random number of saves
/// and a random spin; while a temporary file is in the folder; or as soon as the entry's file is
/// seen with a size that is neither entry's (a torn write; never with writes renamed into place).
/// It never sleeps: a background thread spins (`sched_yield()`) and polls, then calls
/// `kill(getpid(), SIGKILL)` while the main loop keeps saving.
///
/// With eviction: a child saves entries of 0 to 1,199 bytes under 12 keys with `maxBytes: 3_000`
/// (most saves evict) and is killed after a seeded number of saves and spins, 8 times (a tenth
/// under ThreadSanitizer). The next start sees only whole entries (each loads as the entry its
/// key was given), counts exactly the entry files' sizes, leaves no temporary file, and, once an
/// object with the limit is used (evicting, if the kill came between a save and its eviction),
/// the total is within the limit, also after a further save.
@Suite("FileLoadableCache: a process killed while saving leaves a whole entry")
struct FileCacheCrashTests {
    static let key = "crash/ü"
    static let small = CachedEntry(
        data: Data(repeating: 0x5A, count: 10), savedAt: Date(timeIntervalSinceReferenceDate: 1_000), version: 1)
    static let large = CachedEntry(
        data: Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) }),
        savedAt: Date(timeIntervalSinceReferenceDate: 2_000.5), version: 2)
    /// The sizes of the two entries' files.
    static let wholeSizes = Set([small, large].map { 40 + key.utf8.count + $0.data.count })

    /// When the child kills itself.
    enum Moment: CustomStringConvertible {
        /// After `saves` saves, then `spins` yields of the thread.
        case afterSpinning(saves: Int, spins: Int)
        /// After `saves` saves, once a temporary file is seen in the folder, then `spins` yields.
        case whileTemporaryFileExists(saves: Int, spins: Int)
        /// After `saves` saves, once the entry's file has a size that is neither entry's.
        case whenEntryFileIsTorn(saves: Int)

        init(seed: UInt64) {
            var random = SeededRandomNumberGenerator(seed: seed)
            let saves = Int.random(in: 1...6, using: &random)
            switch seed % 3 {
            case 0: self = .afterSpinning(saves: saves, spins: Int.random(in: 0..<3_000, using: &random))
            case 1: self = .whileTemporaryFileExists(saves: saves, spins: Int.random(in: 0..<2, using: &random))
            default: self = .whenEntryFileIsTorn(saves: saves)
            }
        }

        var description: String {
            switch self {
            case .afterSpinning(let saves, let spins): "after \(saves) saves and \(spins) spins"
            case .whileTemporaryFileExists(let saves, let spins):
                "after \(saves) saves, with a temporary file, and \(spins) spins"
            case .whenEntryFileIsTorn(let saves): "after \(saves) saves, when the entry's file is torn"
            }
        }

        /// Waits for the moment (polling at most a few seconds), on the killing thread.
        func wait(progress: SaveProgress, folder: String, entryFile: String) {
            func spin(_ count: Int) {
                for _ in 0..<count { sched_yield() }
            }
            let polls = 200_000
            switch self {
            case .afterSpinning(let saves, let spins):
                progress.waitForSaves(saves)
                spin(spins)
            case .whileTemporaryFileExists(let saves, let spins):
                progress.waitForSaves(saves)
                for _ in 0..<polls {
                    let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
                    if names.contains(where: { $0.hasPrefix(".tmp-") }) { break }
                }
                spin(spins)
            case .whenEntryFileIsTorn(let saves):
                progress.waitForSaves(saves)
                var info = stat()
                for _ in 0..<polls {
                    if stat(entryFile, &info) == 0, !FileCacheCrashTests.wholeSizes.contains(Int(info.st_size)) {
                        break
                    }
                }
            }
        }
    }

    /// The child: saves the two entries in turn until its killing thread kills it.
    static func saveUntilKilled(directory: String, seed: UInt64) async throws {
        let cache = FileLoadableCache(directory: URL(fileURLWithPath: directory, isDirectory: true))
        try await cache.save(small, key: key)
        let progress = SaveProgress()
        progress.finishSave()
        let moment = Moment(seed: seed)
        let folder = cache.entriesDirectory.path
        let entryFile = folder + "/" + FileLoadableCache.fileName(forKey: key)
        let killer = Thread {
            moment.wait(progress: progress, folder: folder, entryFile: entryFile)
            kill(getpid(), SIGKILL)
        }
        killer.start()
        var index = 1
        while true {
            try await cache.save(index.isMultiple(of: 2) ? small : large, key: key)
            progress.finishSave()
            index += 1
        }
    }

    @Test("a process killed at a random moment while saving leaves one of the two entries, whole", arguments: 0..<20)
    func killedWhileSaving(iteration: Int) async throws {
        let seed = 0x00C0_FFEE &+ UInt64(iteration)
        let directory = FileCacheFixtures.temporaryDirectory("file-cache-crash")
        defer { FileCacheFixtures.removeDirectory(directory) }
        let context = "seed \(seed) (iteration \(iteration)), killed \(Moment(seed: seed))"

        await #expect(processExitsWith: .signal(SIGKILL), "\(context)") {
            [path = directory.path as String, seed = seed as UInt64] in
            try await FileCacheCrashTests.saveUntilKilled(directory: path, seed: seed)
        }

        // The next launch: a new cache object on the same directory.
        let cache = FileLoadableCache(directory: directory)
        let names = FileCacheFixtures.names(in: cache.entriesDirectory)
        let temporary = names.filter { $0.hasPrefix(".tmp-") }
        // A temporary file is named by its writer's process id and a random part.
        for name in temporary {
            let parts = name.split(separator: "-", omittingEmptySubsequences: false)
            #expect(
                parts.count == 3 && Int32(parts[1]) != nil && UInt64(parts[2], radix: 16) != nil, "\(context): \(name)")
        }
        #expect(
            names.filter { !$0.hasPrefix(".tmp-") } == [FileLoadableCache.fileName(forKey: Self.key)],
            "\(context): \(names)")
        let loaded: CachedEntry?
        do {
            loaded = try await cache.load(key: Self.key)
        } catch {
            Issue.record("\(context): the file left behind does not load: \(error)")
            return
        }
        // The start (the load above) removed the temporary files of the killed process.
        #expect(
            FileCacheFixtures.names(in: cache.entriesDirectory).allSatisfy { !$0.hasPrefix(".tmp-") }, "\(context)")
        let size = loaded.map { "\($0.data.count) bytes" } ?? "nil"
        #expect(loaded == Self.small || loaded == Self.large, "\(context): loaded \(size)")

        // Leftover temporary files disturb neither loads nor saves; removeAll deletes them. When
        // the kill left none, one is made as a kill in the middle of a write would leave it.
        if temporary.isEmpty {
            let torn = Array(FileCacheFixtures.encoded(Self.large, key: Self.key).prefix(70_000))
            try FileCacheFixtures.write(
                torn, to: cache.entriesDirectory.appendingPathComponent(".tmp-5eed\(iteration)"))
            #expect(try await cache.load(key: Self.key) == loaded, "\(context)")
        }
        let leftovers = FileCacheFixtures.names(in: cache.entriesDirectory).filter { $0.hasPrefix(".tmp-") }
        let next = FileCacheFixtures.entry(count: 77, first: 7, savedAt: 3_000, version: 3)
        try await cache.save(next, key: Self.key)
        try await cache.save(Self.small, key: "another")
        #expect(try await cache.load(key: Self.key) == next, "\(context)")
        #expect(try await cache.load(key: "another") == Self.small, "\(context)")
        #expect(
            FileCacheFixtures.names(in: cache.entriesDirectory).filter { $0.hasPrefix(".tmp-") } == leftovers,
            "\(context)")
        try await cache.removeAll()
        #expect(FileCacheFixtures.names(in: cache.entriesDirectory).isEmpty, "\(context)")
    }

    // MARK: - Eviction

    /// The limit of the evicting child: a few of its entries fit.
    static let evictionLimit = 3_000
    /// The keys the evicting child saves, in turn.
    static let evictionKeys = (0..<12).map { "evict/\($0)" }

    /// The entry of the evicting child's save `index`: 0 to 1,199 bytes, so that most saves evict
    /// one entry or more, and some (larger than the limit with the header) are not kept.
    static func evictionEntry(_ index: Int) -> CachedEntry {
        FileCacheFixtures.entry(count: index &* 373 % 1_200, first: UInt8(index % 256), version: index)
    }

    /// The child: saves entry after entry with a small limit until its killing thread kills it,
    /// after a seeded number of saves and spins (so, often, in the middle of an eviction).
    static func saveWithEvictionUntilKilled(directory: String, seed: UInt64) async throws {
        let cache = FileLoadableCache(
            directory: URL(fileURLWithPath: directory, isDirectory: true), maxBytes: evictionLimit)
        var random = SeededRandomNumberGenerator(seed: seed)
        let saves = Int.random(in: 1...40, using: &random)
        let spins = Int.random(in: 0..<500, using: &random)
        let progress = SaveProgress()
        progress.killProcess(afterSaves: saves, spins: spins)
        var index = 0
        while true {
            try await cache.save(evictionEntry(index), key: evictionKeys[index % evictionKeys.count])
            progress.finishSave()
            index += 1
        }
    }

    @Test(
        "a process killed while saving with maxBytes (often while evicting) leaves whole entries and a right total",
        arguments: 0..<8)
    func killedWhileEvicting(iteration: Int) async throws {
        guard iteration < StressScale.rounds(8) else { return }
        let seed = 0x00E7_1C7 &+ UInt64(iteration)
        let directory = FileCacheFixtures.temporaryDirectory("file-cache-evict-crash")
        defer { FileCacheFixtures.removeDirectory(directory) }
        let context = "seed \(seed) (iteration \(iteration))"

        await #expect(processExitsWith: .signal(SIGKILL), "\(context)") {
            [path = directory.path as String, seed = seed as UInt64] in
            try await FileCacheCrashTests.saveWithEvictionUntilKilled(directory: path, seed: seed)
        }

        // The next launch, without a limit first: its start counts the files as they are.
        let folder = directory.appendingPathComponent("v1")
        let unbounded = FileLoadableCache(directory: directory)
        let counted = try await unbounded.usage()
        var sizes = FileCacheFixtures.entryFileSizes(in: folder)
        #expect(FileCacheFixtures.names(in: folder).allSatisfy { !$0.hasPrefix(".tmp-") }, "\(context)")
        #expect(counted.totalBytes == sizes.values.reduce(0, +), "\(context)")
        #expect(Set(counted.namesLeastRecentFirst) == Set(sizes.keys), "\(context)")
        for key in Self.evictionKeys {
            do {
                if let loaded = try await unbounded.load(key: key) {
                    #expect(Self.evictionKeys[loaded.version % Self.evictionKeys.count] == key, "\(context): \(key)")
                    #expect(loaded == Self.evictionEntry(loaded.version), "\(context): \(key)")
                }
            } catch {
                Issue.record("\(context): \(key) does not load whole: \(error)")
            }
        }

        // The limit's first use evicts down to it (if the kill came between a save and its
        // eviction); then the total is the files' and within the limit.
        let bounded = FileLoadableCache(directory: directory, maxBytes: Self.evictionLimit)
        let after = try await bounded.usage()
        sizes = FileCacheFixtures.entryFileSizes(in: folder)
        #expect(after.totalBytes == sizes.values.reduce(0, +), "\(context)")
        #expect(after.totalBytes <= Self.evictionLimit, "\(context): \(after.totalBytes) bytes")
        try await bounded.save(Self.evictionEntry(7), key: "after")
        let final = try await bounded.usage()
        #expect(final.totalBytes == FileCacheFixtures.entryFileSizes(in: folder).values.reduce(0, +), "\(context)")
        #expect(final.totalBytes <= Self.evictionLimit, "\(context)")
    }
}
