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

// MARK: - Layout

/// The on-disk layout of `FileLoadableCache`, a format kept across releases: entries in
/// `directory/v1/`, named by the lowercase hexadecimal of the key's UTF-8 bytes, long keys cut to
/// 238 digits plus `-` and the FNV-1a 64 hash of the whole key (255 characters), the empty key
/// as `-`; no key names a path outside the folder, and keys whose names could meet never read
/// each other's entries.
@Suite("FileLoadableCache: file names and layout")
@MainActor
struct FileCacheLayoutTests {
    @Test("an entry is a file in directory/v1 named by the hexadecimal of its key")
    func entryFileInV1() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory)
        #expect(cache.directory == directory)
        #expect(cache.entriesDirectory == directory.appendingPathComponent("v1", isDirectory: true))
        #expect(FileLoadableCache.fileName(forKey: "hello") == "68656c6c6f")
        try await cache.save(FileCacheFixtures.entry(count: 3), key: "hello")
        #expect(FileCacheFixtures.names(in: directory) == ["v1"])
        #expect(FileCacheFixtures.names(in: cache.entriesDirectory) == ["68656c6c6f"])
    }

    @Test("a key with slashes, dot-dots and unicode stays inside v1 as one hexadecimal name")
    func hostileKeyStaysInside() async throws {
        let parent = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(parent) }
        let directory = parent.appendingPathComponent("cache", isDirectory: true)
        let cache = FileLoadableCache(directory: directory)
        let keys = ["../../escape", "/abs/path", "a/b", "..", ".", "日本語/../ü", "C:\\windows", "~/x", "\0nul"]
        for (index, key) in keys.enumerated() {
            let name = FileLoadableCache.fileName(forKey: key)
            #expect(!name.contains("/"), "\(key)")
            #expect(name == FileCacheFixtures.hex(key.utf8), "\(key)")
            try await cache.save(FileCacheFixtures.entry(count: 4, first: UInt8(index)), key: key)
        }
        #expect(FileCacheFixtures.names(in: parent) == ["cache"])
        #expect(FileCacheFixtures.names(in: directory) == ["v1"])
        #expect(
            FileCacheFixtures.names(in: cache.entriesDirectory)
                == keys.map { FileLoadableCache.fileName(forKey: $0) }.sorted())
        for (index, key) in keys.enumerated() {
            #expect(try await cache.load(key: key) == FileCacheFixtures.entry(count: 4, first: UInt8(index)), "\(key)")
        }
    }

    @Test("127 bytes: a 254-digit name; 128 bytes: 238 digits, '-' and the 16-digit FNV-1a of the key")
    func nameLengthBoundary() async throws {
        let fits = String(repeating: "k", count: 127)
        let fitsName = FileLoadableCache.fileName(forKey: fits)
        #expect(fitsName.count == 254)
        #expect(fitsName == String(repeating: "6b", count: 127))

        // FNV-1a 64 of "a", the published test vector: the hash below is the standard one.
        #expect(FileCacheFixtures.fnv1a("a".utf8) == 0xaf63_dc4c_8601_ec8c)
        for key in [
            String(repeating: "k", count: 128), String(repeating: "k", count: 126) + "é",
            "é" + String(repeating: "k", count: 126),
        ] {
            let bytes = Array(key.utf8)
            #expect(bytes.count == 128)
            let name = FileLoadableCache.fileName(forKey: key)
            #expect(name.utf8.count == 255, "\(key)")
            let hash = String(FileCacheFixtures.fnv1a(bytes), radix: 16)
            let expected =
                FileCacheFixtures.hex(bytes[..<119]) + "-" + String(repeating: "0", count: 16 - hash.count) + hash
            #expect(name == expected)
        }

        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory)
        let long = String(repeating: "k", count: 128)
        try await cache.save(FileCacheFixtures.entry(count: 5, first: 1), key: fits)
        try await cache.save(FileCacheFixtures.entry(count: 5, first: 2), key: long)
        #expect(try await cache.load(key: fits) == FileCacheFixtures.entry(count: 5, first: 1))
        #expect(try await cache.load(key: long) == FileCacheFixtures.entry(count: 5, first: 2))
        #expect(FileCacheFixtures.names(in: cache.entriesDirectory).map(\.utf8.count).sorted() == [254, 255])
        // A key of 10,000 characters too.
        let veryLong = String((0..<10_000).map { Character(UnicodeScalar(UInt8(97 + $0 % 26))) })
        #expect(FileLoadableCache.fileName(forKey: veryLong).utf8.count == 255)
    }

    @Test("two long keys with the same first 119 bytes get different names and keep their own entries")
    func longKeysSharingAPrefix() async throws {
        let prefix = String(repeating: "p", count: 119)
        let first = prefix + String(repeating: "A", count: 40)
        let second = prefix + String(repeating: "B", count: 40)
        let firstName = FileLoadableCache.fileName(forKey: first)
        let secondName = FileLoadableCache.fileName(forKey: second)
        #expect(firstName != secondName)
        #expect(firstName.prefix(239) == secondName.prefix(239))

        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory)
        try await cache.save(FileCacheFixtures.entry(count: 8, first: 10), key: first)
        try await cache.save(FileCacheFixtures.entry(count: 9, first: 20), key: second)
        #expect(try await cache.load(key: first) == FileCacheFixtures.entry(count: 8, first: 10))
        #expect(try await cache.load(key: second) == FileCacheFixtures.entry(count: 9, first: 20))
        try await cache.remove(key: first)
        #expect(try await cache.load(key: first) == nil)
        #expect(try await cache.load(key: second) == FileCacheFixtures.entry(count: 9, first: 20))
    }

    @Test("the empty key's file is '-', a name no other key has ('-' is '2d', '2d' is '3264')")
    func emptyKey() async throws {
        #expect(FileLoadableCache.fileName(forKey: "") == "-")
        #expect(FileLoadableCache.fileName(forKey: "-") == "2d")
        #expect(FileLoadableCache.fileName(forKey: "2d") == "3264")
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory)
        for key in ["", "-", "2d"] { try await cache.save(FileCacheFixtures.entry(count: 2), key: key) }
        #expect(FileCacheFixtures.names(in: cache.entriesDirectory) == ["-", "2d", "3264"])
        try await cache.remove(key: "")
        #expect(FileCacheFixtures.names(in: cache.entriesDirectory) == ["2d", "3264"])
    }

    @Test("names are lowercase hexadecimal (and '-'), at most 255 bytes, one per key, for 500 random keys")
    func namesOfRandomKeys() {
        var random = SeededRandomNumberGenerator(seed: 0xF11E_4A3E)
        let scalars: [UnicodeScalar] = ["A", "Z", "a", "/", ".", "-", "\u{FF}", "é", "日", "🙂", "\u{7F}", "\u{0}"]
        var names: [String: String] = [:]
        for _ in 0..<500 {
            let length = Int.random(in: 0...200, using: &random)
            let key = String(String.UnicodeScalarView((0..<length).map { _ in scalars.randomElement(using: &random)! }))
            let name = FileLoadableCache.fileName(forKey: key)
            #expect(name.allSatisfy { "0123456789abcdef-".contains($0) }, "\(key)")
            #expect(name == name.lowercased())
            #expect(name.utf8.count <= 255)
            if key.utf8.count <= 127 {
                #expect(name == (key.isEmpty ? "-" : FileCacheFixtures.hex(key.utf8)))
            }
            if let earlier = names[name] { #expect(earlier == key, "two keys share the name \(name)") }
            names[name] = key
        }
    }
}

