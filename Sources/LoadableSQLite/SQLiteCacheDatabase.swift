internal import CLoadableSQLite
internal import Foundation
internal import LoadableCaching

/// The cache's database: its schema, its statements (prepared once), and each operation as one
/// transaction. Throws what SQLite said; ``SQLiteLoadableCache`` turns that into the cache's
/// errors and moves an unusable file aside.
///
/// **Schema (an on-disk format, kept across releases).** `PRAGMA application_id` is `0x4C444353`
/// ("LDCS") and `user_version` is 3.
///
/// ```sql
/// CREATE TABLE entries (
///     key TEXT NOT NULL PRIMARY KEY,  -- the key's NFC form
///     data BLOB NOT NULL,
///     saved_at NOT NULL,              -- seconds since 2001-01-01, a REAL (no declared type,
///                                     -- so that SQLite keeps it as given, -0.0 included)
///     version INTEGER NOT NULL,
///     metadata BLOB,                  -- NULL when empty, else as in the file cache's LDC2 files
///     size INTEGER NOT NULL,          -- bytes of key, data and metadata: what maxBytes counts
///     used INTEGER NOT NULL,          -- when last loaded, saved or touched: larger is more
///                                     -- recent
///     pinned INTEGER NOT NULL DEFAULT 0  -- 1 for CachedEntry.isPinned: never evicted, never
///                                        -- removed by removeEntries(savedBefore:)
/// );
/// CREATE INDEX entries_by_pin_and_use ON entries (pinned, used);
/// CREATE TABLE usage (id INTEGER PRIMARY KEY CHECK (id = 0), bytes INTEGER NOT NULL);
/// CREATE TABLE removed_ranges (
///     start_key TEXT NOT NULL,        -- the first key of the range (included), NFC UTF-8
///     end_key TEXT NOT NULL,          -- the end of the range (excluded); need not be UTF-8
///     used_before INTEGER NOT NULL    -- the rows of the range whose used is smaller are removed
/// );
/// ```
///
/// `usage.bytes` is the sum of `size` of every row (pinned rows, and removed rows not deleted yet,
/// included), kept in the same transaction as every change, so that every connection to the file
/// agrees on it without a scan. The index serves eviction (the unpinned rows by use: a range of
/// it) and the next `used` (the larger of the last unpinned and the last pinned row, and of the
/// marks' `used_before`: three seeks).
///
/// **Removed ranges.** A scope's removal of more than ``directRemovalRows`` rows deletes nothing
/// at once: it inserts one row in `removed_ranges` per range of its keys (one, unless keys whose
/// next character joins the prefix's last one split it), with `used_before` the next `used`, in
/// one short transaction. A row in a range whose `used` is smaller than the mark's is removed:
/// every read, touch and list skips it (`isRemoved`), and the next `used` is larger than
/// every mark's, so a save, touch or load after the mark is never hidden by it. Batches of
/// ``removeNextBatch(rows:)`` then delete the removed rows, a bounded number per transaction,
/// moving the mark's `start_key` past what they deleted and dropping the mark when its range is
/// done; the bytes go from `usage` as they are deleted. A save that needs room under a limit
/// deletes removed rows first, before it evicts any entry.
///
/// Format 1 (the first release) had no `pinned` column and its index was
/// `entries_by_use ON entries (used)`; format 2 had no `removed_ranges`. Opening such a file
/// migrates it in place, in one transaction (see ``migrate(_:from:)``).
final class SQLiteCacheDatabase {
    static let applicationID: Int32 = 0x4C44_4353
    static let formatVersion = 3

    /// A scope's removal of up to this many rows deletes them at once, in its transaction; a
    /// larger one marks its ranges removed and leaves the rows to batches.
    static let directRemovalRows = 1_000

    private let connection: SQLiteConnection
    private let begin: SQLiteStatement
    private let commit: SQLiteStatement
    private let rollback: SQLiteStatement
    private let savepoint: SQLiteStatement
    private let releaseSavepoint: SQLiteStatement
    private let rollbackToSavepoint: SQLiteStatement
    private let select: SQLiteStatement
    private let selectTouching: SQLiteStatement
    private let sizeOfKey: SQLiteStatement
    private let upsert: SQLiteStatement
    private let metadataSizeOfKey: SQLiteStatement
    private let touchKey: SQLiteStatement
    private let readUsage: SQLiteStatement
    private let addUsage: SQLiteStatement
    private let deleteKey: SQLiteStatement
    private let leastRecent: SQLiteStatement
    private let deleteRow: SQLiteStatement
    private let deleteRange: SQLiteStatement
    private let keysOfRange: SQLiteStatement
    private let deleteEverything: SQLiteStatement
    private let deleteMarks: SQLiteStatement
    private let readNextUse: SQLiteStatement
    private let deleteSavedBefore: SQLiteStatement
    private let hiddenRemoved: SQLiteStatement
    private let countRange: SQLiteStatement
    private let insertMark: SQLiteStatement
    private let firstMark: SQLiteStatement
    private let batchEnd: SQLiteStatement
    private let deleteRemoved: SQLiteStatement
    private let advanceMark: SQLiteStatement
    private let dropMark: SQLiteStatement
    private let anyMark: SQLiteStatement
    private let dropMarksWithin: SQLiteStatement

