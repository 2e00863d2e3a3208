import Foundation
import Loadable
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

// MARK: - Metadata

/// `CachedEntry.metadata` is kept in the file (format `LDC2`, its pairs sorted with lengths, under
/// the checksum) and given back by `load`; an entry without metadata is written as `LDC1`, and a
/// `LDC1` file (what earlier releases wrote) reads with empty metadata.
@Suite("FileLoadableCache: metadata and the LDC2 format")
struct FileCacheMetadataTests {
    static let entry = CachedEntry(
        data: Data([1, 2, 3]), savedAt: Date(timeIntervalSinceReferenceDate: 99.5), version: 4,
        metadata: ["ETag": "\"abc\"", "Last-Modified": "Wed, 21 Oct 2026 07:28:00 GMT", "": "", "ü": "🙂"])

    @Test("metadata is kept in the documented LDC2 bytes, the same bytes for the same metadata")
    func roundTrip() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory)
        try await cache.save(Self.entry, key: "k")
        #expect(try await cache.load(key: "k") == Self.entry)
        let bytes = try FileCacheFixtures.bytes(at: FileCacheFixtures.file(of: "k", in: cache))
        #expect(Array(bytes[0..<4]) == Array("LDC2".utf8))
        #expect(bytes == FileCacheFixtures.encodedWithMetadata(Self.entry, key: "k"))
        #expect(try await cache.usage().totalBytes == bytes.count)
        // A relaunch reads it, and saving it again writes the same bytes.
        let next = FileLoadableCache(directory: directory)
        let loaded = try #require(try await next.load(key: "k"))
        try await next.save(loaded, key: "k")
        #expect(try FileCacheFixtures.bytes(at: FileCacheFixtures.file(of: "k", in: cache)) == bytes)
    }

    @Test("an LDC1 file (an earlier release's) reads with empty metadata; an entry without metadata is LDC1")
    func earlierFormat() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory)
        try FileManager.default.createDirectory(at: cache.entriesDirectory, withIntermediateDirectories: true)
        var old = Self.entry
        old.metadata = [:]
        try FileCacheFixtures.write(
            FileCacheFixtures.encoded(old, key: "old"), to: FileCacheFixtures.file(of: "old", in: cache))
        let loaded = try #require(try await cache.load(key: "old"))
        #expect(loaded.metadata.isEmpty)
        #expect(loaded == old)
        try await cache.save(old, key: "new")
        #expect(
            try FileCacheFixtures.bytes(at: FileCacheFixtures.file(of: "new", in: cache))
                == FileCacheFixtures.encoded(old, key: "new"))
    }

    @Test("a changed metadata byte fails the checksum; metadata lengths that do not add up are corrupt")
    func corruptMetadata() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory)
        try await cache.save(Self.entry, key: "k")
        let file = FileCacheFixtures.file(of: "k", in: cache)
        var bytes = try FileCacheFixtures.bytes(at: file)
        bytes[44 + 1 + 6] ^= 0x10
        try FileCacheFixtures.write(bytes, to: file)
        let flipped = await FileCacheFixtures.caught { _ = try await cache.load(key: "k") }
        #expect(FileCacheFixtures.kind(of: flipped) == "corrupt")

        // A pair count one too high, with a checksum that matches: the lengths are wrong.
        var entry = Self.entry
        entry.metadata = ["a": "b"]
        var good = FileCacheFixtures.encodedWithMetadata(entry, key: "k")
        good[45] = 2
        let checksum = FileCacheFixtures.fnv1a(good[0..<36] + good[44...])
        good.replaceSubrange(36..<44, with: FileCacheFixtures.littleEndian(checksum))
        try FileCacheFixtures.write(good, to: file)
        let miscounted = await FileCacheFixtures.caught { _ = try await cache.load(key: "k") }
        #expect(FileCacheFixtures.kind(of: miscounted) == "corrupt")
        if case .corrupt(_, let reason) = miscounted { #expect(reason.contains("metadata"), "\(reason)") }
    }
}

// MARK: - Keys as Swift compares them

/// Keys are compared as Swift compares strings: the file's name comes from the key's NFC form, the
/// key inside the file is compared with `==`, and a file an earlier release wrote under another
/// form's name (the raw UTF-8 of an NFD key) is found and moved to its NFC name.
@Suite("FileLoadableCache: keys in NFC form")
struct FileCacheKeyFormTests {
    static let composed = "caf\u{E9}/r\u{E9}sum\u{E9}"
    static let decomposed = "cafe\u{301}/re\u{301}sume\u{301}"

