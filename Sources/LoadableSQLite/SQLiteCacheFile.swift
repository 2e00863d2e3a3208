internal import Loadable
import LoadableSupport

/// What the ``SQLiteLoadableCache`` objects of one database path share in one process: the count
/// of files moved aside at the path, and, by its identity, one cache queue and one set of claims
/// (the order of the persistences' reads and writes, and which store or outbox owns which
/// entries), so that the objects of one path are one cache, as the `FileLoadableCache` objects of
/// one folder are.
///
/// One per standardized path, made by the path's first object and kept for the life of the process
/// (a few bytes a path), so that its identity is never another path's.
final class SQLiteCacheFile: Sendable {
    /// The database file's standardized path.
    let path: String
    /// How many times a file was moved aside at the path in this process.
    let recoveries = Locked(0)
    /// How the objects of the path delete removed ranges: tests change it.
    let removals = Locked(Removals())

    /// How the objects of a path delete the rows of removed ranges.
    struct Removals {
        /// The most rows a batch deletes.
        var batchRows = 1_000
        /// A scope's removal of up to this many rows deletes them at once.
        var directRows = SQLiteCacheDatabase.directRemovalRows
        /// Whether batches wait (for tests): a removal still marks, nothing runs batches until
        /// they are let go.
        var isHeld = false
    }

    private init(path: String) {
        self.path = path
    }

    /// The shared state of `path` (a standardized path), made if this is its first object.
    static func file(atPath path: String) -> SQLiteCacheFile {
        registry.withLock { files in
            if let file = files[path] { return file }
            let file = SQLiteCacheFile(path: path)
            files[path] = file
            return file
        }
    }

    private static let registry = Locked<[String: SQLiteCacheFile]>([:])
}
