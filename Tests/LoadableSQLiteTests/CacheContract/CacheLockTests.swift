import Foundation
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSQLite
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// `tryLock(key:)` of every cache (``LockCacheKind``): one holder at a time per name, freed by
/// `release()` or by dropping the lock object, names apart from each other, a second release that
/// does nothing, and scopes that share their cache's locks under the prefixed name. The file and
/// SQLite caches lock files that two objects on one storage share.
@Suite("Every LoadableCache: tryLock")
struct CacheLockTests {
    @Test(
        "a held name is refused, through another object too, until released; then it is taken again",
        arguments: LockCacheKind.allCases)
    func heldUntilReleased(kind: LockCacheKind) async throws {
        let subject = try LockSubject(kind)
        defer { subject.cleanUp() }
        let lock = try #require(try await subject.cache.tryLock(key: "outbox"))
        #expect(lock.isHeld)
        #expect(try await subject.cache.tryLock(key: "outbox") == nil)
        #expect(try await subject.another().tryLock(key: "outbox") == nil)
        lock.release()
        #expect(!lock.isHeld)
        let again = try #require(try await subject.another().tryLock(key: "outbox"))
        #expect(try await subject.cache.tryLock(key: "outbox") == nil)
        again.release()
    }

    #if os(Linux)
        /// A child process that another thread is starting holds a copy of every descriptor
        /// between its fork and its `exec`; a copy made with `dup` stands for it here.
        @Test(
            "a release frees the lock though a copy of its descriptor is still open (a child between fork and exec)",
            arguments: [LockCacheKind.file, .sqlite])
        func releaseWithCopiedDescriptor(kind: LockCacheKind) async throws {
            let subject = try LockSubject(kind)
            defer { subject.cleanUp() }
            let lock = try #require(try await subject.cache.tryLock(key: "outbox"))
            // Only the lock files' descriptors: closing a copy of the database's would drop
            // SQLite's own (process-wide) locks on it.
            let locks =
                kind == .file
                ? subject.directory.appendingPathComponent("locks")
                : URL(fileURLWithPath: subject.databaseFile.path + "-locks")
            let file = locks.appendingPathComponent(FileLoadableCache.fileName(forKey: "outbox"))
            let copies = try Self.copyDescriptors(of: file)
            defer { for copy in copies { close(copy) } }
            #expect(copies.count == 1)
            lock.release()
            let again = try await subject.another().tryLock(key: "outbox")
            #expect(again != nil)
            withExtendedLifetime(again) {}
        }

        /// `dup` of each descriptor of this process open on `file`.
        private static func copyDescriptors(of file: URL) throws -> [Int32] {
            let path = file.resolvingSymlinksInPath().path
            // All found before any is copied: a copy takes the lowest free number, which may be
            // that of the listing's own descriptor, closed since.
            let found = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").compactMap { name in
                let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)")
                return target == path ? Int32(name) : nil
            }
            return try found.map { descriptor in
                let copy = dup(descriptor)
                guard copy >= 0 else { throw CocoaError(.fileReadUnknown) }
                return copy
            }
        }
    #endif

    @Test("a lock object dropped without release frees its lock", arguments: LockCacheKind.allCases)
    func droppedLockFrees(kind: LockCacheKind) async throws {
        let subject = try LockSubject(kind)
        defer { subject.cleanUp() }
        do {
            let lock = try await subject.cache.tryLock(key: "outbox")
            #expect(lock?.isHeld == true)
            #expect(try await subject.cache.tryLock(key: "outbox") == nil)
            withExtendedLifetime(lock) {}
        }
        let lock = try await subject.cache.tryLock(key: "outbox")
        #expect(lock != nil)
        withExtendedLifetime(lock) {}
    }

    @Test("different names do not conflict; names Swift finds equal are one lock", arguments: LockCacheKind.allCases)
    func names(kind: LockCacheKind) async throws {
        let subject = try LockSubject(kind)
        defer { subject.cleanUp() }
        let longKey = String(repeating: "long key ", count: 40)
        var held: [LoadableCacheLock] = []
        for key in ["outbox", "outbox2", "Outbox", "", "caf\u{E9}", longKey, longKey + "2", "a/b"] {
            let lock = try await subject.cache.tryLock(key: key)
            #expect(lock != nil, "\(key)")
            if let lock { held.append(lock) }
        }
        // "café" typed with a combining accent is the lock of "café" typed precomposed.
        #expect(try await subject.cache.tryLock(key: "cafe\u{301}") == nil)
        #expect(try await subject.cache.tryLock(key: longKey) == nil)
        for lock in held { lock.release() }
        #expect(try await subject.cache.tryLock(key: "cafe\u{301}") != nil)
    }

    @Test("a second release does nothing, not even to a lock taken since", arguments: LockCacheKind.allCases)
    func releaseTwice(kind: LockCacheKind) async throws {
        let subject = try LockSubject(kind)
        defer { subject.cleanUp() }
        let first = try #require(try await subject.cache.tryLock(key: "outbox"))
        first.release()
        let second = try #require(try await subject.cache.tryLock(key: "outbox"))
        first.release()
        #expect(!first.isHeld)
        #expect(second.isHeld)
        #expect(try await subject.cache.tryLock(key: "outbox") == nil)
        second.release()
        second.release()
        #expect(try await subject.cache.tryLock(key: "outbox") != nil)
    }

    @Test(
        "views of one cache share the lock of the prefixed name; other prefixes do not conflict",
        arguments: LockCacheKind.unscoped)
    func scopes(kind: LockCacheKind) async throws {
        let subject = try LockSubject(kind)
        defer { subject.cleanUp() }
        let cache = subject.base
        let lock = try #require(try await cache.scoped("posts/").tryLock(key: "outbox"))
        #expect(try await cache.scoped("posts/").tryLock(key: "outbox") == nil)
        #expect(try await cache.tryLock(key: "posts/outbox") == nil)
        #expect(try await cache.scoped("posts").scoped("/").tryLock(key: "outbox") == nil)
        let other = try await cache.scoped("users/").tryLock(key: "outbox")
        #expect(other != nil)
        let nested = try await cache.scoped("posts/").scoped("drafts/").tryLock(key: "outbox")
        #expect(nested != nil)
        #expect(try await cache.tryLock(key: "posts/drafts/outbox") == nil)
        lock.release()
        #expect(try await cache.tryLock(key: "posts/outbox") != nil)
        withExtendedLifetime((other, nested)) {}
    }

    @Test(
        "locksAcrossProcesses: true for the file and SQLite caches and their scopes, false for the rest",
        arguments: LockCacheKind.allCases)
    func acrossProcesses(kind: LockCacheKind) throws {
        let subject = try LockSubject(kind)
        defer { subject.cleanUp() }
        #expect(subject.cache.locksAcrossProcesses == kind.locksAcrossProcesses)
    }

    @Test("caches on other folders or files do not share locks", arguments: [LockCacheKind.file, .sqlite])
    func otherStorage(kind: LockCacheKind) async throws {
        let first = try LockSubject(kind)
        defer { first.cleanUp() }
        let second = try LockSubject(kind)
        defer { second.cleanUp() }
        let lock = try #require(try await first.cache.tryLock(key: "outbox"))
        #expect(try await second.cache.tryLock(key: "outbox") != nil)
        withExtendedLifetime(lock) {}
    }
}

