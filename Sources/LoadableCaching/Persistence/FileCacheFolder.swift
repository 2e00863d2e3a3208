import Foundation
internal import Loadable

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// What the ``FileLoadableCache`` objects of one folder share in one process: the entry files
/// with their sizes in recency order, found by one scan of the folder when the first object uses
/// it, and the lock that runs their reads and writes one at a time.
///
/// One per folder path (the standardized path of `v1/`), found in a registry that holds it weakly:
/// it lives while a cache object of the folder does (and a cache object lives while a job of the
/// cache queue holds it), and the next object after the last one scans the folder again.
final class FileCacheFolder: Sendable {
    /// The `v1/` folder's path.
    let path: String
    private let contents: Locked<Contents>

    private init(path: String) {
        self.path = path
        contents = Locked(Contents(path: path))
    }

    deinit {
        Self.registry.withLock { folders in
            if folders[path]?.folder == nil { folders[path] = nil }
        }
    }

    /// A folder held without keeping it alive.
    private struct WeakFolder {
        weak var folder: FileCacheFolder?
    }

    /// The live folders by path.
    private static let registry = Locked<[String: WeakFolder]>([:])
    /// How many times each path was scanned at a start, for tests.
    private static let starts = Locked<[String: Int]>([:])

    /// The folder of `path`, shared with every live cache object of it.
    static func folder(atPath path: String) -> FileCacheFolder {
        registry.withLock { folders in
            if let folder = folders[path]?.folder { return folder }
            let folder = FileCacheFolder(path: path)
            folders[path] = WeakFolder(folder: folder)
            return folder
        }
    }

    /// Forgets the folder of `path`: the next object on it gets a new one (for tests).
    static func forget(atPath path: String) {
        registry.withLock { $0[path] = nil }
    }

    /// How many times the folder at `path` was scanned by a start in this process.
    static func startCount(atPath path: String) -> Int {
        starts.withLock { $0[path] ?? 0 }
    }

    /// Runs `body` with the folder's contents, started (scanned) if this is the first use, and,
    /// when `limit` is given, entries evicted down to it first.
    func withContents<Result>(evictingTo limit: Int?, _ body: (inout Contents) throws -> Result) throws -> Result {
        try contents.withLock { contents in
            try contents.start()
            if let limit { contents.evict(to: limit) }
            return try body(&contents)
        }
    }

    /// Runs `body` with the folder's contents, not started if this is the first use.
    func withUnstartedContents<Result>(_ body: (inout Contents) throws -> Result) rethrows -> Result {
        try contents.withLock(body)
    }

    /// The entry files in memory, and the file work on them.
    struct Contents {
        /// The `v1/` folder's path.
        let path: String
        private(set) var isStarted = false
        private var folderExists = false
        /// The entry files with their sizes, least recently used first.
        private(set) var entries = RecencyList()
        /// The latest modification time given to a file, in nanoseconds since 1970.
        private var lastModified: Int64 = 0

        init(path: String) {
            self.path = path
        }

        func filePath(_ name: String) -> String { path + "/" + name }

        // MARK: Start

        /// The scan of the first use: lists the entry files with their sizes, in the order of
        /// their modification times, and removes stale temporary files.
        mutating func start() throws {
            guard !isStarted else { return }
            let items: [FolderItem]
            do {
                guard let listed = try FileIO.list(folder: path) else {
                    finishStart(folderExists: false)
                    return
                }
                items = listed
            } catch let error as FileIOError where error.code == ENOTDIR {
                // Something in the way of the folder: a save reports it when it makes the folder.
                finishStart(folderExists: false)
                return
            }
            var found: [FolderItem] = []
            for item in items {
                if item.name.hasPrefix(".tmp-") {
                    if FileIO.isStaleTemporaryFile(item.name) { try? FileIO.removeFile(atPath: filePath(item.name)) }
                } else if item.isRegularFile && Self.isEntryName(item.name) {
                    found.append(item)
                }
            }
            found.sort { ($0.modified, $0.name) < ($1.modified, $1.name) }
            for item in found { entries.touch(item.name, size: item.size) }
            lastModified = found.last?.modified ?? 0
            finishStart(folderExists: true)
        }

        private mutating func finishStart(folderExists: Bool) {
            isStarted = true
            self.folderExists = folderExists
            FileCacheFolder.starts.withLock { $0[path, default: 0] += 1 }
        }

