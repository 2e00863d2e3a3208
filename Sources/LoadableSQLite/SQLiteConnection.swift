internal import CLoadableSQLite
internal import Foundation

/// What SQLite said when a call failed: its extended result code and message.
struct SQLiteFailure: Error {
    let code: Int32
    let message: String

    /// The primary result code (the low byte of the extended one).
    var primaryCode: Int32 { code & 0xff }

    /// Whether the file is not a database, or a damaged one: what moving it aside fixes.
    var meansUnusableFile: Bool {
        primaryCode == SQLITE_CORRUPT || primaryCode == SQLITE_NOTADB
    }

    /// Whether the file was moved or deleted behind the connection's back (another object on the
    /// same path moved a damaged file aside): what opening the path again fixes.
    var meansFileMoved: Bool {
        code == SQLITE_READONLY | (4 << 8)  // SQLITE_READONLY_DBMOVED
    }

    /// SQLite's message and its extended result code, as in `file is not a database (SQLite 26)`.
    var text: String { "\(message) (SQLite \(code))" }
}

/// One prepared statement: parameters bound by index (1-based), rows stepped one at a time. The
/// connection that made it finalizes it.
final class SQLiteStatement {
    fileprivate let handle: OpaquePointer
    private let connection: OpaquePointer

    fileprivate init(handle: OpaquePointer, connection: OpaquePointer) {
        self.handle = handle
        self.connection = connection
    }

    /// Binds UTF-8 text: the bytes of `string` as they are (SQLite compares them byte by byte).
    func bind(_ index: Int32, text string: String) throws(SQLiteFailure) {
        var string = string
        let code = string.withUTF8 { bytes in bindText(index, UnsafeRawBufferPointer(bytes)) }
        guard code == SQLITE_OK else { throw SQLiteConnection.failure(of: connection) }
    }

    /// Binds raw bytes as UTF-8 text (a key prefix's successor, which need not be valid UTF-8).
    func bind(_ index: Int32, textBytes bytes: [UInt8]) throws(SQLiteFailure) {
        let code = bytes.withUnsafeBytes { bindText(index, $0) }
        guard code == SQLITE_OK else { throw SQLiteConnection.failure(of: connection) }
    }

    private func bindText(_ index: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32 {
        guard let base = bytes.baseAddress, !bytes.isEmpty else {
            return sqlite3_bind_text(handle, index, "", 0, nil)
        }
        return sqlite3_bind_text64(
            handle, index, base.assumingMemoryBound(to: CChar.self), UInt64(bytes.count), sqliteTransient,
            UInt8(SQLITE_UTF8))
    }

    /// Binds a blob (an empty one for no bytes, never `NULL`).
    func bind(_ index: Int32, blob data: Data) throws(SQLiteFailure) {
        let code = data.withUnsafeBytes { bytes in
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return sqlite3_bind_zeroblob(handle, index, 0) }
            return sqlite3_bind_blob64(handle, index, base, UInt64(bytes.count), sqliteTransient)
        }
        guard code == SQLITE_OK else { throw SQLiteConnection.failure(of: connection) }
    }

    /// Binds a blob, or `NULL` for `nil`.
    func bind(_ index: Int32, blob bytes: [UInt8]?) throws(SQLiteFailure) {
        guard let bytes else {
            sqlite3_bind_null(handle, index)
            return
        }
        let code = bytes.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress, !buffer.isEmpty else { return sqlite3_bind_zeroblob(handle, index, 0) }
            return sqlite3_bind_blob64(handle, index, base, UInt64(buffer.count), sqliteTransient)
        }
        guard code == SQLITE_OK else { throw SQLiteConnection.failure(of: connection) }
    }

    func bind(_ index: Int32, _ value: Int64) {
        sqlite3_bind_int64(handle, index, value)
    }

    func bind(_ index: Int32, _ value: Double) {
        sqlite3_bind_double(handle, index, value)
    }

    /// Steps once: `true` when a row is ready, `false` when the statement is done.
    func step() throws(SQLiteFailure) -> Bool {
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw SQLiteConnection.failure(of: connection)
        }
    }

    /// Runs the statement to its end.
    func run() throws(SQLiteFailure) {
        while try step() {}
    }

    /// Makes the statement ready to run again, its parameters cleared.
    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    func int64(_ column: Int32) -> Int64 {
        sqlite3_column_int64(handle, column)
    }

    func double(_ column: Int32) -> Double {
        sqlite3_column_double(handle, column)
    }

    func type(_ column: Int32) -> Int32 {
        sqlite3_column_type(handle, column)
    }

    /// The column's bytes (text or blob).
    func data(_ column: Int32) -> Data {
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let bytes = sqlite3_column_blob(handle, column) else { return Data() }
        return Data(bytes: bytes, count: count)
    }

    /// The column's bytes (text or blob), as an array.
    func bytes(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let bytes = sqlite3_column_blob(handle, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }
}