    /// The `used` of a row loaded, saved or touched now: one more than the largest (the larger of
    /// the last unpinned row's and the last pinned row's, each one seek in the index), and than
    /// every mark's `used_before`, so that no mark hides it.
    private static let nextUse = """
        (SELECT max(coalesce((SELECT max(used) FROM entries WHERE pinned = 0), 0),
                    coalesce((SELECT max(used) FROM entries WHERE pinned = 1), 0),
                    coalesce((SELECT max(used_before) FROM removed_ranges), 0)) + 1)
        """

    /// Whether the row of `entries` at hand (its `key` and `used`) is in a removed range: a
    /// condition for a `WHERE` on `entries`. With no marks (the usual case), one look at an empty
    /// table.
    private static let isRemoved = """
        EXISTS (SELECT 1 FROM removed_ranges WHERE key >= start_key AND key < end_key AND used < used_before)
        """

    /// Opens the database at `path`, creating the file and the schema if needed, and migrating a
    /// file of an earlier format.
    ///
    /// - Throws: What SQLite said; `SQLITE_READONLY` when the file could be opened for reading
    ///   only, `SQLITE_NOTADB` when it is another application's database or a later format.
    init(path: String) throws(SQLiteFailure) {
        let connection = try SQLiteConnection(path: path)
        connection.setBusyTimeout(milliseconds: 10_000)
        // Reads the file's header: a file that is not a database fails here.
        _ = try connection.text(of: "PRAGMA schema_version")
        if connection.isReadOnly {
            throw SQLiteFailure(code: SQLITE_READONLY, message: "the file can be opened for reading only")
        }
        // Another application's database, or a later format, is left as it is (never switched to
        // a write-ahead log or given a table): the caller moves it aside.
        let applicationID = Int32(try connection.text(of: "PRAGMA application_id") ?? "0") ?? 0
        let version = Int(try connection.text(of: "PRAGMA user_version") ?? "0") ?? 0
        let tables = try connection.text(of: "SELECT count(*) FROM sqlite_schema") ?? "0"
        if tables != "0" && applicationID != Self.applicationID {
            throw SQLiteFailure(
                code: SQLITE_NOTADB,
                message: "the file is another application's database (application_id \(applicationID))")
        }
        if version > Self.formatVersion { throw Self.laterFormat(version) }
        if tables == "0" {
            // A new file: the space `removeAll()` frees can go back to the system
            // (`incremental_vacuum`).
            try connection.execute("PRAGMA auto_vacuum = INCREMENTAL")
        }
        // Write-ahead log: a kill at any moment leaves the last committed save; readers do not
        // wait for writers. NORMAL syncs at checkpoints: a power cut may lose the last saves,
        // never the database's consistency.
        _ = try connection.text(of: "PRAGMA journal_mode = WAL")
        try connection.execute("PRAGMA synchronous = NORMAL")
        try connection.execute("PRAGMA journal_size_limit = 4194304")
        if tables == "0" || version < Self.formatVersion { try Self.setUpSchema(in: connection) }
        try Self.checkMarks(in: connection)
        self.connection = connection
        begin = try connection.prepare("BEGIN IMMEDIATE")
        commit = try connection.prepare("COMMIT")
        rollback = try connection.prepare("ROLLBACK")
        savepoint = try connection.prepare("SAVEPOINT entry")
        releaseSavepoint = try connection.prepare("RELEASE entry")
        rollbackToSavepoint = try connection.prepare("ROLLBACK TO entry")
        select = try connection.prepare(
            "SELECT data, saved_at, version, metadata, pinned FROM entries WHERE key = ?1 AND NOT \(Self.isRemoved)")
        selectTouching = try connection.prepare(
            """
            UPDATE entries SET used = \(Self.nextUse) WHERE key = ?1 AND NOT \(Self.isRemoved)
            RETURNING data, saved_at, version, metadata, pinned
            """)
        sizeOfKey = try connection.prepare("SELECT size FROM entries WHERE key = ?1")
        upsert = try connection.prepare(
            """
            INSERT INTO entries (key, data, saved_at, version, metadata, size, pinned, used)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, \(Self.nextUse))
            ON CONFLICT (key) DO UPDATE SET data = excluded.data, saved_at = excluded.saved_at,
                version = excluded.version, metadata = excluded.metadata, size = excluded.size,
                pinned = excluded.pinned, used = excluded.used
            """)
        metadataSizeOfKey = try connection.prepare(
            """
            SELECT coalesce(length(CAST(metadata AS BLOB)), 0), size, pinned FROM entries
            WHERE key = ?1 AND NOT \(Self.isRemoved)
            """)
        touchKey = try connection.prepare(
            "UPDATE entries SET saved_at = ?2, metadata = ?3, size = size + ?4, used = \(Self.nextUse) WHERE key = ?1")
        readUsage = try connection.prepare("SELECT bytes FROM usage WHERE id = 0")
        addUsage = try connection.prepare("UPDATE usage SET bytes = bytes + ?1 WHERE id = 0 RETURNING bytes")
        deleteKey = try connection.prepare("DELETE FROM entries WHERE key = ?1 RETURNING size")
        // The unpinned entries, least recently used first: a range of the index. (Removed rows
        // are deleted before them, and passed over here: see `evict(excess:)`.)
        leastRecent = try connection.prepare(
            "SELECT rowid, size FROM entries WHERE pinned = 0 AND NOT \(Self.isRemoved) ORDER BY used")
        deleteRow = try connection.prepare("DELETE FROM entries WHERE rowid = ?1")
        deleteRange = try connection.prepare("DELETE FROM entries WHERE key >= ?1 AND key < ?2 RETURNING size")
        keysOfRange = try connection.prepare(
            "SELECT CAST(key AS BLOB) FROM entries WHERE key >= ?1 AND key < ?2 ORDER BY key")
        deleteEverything = try connection.prepare("DELETE FROM entries")
        deleteMarks = try connection.prepare("DELETE FROM removed_ranges")
        readNextUse = try connection.prepare("SELECT \(Self.nextUse)")
        // `+pinned`: a scan of the table, in its order, rather than of every unpinned row through
        // the index, out of the table's order.
        deleteSavedBefore = try connection.prepare(
            "DELETE FROM entries WHERE saved_at < ?1 AND +pinned = 0 RETURNING size")
        // Removed rows not deleted yet, pinned or not, a mark's range after the other's; once
        // each, though a row in two overlapping ranges matches both.
        hiddenRemoved = try connection.prepare(
            """
            SELECT DISTINCT entries.rowid, size FROM removed_ranges CROSS JOIN entries
            WHERE key >= start_key AND key < end_key AND used < used_before
            """)
        countRange = try connection.prepare(
            "SELECT count(*) FROM (SELECT 1 FROM entries WHERE key >= ?1 AND key < ?2 LIMIT ?3)")
        insertMark = try connection.prepare(
            "INSERT INTO removed_ranges (start_key, end_key, used_before) VALUES (?1, ?2, ?3)")
        firstMark = try connection.prepare(
            "SELECT rowid, start_key, end_key, used_before FROM removed_ranges ORDER BY rowid LIMIT 1")
        // The key after the first ?3 keys of a range: where a batch stops (the index alone).
        batchEnd = try connection.prepare(
            "SELECT key FROM entries WHERE key >= ?1 AND key < ?2 ORDER BY key LIMIT 1 OFFSET ?3")
        deleteRemoved = try connection.prepare(
            "DELETE FROM entries WHERE key >= ?1 AND key < ?2 AND used < ?3 RETURNING size")
        advanceMark = try connection.prepare("UPDATE removed_ranges SET start_key = ?2 WHERE rowid = ?1")
        dropMark = try connection.prepare("DELETE FROM removed_ranges WHERE rowid = ?1")
        anyMark = try connection.prepare("SELECT EXISTS (SELECT 1 FROM removed_ranges)")
        dropMarksWithin = try connection.prepare(
            "DELETE FROM removed_ranges WHERE start_key >= ?1 AND end_key <= ?2")
    }