/// Where the file and SQLite caches keep their lock files, and what a file in the way does.
@Suite("FileLoadableCache and SQLiteLoadableCache: lock files")
struct CacheLockFileTests {
    @Test("the file cache locks locks/<entry file name> beside v1/, readable by the user only, kept after release")
    func fileCacheLayout() async throws {
        let subject = try LockSubject(.file)
        defer { subject.cleanUp() }
        let locks = subject.directory.appendingPathComponent("locks")
        let lock = try #require(try await subject.cache.tryLock(key: "caf\u{E9}/outbox"))
        let name = FileLoadableCache.fileName(forKey: "caf\u{E9}/outbox")
        #expect(FileCacheFixtures.names(in: locks) == [name])
        #expect(try Self.mode(of: locks.appendingPathComponent(name)) == 0o600)
        #expect(try Self.mode(of: locks) == 0o700)
        lock.release()
        #expect(FileCacheFixtures.names(in: locks) == [name])
        // Entries are elsewhere: removing them all leaves the lock files, and a held lock.
        let held = try #require(try await subject.cache.tryLock(key: "caf\u{E9}/outbox"))
        try await subject.cache.save(FileCacheFixtures.entry(count: 3), key: "k")
        try await subject.cache.removeAll()
        #expect(FileCacheFixtures.names(in: locks) == [name])
        #expect(try await subject.another().tryLock(key: "caf\u{E9}/outbox") == nil)
        withExtendedLifetime(held) {}
    }

    @Test("the SQLite cache locks <path>-locks/<entry file name>, readable by the user only")
    func sqliteCacheLayout() async throws {
        let subject = try LockSubject(.sqlite)
        defer { subject.cleanUp() }
        let locks = URL(fileURLWithPath: subject.databaseFile.path + "-locks")
        let lock = try #require(try await subject.cache.tryLock(key: "outbox"))
        let name = FileLoadableCache.fileName(forKey: "outbox")
        #expect(FileCacheFixtures.names(in: locks) == [name])
        #expect(try Self.mode(of: locks.appendingPathComponent(name)) == 0o600)
        lock.release()
        #expect(FileCacheFixtures.names(in: locks) == [name])
    }

    @Test(
        "a file where the folder of locks should be: tryLock throws loadFailed naming the path",
        arguments: [LockCacheKind.file, .sqlite])
    func fileInTheWay(kind: LockCacheKind) async throws {
        let subject = try LockSubject(kind)
        defer { subject.cleanUp() }
        let locks =
            kind == .file
            ? subject.directory.appendingPathComponent("locks")
            : URL(fileURLWithPath: subject.databaseFile.path + "-locks")
        try FileManager.default.createDirectory(at: subject.directory, withIntermediateDirectories: true)
        try FileCacheFixtures.write([1, 2, 3], to: locks)
        let error = await FileCacheFixtures.caught { _ = try await subject.cache.tryLock(key: "outbox") }
        guard case .loadFailed(let key, let underlying)? = error else {
            Issue.record("expected loadFailed, got \(String(describing: error))")
            return
        }
        #expect(key == "outbox")
        #expect("\(underlying)".contains(locks.path))
        #expect("\(underlying)".contains("Not a directory"))
    }

    /// The permission bits of the file or folder at `url`.
    static func mode(of url: URL) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
        return (attributes[.posixPermissions] as? Int ?? -1) & 0o777
    }
}
