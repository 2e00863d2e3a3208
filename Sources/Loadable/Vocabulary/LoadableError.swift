/// Errors the framework itself reports.
///
/// ```swift
/// do {
///     let photos = try await photosLoadable.syncedContents()
/// } catch LoadableError.unspecified {
///     // The loadable failed without saying why.
/// }
/// ```
public enum LoadableError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The loadable failed to sync (or ended a sync without contents) and gave no error of its own.
    case unspecified
    /// The sync ran longer than the loadable's `syncTimeout` and was cancelled.
    case timedOut
    /// A load returned ``LoadResult/confirmed(metadata:)`` while the loadable had no contents to
    /// confirm.
    case nothingToConfirm

    /// A readable explanation of the error.
    public var description: String {
        switch self {
        case .unspecified: "The loadable failed to sync without giving a reason"
        case .timedOut: "The sync took longer than the loadable's syncTimeout and was cancelled"
        case .nothingToConfirm: "The load confirmed the contents, but the loadable had none to confirm"
        }
    }
}
