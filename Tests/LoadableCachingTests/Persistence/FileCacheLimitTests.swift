import Foundation
import LoadableCaching
import LoadableCachingTestSupport
import LoadableTesting
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

// MARK: - maxBytes

/// What `FileLoadableCache(directory:maxBytes:)` does beyond the rules it shares with the SQLite
/// cache (in `LoadableSQLiteTests/CacheContract/CacheContractLimitTests.swift`): the usage is
/// counted in memory from one scan at the start, the recency order survives a restart (file
/// times), a lowered limit evicts at the first use, and `removeEntries(savedBefore:)` leaves files
/// that are not entries alone.
@Suite("FileLoadableCache: the usage's scan, a restart, a lowered limit")
struct FileCacheLimitTests {
    /// A 100-byte entry file under a one-letter key: 40 + 1 + 59.
    static func entry(_ first: UInt8, savedAt: Double = 1_000) -> CachedEntry {
        FileCacheFixtures.entry(count: 59, first: first, savedAt: savedAt)
    }

    static func names(_ keys: String...) -> [String] {
        keys.map { FileLoadableCache.fileName(forKey: $0) }
    }

    @Test("a restart (every object gone) scans once and keeps the recency order of loads and saves")
    func restartKeepsOrder() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let startsBefore = FileLoadableCache.startCount(directory: directory)
        var order: [String] = []
        do {
            let cache = FileLoadableCache(directory: directory, maxBytes: 10_000)
            for key in ["a", "b", "c", "d"] { try await cache.save(Self.entry(1), key: key) }
            _ = try await cache.load(key: "b")
            _ = try await cache.load(key: "a")
            try await cache.save(Self.entry(2), key: "c")
            order = try await cache.usage().namesLeastRecentFirst
            #expect(order == Self.names("d", "b", "a", "c"))
            // Another object on the folder shares the state: no second scan.
            _ = try await FileLoadableCache(directory: directory).usage()
            #expect(FileLoadableCache.startCount(directory: directory) == startsBefore + 1)
        }
        FileLoadableCache.forgetFolder(directory: directory)
        let next = FileLoadableCache(directory: directory, maxBytes: 10_000)
        #expect(try await next.usage().namesLeastRecentFirst == order)
        #expect(try await next.usage().totalBytes == 400)
        #expect(FileLoadableCache.startCount(directory: directory) == startsBefore + 2)
    }

    @Test("a limit lowered since the last launch evicts the least recently used at the first use")
    func loweredLimitEvictsAtStart() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        do {
            let cache = FileLoadableCache(directory: directory, maxBytes: 1_000)
            for key in ["a", "b", "c", "d"] { try await cache.save(Self.entry(1), key: key) }
            _ = try await cache.load(key: "a")
        }
        FileLoadableCache.forgetFolder(directory: directory)
        let lowered = FileLoadableCache(directory: directory, maxBytes: 250)
        #expect(try await lowered.usage().namesLeastRecentFirst == Self.names("d", "a"))
        #expect(FileCacheFixtures.names(in: lowered.entriesDirectory) == Self.names("a", "d").sorted())
    }

    @Test("removeEntries(savedBefore:) reads the dates in the headers and leaves files that are not entries alone")
    func savedBefore() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory, maxBytes: 10_000)
        try await cache.save(Self.entry(1, savedAt: 10), key: "old")
        var withMetadata = Self.entry(2, savedAt: 19.5)
        withMetadata.metadata = ["ETag": "\"x\""]
        try await cache.save(withMetadata, key: "older")
        try await cache.save(Self.entry(3, savedAt: 20), key: "kept")
        try FileCacheFixtures.write(Array("not an entry".utf8), to: FileCacheFixtures.file(of: "junk", in: cache))

        try await cache.removeEntries(savedBefore: Date(timeIntervalSinceReferenceDate: 20))
        #expect(
            FileCacheFixtures.names(in: cache.entriesDirectory)
                == [FileLoadableCache.fileName(forKey: "junk"), FileLoadableCache.fileName(forKey: "kept")].sorted())
        // The junk file, written from outside after the start, is not counted.
        var sizes = FileCacheFixtures.entryFileSizes(in: cache.entriesDirectory)
        sizes[FileLoadableCache.fileName(forKey: "junk")] = nil
        #expect(try await cache.usage().totalBytes == sizes.values.reduce(0, +))
    }
}

// MARK: - Temporary files and removeAll

