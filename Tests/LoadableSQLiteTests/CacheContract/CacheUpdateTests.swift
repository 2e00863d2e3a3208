import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSQLite
import LoadableSupport
import LoadableTestSupport
import Testing

/// `update(key:_:)` of every cache (``LockCacheKind``): it reads what is there, writes what the
/// closure leaves (a pin and metadata too), removes on `nil`, writes nothing when the closure
/// throws or leaves the entry as it was; updates started together lose nothing (every kind but
/// the defaults' two steps); the limits of the file and SQLite caches apply; bad data throws what
/// a load throws, and a date that is not finite what a save throws.
@Suite("Every LoadableCache: update")
struct CacheUpdateTests {
    @Test(
        "reads what is there, saves what the closure leaves, returns what it returns",
        arguments: LockCacheKind.allCases)
    func readsAndWrites(kind: LockCacheKind) async throws {
        let subject = try LockSubject(kind)
        defer { subject.cleanUp() }
        let first = contractEntry(3, savedAt: 10)
        let created = try await subject.cache.update(key: "k") { entry in
            let found = entry
            entry = first
            return found
        }
        #expect(created == nil)
        #expect(try await subject.cache.load(key: "k") == first)
        #expect(try await subject.base.load(key: subject.baseKey("k")) == first)

        let second = contractEntry(5, first: 9, savedAt: 20, version: 2)
        let found = try await subject.another().update(key: "k") { entry in
            let found = entry
            entry = second
            return found
        }
        #expect(found == first)
        #expect(try await subject.cache.load(key: "k") == second)
    }

    @Test("nil removes the entry; nil left nil writes nothing", arguments: LockCacheKind.allCases)
    func nilRemoves(kind: LockCacheKind) async throws {
        let subject = try LockSubject(kind)
        defer { subject.cleanUp() }
        try await subject.cache.save(contractEntry(3), key: "k")
        try await subject.cache.save(contractEntry(4), key: "other")
        let removed = try await subject.cache.update(key: "k") { entry in
            defer { entry = nil }
            return entry
        }
        #expect(removed == contractEntry(3))
        #expect(try await subject.cache.load(key: "k") == nil)
        let none = try await subject.cache.update(key: "missing") { entry in entry == nil }
        #expect(none)
        #expect(try await subject.cache.load(key: "missing") == nil)
        #expect(try await subject.cache.load(key: "other") == contractEntry(4))
    }

    @Test("a throwing closure writes nothing and its error is rethrown", arguments: LockCacheKind.allCases)
    func throwingClosure(kind: LockCacheKind) async throws {
        let subject = try LockSubject(kind)
        defer { subject.cleanUp() }
        try await subject.cache.save(contractEntry(3), key: "k")
        for change in [contractEntry(9, first: 1), nil] {
            await #expect(throws: TestError("refused")) {
                try await subject.cache.update(key: "k") { entry in
                    entry = change
                    throw TestError("refused")
                }
            }
            #expect(try await subject.cache.load(key: "k") == contractEntry(3))
        }
        await #expect(throws: TestError("refused")) {
            try await subject.cache.update(key: "missing") { entry in
                entry = contractEntry(1)
                throw TestError("refused")
            }
        }
        #expect(try await subject.cache.load(key: "missing") == nil)
    }

    @Test("a pin and metadata are kept as the closure leaves them", arguments: LockCacheKind.allCases)
    func pinAndMetadata(kind: LockCacheKind) async throws {
        let subject = try LockSubject(kind)
        defer { subject.cleanUp() }
        try await subject.cache.save(contractEntry(3, metadata: ["ETag": "\"1\""]), key: "k")
        try await subject.cache.update(key: "k") { entry in
            entry?.isPinned = true
            entry?.metadata = ["ETag": "\"2\"", "é": "ü"]
        }
        var pinned = contractEntry(3, metadata: ["ETag": "\"2\"", "é": "ü"])
        pinned.isPinned = true
        #expect(try await subject.cache.load(key: "k") == pinned)
        #expect(try await subject.another().load(key: "k") == pinned)
        if kind.base == .file, let file = subject.base as? FileLoadableCache {
            let name = FileLoadableCache.fileName(forKey: subject.baseKey("k"))
            #expect(FileCacheFixtures.names(in: file.entriesDirectory.appendingPathComponent("pinned")) == [name])
        }
        try await subject.cache.update(key: "k") { entry in
            entry?.isPinned = false
            entry?.metadata = [:]
        }
        #expect(try await subject.cache.load(key: "k") == contractEntry(3))
    }

    @Test(
        "50 tasks on each of two objects append a byte each through update: none is lost",
        arguments: LockCacheKind.allCases.filter(\.hasAtomicUpdate))
    func concurrentAppends(kind: LockCacheKind) async throws {
        let subject = try LockSubject(kind)
        defer { subject.cleanUp() }
        let objects = [subject.cache, try subject.another()]
        let tasks = 50
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<(2 * tasks) {
                let cache = objects[index % 2]
                group.addTask {
                    try await cache.update(key: "log") { entry in append(UInt8(index), to: &entry) }
                }
            }
            try await group.waitForAll()
        }
        let data = try #require(try await subject.cache.load(key: "log")).data
        #expect(data.sorted() == (0..<(2 * tasks)).map { UInt8($0) })
    }

    @Test("the update of each cache type, called on the type itself, is its own: two objects lose no append")
    func concreteTypes() async throws {
        let directory = FileCacheFixtures.temporaryDirectory("update-concrete")
        defer { FileCacheFixtures.removeDirectory(directory) }
        let files = (FileLoadableCache(directory: directory), FileLoadableCache(directory: directory))
        let path = directory.appendingPathComponent("cache.sqlite")
        let databases = (try SQLiteLoadableCache(path: path), try SQLiteLoadableCache(path: path))
        let memory = InMemoryLoadableCache()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<100 {
                let byte = UInt8(index)
                group.addTask {
                    let file = index.isMultiple(of: 2) ? files.0 : files.1
                    try await file.update(key: "log") { append(byte, to: &$0) }
                    let database = index.isMultiple(of: 2) ? databases.0 : databases.1
                    try await database.update(key: "log") { append(byte, to: &$0) }
                    try await memory.update(key: "log") { append(byte, to: &$0) }
                }
            }
            try await group.waitForAll()
        }
        let all = (0..<100).map { UInt8($0) }
        #expect(try await files.0.load(key: "log")?.data.sorted() == all)
        #expect(try await databases.0.load(key: "log")?.data.sorted() == all)
        #expect(await memory.load(key: "log")?.data.sorted() == all)
    }

    @Test("the default update is a load and a save, in order", arguments: [LockCacheKind.own, .scopedOwn])
    func defaults(kind: LockCacheKind) async throws {
        let subject = try LockSubject(kind)
        defer { subject.cleanUp() }
        for index in 0..<10 {
            try await subject.cache.update(key: "log") { append(UInt8(index), to: &$0) }
        }
        #expect(try await subject.cache.load(key: "log")?.data == Data(0..<10))
    }
}

