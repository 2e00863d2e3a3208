public import Foundation

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// A ``LoadableCache`` that keeps one file per key in a directory.
///
/// ```swift
/// let caches = FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask)[0]
/// let cache = FileLoadableCache(directory: caches.appendingPathComponent("loadables"))
/// ```
///
/// **Crash safety.** A save writes a temporary file in the same folder and renames it over the old
/// one, so a crash at any moment (a kill, a power cut after the rename reached the disk) leaves
/// the old entry or the new one, never a torn file. A file that is not a complete entry anyway (cut
/// short, overwritten by something else) is reported as ``LoadableCacheError/corrupt(key:reason:)``.
///
/// **Layout (an on-disk format, kept across releases).** Entries live in a `v1/` folder inside
/// `directory`. A file's name is the lowercase hexadecimal of its key's UTF-8 bytes, so no key can
/// name a path outside the folder and names never differ only in case. A key whose name would pass
/// 255 bytes (more than 127 bytes of UTF-8) is cut to 238 hexadecimal digits, followed by `-` and
/// 16 hexadecimal digits of a hash of the whole key; the empty key's file is `-`. Each file starts
/// with a 40-byte header (the magic `LDC1`, the version, the save date, the lengths of the key and
/// the data, and a checksum of the whole file), followed by the key and the data; the key in the file must match the
/// one asked for, so two long keys that share a name are a miss, never each other's data.
///
/// **Threads.** An actor: its reads and writes run off the main actor, one at a time. The
/// directory is created on the first save. Files are created readable by the user only.
public actor FileLoadableCache: LoadableCache {
    /// The directory given at init; entries are in its ``entriesDirectory``.
    public nonisolated let directory: URL
    /// The folder of this format's files: `directory/v1`.
    public nonisolated let entriesDirectory: URL
    private let folderPath: String
    private var folderExists = false

    /// Creates a cache in `directory`. Nothing is read or created until the first use.
    ///
    /// - Parameter directory: A directory of the app's own (for example in its caches directory);
    ///   it is created, with its parents, on the first save.
    public init(directory: URL) {
        self.directory = directory
        entriesDirectory = directory.appendingPathComponent("v1", isDirectory: true)
        folderPath = entriesDirectory.path
    }

    /// The name of the file that keeps `key`'s entry, inside ``entriesDirectory``.
    ///
    /// - Parameter key: A cache key; any string, including the empty one.
    /// - Returns: The lowercase hexadecimal of the key's UTF-8 bytes, cut and suffixed with a hash
    ///   when longer than 255 bytes; `-` for the empty key.
    public nonisolated static func fileName(forKey key: String) -> String {
        let bytes = Array(key.utf8)
        guard !bytes.isEmpty else { return "-" }
        if bytes.count * 2 <= maxNameLength { return hex(bytes[...]) }
        let kept = (maxNameLength - 17) / 2
        let hash = String(FNV1a.hash(bytes[...]), radix: 16)
        return hex(bytes[..<kept]) + "-" + String(repeating: "0", count: 16 - hash.count) + hash
    }

    // MARK: - LoadableCache

    /// Reads the entry of `key`.
    ///
    /// - Returns: The entry, or `nil` when there is no file for `key` (or the file is another
    ///   key's, whose name it shares).
    /// - Throws: ``LoadableCacheError/corrupt(key:reason:)`` when the file is not a complete
    ///   entry; ``LoadableCacheError/loadFailed(key:underlying:)`` when it cannot be read.
    public func load(key: String) throws -> CachedEntry? {
        let path = self.path(forKey: key)
        let bytes: [UInt8]
        do {
            guard let read = try FileIO.readFile(atPath: path) else { return nil }
            bytes = read
        } catch {
            throw LoadableCacheError.loadFailed(key: key, underlying: error)
        }
        return try EntryFile.decode(bytes, key: key)
    }

    /// Writes `entry` for `key`: to a temporary file, then renamed over the old one.
    ///
    /// - Throws: ``LoadableCacheError/saveFailed(key:underlying:)``; the old entry, if any, is
    ///   left whole.
    public func save(_ entry: CachedEntry, key: String) throws {
        let bytes = EntryFile.encode(entry, key: key)
        do {
            try ensureFolder()
            do {
                try FileIO.writeAtomically(bytes, toPath: path(forKey: key), inFolder: folderPath)
            } catch let error as FileIOError where error.code == ENOENT {
                // The folder went away (cleared by another process): make it again, once.
                folderExists = false
                try ensureFolder()
                try FileIO.writeAtomically(bytes, toPath: path(forKey: key), inFolder: folderPath)
            }
        } catch {
            throw LoadableCacheError.saveFailed(key: key, underlying: error)
        }
    }

    /// Deletes the file of `key`, if there is one.
    ///
    /// - Throws: ``LoadableCacheError/removeFailed(key:underlying:)``.
    public func remove(key: String) throws {
        do {
            try FileIO.removeFile(atPath: path(forKey: key))
        } catch {
            throw LoadableCacheError.removeFailed(key: key, underlying: error)
        }
    }

    /// Deletes the `v1/` folder with every entry (and any temporary file a crash left behind).
    ///
    /// - Throws: ``LoadableCacheError/removeAllFailed(underlying:)``.
    public func removeAll() throws {
        folderExists = false
        do {
            try FileManager.default.removeItem(atPath: folderPath)
        } catch {
            guard FileManager.default.fileExists(atPath: folderPath) else { return }
            throw LoadableCacheError.removeAllFailed(underlying: error)
        }
    }

    // MARK: - Files

    private func path(forKey key: String) -> String {
        folderPath + "/" + Self.fileName(forKey: key)
    }

    private func ensureFolder() throws {
        guard !folderExists else { return }
        try FileManager.default.createDirectory(atPath: folderPath, withIntermediateDirectories: true)
        folderExists = true
    }

    /// The longest file name most file systems take, in bytes.
    private static let maxNameLength = 255

    private nonisolated static func hex(_ bytes: ArraySlice<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// The bytes of one entry's file (format v1).
///
/// ```
/// offset size
///      0    4  magic "LDC1"
///      4    8  version, Int64 little-endian
///     12    8  savedAt, seconds since 2001-01-01 as a Float64 bit pattern, little-endian
///     20    4  key length in bytes, UInt32 little-endian
///     24    8  data length in bytes, UInt64 little-endian
///     32    8  FNV-1a 64 of bytes 0..<32, then the key, then the data, little-endian
///     40       the key (UTF-8), then the data
/// ```
enum EntryFile {
    static let magic: [UInt8] = Array("LDC1".utf8)
    static let headerSize = 40

    static func encode(_ entry: CachedEntry, key: String) -> [UInt8] {
        let keyBytes = Array(key.utf8)
        var out = [UInt8]()
        out.reserveCapacity(headerSize + keyBytes.count + entry.data.count)
        out.append(contentsOf: magic)
        out.append(contentsOf: littleEndianBytes(UInt64(bitPattern: Int64(entry.version))))
        out.append(contentsOf: littleEndianBytes(entry.savedAt.timeIntervalSinceReferenceDate.bitPattern))
        out.append(contentsOf: littleEndianBytes(UInt32(keyBytes.count)))
        out.append(contentsOf: littleEndianBytes(UInt64(entry.data.count)))
        var hash = FNV1a()
        hash.add(out[...])
        hash.add(keyBytes[...])
        entry.data.withUnsafeBytes { hash.add($0) }
        out.append(contentsOf: littleEndianBytes(hash.value))
        out.append(contentsOf: keyBytes)
        out.append(contentsOf: entry.data)
        return out
    }

    /// The entry in `bytes`, or `nil` when the file is another key's (a long key sharing its
    /// name).
    static func decode(_ bytes: [UInt8], key: String) throws -> CachedEntry? {
        func corrupt(_ reason: String) -> LoadableCacheError { .corrupt(key: key, reason: reason) }
        guard bytes.count >= headerSize else {
            throw corrupt("the file has \(bytes.count) bytes, shorter than the \(headerSize)-byte header")
        }
        guard Array(bytes[0..<4]) == magic else { throw corrupt("the file does not start with \"LDC1\"") }
        let version = Int64(bitPattern: readUInt64(bytes, at: 4))
        let savedAt = Double(bitPattern: readUInt64(bytes, at: 12))
        let keyCount = Int(readUInt32(bytes, at: 20))
        let dataCount = readUInt64(bytes, at: 24)
        let checksum = readUInt64(bytes, at: 32)
        let available = UInt64(bytes.count - headerSize)
        guard UInt64(keyCount) <= available, dataCount == available - UInt64(keyCount) else {
            throw corrupt(
                "the header announces \(keyCount) key bytes and \(dataCount) data bytes, the file has \(available) after the header"
            )
        }
        var hash = FNV1a()
        hash.add(bytes[0..<32])
        hash.add(bytes[headerSize...])
        guard hash.value == checksum else { throw corrupt("the checksum does not match the contents") }
        guard savedAt.isFinite, let version = Int(exactly: version) else {
            throw corrupt("the header's date or version is not a number")
        }
        let keyEnd = headerSize + keyCount
        guard bytes[headerSize..<keyEnd].elementsEqual(key.utf8) else { return nil }
        return CachedEntry(
            data: Data(bytes[keyEnd...]), savedAt: Date(timeIntervalSinceReferenceDate: savedAt), version: version)
    }

    private static func readUInt64(_ bytes: [UInt8], at offset: Int) -> UInt64 {
        var value: UInt64 = 0
        for index in (0..<8).reversed() { value = value << 8 | UInt64(bytes[offset + index]) }
        return value
    }

    private static func readUInt32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        var value: UInt32 = 0
        for index in (0..<4).reversed() { value = value << 8 | UInt32(bytes[offset + index]) }
        return value
    }
}

/// `value`'s bytes, least significant first.
private func littleEndianBytes<Value: FixedWidthInteger>(_ value: Value) -> [UInt8] {
    (0..<(Value.bitWidth / 8)).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) }
}

