package import Foundation
package import LoadableCaching
import LoadableTesting
package import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

// MARK: - Fixtures shared by the FileLoadableCache tests

/// Temporary directories, entries and the on-disk format written out independently of the cache's
/// own code, for the tests of `FileLoadableCache` (`FileLoadableCacheTests.swift`, `FileCacheCrashTests.swift` and
/// `CacheModelTests.swift`), and by the contract tests of every cache kind (`CacheContract*.swift`).
package enum FileCacheFixtures {
    /// A new directory path under the system's temporary directory; nothing is created.
    package static func temporaryDirectory(_ label: String = "file-cache") -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent(
            "\(label)-\(UUID().uuidString)", isDirectory: true)
    }

    /// Deletes `directory` and everything in it, making its folders writable first.
    package static func removeDirectory(_ directory: URL) {
        if let paths = FileManager.default.enumerator(atPath: directory.path) {
            for case let path as String in paths {
                chmod(directory.path + "/" + path, 0o700)
            }
        }
        chmod(directory.path, 0o700)
        try? FileManager.default.removeItem(at: directory)
    }

    /// The names in `directory`, sorted; empty when it does not exist.
    package static func names(in directory: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).sorted()
    }

    /// Whether something (a file or a folder) is at `url`.
    package static func exists(_ url: URL) -> Bool {
        FileManager.default.fileExists(atPath: url.path)
    }

    /// The bytes of the file at `url`.
    package static func bytes(at url: URL) throws -> [UInt8] {
        Array(try Data(contentsOf: url))
    }

    /// Replaces the file at `url` with `bytes`.
    package static func write(_ bytes: [UInt8], to url: URL) throws {
        try Data(bytes).write(to: url)
    }

    /// The file of `key` in `cache`.
    package static func file(of key: String, in cache: FileLoadableCache) -> URL {
        cache.entriesDirectory.appendingPathComponent(FileLoadableCache.fileName(forKey: key))
    }

    /// The bytes 0 to 255, again and again: the data of ``entry(count:first:savedAt:version:)``.
    private static let pattern = (0..<(256 + 200_000)).map { UInt8(truncatingIfNeeded: $0) }

    /// An entry whose data is `count` bytes (at most 200,000) counting up from `first`.
    package static func entry(count: Int, first: UInt8 = 0, savedAt: Double = 1_000, version: Int = 1) -> CachedEntry {
        CachedEntry(
            data: Data(pattern[Int(first)..<(Int(first) + count)]),
            savedAt: Date(timeIntervalSinceReferenceDate: savedAt), version: version)
    }

    /// The 64-bit FNV-1a hash, written here from its definition.
    package static func fnv1a<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        return hash
    }

    /// Lowercase hexadecimal of `bytes`, two digits a byte.
    package static func hex<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }

    /// `value`'s bytes, least significant first.
    package static func littleEndian<Value: FixedWidthInteger>(_ value: Value) -> [UInt8] {
        (0..<(Value.bitWidth / 8)).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) }
    }

    /// The file format v1 of `entry` under `key`, built from its documentation.
    package static func encoded(_ entry: CachedEntry, key: String) -> [UInt8] {
        let keyBytes = Array(key.utf8)
        let data = Array(entry.data)
        let header =
            Array("LDC1".utf8) + littleEndian(Int64(entry.version))
            + littleEndian(entry.savedAt.timeIntervalSinceReferenceDate.bitPattern)
            + littleEndian(UInt32(keyBytes.count)) + littleEndian(UInt64(data.count))
        return header + littleEndian(fnv1a(header + keyBytes + data)) + keyBytes + data
    }

    /// The file format `LDC2` of `entry` (with metadata) under `key`, built from its documentation.
    package static func encodedWithMetadata(_ entry: CachedEntry, key: String) -> [UInt8] {
        let keyBytes = Array(key.utf8)
        let data = Array(entry.data)
        var metadata = littleEndian(UInt32(entry.metadata.count))
        for (name, value) in entry.metadata.sorted(by: { $0.key < $1.key }) {
            metadata += littleEndian(UInt32(name.utf8.count)) + Array(name.utf8)
            metadata += littleEndian(UInt32(value.utf8.count)) + Array(value.utf8)
        }
        let header =
            Array("LDC2".utf8) + littleEndian(Int64(entry.version))
            + littleEndian(entry.savedAt.timeIntervalSinceReferenceDate.bitPattern)
            + littleEndian(UInt32(keyBytes.count)) + littleEndian(UInt64(data.count))
            + littleEndian(UInt32(metadata.count))
        return header + littleEndian(fnv1a(header + keyBytes + metadata + data)) + keyBytes + metadata + data
    }

    /// The size of the file of `entry` (without metadata) under `key`.
    package static func fileSize(_ entry: CachedEntry, key: String) -> Int {
        40 + key.precomposedStringWithCanonicalMapping.utf8.count + entry.data.count
    }

    /// The entry files in `folder` (not the temporary ones) and their sizes, by name.
    package static func entryFileSizes(in folder: URL) -> [String: Int] {
        var sizes: [String: Int] = [:]
        for name in names(in: folder) where !name.hasPrefix(".tmp-") {
            var info = stat()
            if stat(folder.path + "/" + name, &info) == 0 { sizes[name] = Int(info.st_size) }
        }
        return sizes
    }

    /// The case of `error`, by name.
    package static func kind(of error: LoadableCacheError?) -> String {
        switch error {
        case .corrupt: "corrupt"
        case .versionMismatch: "versionMismatch"
        case .decodingFailed: "decodingFailed"
        case .encodingFailed: "encodingFailed"
        case .loadFailed: "loadFailed"
        case .saveFailed: "saveFailed"
        case .removeFailed: "removeFailed"
        case .removeAllFailed: "removeAllFailed"
        case nil: "no error"
        }
    }

    /// The `LoadableCacheError` `body` throws, or `nil` (an issue is recorded for any other error).
    package static func caught(
        isolation: isolated (any Actor)? = #isolation, sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () async throws -> Void
    ) async -> LoadableCacheError? {
        do {
            try await body()
            return nil
        } catch let error as LoadableCacheError {
            return error
        } catch {
            Issue.record("not a LoadableCacheError: \(error)", sourceLocation: sourceLocation)
            return nil
        }
    }

    /// Whether a folder of mode 0o500 refuses a new file here: not when running as root (user id
    /// 0) with its power to override permissions, which is found by trying.
    package static func permissionsAreEnforced() -> Bool {
        let folder = temporaryDirectory("permission-probe")
        defer { removeDirectory(folder) }
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            return false
        }
        guard chmod(folder.path, 0o500) == 0 else { return false }
        let descriptor = open(folder.path + "/probe", O_WRONLY | O_CREAT | O_EXCL, 0o600)
        if descriptor >= 0 {
            close(descriptor)
            return false
        }
        return errno == EACCES
    }
}