// MARK: - Round trips

/// What `save`, `load`, `remove` and `removeAll` of `FileLoadableCache` do to the files (the rules
/// every cache keeps are in `LoadableSQLiteTests/CacheContract/CacheContractTests.swift`):
/// `removeAll` deletes every file in the `v1` folder, stray temporary files too, and keeps the
/// folder; the directory with its parents is made on the first save (not before); a folder deleted
/// from outside is made again.
@Suite("FileLoadableCache: the files of save, load, remove, removeAll")
@MainActor
struct FileCacheRoundTripTests {
    @Test("the directory and its parents are made on the first save, not by loads or removes")
    func directoryMadeOnFirstSave() async throws {
        let root = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(root) }
        let directory = root.appendingPathComponent("a/b/c", isDirectory: true)
        let cache = FileLoadableCache(directory: directory)
        #expect(try await cache.load(key: "k") == nil)
        try await cache.remove(key: "k")
        try await cache.removeAll()
        #expect(!FileCacheFixtures.exists(root))
        try await cache.save(FileCacheFixtures.entry(count: 1), key: "k")
        #expect(FileCacheFixtures.names(in: directory) == ["v1"])
        #expect(try await cache.load(key: "k") == FileCacheFixtures.entry(count: 1))
    }

    @Test("removeAll deletes every file in v1, stray temporary files too, and keeps the folder; saves work after it")
    func removeAllDeletesTheFiles() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory)
        for index in 0..<5 {
            try await cache.save(FileCacheFixtures.entry(count: index), key: "key \(index)")
        }
        try FileCacheFixtures.write([1, 2, 3], to: cache.entriesDirectory.appendingPathComponent(".tmp-deadbeef"))
        let neighbour = directory.appendingPathComponent("not-the-cache")
        try FileCacheFixtures.write([9], to: neighbour)

        try await cache.removeAll()
        #expect(FileCacheFixtures.names(in: cache.entriesDirectory).isEmpty)
        #expect(FileCacheFixtures.names(in: directory) == ["not-the-cache", "v1"])
        for index in 0..<5 {
            #expect(try await cache.load(key: "key \(index)") == nil)
        }
        try await cache.removeAll()

        try await cache.save(FileCacheFixtures.entry(count: 3, first: 3), key: "after")
        #expect(FileCacheFixtures.names(in: cache.entriesDirectory) == [FileLoadableCache.fileName(forKey: "after")])
        #expect(try await cache.load(key: "after") == FileCacheFixtures.entry(count: 3, first: 3))
        #expect(try await cache.load(key: "key 0") == nil)
    }

    @Test("a v1 folder deleted behind the cache's back is made again by the next save")
    func folderDeletedFromOutside() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory)
        try await cache.save(FileCacheFixtures.entry(count: 1), key: "first")
        try FileManager.default.removeItem(at: directory)
        #expect(try await cache.load(key: "first") == nil)
        try await cache.save(FileCacheFixtures.entry(count: 2), key: "second")
        #expect(try await cache.load(key: "second") == FileCacheFixtures.entry(count: 2))

        // Another cache object on the same directory clears it: this one saves again.
        try await FileLoadableCache(directory: directory).removeAll()
        try await cache.save(FileCacheFixtures.entry(count: 3), key: "third")
        #expect(try await cache.load(key: "third") == FileCacheFixtures.entry(count: 3))
        #expect(try await cache.load(key: "second") == nil)
    }
}

