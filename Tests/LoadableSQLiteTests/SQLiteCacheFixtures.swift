import CLoadableSQLite
import Foundation
import LoadableCaching
import LoadableCachingTestSupport
import Testing

/// A database file opened with SQLite's own calls, beside the cache: to write a file as an earlier
/// release left it, or a row the cache would never write, and to read what the cache wrote
/// without going through it.
final class RawSQLiteDatabase {
    private let handle: OpaquePointer

    /// Opens (or creates) the database at `path`.
    init(_ path: URL) throws {
        var handle: OpaquePointer?
        guard sqlite3_open(path.path, &handle) == SQLITE_OK, let handle else {
            sqlite3_close(handle)
            throw RawSQLiteFailure(message: "could not open \(path.path)")
        }
        sqlite3_busy_timeout(handle, 10_000)
        self.handle = handle
    }

    deinit {
        sqlite3_close(handle)
    }

    /// Runs `sql` (one or more statements).
    func execute(_ sql: String) throws {
        guard sqlite3_exec(handle, sql, nil, nil, nil) == SQLITE_OK else {
            throw RawSQLiteFailure(message: String(cString: sqlite3_errmsg(handle)))
        }
    }

    /// The first column of every row of `sql`, as text (`""` for `NULL`).
    func texts(_ sql: String) throws -> [String] {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw RawSQLiteFailure(message: String(cString: sqlite3_errmsg(handle)))
        }
        defer { sqlite3_finalize(statement) }
        var texts: [String] = []
        while true {
            switch sqlite3_step(statement) {
            case SQLITE_ROW: texts.append(sqlite3_column_text(statement, 0).map { String(cString: $0) } ?? "")
            case SQLITE_DONE: return texts
            default: throw RawSQLiteFailure(message: String(cString: sqlite3_errmsg(handle)))
            }
        }
    }

    /// The first column of the first row of `sql`, as text.
    func text(_ sql: String) throws -> String? {
        try texts(sql).first
    }
}

struct RawSQLiteFailure: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// Files as the first release of `SQLiteLoadableCache` wrote them (format 1, without pins), from
/// the schema it documented, written without the cache's code.
enum SQLiteCacheFixtures {
    /// The application id every format of the cache keeps: "LDCS".
    static let applicationID = 0x4C44_4353

    /// The schema of format 1.
    static let formatOneSchema = """
        PRAGMA journal_mode = WAL;
        BEGIN;
        CREATE TABLE entries (
            key TEXT NOT NULL PRIMARY KEY,
            data BLOB NOT NULL,
            saved_at NOT NULL,
            version INTEGER NOT NULL,
            metadata BLOB,
            size INTEGER NOT NULL,
            used INTEGER NOT NULL
        );
        CREATE INDEX entries_by_use ON entries (used);
        CREATE TABLE usage (id INTEGER PRIMARY KEY CHECK (id = 0), bytes INTEGER NOT NULL);
        INSERT INTO usage (id, bytes) VALUES (0, 0);
        PRAGMA application_id = \(applicationID);
        PRAGMA user_version = 1;
        COMMIT;
        """

    /// The schema of format 2: format 1 with pins.
    static let formatTwoSchema = """
        PRAGMA journal_mode = WAL;
        BEGIN;
        CREATE TABLE entries (
            key TEXT NOT NULL PRIMARY KEY,
            data BLOB NOT NULL,
            saved_at NOT NULL,
            version INTEGER NOT NULL,
            metadata BLOB,
            size INTEGER NOT NULL,
            used INTEGER NOT NULL,
            pinned INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX entries_by_pin_and_use ON entries (pinned, used);
        CREATE TABLE usage (id INTEGER PRIMARY KEY CHECK (id = 0), bytes INTEGER NOT NULL);
        INSERT INTO usage (id, bytes) VALUES (0, 0);
        PRAGMA application_id = \(applicationID);
        PRAGMA user_version = 2;
        COMMIT;
        """

    /// The metadata's bytes as the schema documents them (the file cache's `LDC2` metadata): a
    /// 4-byte count, then each pair sorted by name, each string as a 4-byte length and its UTF-8,
    /// little-endian.
    static func metadataBytes(_ metadata: [String: String]) -> [UInt8] {
        var bytes = FileCacheFixtures.littleEndian(UInt32(metadata.count))
        for (name, value) in metadata.sorted(by: { $0.key < $1.key }) {
            bytes += FileCacheFixtures.littleEndian(UInt32(name.utf8.count)) + Array(name.utf8)
            bytes += FileCacheFixtures.littleEndian(UInt32(value.utf8.count)) + Array(value.utf8)
        }
        return bytes
    }

    /// Writes a format-1 database at `path` holding `entries` (ASCII keys), used in the order
    /// given (the first is the least recently used), with its usage total; returns the total.
    @discardableResult
    static func writeFormatOne(_ entries: [(key: String, entry: CachedEntry)], to path: URL) throws -> Int {
        try write(entries, schema: formatOneSchema, to: path)
    }

    /// Writes a format-2 database at `path` holding `entries` (ASCII keys; the pinned ones with
    /// their pin), used in the order given, with its usage total; returns the total.
    @discardableResult
    static func writeFormatTwo(_ entries: [(key: String, entry: CachedEntry)], to path: URL) throws -> Int {
        let total = try write(entries, schema: formatTwoSchema, to: path)
        let pinned = entries.filter(\.entry.isPinned).map { "'\($0.key)'" }.joined(separator: ", ")
        try RawSQLiteDatabase(path).execute("UPDATE entries SET pinned = 1 WHERE key IN (\(pinned))")
        return total
    }

    private static func write(
        _ entries: [(key: String, entry: CachedEntry)], schema: String, to path: URL
    ) throws -> Int {
        try FileManager.default.createDirectory(
            at: path.deletingLastPathComponent(), withIntermediateDirectories: true)
        let database = try RawSQLiteDatabase(path)
        try database.execute(schema)
        var total = 0
        var rows: [String] = []
        for (used, (key, entry)) in entries.enumerated() {
            let metadata = entry.metadata.isEmpty ? nil : metadataBytes(entry.metadata)
            let size = key.utf8.count + entry.data.count + (metadata?.count ?? 0)
            total += size
            let metadataSQL = metadata.map { "x'\(FileCacheFixtures.hex($0))'" } ?? "NULL"
            rows.append(
                "('\(key)', x'\(FileCacheFixtures.hex(entry.data))', \(entry.savedAt.timeIntervalSinceReferenceDate), "
                    + "\(entry.version), \(metadataSQL), \(size), \(used + 1))")
        }
        try database.execute(
            """
            BEGIN;
            \(rows.map { "INSERT INTO entries (key, data, saved_at, version, metadata, size, used) VALUES \($0);" }.joined(separator: "\n"))
            UPDATE usage SET bytes = \(total) WHERE id = 0;
            COMMIT;
            """)
        return total
    }
}
