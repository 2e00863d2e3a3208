import CLoadableSQLite
import Foundation
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSQLite
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Files a `SQLiteLoadableCache` cannot use: each is reported once, by one clear
/// `LoadableCacheError` naming the path and SQLite's message, moved aside as `<name>.bad`, and
/// replaced by a fresh, empty database that works; never a crash, never an empty cache without a
/// report.
@Suite("SQLiteLoadableCache: files it cannot use are reported once, moved aside and started afresh")
struct SQLiteCacheRecoveryTests {
    /// A new folder and the database path in it; nothing is created.
    static func makePath() -> (folder: URL, path: URL) {
        let folder = FileCacheFixtures.temporaryDirectory("sqlite-cache")
        return (folder, folder.appendingPathComponent("cache.sqlite"))
    }

    /// Saves `count` entries of 1 KB (keys `k0`, `k1`, …) in a database at `path`, and closes it.
    static func fill(_ path: URL, count: Int) async throws {
        let cache = try SQLiteLoadableCache(path: path)
        for index in 0..<count {
            try await cache.save(FileCacheFixtures.entry(count: 1_000, first: UInt8(index % 256)), key: "k\(index)")
        }
    }

    /// Checks what the first load after opening a bad file reports, that the file was moved aside
    /// with its bytes, and that the fresh database is empty, works, and reports nothing more.
    static func expectRecovered(
        _ cache: SQLiteLoadableCache, path: URL, movedBytes: [UInt8]?, message: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let error = await FileCacheFixtures.caught { _ = try await cache.load(key: "k1") }
        guard case .corrupt(let key, let reason)? = error else {
            Issue.record("expected corrupt, got \(String(describing: error))", sourceLocation: sourceLocation)
            return
        }
        #expect(key == "k1", sourceLocation: sourceLocation)
        #expect(reason.contains(path.path), "\(reason)", sourceLocation: sourceLocation)
        #expect(reason.contains(message), "\(reason)", sourceLocation: sourceLocation)
        #expect(reason.contains("moved to \(path.path).bad"), "\(reason)", sourceLocation: sourceLocation)
        let moved = URL(fileURLWithPath: path.path + ".bad")
        #expect(FileCacheFixtures.exists(moved), sourceLocation: sourceLocation)
        if let movedBytes {
            #expect(try FileCacheFixtures.bytes(at: moved) == movedBytes, sourceLocation: sourceLocation)
        }
        // Reported once: the fresh database is empty, and works.
        #expect(try await cache.load(key: "k1") == nil, sourceLocation: sourceLocation)
        var entry = FileCacheFixtures.entry(count: 300, first: 9)
        entry.metadata = ["ETag": "\"v1\""]
        try await cache.save(entry, key: "k1")
        #expect(try await cache.load(key: "k1") == entry, sourceLocation: sourceLocation)
        #expect(try await cache.integrityCheck() == ["ok"], sourceLocation: sourceLocation)
        // The next launch finds a good database: no report.
        let next = try SQLiteLoadableCache(path: path)
        #expect(try await next.load(key: "k1") == entry, sourceLocation: sourceLocation)
    }