// MARK: - Format

/// The bytes `FileLoadableCache` writes are exactly format v1 as documented (magic `LDC1`,
/// little-endian version, save date bits, key and data lengths, FNV-1a 64 of all the rest, the
/// key, the data), a file in that format written by anyone else reads back, and entry files are
/// readable by the user only.
@Suite("FileLoadableCache: file format v1")
@MainActor
struct FileCacheFormatTests {
    @Test("the file is the documented header, the key and the data")
    func headerBytes() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory)
        let entry = CachedEntry(
            data: Data([0xDE, 0xAD, 0xBE, 0xEF, 0x00]),
            savedAt: Date(timeIntervalSinceReferenceDate: 123_456.789), version: 0x0102_0304_0506_0708)
        try await cache.save(entry, key: "hdr")
        let bytes = try FileCacheFixtures.bytes(at: FileCacheFixtures.file(of: "hdr", in: cache))
        #expect(bytes.count == 40 + 3 + 5)
        #expect(Array(bytes[0..<4]) == Array("LDC1".utf8))
        #expect(Array(bytes[4..<12]) == [0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01])
        #expect(Array(bytes[12..<20]) == FileCacheFixtures.littleEndian((123_456.789).bitPattern))
        #expect(Array(bytes[20..<24]) == [3, 0, 0, 0])
        #expect(Array(bytes[24..<32]) == [5, 0, 0, 0, 0, 0, 0, 0])
        #expect(
            Array(bytes[32..<40])
                == FileCacheFixtures.littleEndian(
                    FileCacheFixtures.fnv1a(Array(bytes[0..<32]) + Array("hdr".utf8) + [0xDE, 0xAD, 0xBE, 0xEF, 0])))
        #expect(Array(bytes[40..<43]) == Array("hdr".utf8))
        #expect(Array(bytes[43...]) == [0xDE, 0xAD, 0xBE, 0xEF, 0x00])
        #expect(bytes == FileCacheFixtures.encoded(entry, key: "hdr"))
    }

    @Test("a negative version, a unicode key and empty data are written as documented")
    func otherFieldValues() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory)
        let key = "ü/🙂"
        let entry = CachedEntry(data: Data(), savedAt: Date(timeIntervalSinceReferenceDate: -5.5), version: -2)
        try await cache.save(entry, key: key)
        let bytes = try FileCacheFixtures.bytes(at: FileCacheFixtures.file(of: key, in: cache))
        #expect(Array(bytes[4..<12]) == [0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(Array(bytes[20..<24]) == [7, 0, 0, 0])
        #expect(bytes == FileCacheFixtures.encoded(entry, key: key))
    }

    @Test("a file in format v1 written by someone else loads")
    func readsTheDocumentedFormat() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory)
        try FileManager.default.createDirectory(at: cache.entriesDirectory, withIntermediateDirectories: true)
        let entry = FileCacheFixtures.entry(count: 300, first: 5, savedAt: 777.25, version: 3)
        let key = String(repeating: "w", count: 200)
        try FileCacheFixtures.write(
            FileCacheFixtures.encoded(entry, key: key), to: FileCacheFixtures.file(of: key, in: cache))
        #expect(try await cache.load(key: key) == entry)
    }

    @Test("entry files are mode 0600")
    func fileMode() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory)
        try await cache.save(FileCacheFixtures.entry(count: 10), key: "a")
        try await cache.save(FileCacheFixtures.entry(count: 20), key: "a")
        try await cache.save(FileCacheFixtures.entry(count: 30), key: "")
        for name in FileCacheFixtures.names(in: cache.entriesDirectory) {
            var info = stat()
            #expect(stat(cache.entriesDirectory.path + "/" + name, &info) == 0)
            #expect(info.st_mode & 0o777 == 0o600, "\(name): \(String(info.st_mode & 0o777, radix: 8))")
        }
        #expect(FileCacheFixtures.names(in: cache.entriesDirectory).count == 2)
    }
}