    private static func laterFormat(_ version: Int) -> SQLiteFailure {
        SQLiteFailure(
            code: SQLITE_NOTADB,
            message: "the file is in format \(version) of a later release; this release reads format \(formatVersion)")
    }

    /// Creates the tables of a new file, or migrates a file of format 1, in one transaction that
    /// reads the format again first: another object or process doing the same at the same time
    /// waits for the lock, and then finds the work done.
    private static func setUpSchema(in connection: SQLiteConnection) throws(SQLiteFailure) {
        try connection.execute("BEGIN IMMEDIATE")
        do throws(SQLiteFailure) {
            let version = Int(try connection.text(of: "PRAGMA user_version") ?? "0") ?? 0
            let tables = try connection.text(of: "SELECT count(*) FROM sqlite_schema") ?? "0"
            if tables == "0" {
                try createSchema(in: connection)
            } else if version == 1 || version == 2 {
                try migrate(connection, from: version)
            } else if version > formatVersion {
                throw laterFormat(version)
            }
            try connection.execute("COMMIT")
        } catch {
            try? connection.execute("ROLLBACK")
            throw error
        }
    }

    /// Creates the tables, in the transaction of ``setUpSchema(in:)``.
    private static func createSchema(in connection: SQLiteConnection) throws(SQLiteFailure) {
        try connection.execute(
            """
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
            \(Self.removedRangesSchema)
            PRAGMA application_id = \(Self.applicationID);
            PRAGMA user_version = \(Self.formatVersion);
            """)
    }

