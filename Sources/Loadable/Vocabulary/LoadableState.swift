/// The stage a loadable is at: nothing going on, syncing, synced, or failed.
///
/// Any transition is allowed: a loadable is a promise that can be resolved again. Contents obtained
/// earlier stay available while the loadable syncs again or after a refresh fails, so the state
/// says how the *last* sync went, and ``PureLoadable/isContentsAvailable`` says whether there is
/// something to show.
///
/// The ``description`` is the kebab-case name of the case, for logs and truth tables:
///
/// ```swift
/// print(LoadableState.didSyncSuccessfully)  // did-sync-successfully
/// ```
public enum LoadableState: Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Nothing is going on: never synced, or the outcome of the last sync no longer matters.
    case idle
    /// A sync is in progress.
    case syncing
    /// The last sync succeeded; contents are available.
    case didSyncSuccessfully
    /// The last sync failed; contents obtained earlier, if any, are still available.
    case didFailToSync

    /// `idle`, `syncing`, `did-sync-successfully` or `did-fail-to-sync`.
    public var description: String {
        switch self {
        case .idle: "idle"
        case .syncing: "syncing"
        case .didSyncSuccessfully: "did-sync-successfully"
        case .didFailToSync: "did-fail-to-sync"
        }
    }
}
