import Foundation
internal import Loadable
import LoadableSupport

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
    /// The entry files in memory, and the file work on them.
    ///
    /// Pinned entries (``CachedEntry/isPinned``: an outbox's queue) are files of the same names in
    /// the ``pinnedPath`` folder, `pinned/` inside `v1/`: kept apart from the recency order, so
    /// that no limit evicts them, while their sizes count toward it.
    struct Contents {
        /// The `v1/` folder's path.
        let path: String
        /// The `pinned/` folder's path, inside ``path``.
        let pinnedPath: String
        private(set) var isStarted = false
        private var folderExists = false
        private var pinnedFolderExists = false
        /// The unpinned entry files with their sizes, least recently used first.
        private(set) var entries = RecencyList()
        /// The pinned entry files with their sizes, least recently used first (an order no
        /// eviction reads; kept as the unpinned one is, so that both say how the files were used).
        private(set) var pinned = RecencyList()
        /// The latest modification time given to a file, in nanoseconds since 1970.
        private var lastModified: Int64 = 0

        /// The name of the folder of pinned entries inside `v1/`: not an entry's name (which is
        /// hexadecimal digits and `-`).
        static let pinnedFolderName = "pinned"

        init(path: String) {
            self.path = path
            pinnedPath = path + "/" + Self.pinnedFolderName
        }

        /// The sizes of every entry file, pinned ones included: what a limit bounds.
        var totalBytes: Int { entries.totalBytes + pinned.totalBytes }

        func filePath(_ name: String) -> String { path + "/" + name }

        func pinnedFilePath(_ name: String) -> String { pinnedPath + "/" + name }

        // MARK: Start

        /// The scan of the first use: lists the entry files with their sizes, in the order of
        /// their modification times, and the pinned ones, and removes stale temporary files.
        mutating func start() throws {
            guard !isStarted else { return }
            guard var found = try Self.scan(path) else {
                finishStart(folderExists: false)
                return
            }
            let pinnedScan = try Self.scan(pinnedPath)
            pinnedFolderExists = pinnedScan != nil
            let pinnedFound = pinnedScan ?? []
            if !pinnedFound.isEmpty {
                // A key saved in both folders: a process stopped between writing one file and
                // removing the other. The newer file is the entry (the pinned one on a tie).
                let plainByName = Dictionary(found.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
                var replaced = Set<String>()
                var kept: [FolderItem] = []
                for item in pinnedFound {
                    if let plain = plainByName[item.name] {
                        if plain.modified > item.modified {
                            try? FileIO.removeFile(atPath: pinnedFilePath(item.name))
                            continue
                        }
                        try? FileIO.removeFile(atPath: filePath(item.name))
                        replaced.insert(item.name)
                    }
                    kept.append(item)
                }
                kept.sort { ($0.modified, $0.name) < ($1.modified, $1.name) }
                for item in kept { pinned.touch(item.name, size: item.size) }
                lastModified = max(lastModified, kept.last?.modified ?? 0)
                if !replaced.isEmpty { found.removeAll { replaced.contains($0.name) } }
            }
            found.sort { ($0.modified, $0.name) < ($1.modified, $1.name) }
            for item in found { entries.touch(item.name, size: item.size) }
            lastModified = max(lastModified, found.last?.modified ?? 0)
            finishStart(folderExists: true)
        }

        /// The entry files in the folder at `folder` (removing stale temporary files), or `nil`
        /// when there is no folder (or something else is in its place).
        private static func scan(_ folder: String) throws -> [FolderItem]? {
            let items: [FolderItem]
            do {
                guard let listed = try FileIO.list(folder: folder) else { return nil }
                items = listed
            } catch let error as FileIOError where error.code == ENOTDIR {
                // Something in the way of the folder: a save reports it when it makes the folder.
                return nil
            }
            var found: [FolderItem] = []
            for item in items {
                if item.name.hasPrefix(".tmp-") {
                    if FileIO.isStaleTemporaryFile(item.name) {
                        try? FileIO.removeFile(atPath: folder + "/" + item.name)
                    }
                } else if item.isRegularFile && isEntryName(item.name) {
                    found.append(item)
                }
            }
            return found
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

        /// Removes least recently used entries until the total is at most `limit`, or until only
        /// pinned ones are left.
        mutating func evict(to limit: Int) {
            while totalBytes > limit, let oldest = entries.leastRecentlyUsed {
                // A file that cannot be removed is forgotten all the same: the next start sees it.
                try? FileIO.removeFile(atPath: filePath(oldest.name))
                entries.remove(oldest.name)
            }
        }

        // MARK: Entries

        /// Writes `bytes` as the file `name` (in `pinned/` for a pinned entry); removes the key's
        /// file in the other folder and the files of its `oldNames`. An unpinned entry larger
        /// than `limit` is not kept, and the key's old entry is removed; a pinned one is always
        /// kept.
        mutating func save(_ bytes: [UInt8], name: String, oldNames: [String], isPinned: Bool, limit: Int?) throws {
            if !isPinned, let limit, bytes.count > limit {
                try remove(name: name, oldNames: oldNames)
                return
            }
            try makeFolders(pinned: isPinned)
            let folder = isPinned ? pinnedPath : path
            let file = folder + "/" + name
            let modified = limit == nil ? nil : nextModified()
            do {
                try FileIO.writeAtomically(bytes, toPath: file, inFolder: folder, modified: modified)
            } catch let error as FileIOError where error.code == ENOENT {
                // The folder went away (cleared by another process), its entries with it: make it
                // again, once.
                forgetEverything()
                try makeFolders(pinned: isPinned)
                try FileIO.writeAtomically(bytes, toPath: file, inFolder: folder, modified: modified)
            }
            if isPinned {
                pinned.touch(name, size: bytes.count)
                // The key's unpinned file, if any (this process's or another's), goes.
                try FileIO.removeFile(atPath: filePath(name))
                entries.remove(name)
            } else {
                entries.touch(name, size: bytes.count)
                if pinned.contains(name) {
                    try FileIO.removeFile(atPath: pinnedFilePath(name))
                    pinned.remove(name)
                }
            }
            try removeOldNames(oldNames)
            if let limit { evict(to: limit) }
        }

        /// Makes `v1/`, and `pinned/` inside it when `pinned`, unless they are known to exist.
        private mutating func makeFolders(pinned: Bool) throws {
            if !folderExists {
                try FileIO.makeFolder(atPath: path)
                folderExists = true
            }
            if pinned && !pinnedFolderExists {
                try FileIO.makeFolder(atPath: pinnedPath)
                pinnedFolderExists = true
            }
        }

        /// Forgets every entry and folder: another process removed the folder.
        private mutating func forgetEverything() {
            entries.removeAll()
            pinned.removeAll()
            folderExists = false
            pinnedFolderExists = false
        }

        /// The entry of `key` in the file `name` (or, moved to `name`, in one of `oldNames`).
        mutating func load(key: String, name: String, oldNames: [String], limit: Int?) throws -> CachedEntry? {
            guard let found = try find(key: key, name: name, oldNames: oldNames) else { return nil }
            let entry = try EntryFile.decode(found.bytes, key: key)
            if var entry {
                entry.isPinned = found.isPinned
                touch(found.name, size: found.bytes.count, isPinned: found.isPinned, limit: limit)
                return entry
            }
            return nil
        }

        /// Sets the save date and the metadata of `key`'s entry: in place (one write of the
        /// header) when the metadata stays the same, else by writing the file again. Returns
        /// `false` when there is no entry.
        mutating func touch(
            key: String, name: String, oldNames: [String], savedAt: Date, metadata: [String: String], limit: Int?
        ) throws -> Bool {
            var isPinned = pinned.contains(name)
            var outcome = try patch(isPinned ? pinnedFilePath(name) : filePath(name), key: key, savedAt, metadata)
            if outcome == nil {
                // Not where this process saw it last: pinned by another process, or under an old
                // name (moved to `name` by the lookup).
                guard let found = try find(key: key, name: name, oldNames: oldNames), found.name == name else {
                    return false
                }
                isPinned = found.isPinned
                outcome = try patch(isPinned ? pinnedFilePath(name) : filePath(name), key: key, savedAt, metadata)
            }
            switch outcome {
            case nil, .notThisKey:
                return false
            case .patched(let size):
                touch(name, size: size, isPinned: isPinned, limit: limit)
            case .needsRewrite(var entry):
                entry.savedAt = savedAt
                entry.metadata = metadata
                try save(
                    EntryFile.encode(entry, key: canonicalCacheKey(key)), name: name, oldNames: [], isPinned: isPinned,
                    limit: limit)
            }
            return true
        }

        /// What ``patch(_:key:_:_:)`` did.
        private enum PatchOutcome {
            /// The file's header was written in place; the file has `size` bytes.
            case patched(size: Int)
            /// The metadata changes: the entry must be written again.
            case needsRewrite(CachedEntry)
            /// The file is another key's (a long key sharing its name).
            case notThisKey
        }

        /// Gives the entry file at `file` the save date `savedAt` in place when its metadata is
        /// `metadata`; `nil` when there is no file.
        private func patch(
            _ file: String, key: String, _ savedAt: Date, _ metadata: [String: String]
        ) throws -> PatchOutcome? {
            var outcome = PatchOutcome.notThisKey
            let read = try FileIO.patchFile(atPath: file) { bytes in
                guard let entry = try EntryFile.decode(bytes, key: key) else { return nil }
                guard entry.metadata == metadata else {
                    outcome = .needsRewrite(entry)
                    return nil
                }
                outcome = .patched(size: bytes.count)
                return EntryFile.savedAtPatch(bytes, savedAt: savedAt)
            }
            return read == nil ? nil : outcome
        }

        /// The file of `key`: its bytes, its name, and whether it is pinned; `nil` when there is
        /// none. A file of one of `oldNames` (an earlier release's) is moved to `name`.
        private mutating func find(
            key: String, name: String, oldNames: [String]
        ) throws -> (bytes: [UInt8], name: String, isPinned: Bool)? {
            if pinned.contains(name) {
                if let bytes = try FileIO.readFile(atPath: pinnedFilePath(name)) { return (bytes, name, true) }
                pinned.remove(name)
            }
            if let bytes = try FileIO.readFile(atPath: filePath(name)) { return (bytes, name, false) }
            entries.remove(name)
            // Pinned by another process since this one started.
            if let bytes = try FileIO.readFile(atPath: pinnedFilePath(name)) {
                pinnedFolderExists = true
                pinned.touch(name, size: bytes.count)
                return (bytes, name, true)
            }
            for oldName in oldNames {
                let oldFile = filePath(oldName)
                guard let bytes = try FileIO.readFile(atPath: oldFile) else {
                    entries.remove(oldName)
                    continue
                }
                guard try EntryFile.decode(bytes, key: key) != nil else { continue }
                if FileIO.move(oldFile, to: filePath(name)) {
                    entries.remove(oldName)
                    return (bytes, name, false)
                }
                return (bytes, oldName, false)
            }
            return nil
        }

        /// Makes `name` the most recently used; with a limit, its file's time says so too.
        private mutating func touch(_ name: String, size: Int, isPinned: Bool, limit: Int?) {
            if isPinned {
                pinned.touch(name, size: size)
            } else {
                entries.touch(name, size: size)
            }
            if limit != nil {
                FileIO.setModified(nextModified(), atPath: isPinned ? pinnedFilePath(name) : filePath(name))
            }
        }

        /// Removes the file `name`, pinned or not, and the files of the key's `oldNames`.
        mutating func remove(name: String, oldNames: [String]) throws {
            try FileIO.removeFile(atPath: filePath(name))
            entries.remove(name)
            try FileIO.removeFile(atPath: pinnedFilePath(name))
            pinned.remove(name)
            try removeOldNames(oldNames)
        }

        private mutating func removeOldNames(_ oldNames: [String]) throws {
            for oldName in oldNames where entries.contains(oldName) {
                try FileIO.removeFile(atPath: filePath(oldName))
                entries.remove(oldName)
            }
        }

        /// Removes the files `shouldRemove` picks among the entry files (the pinned ones too when
        /// `includingPinned`), or, with `everything`, every file but the temporary files of
        /// writes in progress in other processes.
        ///
        /// - Returns: What could not be removed, each with the system's reason.
        mutating func removeFiles(
            everything: Bool, includingPinned: Bool,
            where shouldRemove: (_ folder: String, _ name: String) throws -> Bool
        ) -> [FileIOError] {
            let items: [FolderItem]
            do {
                guard let listed = try FileIO.list(folder: path) else {
                    forgetEverything()
                    return []
                }
                items = listed
            } catch let error as FileIOError where error.code == ENOTDIR {
                guard everything else { return [] }
                // A file where the folder should be: removing everything removes it.
                forgetEverything()
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
            var failures = removeFiles(
                items.filter { $0.name != Self.pinnedFolderName }, in: path, isPinned: false, everything: everything,
                where: shouldRemove)
            guard includingPinned, items.contains(where: { $0.name == Self.pinnedFolderName }) else { return failures }
            do {
                let pinnedItems = try FileIO.list(folder: pinnedPath) ?? []
                failures += removeFiles(
                    pinnedItems, in: pinnedPath, isPinned: true, everything: everything, where: shouldRemove)
            } catch let error as FileIOError where error.code == ENOTDIR {
                // Not a folder of this cache's: `pinned` is no entry's name, so everything removes it.
                if everything {
                    do { try FileIO.removeFile(atPath: pinnedPath) } catch let error as FileIOError {
                        failures.append(error)
                    } catch {}
                }
            } catch let error as FileIOError {
                failures.append(error)
            } catch {
                failures.append(FileIOError(operation: "opendir", path: pinnedPath, code: EIO))
            }
            return failures
        }

        /// Removes the files of `items` in `folder` that `shouldRemove` picks (every one with
        /// `everything`, but the temporary files of writes in progress in other processes).
        private mutating func removeFiles(
            _ items: [FolderItem], in folder: String, isPinned: Bool, everything: Bool,
            where shouldRemove: (_ folder: String, _ name: String) throws -> Bool
        ) -> [FileIOError] {
            var failures: [FileIOError] = []
            for item in items {
                let file = folder + "/" + item.name
                do {
                    if item.name.hasPrefix(".tmp-") {
                        guard everything, FileIO.isStaleTemporaryFile(item.name) else { continue }
                    } else if !everything {
                        guard item.isRegularFile, Self.isEntryName(item.name), try shouldRemove(folder, item.name)
                        else {
                            continue
                        }
                    }
                    try FileIO.removeFile(atPath: file)
                    if isPinned { pinned.remove(item.name) } else { entries.remove(item.name) }
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