    /// The table of removed ranges (format 3).
    private static let removedRangesSchema = """
        CREATE TABLE removed_ranges (
            start_key TEXT NOT NULL,
            end_key TEXT NOT NULL,
            used_before INTEGER NOT NULL
        );
        """

    /// Migrates a file of format 1 or 2 to format 3, in the transaction of ``setUpSchema(in:)``.
    /// From format 1: every entry unpinned, the index by use replaced by the one by pin and use.
    /// From format 2: the table of removed ranges, empty. Nothing else changes: the entries, their
    /// sizes, their order and the usage stay as they are.
    private static func migrate(_ connection: SQLiteConnection, from version: Int) throws(SQLiteFailure) {
        if version == 1 {
            try connection.execute(
                """
                ALTER TABLE entries ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
                DROP INDEX IF EXISTS entries_by_use;
                CREATE INDEX entries_by_pin_and_use ON entries (pinned, used);
                """)
        }
        try connection.execute("\(removedRangesSchema) PRAGMA user_version = \(formatVersion);")
    }

    /// Throws `SQLITE_CORRUPT` when a row of `removed_ranges` is not a mark (a column of another
    /// type): the rows it would hide or delete cannot be known.
    private static func checkMarks(in connection: SQLiteConnection) throws(SQLiteFailure) {
        let bad = try connection.text(
            of: """
                SELECT count(*) FROM removed_ranges WHERE typeof(start_key) != 'text'
                    OR typeof(end_key) != 'text' OR typeof(used_before) != 'integer'
                """)
        guard bad == "0" else {
            throw SQLiteFailure(
                code: SQLITE_CORRUPT,
                message: "\(bad ?? "?") row(s) of removed_ranges are not removed ranges (a column of another type)")
        }
    }

    /// Whether the file was renamed or deleted since it was opened.
    var hasMoved: Bool { connection.hasMoved }

    /// What a load found: an entry, nothing, or a row that is not an entry (`reason`).
    enum Loaded {
        case entry(CachedEntry)
        case none
        case corrupt(reason: String)
    }

    /// The entry of `key` (an NFC key); with `touching`, made the most recently used.
    func load(key: String, touching: Bool) throws(SQLiteFailure) -> Loaded {
        let statement = touching ? selectTouching : select
        defer { statement.reset() }
        try statement.bind(1, text: key)
        guard try statement.step() else { return .none }
        let loaded = Self.entry(in: statement)
        // An UPDATE … RETURNING commits when it is stepped to its end.
        if touching { while try statement.step() {} }
        return loaded
    }

    private static func entry(in row: SQLiteStatement) -> Loaded {
        let savedAtType = row.type(1)
        guard savedAtType == SQLITE_FLOAT || savedAtType == SQLITE_INTEGER, row.type(2) == SQLITE_INTEGER else {
            return .corrupt(reason: "its row's saved_at or version is not a number")
        }
        var metadata: [String: String] = [:]
        switch row.type(3) {
        case SQLITE_NULL: break
        case SQLITE_BLOB:
            guard let decoded = EntryFile.decodedMetadata(row.bytes(3)[...]) else {
                return .corrupt(reason: "its metadata's lengths do not add up")
            }
            metadata = decoded
        default: return .corrupt(reason: "its row's metadata is not a blob")
        }
        guard row.type(4) == SQLITE_INTEGER else { return .corrupt(reason: "its row's pinned is not a number") }
        return .entry(
            CachedEntry(
                data: row.data(0), savedAt: Date(timeIntervalSinceReferenceDate: row.double(1)),
                version: Int(row.int64(2)), metadata: metadata, isPinned: row.int64(4) != 0))
    }

    /// Saves `entry` under `key` (an NFC key), with its pin; with `limit`, then removes the least
    /// recently used unpinned entries until the total is at or under it (or none is left), in the
    /// same transaction. An unpinned entry larger than `limit` is not kept, and the key's old
    /// entry is removed.
    func save(_ entry: CachedEntry, key: String, limit: Int?) throws(SQLiteFailure) {
        try transaction { () throws(SQLiteFailure) in try saveRow(entry, key: key, limit: limit) }
    }

    /// For tests: the transactions this connection committed (one per call that writes, one per
    /// group of saves).
    private(set) var commits = 0
    /// For tests: a save of this key in a group fails after its savepoint, once.
    var failingGroupSave: String?
    /// For tests: the next commit of a group fails (and the group is rolled back), once.
    var failsNextGroupCommit = false

    /// Whether the transaction of a group of saves is open (``saveInGroup(_:key:limit:)``).
    var isInGroup: Bool { connection.isInTransaction }