    @Test("a file that is not a database: the first load reports it; moved aside whole; a fresh database")
    func notADatabase() async throws {
        let (folder, path) = Self.makePath()
        defer { FileCacheFixtures.removeDirectory(folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let bytes =
            Array("these are the notes of another program, not a database\n".utf8)
            + (0..<5_000).map {
                UInt8(truncatingIfNeeded: $0 &* 7)
            }
        try FileCacheFixtures.write(bytes, to: path)

        let cache = try SQLiteLoadableCache(path: path)
        try await Self.expectRecovered(cache, path: path, movedBytes: bytes, message: "file is not a database")
    }

    @Test("a truncated database (half its pages gone): reported, moved aside, a fresh database")
    func truncatedDatabase() async throws {
        let (folder, path) = Self.makePath()
        defer { FileCacheFixtures.removeDirectory(folder) }
        try await Self.fill(path, count: 400)
        let whole = try FileCacheFixtures.bytes(at: path)
        #expect(whole.count > 400_000)
        let truncated = Array(whole.prefix(whole.count / 2))
        try FileCacheFixtures.write(truncated, to: path)

        let cache = try SQLiteLoadableCache(path: path)
        try await Self.expectRecovered(cache, path: path, movedBytes: truncated, message: "malformed")
    }

    @Test("a file cut inside its header, or to nothing with a log of another database: reported, never a crash")
    func cutInsideHeader() async throws {
        for length in [10, 99, 100, 1_000] {
            let (folder, path) = Self.makePath()
            defer { FileCacheFixtures.removeDirectory(folder) }
            try await Self.fill(path, count: 20)
            let cut = Array(try FileCacheFixtures.bytes(at: path).prefix(length))
            try FileCacheFixtures.write(cut, to: path)
            let cache = try SQLiteLoadableCache(path: path)
            let error = await FileCacheFixtures.caught { _ = try await cache.load(key: "k1") }
            #expect(
                FileCacheFixtures.kind(of: error) == "corrupt", "cut to \(length) bytes: \(String(describing: error))")
            #expect(FileCacheFixtures.exists(URL(fileURLWithPath: path.path + ".bad")), "cut to \(length) bytes")
            try await cache.save(FileCacheFixtures.entry(count: 10), key: "after")
            #expect(try await cache.load(key: "after") == FileCacheFixtures.entry(count: 10))
        }
    }

    @Test("a folder in the database file's place: reported, moved aside with what it holds, a fresh database")
    func folderInPlace() async throws {
        let (folder, path) = Self.makePath()
        defer { FileCacheFixtures.removeDirectory(folder) }
        try FileManager.default.createDirectory(at: path, withIntermediateDirectories: true)
        try FileCacheFixtures.write([1, 2, 3], to: path.appendingPathComponent("inside"))

        let cache = try SQLiteLoadableCache(path: path)
        try await Self.expectRecovered(
            cache, path: path, movedBytes: nil, message: "a folder is in the database file's place")
        let moved = URL(fileURLWithPath: path.path + ".bad")
        #expect(try FileCacheFixtures.bytes(at: moved.appendingPathComponent("inside")) == [1, 2, 3])
    }

    @Test("another application's database at the path: reported and moved aside, never changed")
    func anotherApplicationsDatabase() async throws {
        let (folder, path) = Self.makePath()
        defer { FileCacheFixtures.removeDirectory(folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var handle: OpaquePointer?
        #expect(sqlite3_open(path.path, &handle) == SQLITE_OK)
        #expect(
            sqlite3_exec(handle, "CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine')", nil, nil, nil)
                == SQLITE_OK)
        sqlite3_close(handle)
        let bytes = try FileCacheFixtures.bytes(at: path)

        let cache = try SQLiteLoadableCache(path: path)
        try await Self.expectRecovered(cache, path: path, movedBytes: bytes, message: "another application's database")
    }

    @Test("a page damaged while the database is in use: the call that meets it reports it; a fresh database")
    func damagedPageAtRunTime() async throws {
        let (folder, path) = Self.makePath()
        defer { FileCacheFixtures.removeDirectory(folder) }
        try await Self.fill(path, count: 400)
        let cache = try SQLiteLoadableCache(path: path)
        // Opening found nothing wrong; the first load reads an entry.
        #expect(try await cache.load(key: "k0") == FileCacheFixtures.entry(count: 1_000, first: 0))
        // Garbage over every page but the first few (the header and the schema), behind its back.
        var bytes = try FileCacheFixtures.bytes(at: path)
        for index in (4 * 4_096)..<bytes.count { bytes[index] = UInt8(truncatingIfNeeded: index &* 131 ^ 0x5A) }
        try FileCacheFixtures.write(bytes, to: path)

        var reports: [LoadableCacheError] = []
        for index in 0..<400 {
            do {
                _ = try await cache.load(key: "k\(index)")
            } catch let error as LoadableCacheError {
                reports.append(error)
            }
        }
        #expect(reports.count == 1, "\(reports)")
        guard case .corrupt(_, let reason)? = reports.first else {
            Issue.record("expected corrupt, got \(reports)")
            return
        }
        #expect(reason.contains(path.path) && reason.contains("moved to \(path.path).bad"), "\(reason)")
        // The fresh database takes saves, and the next launch opens it without a report.
        try await cache.save(FileCacheFixtures.entry(count: 5), key: "after")
        let next = try SQLiteLoadableCache(path: path)
        #expect(try await next.load(key: "after") == FileCacheFixtures.entry(count: 5))
        #expect(try await next.integrityCheck() == ["ok"])
    }

    @Test(
        "a save that meets a damaged page fails as saveFailed with the SQLite error, moved aside; the next save works")
    func damagedPageMetBySave() async throws {
        let (folder, path) = Self.makePath()
        defer { FileCacheFixtures.removeDirectory(folder) }
        try await Self.fill(path, count: 400)
        let cache = try SQLiteLoadableCache(path: path)
        _ = try await cache.load(key: "k0")
        var bytes = try FileCacheFixtures.bytes(at: path)
        for index in (4 * 4_096)..<bytes.count { bytes[index] = 0xFF }
        try FileCacheFixtures.write(bytes, to: path)

        var failure: LoadableCacheError?
        for index in 0..<400 where failure == nil {
            failure = await FileCacheFixtures.caught {
                try await cache.save(FileCacheFixtures.entry(count: 2_000), key: "k\(index)")
            }
        }
        guard case .saveFailed(_, let underlying)? = failure, let sqlite = underlying as? SQLiteCacheError else {
            Issue.record("expected saveFailed with a SQLiteCacheError, got \(String(describing: failure))")
            return
        }
        #expect(sqlite.path == path.path)
        #expect(sqlite.movedTo == path.path + ".bad")
        #expect("\(sqlite)".contains("could not be used") && "\(sqlite)".contains("fresh database"), "\(sqlite)")
        try await cache.save(FileCacheFixtures.entry(count: 7), key: "next")
        #expect(try await cache.load(key: "next") == FileCacheFixtures.entry(count: 7))
    }

    @Test("a second recovery of the same path moves the file to .bad-2, keeping the first")
    func secondRecovery() async throws {
        let (folder, path) = Self.makePath()
        defer { FileCacheFixtures.removeDirectory(folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for round in 1...2 {
            try FileCacheFixtures.write(Array("garbage \(round) of a few bytes, repeated".utf8), to: path)
            let cache = try SQLiteLoadableCache(path: path)
            let error = await FileCacheFixtures.caught { _ = try await cache.load(key: "k") }
            let suffix = round == 1 ? ".bad" : ".bad-2"
            #expect(
                "\(error.map { "\($0)" } ?? "")".contains("moved to \(path.path)\(suffix),"),
                "\(String(describing: error))")
        }
        #expect(
            try FileCacheFixtures.bytes(at: URL(fileURLWithPath: path.path + ".bad"))
                == Array("garbage 1 of a few bytes, repeated".utf8))
    }

    @Test("a folder that cannot be made: init throws a SQLiteCacheError naming the folder and the reason")
    func folderCannotBeMade() throws {
        let (folder, _) = Self.makePath()
        defer { FileCacheFixtures.removeDirectory(folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let blocker = folder.appendingPathComponent("file")
        try FileCacheFixtures.write([1], to: blocker)
        let path = blocker.appendingPathComponent("sub/cache.sqlite")
        #expect {
            _ = try SQLiteLoadableCache(path: path)
        } throws: { error in
            guard let error = error as? SQLiteCacheError else { return false }
            return error.path == path.path && error.message.contains(blocker.path) && error.movedTo == nil
        }
    }
}

/// Two objects on one file: when one moves a damaged file aside, the other finds the fresh
/// database at its next call.
@Suite("SQLiteLoadableCache: a second object follows a recovery")
struct SQLiteCacheSharedRecoveryTests {
    @Test("after one object moved a damaged file aside, the other's saves and loads reach the fresh database")
    func otherObjectFollows() async throws {
        let (folder, path) = SQLiteCacheRecoveryTests.makePath()
        defer { FileCacheFixtures.removeDirectory(folder) }
        try await SQLiteCacheRecoveryTests.fill(path, count: 400)
        let first = try SQLiteLoadableCache(path: path)
        let second = try SQLiteLoadableCache(path: path)
        _ = try await first.load(key: "k0")
        _ = try await second.load(key: "k0")
        var bytes = try FileCacheFixtures.bytes(at: path)
        for index in (4 * 4_096)..<bytes.count { bytes[index] = 0xFF }
        try FileCacheFixtures.write(bytes, to: path)
        var report: LoadableCacheError?
        for index in 0..<400 where report == nil {
            report = await FileCacheFixtures.caught { _ = try await first.load(key: "k\(index)") }
        }
        #expect(FileCacheFixtures.kind(of: report) == "corrupt")

        try await second.save(FileCacheFixtures.entry(count: 11), key: "from second")
        #expect(try await first.load(key: "from second") == FileCacheFixtures.entry(count: 11))
        try await first.save(FileCacheFixtures.entry(count: 12), key: "from first")
        #expect(try await second.load(key: "from first") == FileCacheFixtures.entry(count: 12))
        #expect(try await second.load(key: "k399") == nil)
        #expect(try await second.integrityCheck() == ["ok"])

        // The second object's old connection, closed when it followed, left the fresh file's
        // write-ahead log alone: a third object (the next launch) reads both saves.
        let third = try SQLiteLoadableCache(path: path)
        #expect(try await third.load(key: "from second") == FileCacheFixtures.entry(count: 11))
        #expect(try await third.load(key: "from first") == FileCacheFixtures.entry(count: 12))
        #expect(try await third.integrityCheck() == ["ok"])
    }
}