// MARK: - Bad input

/// What `FileLoadableCache` does with files it did not write whole and with a file system that
/// refuses: garbage, a cut file, a changed byte are `corrupt` naming the key; another key's file
/// under this key's name is a miss; a folder in the file's place and an unwritable directory are
/// `loadFailed` / `saveFailed` naming the key (never a crash), and a failed save leaves the old
/// entry whole with no temporary file.
@Suite("FileLoadableCache: bad files and refusing file systems")
@MainActor
struct FileCacheBadInputTests {
    /// A cache in a new directory, with its v1 folder made.
    func makeCache() throws -> (FileLoadableCache, URL) {
        let directory = FileCacheFixtures.temporaryDirectory()
        let cache = FileLoadableCache(directory: directory)
        try FileManager.default.createDirectory(at: cache.entriesDirectory, withIntermediateDirectories: true)
        return (cache, directory)
    }

    @Test("random bytes are corrupt, naming the key")
    func garbage() async throws {
        let (cache, directory) = try makeCache()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let key = "garbage key"
        var random = SeededRandomNumberGenerator(seed: 0x6A4B_A6E)
        for length in [1, 3, 39, 40, 41, 100, 5_000] {
            for withMagic in [false, true] {
                var bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
                if withMagic && length >= 4 { bytes.replaceSubrange(0..<4, with: Array("LDC1".utf8)) }
                try FileCacheFixtures.write(bytes, to: FileCacheFixtures.file(of: key, in: cache))
                let error = await FileCacheFixtures.caught { _ = try await cache.load(key: key) }
                #expect(FileCacheFixtures.kind(of: error) == "corrupt", "\(length) bytes")
                #expect(error?.key == key)
                #expect("\(error.map { "\($0)" } ?? "")".contains("\"garbage key\""))
            }
        }
    }

    @Test("a file cut short, in the header, the key or the data, is corrupt; so is one too long")
    func truncated() async throws {
        let (cache, directory) = try makeCache()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let key = "truncated"
        let entry = FileCacheFixtures.entry(count: 100, first: 1)
        try await cache.save(entry, key: key)
        let file = FileCacheFixtures.file(of: key, in: cache)
        let whole = try FileCacheFixtures.bytes(at: file)
        #expect(whole.count == 40 + 9 + 100)
        for length in [0, 1, 4, 12, 20, 32, 39, 40, 44, 49, 50, 99, whole.count - 1] {
            try FileCacheFixtures.write(Array(whole[..<length]), to: file)
            let error = await FileCacheFixtures.caught { _ = try await cache.load(key: key) }
            #expect(FileCacheFixtures.kind(of: error) == "corrupt", "cut at \(length)")
            #expect(error?.key == key)
        }
        try FileCacheFixtures.write(whole + [0], to: file)
        let error = await FileCacheFixtures.caught { _ = try await cache.load(key: key) }
        #expect(FileCacheFixtures.kind(of: error) == "corrupt")

        try FileCacheFixtures.write(whole, to: file)
        #expect(try await cache.load(key: key) == entry)
    }