    @Test("a key typed two ways has one file, named by its NFC form, with the NFC key inside")
    func twoSpellingsOneFile() async throws {
        #expect(Self.composed == Self.decomposed)
        #expect(FileLoadableCache.fileName(forKey: Self.decomposed) == FileCacheFixtures.hex(Self.composed.utf8))
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory)
        try await cache.save(FileCacheFixtures.entry(count: 5), key: Self.decomposed)
        try await cache.save(FileCacheFixtures.entry(count: 6), key: Self.composed)
        #expect(FileCacheFixtures.names(in: cache.entriesDirectory) == [FileCacheFixtures.hex(Self.composed.utf8)])
        #expect(
            try FileCacheFixtures.bytes(at: FileCacheFixtures.file(of: Self.decomposed, in: cache))
                == FileCacheFixtures.encoded(FileCacheFixtures.entry(count: 6), key: Self.composed))
    }

    @Test("a file written under the raw name of an NFD key is found by either spelling and moved to its NFC name")
    func oldNameMigrates() async throws {
        for spelling in [Self.composed, Self.decomposed] {
            let directory = FileCacheFixtures.temporaryDirectory()
            defer { FileCacheFixtures.removeDirectory(directory) }
            let folder = directory.appendingPathComponent("v1")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let entry = FileCacheFixtures.entry(count: 9, first: 3)
            // As an earlier release wrote it: the NFD key's bytes, in the name and in the file.
            let oldName = FileCacheFixtures.hex(Self.decomposed.utf8)
            try FileCacheFixtures.write(
                FileCacheFixtures.encoded(entry, key: Self.decomposed), to: folder.appendingPathComponent(oldName))

            let cache = FileLoadableCache(directory: directory, maxBytes: 10_000)
            #expect(try await cache.load(key: spelling) == entry)
            #expect(FileCacheFixtures.names(in: folder) == [FileCacheFixtures.hex(Self.composed.utf8)])
            #expect(try await cache.usage().namesLeastRecentFirst == [FileCacheFixtures.hex(Self.composed.utf8)])
            #expect(try await cache.load(key: Self.decomposed) == entry)
        }
    }

    @Test("a save of a key whose old-named file is there removes the old file")
    func saveReplacesOldName() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let folder = directory.appendingPathComponent("v1")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try FileCacheFixtures.write(
            FileCacheFixtures.encoded(FileCacheFixtures.entry(count: 1), key: Self.decomposed),
            to: folder.appendingPathComponent(FileCacheFixtures.hex(Self.decomposed.utf8)))
        let cache = FileLoadableCache(directory: directory)
        try await cache.save(FileCacheFixtures.entry(count: 2), key: Self.composed)
        #expect(FileCacheFixtures.names(in: folder) == [FileCacheFixtures.hex(Self.composed.utf8)])
        #expect(try await cache.usage().totalBytes == 40 + Self.composed.utf8.count + 2)
    }
}

// MARK: - Errors that name the path

/// Folder errors name the path and the system's reason; a read that fails for a reason other than
/// the bytes is `loadFailed` and leaves the file alone; an invalid `maxBytes` stops the program
/// with a message naming it.
@Suite("FileLoadableCache: errors name the path and the reason")
struct FileCacheErrorTests {
    @Test("a directory path that is a file: the save names mkdir, the v1 path and 'Not a directory'")
    func folderPathIsAFile() async throws {
        let parent = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(parent) }
        try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
        let directory = parent.appendingPathComponent("file")
        try FileCacheFixtures.write([1], to: directory)
        let cache = FileLoadableCache(directory: directory)
        let error = await FileCacheFixtures.caught { try await cache.save(FileCacheFixtures.entry(count: 1), key: "k") }
        #expect(FileCacheFixtures.kind(of: error) == "saveFailed")
        let text = error.map { "\($0)" } ?? ""
        #expect(text.contains("mkdir(\(directory.path)/v1) failed: Not a directory (errno \(ENOTDIR))"), "\(text)")
        #expect(!text.contains("NSCocoaErrorDomain"))
    }

    @Test("too many open files: load is loadFailed naming the path, the file stays and loads afterwards")
    func tooManyOpenFiles() async {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        // In a process of its own: the open-file limit is the process's.
        await #expect(processExitsWith: .success) { [path = directory.path as String] in
            let cache = FileLoadableCache(directory: URL(fileURLWithPath: path, isDirectory: true))
            let entry = FileCacheFixtures.entry(count: 10)
            try await cache.save(entry, key: "k")
            // A low limit, so that running out takes few descriptors.
            #if canImport(Glibc)
                let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
            #else
                let resource = RLIMIT_NOFILE
            #endif
            var limit = rlimit()
            #expect(getrlimit(resource, &limit) == 0)
            limit.rlim_cur = min(limit.rlim_cur, 256)
            #expect(setrlimit(resource, &limit) == 0)
            var descriptors: [Int32] = []
            while true {
                let descriptor = open("/dev/null", O_RDONLY)
                if descriptor < 0 { break }
                descriptors.append(descriptor)
            }
            let error = await FileCacheFixtures.caught { _ = try await cache.load(key: "k") }
            for descriptor in descriptors { close(descriptor) }
            #expect(FileCacheFixtures.kind(of: error) == "loadFailed")
            #expect("\(error.map { "\($0)" } ?? "")".contains("(errno \(EMFILE))"))
            #expect(try await cache.load(key: "k") == entry)
        }
    }

    @Test("maxBytes 0 or negative stops the program naming maxBytes and the valid range", arguments: [0, -1])
    func invalidMaxBytes(maxBytes: Int) async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            [maxBytes = maxBytes as Int] in
            _ = FileLoadableCache(directory: URL(fileURLWithPath: "/tmp/unused"), maxBytes: maxBytes)
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("FileLoadableCache: maxBytes must be > 0 or nil, got \(maxBytes)"))
        }
    }
}

// MARK: - One folder, one order

/// A loadable, persisted through a fresh `FileLoadableCache(directory:)` (the README's inline
/// pattern), changed and released, then made again right away with another fresh object on the
/// same folder: the restore reads the last change, because both objects share the folder's queue.
@Suite("FileLoadableCache: objects on one folder share one queue")
@MainActor
struct FileCacheSharedQueueTests {
    final class Counter: Loadable<Int> {
        override func doSync() {}
    }

    @Test("50 rounds: a loadable made again right after its predecessor's last change restores that change")
    func inlineCachesKeepOrder() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        for round in 0..<50 {
            do {
                let loadable = Counter()
                loadable.persist(in: FileLoadableCache(directory: directory), key: "counter")
                loadable.setContents(round)
            }
            // Made again at once, with another object on the folder: its restore is queued after
            // the save above.
            let again = Counter()
            let persistence = again.persist(in: FileLoadableCache(directory: directory), key: "counter")
            await persistence.saved()
            #expect(again.contents == round, "round \(round)")
        }
    }
}