/// What the limits, bad data and bad dates do to the updates of the file and SQLite caches.
@Suite("FileLoadableCache and SQLiteLoadableCache: update keeps the rules of load and save")
struct CacheUpdateRuleTests {
    static let kinds: [LockCacheKind] = [.file, .sqlite, .scopedFile, .scopedSQLite]

    @Test("the limit applies: an unpinned entry grown past maxBytes is not kept; a pinned one is", arguments: kinds)
    func limit(kind: LockCacheKind) async throws {
        let subject = try LockSubject(kind, maxBytes: 2_000)
        defer { subject.cleanUp() }
        try await subject.cache.save(contractEntry(100), key: "k")
        try await subject.cache.update(key: "k") { $0 = contractEntry(3_000) }
        #expect(try await subject.cache.load(key: "k") == nil)
        let pinned = CachedEntry(
            data: contractEntry(3_000).data, savedAt: Date(timeIntervalSinceReferenceDate: 1_000), version: 1,
            isPinned: true)
        try await subject.cache.update(key: "k") { $0 = pinned }
        #expect(try await subject.cache.load(key: "k") == pinned)
    }

    @Test(
        "an entry whose bytes are not an entry: update throws what load throws; the closure does not run",
        arguments: kinds)
    func corruptEntry(kind: LockCacheKind) async throws {
        let subject = try LockSubject(kind)
        defer { subject.cleanUp() }
        try await subject.cache.save(contractEntry(10), key: "k")
        let key = subject.baseKey("k")
        if kind.base == .file, let file = subject.base as? FileLoadableCache {
            try FileCacheFixtures.write(Array("not an entry".utf8), to: FileCacheFixtures.file(of: key, in: file))
        } else {
            try RawSQLiteDatabase(subject.databaseFile).execute(
                "UPDATE entries SET saved_at = 'never' WHERE key = '\(key)'")
        }
        let loadError = await FileCacheFixtures.caught { _ = try await subject.cache.load(key: "k") }
        let runs = Locked(0)
        let updateError = await FileCacheFixtures.caught {
            try await subject.cache.update(key: "k") { entry in
                runs.withLock { $0 += 1 }
                entry = nil
            }
        }
        #expect(FileCacheFixtures.kind(of: loadError) == "corrupt")
        #expect(updateError.map { "\($0)" } == loadError.map { "\($0)" })
        #expect(updateError?.key == subject.baseKey("k"))
        #expect(runs.withLock { $0 } == 0)
    }

    @Test(
        "an entry left with a savedAt that is not finite is refused with saveFailed; nothing is written",
        arguments: kinds)
    func nonFiniteDate(kind: LockCacheKind) async throws {
        let subject = try LockSubject(kind)
        defer { subject.cleanUp() }
        try await subject.cache.save(contractEntry(10), key: "k")
        let error = await FileCacheFixtures.caught {
            try await subject.cache.update(key: "k") { entry in
                entry?.savedAt = Date(timeIntervalSinceReferenceDate: .infinity)
            }
        }
        #expect(FileCacheFixtures.kind(of: error) == "saveFailed")
        #expect(error?.key == subject.baseKey("k"))
        #expect(try await subject.cache.load(key: "k") == contractEntry(10))
    }
}