    /// Saves `entry` under `key` by the rules of ``save(_:key:limit:)``, in the transaction of a
    /// group of saves, which the first save opens (`BEGIN IMMEDIATE`) and ``commitGroup()`` ends:
    /// each save in a savepoint of its own, so that a failed one is undone alone. After a failure
    /// SQLite may have rolled the whole transaction back (a full disk): ``isInGroup`` then reads
    /// `false`, and the group's earlier saves are not written.
    func saveInGroup(_ entry: CachedEntry, key: String, limit: Int?) throws(SQLiteFailure) {
        if !connection.isInTransaction {
            defer { begin.reset() }
            try begin.run()
        }
        do {
            defer { savepoint.reset() }
            try savepoint.run()
        }
        do throws(SQLiteFailure) {
            if let failing = failingGroupSave, failing == key {
                failingGroupSave = nil
                throw SQLiteFailure(code: SQLITE_CONSTRAINT, message: "a save refused for a test")
            }
            try saveRow(entry, key: key, limit: limit)
            defer { releaseSavepoint.reset() }
            try releaseSavepoint.run()
        } catch {
            // Either may fail harmlessly when SQLite has rolled the transaction back already.
            _ = try? rollbackToSavepoint.run()
            rollbackToSavepoint.reset()
            _ = try? releaseSavepoint.run()
            releaseSavepoint.reset()
            throw error
        }
    }

    /// Commits the transaction of a group of saves, if one is open; rolls it back if the commit
    /// fails.
    func commitGroup() throws(SQLiteFailure) {
        guard connection.isInTransaction else { return }
        if failsNextGroupCommit {
            failsNextGroupCommit = false
            rollBack()
            throw SQLiteFailure(code: SQLITE_FULL, message: "a commit refused for a test")
        }
        try commitOrRollBack()
    }

    /// What an update's change leaves to write.
    enum Change {
        /// Nothing: the entry stays as it was.
        case none
        /// The entry to save, by the rules of ``save(_:key:limit:)``.
        case save(CachedEntry)
        /// The entry goes.
        case remove
    }

    /// Loads the entry of `key` (an NFC key; with `touching`, made the most recently used), and
    /// writes what `change` makes of what was found, in one `BEGIN IMMEDIATE` transaction: no
    /// write of another connection, in this process or another, comes in between. A save keeps
    /// the rules of ``save(_:key:limit:)``, the limit's evictions included.
    func update(key: String, touching: Bool, limit: Int?, _ change: (Loaded) -> Change) throws(SQLiteFailure) {
        try transaction { () throws(SQLiteFailure) in
            switch change(try load(key: key, touching: touching)) {
            case .none: break
            case .save(let entry): try saveRow(entry, key: key, limit: limit)
            case .remove: try removeKey(key)
            }
        }
    }

    /// Sets the save date and the metadata of the row of `key` (an NFC key), its size and the
    /// usage by the metadata's change, and makes it the most recently used; its data, version and
    /// pin stay. With `limit`, the rules of a save of the changed entry follow, in the same
    /// transaction: unpinned and larger than `limit` on its own, the row is removed; else the
    /// least recently used unpinned rows are removed while the total is over the limit, the
    /// touched row last (it is the most recently used).
    ///
    /// - Returns: Whether `key` has a row (`false`: nothing was written).
    func touch(key: String, savedAt: Date, metadata: [String: String], limit: Int?) throws(SQLiteFailure) -> Bool {
        let encoded = Self.encodedMetadata(metadata)
        var found = false
        try transaction { () throws(SQLiteFailure) in
            let oldMetadataSize: Int64
            let oldSize: Int64
            let isPinned: Bool
            do {
                defer { metadataSizeOfKey.reset() }
                try metadataSizeOfKey.bind(1, text: key)
                guard try metadataSizeOfKey.step() else { return }
                oldMetadataSize = metadataSizeOfKey.int64(0)
                oldSize = metadataSizeOfKey.int64(1)
                isPinned = metadataSizeOfKey.int64(2) != 0
            }
            found = true
            let delta = Int64(encoded?.count ?? 0) - oldMetadataSize
            if let limit, oldSize + delta > Int64(limit), !isPinned {
                try removeKey(key)
                return
            }
            do {
                defer { touchKey.reset() }
                try touchKey.bind(1, text: key)
                touchKey.bind(2, savedAt.timeIntervalSinceReferenceDate)
                try touchKey.bind(3, blob: encoded)
                touchKey.bind(4, delta)
                try touchKey.run()
            }
            let total = try addToUsage(delta)
            if let limit, total > Int64(limit) { try evict(excess: total - Int64(limit)) }
        }
        return found
    }

    /// The bytes of `metadata` as a row keeps them: `nil` (`NULL`) when empty, else as in the
    /// file cache's LDC2 files.
    private static func encodedMetadata(_ metadata: [String: String]) -> [UInt8]? {
        metadata.isEmpty ? nil : EntryFile.encodedMetadata(metadata)
    }

    /// Removes the entry of `key` (an NFC key).
    func remove(key: String) throws(SQLiteFailure) {
        try transaction { () throws(SQLiteFailure) in try removeKey(key) }
    }