    @Test("one changed byte of the version, the date, the key or the data fails the checksum: corrupt")
    func flippedByte() async throws {
        let (cache, directory) = try makeCache()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let key = "flipped"
        try await cache.save(FileCacheFixtures.entry(count: 64, first: 9), key: key)
        let file = FileCacheFixtures.file(of: key, in: cache)
        let whole = try FileCacheFixtures.bytes(at: file)
        for (position, bit) in [
            (4, 0), (11, 7), (12, 0), (19, 6), (40, 0), (46, 7), (47, 0), (47 + 31, 3), (whole.count - 1, 7),
        ] {
            var bytes = whole
            bytes[position] ^= 1 << bit
            try FileCacheFixtures.write(bytes, to: file)
            let error = await FileCacheFixtures.caught { _ = try await cache.load(key: key) }
            #expect(FileCacheFixtures.kind(of: error) == "corrupt", "byte \(position)")
            #expect(error?.key == key)
            if case .corrupt(_, let reason) = error { #expect(reason.contains("checksum"), "\(reason)") }
        }
    }

    @Test("another key's file under this key's name is a miss, not that key's data")
    func anotherKeysFile() async throws {
        let (cache, directory) = try makeCache()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let shared = String(repeating: "s", count: 119)
        let owner = shared + String(repeating: "1", count: 30)
        let other = shared + String(repeating: "2", count: 30)
        let entry = FileCacheFixtures.entry(count: 12, first: 3)
        try await cache.save(entry, key: owner)
        let bytes = try FileCacheFixtures.bytes(at: FileCacheFixtures.file(of: owner, in: cache))
        for key in [other, "short", ""] {
            try FileCacheFixtures.write(bytes, to: FileCacheFixtures.file(of: key, in: cache))
            #expect(try await cache.load(key: key) == nil, "\(key)")
        }
        #expect(try await cache.load(key: owner) == entry)
    }

    @Test("a folder where the file should be: load, save and remove fail naming the key, no crash")
    func folderInPlaceOfFile() async throws {
        let (cache, directory) = try makeCache()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let key = "folder"
        try FileManager.default.createDirectory(
            at: FileCacheFixtures.file(of: key, in: cache).appendingPathComponent("inside"),
            withIntermediateDirectories: true)

        let loadError = await FileCacheFixtures.caught { _ = try await cache.load(key: key) }
        #expect(FileCacheFixtures.kind(of: loadError) == "loadFailed")
        #expect(loadError?.key == key)
        let saveError = await FileCacheFixtures.caught {
            try await cache.save(FileCacheFixtures.entry(count: 1), key: key)
        }
        #expect(FileCacheFixtures.kind(of: saveError) == "saveFailed")
        #expect(saveError?.key == key)
        let removeError = await FileCacheFixtures.caught { try await cache.remove(key: key) }
        #expect(FileCacheFixtures.kind(of: removeError) == "removeFailed")
        #expect(removeError?.key == key)
        // No temporary file is left behind, and other keys still work.
        #expect(FileCacheFixtures.names(in: cache.entriesDirectory) == [FileLoadableCache.fileName(forKey: key)])
        try await cache.save(FileCacheFixtures.entry(count: 2), key: "other")
        #expect(try await cache.load(key: "other") == FileCacheFixtures.entry(count: 2))
    }

    @Test("a file where the v1 folder should be: save and load fail naming the key")
    func fileInPlaceOfFolder() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let cache = FileLoadableCache(directory: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try FileCacheFixtures.write([1], to: cache.entriesDirectory)
        let saveError = await FileCacheFixtures.caught {
            try await cache.save(FileCacheFixtures.entry(count: 1), key: "k")
        }
        #expect(FileCacheFixtures.kind(of: saveError) == "saveFailed")
        #expect(saveError?.key == "k")
        let loadError = await FileCacheFixtures.caught { _ = try await cache.load(key: "k") }
        #expect(FileCacheFixtures.kind(of: loadError) == "loadFailed")
        #expect(loadError?.key == "k")
        // removeAll deletes it, and the cache works again.
        try await cache.removeAll()
        try await cache.save(FileCacheFixtures.entry(count: 1), key: "k")
        #expect(try await cache.load(key: "k") == FileCacheFixtures.entry(count: 1))
    }

    @Test(
        "an unwritable folder: save fails naming the key and the old entry stays whole",
        .enabled("the file system refuses writes to a 0o500 folder (not as root)") {
            FileCacheFixtures.permissionsAreEnforced()
        })
    func unwritableFolder() async throws {
        let (cache, directory) = try makeCache()
        defer { FileCacheFixtures.removeDirectory(directory) }
        let old = FileCacheFixtures.entry(count: 30, first: 1)
        try await cache.save(old, key: "kept")
        let before = FileCacheFixtures.names(in: cache.entriesDirectory)

        #expect(chmod(cache.entriesDirectory.path, 0o500) == 0)
        let error = await FileCacheFixtures.caught {
            try await cache.save(FileCacheFixtures.entry(count: 5_000, first: 2), key: "kept")
        }
        #expect(FileCacheFixtures.kind(of: error) == "saveFailed")
        #expect(error?.key == "kept")
        #expect("\(error.map { "\($0)" } ?? "")".contains("\"kept\""))
        let newKeyError = await FileCacheFixtures.caught { try await cache.save(old, key: "new") }
        #expect(FileCacheFixtures.kind(of: newKeyError) == "saveFailed")
        #expect(newKeyError?.key == "new")
        #expect(try await cache.load(key: "kept") == old)
        #expect(FileCacheFixtures.names(in: cache.entriesDirectory) == before)

        // An unreadable entry file is a load failure naming the key.
        #expect(chmod(cache.entriesDirectory.path, 0o700) == 0)
        #expect(chmod(FileCacheFixtures.file(of: "kept", in: cache).path, 0o000) == 0)
        let loadError = await FileCacheFixtures.caught { _ = try await cache.load(key: "kept") }
        #expect(FileCacheFixtures.kind(of: loadError) == "loadFailed")
        #expect(loadError?.key == "kept")

        // A directory that cannot be made: the first save fails naming the key.
        let parent = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(parent) }
        try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
        #expect(chmod(parent.path, 0o500) == 0)
        let fresh = FileLoadableCache(directory: parent.appendingPathComponent("cache"))
        let firstError = await FileCacheFixtures.caught { try await fresh.save(old, key: "first") }
        #expect(FileCacheFixtures.kind(of: firstError) == "saveFailed")
        #expect(firstError?.key == "first")
    }