/// The 64-bit FNV-1a hash: a file's checksum and a long key's name suffix.
struct FNV1a {
    private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    static func hash(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        var hash = FNV1a()
        hash.add(bytes)
        return hash.value
    }

    mutating func add(_ bytes: ArraySlice<UInt8>) {
        bytes.withUnsafeBytes { add($0) }
    }

    mutating func add(_ bytes: UnsafeRawBufferPointer) {
        var hash = value
        for byte in bytes {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        value = hash
    }
}

/// A failed system call on a cache file: which call, on which path, and the system's reason.
struct FileIOError: Error, CustomStringConvertible {
    let operation: String
    let path: String
    let code: Int32

    var description: String {
        "\(operation)(\(path)) failed: \(String(cString: strerror(code))) (errno \(code))"
    }
}

/// The system calls behind ``FileLoadableCache``: fewer and cheaper than Foundation's, with
/// errors that name the path.
enum FileIO {
    /// The whole file at `path`, or `nil` if there is none.
    static func readFile(atPath path: String) throws -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        if descriptor < 0 {
            if errno == ENOENT { return nil }
            throw FileIOError(operation: "open", path: path, code: errno)
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw FileIOError(operation: "fstat", path: path, code: errno) }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw FileIOError(operation: "read", path: path, code: EISDIR)
        }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var done = 0
        while done < bytes.count {
            let count = bytes.withUnsafeMutableBytes { buffer in
                read(descriptor, buffer.baseAddress! + done, buffer.count - done)
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw FileIOError(operation: "read", path: path, code: errno)
            }
            if count == 0 { break }  // cut short while reading: the decoder reports it
            done += count
        }
        if done < bytes.count { bytes.removeLast(bytes.count - done) }
        return bytes
    }

    /// Writes `bytes` to a new temporary file in `folder`, then renames it to `path`.
    static func writeAtomically(_ bytes: [UInt8], toPath path: String, inFolder folder: String) throws {
        let temporary = folder + "/.tmp-" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw FileIOError(operation: "open", path: temporary, code: errno) }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { buffer in
                write(descriptor, buffer.baseAddress! + written, buffer.count - written)
            }
            if count < 0 {
                if errno == EINTR { continue }
                let code = errno
                close(descriptor)
                unlink(temporary)
                throw FileIOError(operation: "write", path: temporary, code: code)
            }
            written += count
        }
        guard close(descriptor) == 0 else {
            let code = errno
            unlink(temporary)
            throw FileIOError(operation: "close", path: temporary, code: code)
        }
        guard rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw FileIOError(operation: "rename", path: path, code: code)
        }
    }

    /// Deletes the file at `path`; a missing file is not an error.
    static func removeFile(atPath path: String) throws {
        guard unlink(path) == 0 || errno == ENOENT else {
            throw FileIOError(operation: "unlink", path: path, code: errno)
        }
    }
}