    /// Removes every entry whose key starts with the bytes of `prefix` (an NFC prefix); every
    /// entry for an empty one. Up to `directRows` rows are deleted at once; more are marked
    /// removed (see the type's documentation), and the caller runs ``removeNextBatch(rows:)``.
    ///
    /// - Returns: Whether ranges were marked removed (batches are left to run).
    @discardableResult
    func removeEntries(keyPrefix prefix: String, directRows: Int = directRemovalRows) throws(SQLiteFailure) -> Bool {
        var successor = Array(prefix.utf8)
        guard let last = successor.popLast() else {
            try removeAll()
            return false
        }
        // Valid UTF-8 ends with a byte under 0xC0: adding one never carries.
        successor.append(last + 1)
        var marked = false
        try transaction { () throws(SQLiteFailure) in
            // The ranges of the keys that start with the prefix as Swift compares strings.
            var lower = Array(prefix.utf8)
            var ranges: [(lower: [UInt8], upper: [UInt8])] = []
            for kept in try keysJoiningPrefix(prefix, successor: successor) {
                ranges.append((lower, kept))
                // The smallest key after `kept`: it and a zero byte.
                lower = kept + [0]
            }
            ranges.append((lower, successor))
            if try rowCount(from: Array(prefix.utf8), to: successor, upTo: directRows + 1) <= directRows {
                var freed: Int64 = 0
                for range in ranges { freed += try removeRange(from: range.lower, before: range.upper) }
                _ = try addToUsage(-freed)
                // The marks of earlier removals inside the prefix's range: their rows are gone.
                defer { dropMarksWithin.reset() }
                try dropMarksWithin.bind(1, text: prefix)
                try dropMarksWithin.bind(2, textBytes: successor)
                try dropMarksWithin.run()
                return
            }
            let before = try nextUse()
            for range in ranges {
                defer { insertMark.reset() }
                try insertMark.bind(1, textBytes: range.lower)
                try insertMark.bind(2, textBytes: range.upper)
                insertMark.bind(3, before)
                try insertMark.run()
            }
            marked = true
        }
        return marked
    }

    /// The keys (UTF-8 bytes) whose bytes start with `prefix` but whose next character joins the
    /// prefix's last one (a combining accent, a joined emoji, a line feed after a carriage
    /// return), so that they do not start with it as Swift compares strings: they stay. Only a
    /// key whose next byte is not ASCII, or is a line feed, can be one (two ranges of the key
    /// index), unless an ASCII letter joins the prefix's end (it ends with a "Prepend" character,
    /// as U+0600 ARABIC NUMBER SIGN): then every key of the range is checked.
    private func keysJoiningPrefix(_ prefix: String, successor: [UInt8]) throws(SQLiteFailure) -> [[UInt8]] {
        let bytes = Array(prefix.utf8)
        let ranges: [(lower: [UInt8], upper: [UInt8])] =
            (prefix + "a").hasPrefix(prefix)
            ? [(bytes + [0x0A], bytes + [0x0B]), (bytes + [0x80], successor)] : [(bytes, successor)]
        var kept: [[UInt8]] = []
        for range in ranges {
            defer { keysOfRange.reset() }
            try keysOfRange.bind(1, textBytes: range.lower)
            try keysOfRange.bind(2, textBytes: range.upper)
            while try keysOfRange.step() {
                let key = keysOfRange.bytes(0)
                if !String(decoding: key, as: UTF8.self).hasPrefix(prefix) { kept.append(key) }
            }
        }
        return kept
    }

    /// How many rows are in `lower..<upper`, counting up to `limit` (the key index alone).
    private func rowCount(from lower: [UInt8], to upper: [UInt8], upTo limit: Int) throws(SQLiteFailure) -> Int {
        defer { countRange.reset() }
        try countRange.bind(1, textBytes: lower)
        try countRange.bind(2, textBytes: upper)
        countRange.bind(3, Int64(limit))
        return try countRange.step() ? Int(countRange.int64(0)) : 0
    }

    /// The `used` a row loaded, saved or touched now gets.
    private func nextUse() throws(SQLiteFailure) -> Int64 {
        defer { readNextUse.reset() }
        return try readNextUse.step() ? readNextUse.int64(0) : 1
    }

    /// Removes the keys in `lower..<upper`; returns the bytes freed.
    private func removeRange(from lower: [UInt8], before upper: [UInt8]) throws(SQLiteFailure) -> Int64 {
        defer { deleteRange.reset() }
        try deleteRange.bind(1, textBytes: lower)
        try deleteRange.bind(2, textBytes: upper)
        return try Self.sumOfSizes(stepping: deleteRange)
    }

    /// Steps a `DELETE … RETURNING size` to its end; returns the sum of the sizes.
    private static func sumOfSizes(stepping delete: SQLiteStatement) throws(SQLiteFailure) -> Int64 {
        var freed: Int64 = 0
        while try delete.step() { freed += delete.int64(0) }
        return freed
    }

