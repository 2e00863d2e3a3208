import Foundation

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// A failed system call on a cache file: which call, on which path, and the system's reason.
struct FileIOError: Error, CustomStringConvertible {
    let operation: String
    let path: String
    let code: Int32

    var description: String {
        "\(operation)(\(path)) failed: \(String(cString: strerror(code))) (errno \(code))"
    }
}

/// The files a removal could not remove, each with the system's reason.
struct FileRemovalFailures: Error, CustomStringConvertible {
    let failures: [FileIOError]

    var description: String {
        let count = failures.count == 1 ? "1 file" : "\(failures.count) files"
        return "\(count) could not be removed: " + failures.map(\.description).joined(separator: "; ")
    }
}

/// One name in a folder, with what the folder listing and `lstat` say about it.
struct FolderItem {
    var name: String
    var isRegularFile: Bool
    var size: Int
    /// The modification time, in nanoseconds since 1970.
    var modified: Int64
}

/// The system calls behind ``FileLoadableCache``: fewer and cheaper than Foundation's, with
/// errors that name the path.
enum FileIO {
    /// The whole file at `path`, or `nil` if there is none.
    static func readFile(atPath path: String) throws -> [UInt8]? {
        try readBytes(atPath: path, atMost: nil)
    }

    /// The first `limit` bytes of the file at `path` (all of them for `nil`), or `nil` if there is
    /// no file.
    static func readBytes(atPath path: String, atMost limit: Int?) throws -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        if descriptor < 0 {
            if errno == ENOENT { return nil }
            throw FileIOError(operation: "open", path: path, code: errno)
        }
        defer { close(descriptor) }
        return try readAll(descriptor, path: path, atMost: limit)
    }

    /// The first `limit` bytes (all of them for `nil`) of the regular file open as `descriptor`.
    private static func readAll(_ descriptor: Int32, path: String, atMost limit: Int?) throws -> [UInt8] {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw FileIOError(operation: "fstat", path: path, code: errno) }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw FileIOError(operation: "read", path: path, code: EISDIR)
        }
        var bytes = [UInt8](repeating: 0, count: min(Int(info.st_size), limit ?? .max))
        let (done, failure) = bytes.withUnsafeMutableBytes { buffer in
            transferAll(buffer.count) { done in read(descriptor, buffer.baseAddress! + done, buffer.count - done) }
        }
        if let failure { throw FileIOError(operation: "read", path: path, code: failure) }
        // Cut short while reading: the decoder reports it.
        if done < bytes.count { bytes.removeLast(bytes.count - done) }
        return bytes
    }

    /// Calls `transfer` (one `read` or `write` from the offset it is given, returning how many
    /// bytes it moved) until `count` bytes are moved or one call moves none, calling again after
    /// an interrupt (`EINTR`); returns how many were moved, and the `errno` of a call that failed.
    private static func transferAll(_ count: Int, _ transfer: (_ done: Int) -> Int) -> (done: Int, failure: Int32?) {
        var done = 0
        while done < count {
            let moved = transfer(done)
            if moved < 0 {
                if errno == EINTR { continue }
                return (done, errno)
            }
            if moved == 0 { break }
            done += moved
        }
        return (done, nil)
    }

    /// Reads the file at `path` and writes what `patch` returns for its bytes at the offset it
    /// returns, in one write, on the same open file (a file renamed over it meanwhile is not
    /// written). Returns the bytes read, or `nil` if there is no file.
    ///
    /// One write of a few bytes inside the file's first block: a process killed during it leaves
    /// the bytes before or after, never a part.
    static func patchFile(
        atPath path: String, _ patch: ([UInt8]) throws -> (offset: Int, bytes: [UInt8])?
    ) throws -> [UInt8]? {
        let descriptor = open(path, O_RDWR | O_CLOEXEC)
        if descriptor < 0 {
            if errno == ENOENT { return nil }
            throw FileIOError(operation: "open", path: path, code: errno)
        }
        defer { close(descriptor) }
        let bytes = try readAll(descriptor, path: path, atMost: nil)
        guard let (offset, replacement) = try patch(bytes) else { return bytes }
        let written = replacement.withUnsafeBytes { buffer in
            pwrite(descriptor, buffer.baseAddress!, buffer.count, off_t(offset))
        }
        guard written == replacement.count else {
            throw FileIOError(operation: "pwrite", path: path, code: written < 0 ? errno : EIO)
        }
        return bytes
    }

    /// A temporary file's name: `.tmp-<pid>-<random>`, unique per process.
    static func temporaryName() -> String {
        ".tmp-\(getpid())-" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
    }

    /// Whether `name` is a temporary file that no write in progress uses: one of a process that is
    /// not running, or of this process (an earlier process with the same id: this process never
    /// leaves its own, and none is in progress while its folder is locked), or a name that does not
    /// parse.
    static func isStaleTemporaryFile(_ name: String) -> Bool {
        let parts = name.utf8.split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false)
        guard parts.count == 3, let pid = Int32(Substring(parts[1])), pid > 0 else { return true }
        if pid == getpid() { return true }
        return kill(pid, 0) != 0 && errno == ESRCH
    }

    /// Writes `bytes` to a new temporary file in `folder`, then renames it to `path`; sets the
    /// file's modification time to `modified` (nanoseconds since 1970) when given.
    static func writeAtomically(
        _ bytes: [UInt8], toPath path: String, inFolder folder: String, modified: Int64?
    )
        throws
    {
        let temporary = folder + "/" + temporaryName()
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw FileIOError(operation: "open", path: temporary, code: errno) }
        func fail(_ operation: String, _ code: Int32, path failedPath: String) -> FileIOError {
            close(descriptor)
            unlink(temporary)
            return FileIOError(operation: operation, path: failedPath, code: code)
        }
        let (written, failure) = bytes.withUnsafeBytes { buffer in
            transferAll(buffer.count) { done in write(descriptor, buffer.baseAddress! + done, buffer.count - done) }
        }
        if let failure { throw fail("write", failure, path: temporary) }
        // A write that moves nothing, which the system does not do for a regular file.
        if written < bytes.count { throw fail("write", EIO, path: temporary) }
        if let modified {
            var times = [timespec(tv_sec: 0, tv_nsec: omitTime), timespec(nanoseconds: modified)]
            guard futimens(descriptor, &times) == 0 else { throw fail("futimens", errno, path: temporary) }
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

    /// Sets the modification time of the file at `path` (nanoseconds since 1970); a failure is
    /// ignored (the order it keeps is a hint for the next start).
    static func setModified(_ modified: Int64, atPath path: String) {
        var times = [timespec(tv_sec: 0, tv_nsec: omitTime), timespec(nanoseconds: modified)]
        _ = utimensat(AT_FDCWD, path, &times, 0)
    }

    /// The wall-clock time in nanoseconds since 1970, as file times count it.
    static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    /// Deletes the file at `path`; a missing file is not an error.
    static func removeFile(atPath path: String) throws {
        guard unlink(path) == 0 || errno == ENOENT else {
            throw FileIOError(operation: "unlink", path: path, code: errno)
        }
    }

    /// Renames the file at `path` to `newPath`; returns whether it did.
    static func move(_ path: String, to newPath: String) -> Bool {
        rename(path, newPath) == 0
    }

    /// Makes the folder at `path` and its missing parents (mode 0700).
    ///
    /// - Throws: ``FileIOError`` naming the folder that could not be made, with the system's
    ///   reason (a file in the way is "Not a directory").
    static func makeFolder(atPath path: String) throws {
        if mkdir(path, 0o700) == 0 { return }
        let code = errno
        switch code {
        case EEXIST:
            var info = stat()
            guard stat(path, &info) == 0 else { throw FileIOError(operation: "stat", path: path, code: errno) }
            guard (info.st_mode & S_IFMT) == S_IFDIR else {
                throw FileIOError(operation: "mkdir", path: path, code: ENOTDIR)
            }
        case ENOENT:
            let parent = (path as NSString).deletingLastPathComponent
            guard !parent.isEmpty, parent != path else { throw FileIOError(operation: "mkdir", path: path, code: code) }
            try makeFolder(atPath: parent)
            guard mkdir(path, 0o700) == 0 || errno == EEXIST else {
                throw FileIOError(operation: "mkdir", path: path, code: errno)
            }
        default:
            throw FileIOError(operation: "mkdir", path: path, code: code)
        }
    }

    /// The names in the folder at `path` (without `.` and `..`), with their sizes and times; `nil`
    /// when there is no folder.
    static func list(folder path: String) throws -> [FolderItem]? {
        guard let folder = opendir(path) else {
            if errno == ENOENT { return nil }
            throw FileIOError(operation: "opendir", path: path, code: errno)
        }
        defer { closedir(folder) }
        let descriptor = dirfd(folder)
        var items: [FolderItem] = []
        while true {
            errno = 0
            guard let entry = readdir(folder) else {
                if errno != 0 { throw FileIOError(operation: "readdir", path: path, code: errno) }
                return items
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { buffer in
                String(cString: buffer.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if name == "." || name == ".." { continue }
            var info = stat()
            guard fstatat(descriptor, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { continue }  // gone meanwhile
            items.append(
                FolderItem(
                    name: name, isRegularFile: (info.st_mode & S_IFMT) == S_IFREG, size: Int(info.st_size),
                    modified: info.modifiedNanoseconds))
        }
    }

    /// `UTIME_OMIT`: leave that time as it is.
    #if canImport(Darwin)
        private static let omitTime = Int(-2)
    #else
        private static let omitTime = Int((1 << 30) - 2)
    #endif
}

extension timespec {
    fileprivate init(nanoseconds: Int64) {
        self.init(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
    }
}

extension stat {
    /// The modification time, in nanoseconds since 1970.
    fileprivate var modifiedNanoseconds: Int64 {
        #if canImport(Darwin)
            Int64(st_mtimespec.tv_sec) * 1_000_000_000 + Int64(st_mtimespec.tv_nsec)
        #else
            Int64(st_mtim.tv_sec) * 1_000_000_000 + Int64(st_mtim.tv_nsec)
        #endif
    }
}