/// Temporary files are named `.tmp-<pid>-<random>`; the start's scan and `removeAll()` remove those
/// of processes that are not running, of this process's id (an earlier process's), and names
/// that do not parse, never those of another running process. `removeAll()` removes every file it
/// can, keeps the folder, and reports each one it could not with the path and the reason.
@Suite("FileLoadableCache: temporary files and removeAll")
struct FileCacheTemporaryFileTests {
    /// A process that runs until its standard input is closed.
    static func runningProcess() throws -> (Process, Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/cat")
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        return (process, input)
    }

    /// The id of a process that ran and ended.
    static func endedProcessID() throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "exit 0"]
        try process.run()
        process.waitUntilExit()
        return process.processIdentifier
    }

    /// Temporary files of a dead, a live other, this process, and one that does not parse.
    static func makeTemporaryFiles(in folder: URL, livePID: Int32) throws -> (live: String, stale: [String]) {
        let live = ".tmp-\(livePID)-abc"
        let stale = [".tmp-\(try endedProcessID())-1f", ".tmp-\(getpid())-2e", ".tmp-deadbeef", ".tmp-x-y-z"]
        for name in [live] + stale { try FileCacheFixtures.write([1, 2, 3], to: folder.appendingPathComponent(name)) }
        return (live, stale)
    }

    @Test("the start removes temporary files of ended processes, of this pid and unparsable ones, not a live one's")
    func startRemovesStaleTemporaryFiles() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let (process, input) = try Self.runningProcess()
        defer {
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
        }
        let folder = directory.appendingPathComponent("v1")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let (live, _) = try Self.makeTemporaryFiles(in: folder, livePID: process.processIdentifier)
        try FileCacheFixtures.write(
            FileCacheFixtures.encoded(FileCacheFixtures.entry(count: 5), key: "k"),
            to: folder.appendingPathComponent(FileLoadableCache.fileName(forKey: "k")))

        let cache = FileLoadableCache(directory: directory)
        #expect(try await cache.load(key: "k") == FileCacheFixtures.entry(count: 5))
        #expect(FileCacheFixtures.names(in: folder) == [live, FileLoadableCache.fileName(forKey: "k")])
        #expect(try await cache.usage().totalBytes == 40 + 1 + 5)

        // A save's own temporary file carries this process's id.
        try await cache.save(FileCacheFixtures.entry(count: 1), key: "k")
        #expect(FileCacheFixtures.names(in: folder).count == 2)
    }

    @Test("removeAll removes entries and stale temporary files, keeps a live process's write and the folder")
    func removeAllKeepsLiveWrites() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let (process, input) = try Self.runningProcess()
        defer {
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
        }
        let cache = FileLoadableCache(directory: directory, maxBytes: 1_000)
        for key in ["a", "b"] { try await cache.save(FileCacheFixtures.entry(count: 10), key: key) }
        let (live, _) = try Self.makeTemporaryFiles(in: cache.entriesDirectory, livePID: process.processIdentifier)
        try await cache.removeAll()
        #expect(FileCacheFixtures.names(in: cache.entriesDirectory) == [live])
        #expect(try await cache.usage().totalBytes == 0)
    }

    @Test("removeAll with an entry it cannot remove removes every other one and names the path and the reason")
    func removeAllReportsWhatItCouldNotRemove() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory, maxBytes: 1_000)
        for key in ["a", "b", "c"] { try await cache.save(FileCacheFixtures.entry(count: 10), key: key) }
        // Another writer's folder under an entry's name: unlink cannot remove it.
        let blocked = FileCacheFixtures.file(of: "blocked", in: cache)
        try FileManager.default.createDirectory(
            at: blocked.appendingPathComponent("inner"), withIntermediateDirectories: true)

        let error = await FileCacheFixtures.caught { try await cache.removeAll() }
        #expect(FileCacheFixtures.kind(of: error) == "removeAllFailed")
        let text = error.map { "\($0)" } ?? ""
        #expect(text.contains("1 file could not be removed: unlink(\(blocked.path)) failed: "), "\(text)")
        #expect(text.contains("(errno \(EISDIR))") || text.contains("(errno \(EPERM))"), "\(text)")
        #expect(FileCacheFixtures.names(in: cache.entriesDirectory) == [blocked.lastPathComponent])
        #expect(try await cache.usage().totalBytes == 0)
        for key in ["a", "b", "c"] { #expect(try await cache.load(key: key) == nil) }
    }
}