    /// Whether ranges are marked removed, their rows not all deleted yet.
    func hasRemovedRanges() throws(SQLiteFailure) -> Bool {
        defer { anyMark.reset() }
        return try anyMark.step() && anyMark.int64(0) != 0
    }

    /// Deletes up to `rows` rows of the oldest removed range (the rows saved since its mark in
    /// that part of the range are passed over and stay), in one transaction: the bytes go from
    /// the usage, the mark's start moves past the part done, and the mark goes when its range is
    /// done.
    ///
    /// - Returns: Whether removed ranges are left.
    /// - Throws: `SQLITE_CORRUPT` when the mark's row is not a mark; what SQLite said otherwise.
    func removeNextBatch(rows: Int) throws(SQLiteFailure) -> Bool {
        var more = false
        try transaction { () throws(SQLiteFailure) in
            let mark: Int64
            let lower: [UInt8]
            let upper: [UInt8]
            let before: Int64
            do {
                defer { firstMark.reset() }
                guard try firstMark.step() else { return }
                guard firstMark.type(1) == SQLITE_TEXT, firstMark.type(2) == SQLITE_TEXT,
                    firstMark.type(3) == SQLITE_INTEGER
                else {
                    throw SQLiteFailure(
                        code: SQLITE_CORRUPT, message: "a row of removed_ranges is not a removed range")
                }
                (mark, lower, upper, before) = (
                    firstMark.int64(0), firstMark.bytes(1), firstMark.bytes(2), firstMark.int64(3)
                )
            }
            var end: [UInt8]?
            do {
                defer { batchEnd.reset() }
                try batchEnd.bind(1, textBytes: lower)
                try batchEnd.bind(2, textBytes: upper)
                batchEnd.bind(3, Int64(max(rows, 1)))
                if try batchEnd.step() { end = batchEnd.bytes(0) }
            }
            let freed: Int64
            do {
                defer { deleteRemoved.reset() }
                try deleteRemoved.bind(1, textBytes: lower)
                try deleteRemoved.bind(2, textBytes: end ?? upper)
                deleteRemoved.bind(3, before)
                freed = try Self.sumOfSizes(stepping: deleteRemoved)
            }
            if let end {
                defer { advanceMark.reset() }
                advanceMark.bind(1, mark)
                try advanceMark.bind(2, textBytes: end)
                try advanceMark.run()
            } else {
                defer { dropMark.reset() }
                dropMark.bind(1, mark)
                try dropMark.run()
            }
            if freed != 0 { _ = try addToUsage(-freed) }
            more = try hasRemovedRanges()
        }
        return more
    }
    /// Removes every entry.
    func removeAll() throws(SQLiteFailure) {
        try transaction { () throws(SQLiteFailure) in
            defer { deleteEverything.reset() }
            try deleteEverything.run()
            defer { deleteMarks.reset() }
            try deleteMarks.run()
            _ = try addToUsage(-(try usageBytes()))
        }
        try releaseFreeSpace()
    }

    /// Removes the unpinned entries saved before `date`.
    func removeEntries(savedBefore date: Date) throws(SQLiteFailure) {
        try transaction { () throws(SQLiteFailure) in
            defer { deleteSavedBefore.reset() }
            deleteSavedBefore.bind(1, date.timeIntervalSinceReferenceDate)
            _ = try addToUsage(-(try Self.sumOfSizes(stepping: deleteSavedBefore)))
        }
    }

    /// Removes the least recently used unpinned entries until the total is at or under `limit`
    /// (or none is left): for a limit lowered since the entries were saved, when a cache object
    /// opens the file.
    func enforce(limit: Int) throws(SQLiteFailure) {
        guard try usageBytes() > Int64(limit) else { return }
        try transaction { () throws(SQLiteFailure) in
            let total = try usageBytes()
            if total > Int64(limit) { try evict(excess: total - Int64(limit)) }
        }
    }

    /// The bytes of the entries (removed rows not deleted yet left out), and their keys in the
    /// order eviction would take them: the unpinned ones from least to most recently used, then
    /// the pinned ones (which it never takes), from least to most recently used: for tests.
    func usage() throws(SQLiteFailure) -> (totalBytes: Int, keysLeastRecentFirst: [String]) {
        let keys = try connection.texts(of: "SELECT key FROM entries WHERE NOT \(Self.isRemoved) ORDER BY pinned, used")
        return (Int(try usageBytes() - removedBytes().bytes), keys)
    }

    /// The rows of removed ranges not deleted yet, their bytes (which the usage still counts),
    /// and the marks: for tests.
    func removedBytes() throws(SQLiteFailure) -> (rows: Int, bytes: Int64, marks: Int) {
        let rows = try connection.text(of: "SELECT count(*) FROM entries WHERE \(Self.isRemoved)") ?? "0"
        let bytes = try connection.text(of: "SELECT total(size) FROM entries WHERE \(Self.isRemoved)") ?? "0"
        let marks = try connection.text(of: "SELECT count(*) FROM removed_ranges") ?? "0"
        return (Int(rows) ?? 0, Int64(Double(bytes) ?? 0), Int(marks) ?? 0)
    }

