import Foundation
import LoadableCaching
import LoadableCachingTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// `FileLoadableCache.keys()`: what moving a file cache's entries to another cache starts from.
@Suite("FileLoadableCache.keys()")
struct FileCacheKeysTests {
    @Test("the keys of every entry, sorted, in NFC form: short, empty, unicode, cut long keys (from the header)")
    func everyKey() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory)
        #expect(try await cache.keys() == [])
        let long = String(repeating: "long/", count: 60)
        let keys = ["posts/1", "", "cafe\u{301}", long + "a", long + "b", "users/ü"]
        for (index, key) in keys.enumerated() {
            try await cache.save(FileCacheFixtures.entry(count: index), key: key)
        }
        // Files that are not entries are left out: a temporary file, a stray name, a cut name
        // whose header is not an entry's.
        try FileCacheFixtures.write([1, 2], to: cache.entriesDirectory.appendingPathComponent(".tmp-1-ab"))
        try FileCacheFixtures.write([1, 2], to: cache.entriesDirectory.appendingPathComponent("notes.txt"))
        let cutName =
            FileLoadableCache.fileName(forKey: long + "a").prefix(238) + "-" + String(repeating: "f", count: 16)
        try FileCacheFixtures.write([1, 2], to: cache.entriesDirectory.appendingPathComponent(String(cutName)))

        let expected = ["posts/1", "", "caf\u{e9}", long + "a", long + "b", "users/ü"].sorted()
        let found = try await cache.keys()
        #expect(found == expected)
        #expect(found.map { Array($0.utf8) } == expected.map { Array($0.utf8) })
        for key in found { #expect(try await cache.load(key: key) != nil, "\(key)") }
    }

    @Test("a folder that cannot be listed: loadFailed with an empty key, naming the path")
    func unlistable() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // A file where the v1 folder should be.
        try FileCacheFixtures.write([1], to: directory.appendingPathComponent("v1"))
        let cache = FileLoadableCache(directory: directory)
        let error = await FileCacheFixtures.caught { _ = try await cache.keys() }
        #expect(FileCacheFixtures.kind(of: error) == "loadFailed")
        #expect(error?.key == "")
        #expect("\(error.map { "\($0)" } ?? "")".contains(directory.path + "/v1"))
    }
}
