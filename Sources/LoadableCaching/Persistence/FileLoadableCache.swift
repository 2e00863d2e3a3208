public import Foundation
internal import Loadable
import LoadableSupport

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// A ``LoadableCache`` that keeps one file per key in a directory, optionally bounded in bytes.
///
/// ```swift
/// let caches = FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask)[0]
/// let cache = FileLoadableCache(directory: caches.appendingPathComponent("loadables"), maxBytes: 50_000_000)
/// ```
///
/// **Crash safety.** A save writes a temporary file in the same folder and renames it over the old
/// one, so a crash at any moment (a kill, a power cut after the rename reached the disk) leaves
/// the old entry or the new one, never a torn file. A file that is not a complete entry anyway (cut
/// short, overwritten by something else) is reported as ``LoadableCacheError/corrupt(key:reason:)``;
/// a file that cannot be read (permissions, too many open files) as
/// ``LoadableCacheError/loadFailed(key:underlying:)``, and is left alone.
///
/// **Layout (an on-disk format, kept across releases).** Entries live in a `v1/` folder inside
/// `directory`. A file's name is the lowercase hexadecimal of the UTF-8 bytes of its key's NFC
/// form, so no key can name a path outside the folder, names never differ only in case, and keys
/// that Swift finds equal (`"café"` typed precomposed or with a combining accent) share one file.
/// A key whose name would pass 255 bytes (more than 127 bytes of UTF-8) is cut to 238 hexadecimal
/// digits, followed by `-` and 16 hexadecimal digits of a hash of the whole key; the empty key's
/// file is `-`. A file written by an earlier release under a name that is not NFC is still found
/// by a load, and moved to its NFC name.
///
/// Each file is a header (the magic `LDC1`, or `LDC2` when the entry has
/// ``CachedEntry/metadata``; the version, the save date, the lengths of the key, the data and the
/// metadata, and a checksum of the whole file), followed by the key, the metadata and the data.
/// Entries without metadata are written as `LDC1`, which earlier releases read. The key in the file
/// must equal the one asked for, so two long keys that share a name are a miss, never each other's
/// data. Temporary files are named `.tmp-<process id>-<random>`. A pinned entry
/// (``CachedEntry/isPinned``) is a file of the same name and format in `v1/pinned/`: the folder is
/// the pin. Releases before pins existed do not see those files (they keep them).
///
/// Locks (``tryLock(key:)``) are empty files in a `locks/` folder inside `directory`, beside
/// `v1/`, named as entry files are (the lock `key`'s file is `locks/<fileName(forKey: key)>`);
/// the locks that ``update(key:_:)`` takes are in `locks/update/`, of the same names. They are
/// held with `flock`, and stay when released. Releases before locks existed do not see them.
///
/// **Limit.** With `maxBytes`, the sizes of the entry files (header, key, metadata and data) add
/// up to at most `maxBytes`: a save that passes it removes the least recently used entries (by
/// load, save or touch) until the total is at or under it. An entry larger than `maxBytes` on its
/// own is not kept (the limit is a hard bound): its save removes the key's old entry and does not
/// throw. Pinned entries are the exception: they count toward the limit but are never evicted,
/// and one larger than the limit is kept; when they pass the limit on their own, every other
/// entry goes.
/// Usage is counted in memory: one scan of the folder when it is first used in the process (which
/// also removes the temporary files of writes that never finished, and, if the limit was lowered,
/// evicts), never a scan per save. The recency order survives a relaunch: with a limit, each load
/// and save sets its file's modification time, strictly increasing, and the scan orders the files
/// by it.
///
/// **Threads and objects.** An actor: its reads and writes run off the main actor. All the
/// objects on one folder in one process share its state (usage, recency, the start's scan) and
/// run their file work one at a time, and persistences through any of them share one cache queue,
/// so a fresh `FileLoadableCache(directory:)` per loadable keeps the order of one shared object.
/// Each object applies its own `maxBytes` to its saves (and evicts down to it on its first use).
/// The directory is created, with its parents, on the first save. Files are created readable by
/// the user only.
///
/// **Two processes.** Saves and loads of two processes on one folder are safe (whole files,
/// renamed into place), and neither removes the other's writes in progress. Usage is counted per
/// process: files another process writes or removes are seen at this process's next start, so
/// the limit holds for this process's own saves. ``removeAll()`` removes every file it can and
/// reports the ones it could not (never the locks). A lock (``tryLock(key:)``) is held by one
/// lock object of one process at a time, and freed when the process exits or dies;
/// ``update(key:_:)`` changes an entry in one step that no other update of the key, in any
/// process, comes into.
public actor FileLoadableCache: LoadableCache {
    /// The directory given at init; entries are in its ``entriesDirectory``.
    public nonisolated let directory: URL
    /// The folder of this format's files: `directory/v1`.
    public nonisolated let entriesDirectory: URL
    /// The most bytes the entry files may take, or `nil` for no limit.
    public nonisolated let maxBytes: Int?
    private nonisolated let folder: FileCacheFolder
    /// The `locks/` folder's path.
    private nonisolated let locksPath: String
    /// Whether this object evicted down to its ``maxBytes`` on its first use.
    private var hasEnforcedLimit = false

    /// Creates a cache in `directory`. Nothing is read or created until the first use.
    ///
    /// - Parameters:
    ///   - directory: A directory of the app's own (for example in its caches directory); it is
    ///     created, with its parents, on the first save.
    ///   - maxBytes: The most bytes the entry files may take (`nil`, the default, for no limit);
    ///     must be greater than 0.
    public init(directory: URL, maxBytes: Int? = nil) {
        if let maxBytes {
            requireValid(maxBytes > 0, "FileLoadableCache: maxBytes must be > 0 or nil, got \(maxBytes)")
        }
        self.directory = directory
        self.maxBytes = maxBytes
        entriesDirectory = directory.appendingPathComponent("v1", isDirectory: true)
        folder = FileCacheFolder.folder(atPath: entriesDirectory.standardizedFileURL.path)
        locksPath = directory.appendingPathComponent("locks", isDirectory: true).standardizedFileURL.path
    }

    /// The name of the file that keeps `key`'s entry, inside ``entriesDirectory``.
    ///
    /// - Parameter key: A cache key; any string, including the empty one.
    /// - Returns: The lowercase hexadecimal of the UTF-8 bytes of the key's NFC form, cut and
    ///   suffixed with a hash when longer than 255 bytes; `-` for the empty key.
    public nonisolated static func fileName(forKey key: String) -> String {
        name(ofCanonicalKey: canonical(key))
    }

    /// `key` in NFC form (pure-ASCII keys as they are).
    static func canonical(_ key: String) -> String {
        canonicalCacheKey(key)
    }

    private static func isASCII(_ key: String) -> Bool {
        key.utf8.allSatisfy { $0 < 0x80 }
    }

    /// The names an earlier release may have given `key`'s file: those of its NFD form and of its
    /// own bytes, when they differ from the NFC name.
    private static func oldNames(of key: String, name: String) -> [String] {
        guard !isASCII(key) else { return [] }
        var names: [String] = []
        for form in [key.decomposedStringWithCanonicalMapping, key] {
            let other = self.name(ofCanonicalKey: form)
            if other != name && !names.contains(other) { names.append(other) }
        }
        return names
    }

    private static func name(ofCanonicalKey key: String) -> String {
        let bytes = Array(key.utf8)
        guard !bytes.isEmpty else { return "-" }
        if bytes.count * 2 <= maxNameLength { return hex(bytes[...]) }
        let kept = keptNameDigits / 2
        let hash = String(FNV1a.hash(bytes[...]), radix: 16)
        return hex(bytes[..<kept]) + "-" + String(repeating: "0", count: 16 - hash.count) + hash
    }

    // MARK: - LoadableCache

    /// Reads the entry of `key` (and makes it the most recently used).
    ///
    /// - Returns: The entry, or `nil` when there is no file for `key` (or the file is another
    ///   key's, whose name it shares).
    /// - Throws: ``LoadableCacheError/corrupt(key:reason:)`` when the file's bytes are not a
    ///   complete entry; ``LoadableCacheError/loadFailed(key:underlying:)`` naming the path and the
    ///   system's reason when it cannot be read (the file is left alone).
    public func load(key: String) throws -> CachedEntry? {
        let name = Self.fileName(forKey: key)
        do {
            return try withContents { contents in
                try contents.load(
                    key: key, name: name, oldNames: Self.oldNames(of: key, name: name), limit: maxBytes)
            }
        } catch let error as LoadableCacheError {
            throw error
        } catch {
            throw LoadableCacheError.loadFailed(key: key, underlying: error)
        }
    }

    /// Writes `entry` for `key`: to a temporary file, then renamed over the old one; then, with a
    /// limit, removes the least recently used entries until the total is at or under it. An entry
    /// larger than ``maxBytes`` is not kept, and the key's old entry is removed.
    ///
    /// - Throws: ``LoadableCacheError/saveFailed(key:underlying:)``; the old entry, if any, is
    ///   left whole.
    public func save(_ entry: CachedEntry, key: String) throws {
        try CachedEntry.checkSavedAt(entry.savedAt, key: key)
        let canonical = Self.canonical(key)
        let name = Self.name(ofCanonicalKey: canonical)
        let bytes = EntryFile.encode(entry, key: canonical)
        do {
            try withContents { contents in
                try contents.save(
                    bytes, name: name, oldNames: Self.oldNames(of: key, name: name), isPinned: entry.isPinned,
                    limit: maxBytes)
            }
        } catch {
            throw LoadableCacheError.saveFailed(key: key, underlying: error)
        }
    }

    /// Sets the save date and the metadata of `key`'s entry, keeping its data, version and pin,
    /// and makes it the most recently used.
    ///
    /// When the metadata stays the same (a `304` that sends back the same validators), the file
    /// is changed in place: one write of its header (the date and the checksum), never of the
    /// data. New metadata changes the header's length: the file is then written again, as a save
    /// does.
    ///
    /// Not isolated to the actor (it hops onto it), so that a call on a `FileLoadableCache`
    /// resolves to it rather than to the protocol's default.
    ///
    /// - Parameters:
    ///   - key: The entry's key.
    ///   - savedAt: The new save date; a finite one.
    ///   - metadata: The new metadata.
    /// - Returns: `false` when there is no entry for `key`.
    /// - Throws: ``LoadableCacheError/corrupt(key:reason:)`` when the file is not a whole entry;
    ///   ``LoadableCacheError/saveFailed(key:underlying:)`` when `savedAt` is not finite or the
    ///   file cannot be written.
    public nonisolated func touch(key: String, savedAt: Date, metadata: [String: String]) async throws -> Bool {
        try CachedEntry.checkSavedAt(savedAt, key: key)
        return try await touchHere(key: key, savedAt: savedAt, metadata: metadata)
    }

    private func touchHere(key: String, savedAt: Date, metadata: [String: String]) throws -> Bool {
        let name = Self.fileName(forKey: key)
        do {
            return try withContents { contents in
                try contents.touch(
                    key: key, name: name, oldNames: Self.oldNames(of: key, name: name), savedAt: savedAt,
                    metadata: metadata, limit: maxBytes)
            }
        } catch let error as LoadableCacheError {
            throw error
        } catch {
            throw LoadableCacheError.saveFailed(key: key, underlying: error)
        }
    }

    /// Deletes the file of `key`, if there is one.
    ///
    /// - Throws: ``LoadableCacheError/removeFailed(key:underlying:)``.
    public func remove(key: String) throws {
        let name = Self.fileName(forKey: key)
        do {
            try withContents { try $0.remove(name: name, oldNames: Self.oldNames(of: key, name: name)) }
        } catch {
            throw LoadableCacheError.removeFailed(key: key, underlying: error)
        }
    }

    /// Deletes every file in the `v1/` folder, and the temporary files of writes that never
    /// finished, but not those of another process's writes in progress; the folder stays.
    ///
    /// - Throws: ``LoadableCacheError/removeAllFailed(underlying:)`` when some files could not be
    ///   removed (every other one is); its underlying error lists each path with the system's
    ///   reason.
    public func removeAll() throws {
        let failures = folder.withUnstartedContents {
            $0.removeFiles(everything: true, includingPinned: true) { _, _ in true }
        }
        try Self.throwing(failures)
    }

    /// Deletes the entries whose keys start with `prefix` (as Swift compares strings, on the
    /// keys' NFC forms); an empty prefix removes everything as ``removeAll()`` does.
    ///
    /// Files are picked by the hexadecimal of the prefix's NFC UTF-8; a cut name (a key longer
    /// than 127 bytes) is checked against the key inside its file.
    ///
    /// Not isolated to the actor (the folder's lock orders it), so that a call on a
    /// `FileLoadableCache` resolves to it rather than to the protocol's default.
    ///
    /// - Parameter prefix: The start of the keys to remove.
    /// - Throws: ``LoadableCacheError/removeAllFailed(underlying:)`` listing each file that could
    ///   not be removed or read, with the system's reason; every other one is removed.
    public nonisolated func removeEntries(keyPrefix prefix: String) async throws {
        let canonicalPrefix = Self.canonical(prefix)
        guard !canonicalPrefix.isEmpty else { return try await removeAll() }
        let prefixName = Self.hex(Array(canonicalPrefix.utf8)[...])
        let failures = folder.withUnstartedContents { contents in
            contents.removeFiles(everything: false, includingPinned: true) { folder, name in
                guard name.utf8.count == Self.maxNameLength, name.utf8.contains(UInt8(ascii: "-")) else {
                    guard name.hasPrefix(prefixName), let key = Self.key(ofName: name) else { return false }
                    return key.hasPrefix(prefix)
                }
                guard name.hasPrefix(prefixName.prefix(Self.keptNameDigits)) else { return false }
                return try Self.head(ofFile: folder + "/" + name)?.key.hasPrefix(prefix) ?? false
            }
        }
        try Self.throwing(failures)
    }

    /// The keys of the entries in the folder (their NFC forms), sorted: to move the entries to
    /// another cache, such as a SQLite one, with a ``load(key:)`` and a save of each.
    ///
    /// A key is read from its file's name, or, for a name cut with a hash (a key longer than 127
    /// bytes), from the file's header; a file whose header is not an entry's is left out.
    ///
    /// - Returns: The keys; none when the folder does not exist.
    /// - Throws: ``LoadableCacheError/loadFailed(key:underlying:)`` with an empty key, naming the
    ///   folder and the system's reason, when the folder cannot be listed.
    public func keys() throws -> [String] {
        var keys = Set<String>()
        for path in [folder.path, folder.path + "/" + FileCacheFolder.Contents.pinnedFolderName] {
            let items: [FolderItem]
            do {
                guard let listed = try FileIO.list(folder: path) else { continue }
                items = listed
            } catch {
                throw LoadableCacheError.loadFailed(key: "", underlying: error)
            }
            for item in items where item.isRegularFile && FileCacheFolder.Contents.isEntryName(item.name) {
                if let key = Self.key(ofName: item.name) {
                    keys.insert(Self.canonical(key))
                } else if let head = try? Self.head(ofFile: path + "/" + item.name) {
                    keys.insert(Self.canonical(head.key))
                }
            }
        }
        return keys.sorted()
    }

    /// Deletes the entries saved (``CachedEntry/savedAt``) before `date`, read from each file's
    /// header; pinned entries (``CachedEntry/isPinned``), and files whose header is not an
    /// entry's, are left alone.
    ///
    /// - Parameter date: The oldest save date kept.
    /// - Throws: ``LoadableCacheError/removeAllFailed(underlying:)`` listing each file that could
    ///   not be read or removed, with the system's reason; every other one is handled.
    public func removeEntries(savedBefore date: Date) throws {
        let failures = folder.withUnstartedContents { contents in
            contents.removeFiles(everything: false, includingPinned: false) { folder, name in
                guard let head = try Self.head(ofFile: folder + "/" + name) else { return false }
                return head.savedAt < date
            }
        }
        try Self.throwing(failures)
    }

    // MARK: - Locks and updates

    /// `true`: the locks and updates of the objects of one folder hold across processes.
    public nonisolated var locksAcrossProcesses: Bool { true }

    /// Takes the lock named `key` if no one holds it: no lock object of this process or of
    /// another on the folder. Never waits.
    ///
    /// The lock is `flock` on the file `locks/<name>` inside ``directory`` (`<name>` as
    /// ``fileName(forKey:)`` gives it), made with its folder on first use and kept when the lock
    /// is released. The system frees it when the process exits or dies. Two long keys whose names
    /// are cut to the same one (see the type's documentation) share a lock.
    ///
    /// - Parameter key: The lock's name: any string; keys that Swift finds equal are one lock.
    /// - Returns: The held lock, or `nil` when someone holds it.
    /// - Throws: ``LoadableCacheError/loadFailed(key:underlying:)`` naming the lock's path and the
    ///   system's reason when its file cannot be made or opened.
    public nonisolated func tryLock(key: String) async throws -> LoadableCacheLock? {
        try FileLock.tryLock(key: key, inFolder: locksPath)
    }

    /// Loads the entry of `key`, passes it to `body`, and saves what `body` leaves (removes the
    /// entry when it leaves `nil`; writes nothing when it leaves the entry as it was), holding the
    /// key's update lock: no other update of the key, through any object of this process or of
    /// another on the folder, comes in between.
    ///
    /// The load and the save are those of ``load(key:)`` and ``save(_:key:)``, in the order of
    /// the folder's other calls: pins, the limit and recency apply. The update lock is `flock` on
    /// `locks/update/<name>` inside ``directory``. Waiting for it, while another update of the key
    /// runs, blocks the actor's thread (never the main actor's); an update is a read and a write of
    /// one file, so the wait is short.
    ///
    /// - Parameters:
    ///   - key: The entry's key.
    ///   - body: Changes the entry (`nil`: there is none).
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws (nothing is written); what ``load(key:)`` throws (`body` does
    ///   not run), and ``LoadableCacheError/loadFailed(key:underlying:)`` when the update lock's
    ///   file cannot be made or opened; what ``save(_:key:)`` and ``remove(key:)`` throw.
    public func update<Result: Sendable>(
        key: String, _ body: @Sendable (inout CachedEntry?) throws -> Result
    ) async throws -> Result {
        let name = Self.fileName(forKey: key)
        let updateLocksPath = locksPath + "/" + Self.updateLocksFolderName
        let lock: LoadableCacheLock
        do {
            lock = try FileLock.lock(atPath: updateLocksPath + "/" + name, inFolder: updateLocksPath)
        } catch {
            throw LoadableCacheError.loadFailed(key: key, underlying: error)
        }
        defer { lock.release() }
        let loaded = try load(key: key)
        var entry = loaded
        let result = try body(&entry)
        guard entry != loaded else { return result }
        if let entry {
            try save(entry, key: key)
        } else {
            try remove(key: key)
        }
        return result
    }

    /// The folder of the update locks inside `locks/`: not a lock's name (hexadecimal digits and
    /// `-`).
    private static let updateLocksFolderName = "update"

    // MARK: - Shared entries

    /// The folder's entries: every object on the folder reads and writes them (one queue, one
    /// set of claims).
    public nonisolated var sharedEntries: LoadableCacheEntries {
        LoadableCacheEntries(id: ObjectIdentifier(folder), cacheName: "FileLoadableCache")
    }

    // MARK: - For tests

    /// The usage as this process counts it: the entry files' total size (pinned ones included),
    /// and their names, least recently used first, then the pinned ones (which no limit evicts),
    /// least recently used first. Starts the folder (scans it) if it was not yet.
    package func usage() throws -> (totalBytes: Int, namesLeastRecentFirst: [String]) {
        try withContents { ($0.totalBytes, $0.entries.namesInOrder + $0.pinned.namesInOrder) }
    }

    /// Makes the next object on `directory` start afresh, with a scan, as in a new process; the
    /// objects made before keep the state they share (a test drops them first).
    package nonisolated static func forgetFolder(directory: URL) {
        FileCacheFolder.forget(
            atPath: directory.appendingPathComponent("v1", isDirectory: true).standardizedFileURL.path)
    }

    /// How many times the folder of `directory` was scanned by a start in this process.
    package nonisolated static func startCount(directory: URL) -> Int {
        FileCacheFolder.startCount(
            atPath: directory.appendingPathComponent("v1", isDirectory: true).standardizedFileURL.path)
    }

    // MARK: - Files

    /// Runs `body` on the folder's contents, started, after this object's first eviction.
    private func withContents<Result>(_ body: (inout FileCacheFolder.Contents) throws -> Result) throws -> Result {
        let limit = hasEnforcedLimit ? nil : maxBytes
        let result = try folder.withContents(evictingTo: limit, body)
        hasEnforcedLimit = true
        return result
    }

    private static func throwing(_ failures: [FileIOError]) throws {
        guard failures.isEmpty else {
            throw LoadableCacheError.removeAllFailed(underlying: FileRemovalFailures(failures: failures))
        }
    }

    /// The save date and key at the start of the file at `path`; `nil` when there is no file or
    /// its start is not an entry's.
    private static func head(ofFile path: String) throws -> (savedAt: Date, key: String)? {
        guard let start = try FileIO.readBytes(atPath: path, atMost: EntryFile.metadataHeaderSize) else { return nil }
        let length = EntryFile.headLength(start)
        if length <= start.count { return EntryFile.head(start) }
        guard let bytes = try FileIO.readBytes(atPath: path, atMost: length) else { return nil }
        return EntryFile.head(bytes)
    }

    /// The key of an uncut name.
    private static func key(ofName name: String) -> String? {
        if name == "-" { return "" }
        let digits = Array(name.utf8)
        guard digits.count.isMultiple(of: 2) else { return nil }
        func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case 0x30...0x39: digit - 0x30
            case 0x61...0x66: digit - 0x61 + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The longest file name most file systems take, in bytes.
    private static let maxNameLength = 255
    /// The digits of a cut name before its `-` and hash.
    private static let keptNameDigits = (maxNameLength - 17) / 2 * 2

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
