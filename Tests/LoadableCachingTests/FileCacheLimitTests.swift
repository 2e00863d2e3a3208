import Foundation
import LoadableCaching
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

/// `FileLoadableCache(directory:maxBytes:)`: the entry files' sizes add up to at most `maxBytes`;
/// a save that passes it removes the least recently used entries (by load or save); an entry
/// larger than the limit is not kept and removes the key's old entry; the usage is counted in
/// memory from one scan at the start, and the recency order survives a restart (file times).
@Suite("FileLoadableCache: maxBytes and least recently used eviction")
struct FileCacheLimitTests {
    /// A 100-byte entry file under a one-letter key: 40 + 1 + 59.
    static func entry(_ first: UInt8, savedAt: Double = 1_000) -> CachedEntry {
        FileCacheFixtures.entry(count: 59, first: first, savedAt: savedAt)
    }

    static func names(_ keys: String...) -> [String] {
        keys.map { FileLoadableCache.fileName(forKey: $0) }
    }

    @Test("a save past maxBytes removes the least recently used entries, by load or save, until under it")
    func evictsLeastRecentlyUsed() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory, maxBytes: 300)
        #expect(cache.maxBytes == 300)
        for (index, key) in ["a", "b", "c"].enumerated() { try await cache.save(Self.entry(UInt8(index)), key: key) }
        #expect(try await cache.usage().totalBytes == 300)
        _ = try await cache.load(key: "a")
        #expect(try await cache.usage().namesLeastRecentFirst == Self.names("b", "c", "a"))

        try await cache.save(Self.entry(3), key: "d")
        #expect(try await cache.load(key: "b") == nil)
        #expect(try await cache.usage().namesLeastRecentFirst == Self.names("c", "a", "d"))
        #expect(try await cache.usage().totalBytes == 300)

        // A bigger entry makes room by removing two.
        try await cache.save(FileCacheFixtures.entry(count: 159, first: 4), key: "e")
        #expect(try await cache.usage().namesLeastRecentFirst == Self.names("d", "e"))
        #expect(try await cache.usage().totalBytes == 300)
        #expect(
            FileCacheFixtures.entryFileSizes(in: cache.entriesDirectory)
                == [FileLoadableCache.fileName(forKey: "d"): 100, FileLoadableCache.fileName(forKey: "e"): 200])
        #expect(try await cache.load(key: "d") == Self.entry(3))
    }

    @Test("an entry larger than maxBytes is not kept, its key's old entry is removed, and the save does not throw")
    func oversizedEntry() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory, maxBytes: 300)
        try await cache.save(Self.entry(1), key: "a")
        try await cache.save(Self.entry(2), key: "b")
        try await cache.save(FileCacheFixtures.entry(count: 260), key: "a")
        #expect(try await cache.load(key: "a") == nil)
        #expect(try await cache.load(key: "b") == Self.entry(2))
        #expect(try await cache.usage().totalBytes == 100)
        #expect(FileCacheFixtures.names(in: cache.entriesDirectory) == Self.names("b"))
        // Exactly the limit fits.
        try await cache.save(FileCacheFixtures.entry(count: 259), key: "c")
        #expect(try await cache.usage().namesLeastRecentFirst == Self.names("c"))
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

    @Test("without maxBytes nothing is evicted, and the usage still counts every file")
    func unbounded() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory)
        #expect(cache.maxBytes == nil)
        for index in 0..<50 { try await cache.save(Self.entry(UInt8(index)), key: "\(index % 10)") }
        #expect(try await cache.usage().totalBytes == 1_000)
        #expect(FileCacheFixtures.names(in: cache.entriesDirectory).count == 10)
    }

    @Test("a save through one object and a load through another on the same folder share one order and one usage")
    func objectsShareTheFolder() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let first = FileLoadableCache(directory: directory, maxBytes: 200)
        let second = FileLoadableCache(directory: directory.appendingPathComponent("x/.."), maxBytes: 200)
        try await first.save(Self.entry(1), key: "a")
        try await second.save(Self.entry(2), key: "b")
        _ = try await second.load(key: "a")
        try await first.save(Self.entry(3), key: "c")
        #expect(try await first.load(key: "b") == nil)
        #expect(try await second.usage().namesLeastRecentFirst == Self.names("a", "c"))
        #expect(try await first.usage().totalBytes == 200)
    }

    @Test("removeEntries(savedBefore:) removes the entries saved before the date, by their headers")
    func savedBefore() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory, maxBytes: 10_000)
        try await cache.save(Self.entry(1, savedAt: 10), key: "old")
        var withMetadata = Self.entry(2, savedAt: 19.5)
        withMetadata.metadata = ["ETag": "\"x\""]
        try await cache.save(withMetadata, key: "older")
        try await cache.save(Self.entry(3, savedAt: 20), key: "kept")
        try await cache.save(Self.entry(4, savedAt: 30), key: String(repeating: "n", count: 200))
        try FileCacheFixtures.write(Array("not an entry".utf8), to: FileCacheFixtures.file(of: "junk", in: cache))

        try await cache.removeEntries(savedBefore: Date(timeIntervalSinceReferenceDate: 20))
        #expect(try await cache.load(key: "old") == nil)
        #expect(try await cache.load(key: "older") == nil)
        #expect(try await cache.load(key: "kept") == Self.entry(3, savedAt: 20))
        #expect(try await cache.load(key: String(repeating: "n", count: 200)) != nil)
        #expect(FileCacheFixtures.exists(FileCacheFixtures.file(of: "junk", in: cache)))
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

