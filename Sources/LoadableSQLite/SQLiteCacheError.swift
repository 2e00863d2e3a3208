/// Why a ``SQLiteLoadableCache`` could not use its database file: the path, and what SQLite (or
/// the system) said.
///
/// It is the underlying error of the `LoadableCacheError` a cache call throws, the `reason` of a
/// `corrupt` one, and what `init(path:maxBytes:)` throws when no database can be opened at the
/// path at all.
public struct SQLiteCacheError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The database file's path.
    public let path: String
    /// SQLite's extended result code, or 0 when the failure was the system's (a folder that could
    /// not be made, a file that could not be moved).
    public let code: Int32
    /// What SQLite (or the system) said.
    public let message: String
    /// Where the unusable file was moved, when it was: a fresh, empty database was then started at
    /// ``path``.
    public let movedTo: String?

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - path: The database file's path.
    ///   - code: SQLite's extended result code, or 0.
    ///   - message: What SQLite (or the system) said.
    ///   - movedTo: Where the unusable file was moved, if it was.
    public init(path: String, code: Int32, message: String, movedTo: String? = nil) {
        self.path = path
        self.code = code
        self.message = message
        self.movedTo = movedTo
    }

    /// A sentence naming the path, what went wrong, and where the file went if it was moved aside.
    public var description: String {
        let said = code == 0 ? message : "\(message) (SQLite \(code))"
        guard let movedTo else { return "SQLite database \(path): \(said)" }
        return
            "SQLite database \(path) could not be used: \(said); it was moved to \(movedTo), and a fresh database started"
    }
}