        /// Whether `name` can be an entry's file name: hexadecimal digits and `-`.
        static func isEntryName(_ name: String) -> Bool {
            !name.isEmpty
                && name.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) || $0 == 0x2D }
        }

        // MARK: Recency and limit

        /// A modification time for a file just used: now, or just after the last one given.
        private mutating func nextModified() -> Int64 {
            lastModified = max(FileIO.now(), lastModified + 1)
            return lastModified
        }

        /// Removes least recently used entries until their total is at most `limit`.
        mutating func evict(to limit: Int) {
            while entries.totalBytes > limit, let oldest = entries.leastRecentlyUsed {
                // A file that cannot be removed is forgotten all the same: the next start sees it.
                try? FileIO.removeFile(atPath: filePath(oldest.name))
                entries.remove(oldest.name)
            }
        }

        // MARK: Entries

        /// Writes `bytes` as the file `name`; removes the files of the key's `oldNames`. An entry
        /// larger than `limit` is not kept, and the key's old entry is removed.
        mutating func save(_ bytes: [UInt8], name: String, oldNames: [String], limit: Int?) throws {
            let file = filePath(name)
            if let limit, bytes.count > limit {
                try FileIO.removeFile(atPath: file)
                entries.remove(name)
                try removeOldNames(oldNames)
                return
            }
            if !folderExists {
                try FileIO.makeFolder(atPath: path)
                folderExists = true
            }
            let modified = limit == nil ? nil : nextModified()
            do {
                try FileIO.writeAtomically(bytes, toPath: file, inFolder: path, modified: modified)
            } catch let error as FileIOError where error.code == ENOENT {
                // The folder went away (cleared by another process), its entries with it: make it
                // again, once.
                entries.removeAll()
                try FileIO.makeFolder(atPath: path)
                try FileIO.writeAtomically(bytes, toPath: file, inFolder: path, modified: modified)
            }
            entries.touch(name, size: bytes.count)
            try removeOldNames(oldNames)
            if let limit { evict(to: limit) }
        }

        /// The entry of `key` in the file `name` (or, moved to `name`, in one of `oldNames`).
        mutating func load(key: String, name: String, oldNames: [String], limit: Int?) throws -> CachedEntry? {
            let file = filePath(name)
            if let bytes = try FileIO.readFile(atPath: file) {
                guard let entry = try EntryFile.decode(bytes, key: key) else { return nil }
                touch(name, size: bytes.count, limit: limit)
                return entry
            }
            entries.remove(name)
            for oldName in oldNames {
                let oldFile = filePath(oldName)
                guard let bytes = try FileIO.readFile(atPath: oldFile) else {
                    entries.remove(oldName)
                    continue
                }
                guard let entry = try EntryFile.decode(bytes, key: key) else { continue }
                if FileIO.move(oldFile, to: file) {
                    entries.remove(oldName)
                    touch(name, size: bytes.count, limit: limit)
                } else {
                    touch(oldName, size: bytes.count, limit: limit)
                }
                return entry
            }
            return nil
        }

        /// Makes `name` the most recently used; with a limit, its file's time says so too.
        private mutating func touch(_ name: String, size: Int, limit: Int?) {
            entries.touch(name, size: size)
            if limit != nil { FileIO.setModified(nextModified(), atPath: filePath(name)) }
        }

        /// Removes the file `name` and the files of the key's `oldNames`.
        mutating func remove(name: String, oldNames: [String]) throws {
            try FileIO.removeFile(atPath: filePath(name))
            entries.remove(name)
            try removeOldNames(oldNames)
        }

        private mutating func removeOldNames(_ oldNames: [String]) throws {
            for oldName in oldNames where entries.contains(oldName) {
                try FileIO.removeFile(atPath: filePath(oldName))
                entries.remove(oldName)
            }
        }

        /// Removes the files `shouldRemove` picks among the entry files, or, with `everything`,
        /// every file but the temporary files of writes in progress in other processes.
        ///
        /// - Returns: What could not be removed, each with the system's reason.
        mutating func removeFiles(everything: Bool, where shouldRemove: (String) throws -> Bool) -> [FileIOError] {
            let items: [FolderItem]
            do {
                guard let listed = try FileIO.list(folder: path) else {
                    entries.removeAll()
                    return []
                }
                items = listed
            } catch let error as FileIOError where error.code == ENOTDIR {
                guard everything else { return [] }
                // A file where the folder should be: removing everything removes it.
                entries.removeAll()
                folderExists = false
                do {
                    try FileIO.removeFile(atPath: path)
                    return []
                } catch let error as FileIOError {
                    return [error]
                } catch {
                    return [FileIOError(operation: "unlink", path: path, code: EIO)]
                }
            } catch let error as FileIOError {
                return [error]
            } catch {
                return [FileIOError(operation: "opendir", path: path, code: EIO)]
            }
            var failures: [FileIOError] = []
            for item in items {
                let file = filePath(item.name)
                do {
                    if item.name.hasPrefix(".tmp-") {
                        guard everything, FileIO.isStaleTemporaryFile(item.name) else { continue }
                    } else if !everything {
                        guard item.isRegularFile, Self.isEntryName(item.name), try shouldRemove(item.name) else {
                            continue
                        }
                    }
                    try FileIO.removeFile(atPath: file)
                    entries.remove(item.name)
                } catch let error as FileIOError {
                    failures.append(error)
                } catch {
                    failures.append(FileIOError(operation: "read", path: file, code: EIO))
                }
            }
            return failures
        }
    }
}
