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