// MARK: - Prefixes and scopes

/// `removeEntries(keyPrefix:)` removes the entries whose keys start with the prefix (files picked
/// by the hexadecimal of the prefix, cut names checked by the key inside), entries of earlier
/// launches included; `scoped(_:)` views save under prefixed keys and clear only their own.
@Suite("FileLoadableCache: removeEntries(keyPrefix:) and scoped views")
struct FileCacheScopeTests {
    @Test("removeEntries(keyPrefix:) removes exactly the keys with the prefix, long and unicode ones too")
    func removeByPrefix() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let long = String(repeating: "l", count: 150)
        let removed = ["a/", "a/1", "a/é", "a/" + long, "a/" + long + "x"]
        let kept = ["a", "b/1", "A/1", "ab/1", "a\u{301}/1", "b/" + long, ""]
        do {
            let earlier = FileLoadableCache(directory: directory, maxBytes: 100_000)
            for key in removed + kept { try await earlier.save(FileCacheFixtures.entry(count: 3), key: key) }
        }
        let cache = FileLoadableCache(directory: directory, maxBytes: 100_000)
        try await cache.removeEntries(keyPrefix: "a/")
        for key in removed { #expect(try await cache.load(key: key) == nil, "\(key)") }
        for key in kept { #expect(try await cache.load(key: key) != nil, "\(key)") }
        #expect(try await cache.usage().namesLeastRecentFirst.count == kept.count)

        // A prefix longer than the kept part of cut names: the keys inside the files decide.
        try await cache.save(FileCacheFixtures.entry(count: 3), key: "b/" + long + "yes")
        try await cache.removeEntries(keyPrefix: "b/" + long + "y")
        #expect(try await cache.load(key: "b/" + long + "yes") == nil)
        #expect(try await cache.load(key: "b/" + long) != nil)
    }

    @Test("a scope saves under prefixed keys and its removeAll removes only its own, earlier launches' too")
    func scopedViews() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        do {
            let earlier = FileLoadableCache(directory: directory)
            try await earlier.scoped("posts/").save(FileCacheFixtures.entry(count: 1), key: "old")
        }
        let cache = FileLoadableCache(directory: directory, maxBytes: 10_000)
        let posts = cache.scoped("posts/")
        let users = cache.scoped("users/")
        try await posts.save(FileCacheFixtures.entry(count: 2), key: "1")
        try await users.save(FileCacheFixtures.entry(count: 3), key: "1")
        try await posts.scoped("drafts/").save(FileCacheFixtures.entry(count: 4), key: "1")
        #expect(try await cache.load(key: "posts/1") == FileCacheFixtures.entry(count: 2))
        #expect(try await cache.load(key: "posts/drafts/1") == FileCacheFixtures.entry(count: 4))
        #expect(try await users.load(key: "1") == FileCacheFixtures.entry(count: 3))

        try await posts.removeAll()
        for key in ["posts/old", "posts/1", "posts/drafts/1"] { #expect(try await cache.load(key: key) == nil) }
        #expect(try await users.load(key: "1") == FileCacheFixtures.entry(count: 3))
        #expect(try await cache.usage().totalBytes == 40 + 7 + 3)
    }
}