    /// What `PRAGMA integrity_check` says (`["ok"]` for a sound file), and a line more when the
    /// kept usage is not the sum of the entries' sizes: for tests.
    func integrityCheck() throws(SQLiteFailure) -> [String] {
        var lines = try connection.texts(of: "PRAGMA integrity_check")
        let total = try connection.text(of: "SELECT total(size) FROM entries") ?? "0"
        let kept = try connection.text(of: "SELECT bytes FROM usage") ?? "0"
        if Double(total) != Double(kept) {
            lines.append("usage.bytes is \(kept), the entries' sizes add up to \(total)")
        }
        return lines
    }

    // MARK: - Steps

    private func transaction(_ body: () throws(SQLiteFailure) -> Void) throws(SQLiteFailure) {
        defer { begin.reset() }
        try begin.run()
        do {
            try body()
        } catch {
            rollBack()
            throw error
        }
        try commitOrRollBack()
    }

    /// Commits the open transaction; rolls it back when the commit fails.
    private func commitOrRollBack() throws(SQLiteFailure) {
        do {
            defer { commit.reset() }
            try commit.run()
            commits += 1
        } catch {
            rollBack()
            throw error
        }
    }

    /// Rolls the open transaction back. SQLite may have rolled it back already (a full disk):
    /// then this fails, harmlessly.
    private func rollBack() {
        _ = try? rollback.run()
        rollback.reset()
    }

    /// Saves `entry` under `key`, in the transaction of the caller (see ``save(_:key:limit:)``).
    private func saveRow(_ entry: CachedEntry, key: String, limit: Int?) throws(SQLiteFailure) {
        let metadata = Self.encodedMetadata(entry.metadata)
        let size = Int64(key.utf8.count) + Int64(entry.data.count) + Int64(metadata?.count ?? 0)
        if let limit, size > Int64(limit), !entry.isPinned {
            try removeKey(key)
            return
        }
        let oldSize = try sizeOf(key: key)
        try upsert.bind(1, text: key)
        try upsert.bind(2, blob: entry.data)
        upsert.bind(3, entry.savedAt.timeIntervalSinceReferenceDate)
        upsert.bind(4, Int64(entry.version))
        try upsert.bind(5, blob: metadata)
        upsert.bind(6, size)
        upsert.bind(7, Int64(entry.isPinned ? 1 : 0))
        do {
            defer { upsert.reset() }
            try upsert.run()
        }
        let total = try addToUsage(size - oldSize)
        if let limit, total > Int64(limit) { try evict(excess: total - Int64(limit)) }
    }

    private func sizeOf(key: String) throws(SQLiteFailure) -> Int64 {
        defer { sizeOfKey.reset() }
        try sizeOfKey.bind(1, text: key)
        return try sizeOfKey.step() ? sizeOfKey.int64(0) : 0
    }

    private func removeKey(_ key: String) throws(SQLiteFailure) {
        let freed: Int64
        do {
            defer { deleteKey.reset() }
            try deleteKey.bind(1, text: key)
            freed = try Self.sumOfSizes(stepping: deleteKey)
        }
        if freed != 0 { _ = try addToUsage(-freed) }
    }

    /// Adds `delta` to the usage; returns the new total.
    private func addToUsage(_ delta: Int64) throws(SQLiteFailure) -> Int64 {
        defer { addUsage.reset() }
        addUsage.bind(1, delta)
        guard try addUsage.step() else { return 0 }
        let total = addUsage.int64(0)
        while try addUsage.step() {}
        return total
    }

    private func usageBytes() throws(SQLiteFailure) -> Int64 {
        defer { readUsage.reset() }
        return try readUsage.step() ? readUsage.int64(0) : 0
    }

    /// Removes the least recently used unpinned entries until at least `excess` bytes are freed,
    /// or none is left: first rows of removed ranges not deleted yet (no entry goes while they
    /// take room), then entries.
    private func evict(excess: Int64) throws(SQLiteFailure) {
        var rows: [Int64] = []
        var freed: Int64 = 0
        // `leastRecent` passes over removed rows: no row comes from both.
        for candidates in [hiddenRemoved, leastRecent] {
            defer { candidates.reset() }
            while freed < excess, try candidates.step() {
                rows.append(candidates.int64(0))
                freed += candidates.int64(1)
            }
        }
        for row in rows {
            defer { deleteRow.reset() }
            deleteRow.bind(1, row)
            try deleteRow.run()
        }
        _ = try addToUsage(-freed)
    }

    /// Gives the pages that removals freed back to the file system: after `removeAll()`, where
    /// they are every page but the schema's, so nothing moves. (After a scope's or an old date's
    /// removal the freed pages stay in the file for later saves: giving them back would move every
    /// page after them, which took longer than the removal.)
    private func releaseFreeSpace() throws(SQLiteFailure) {
        try connection.execute("PRAGMA incremental_vacuum")
    }
}