/// `SQLITE_TRANSIENT`: SQLite copies what is bound (a C macro Swift does not import).
private let sqliteTransient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)

/// One connection to a database file, and the statements prepared on it. Not thread-safe: its
/// owner (an actor) uses it from one thread at a time. Closed when released.
final class SQLiteConnection {
    private let handle: OpaquePointer
    private var statements: [SQLiteStatement] = []

    /// Opens (or creates) the database at `path`, for reading and writing.
    init(path: String) throws(SQLiteFailure) {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let code = sqlite3_open_v2(path, &handle, flags, nil)
        guard let handle else {
            throw SQLiteFailure(code: code, message: String(cString: sqlite3_errstr(code)))
        }
        guard code == SQLITE_OK else {
            let failure = Self.failure(of: handle)
            sqlite3_close_v2(handle)
            throw failure
        }
        sqlite3_extended_result_codes(handle, 1)
        self.handle = handle
    }

    deinit {
        for statement in statements { sqlite3_finalize(statement.handle) }
        sqlite3_close_v2(handle)
    }

    /// Whether a transaction is open (SQLite rolls one back by itself after some failures).
    var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    /// Whether the file was opened for reading only (the system refused writing).
    var isReadOnly: Bool { sqlite3_db_readonly(handle, "main") == 1 }

    /// Whether the file was renamed or deleted since it was opened (another object moved it
    /// aside): one `stat` of the path.
    var hasMoved: Bool {
        var moved: Int32 = 0
        sqlite3_file_control(handle, "main", SQLITE_FCNTL_HAS_MOVED, &moved)
        return moved != 0
    }

    /// How long a write waits for another connection's write to end before it fails.
    func setBusyTimeout(milliseconds: Int32) {
        sqlite3_busy_timeout(handle, milliseconds)
    }

    /// Prepares `sql` once, for the life of the connection.
    func prepare(_ sql: String) throws(SQLiteFailure) -> SQLiteStatement {
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else { throw Self.failure(of: handle) }
        let prepared = SQLiteStatement(handle: statement, connection: handle)
        statements.append(prepared)
        return prepared
    }

    /// Runs `sql` (one or more statements without parameters).
    func execute(_ sql: String) throws(SQLiteFailure) {
        guard sqlite3_exec(handle, sql, nil, nil, nil) == SQLITE_OK else { throw Self.failure(of: handle) }
    }

    /// The first column of the first row of `sql`, as text (`nil` for no row).
    func text(of sql: String) throws(SQLiteFailure) -> String? {
        try texts(of: sql).first
    }

    /// The first column of every row of `sql`, as text.
    func texts(of sql: String) throws(SQLiteFailure) -> [String] {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw Self.failure(of: handle)
        }
        defer { sqlite3_finalize(statement) }
        var texts: [String] = []
        while true {
            switch sqlite3_step(statement) {
            case SQLITE_ROW: texts.append(sqlite3_column_text(statement, 0).map { String(cString: $0) } ?? "")
            case SQLITE_DONE: return texts
            default: throw Self.failure(of: handle)
            }
        }
    }

    /// The last error on `handle`.
    fileprivate static func failure(of handle: OpaquePointer) -> SQLiteFailure {
        SQLiteFailure(code: sqlite3_extended_errcode(handle), message: String(cString: sqlite3_errmsg(handle)))
    }
}