    @Test("a write that fails halfway (the file size limit) leaves the old entry whole and no temporary file")
    func writeFailsHalfway() async throws {
        let directory = FileCacheFixtures.temporaryDirectory()
        defer { FileCacheFixtures.removeDirectory(directory) }
        // In a process of its own: the size limit is the process's.
        await #expect(processExitsWith: .success) { [path = directory.path as String] in
            let cache = FileLoadableCache(directory: URL(fileURLWithPath: path, isDirectory: true))
            let old = FileCacheFixtures.entry(count: 100, first: 1)
            try await cache.save(old, key: "big")
            let names = FileCacheFixtures.names(in: cache.entriesDirectory)

            #if canImport(Glibc)
                let resource = __rlimit_resource_t(RLIMIT_FSIZE.rawValue)
            #else
                let resource = RLIMIT_FSIZE
            #endif
            var limit = rlimit()
            #expect(getrlimit(resource, &limit) == 0)
            let previous = limit
            limit.rlim_cur = 4_096
            signal(SIGXFSZ, SIG_IGN)
            #expect(setrlimit(resource, &limit) == 0)
            let error = await FileCacheFixtures.caught {
                try await cache.save(FileCacheFixtures.entry(count: 100_000, first: 2), key: "big")
            }
            limit = previous
            #expect(setrlimit(resource, &limit) == 0)

            #expect(FileCacheFixtures.kind(of: error) == "saveFailed")
            #expect(error?.key == "big")
            #expect(try await cache.load(key: "big") == old)
            #expect(FileCacheFixtures.names(in: cache.entriesDirectory) == names)
        }
    }
}
