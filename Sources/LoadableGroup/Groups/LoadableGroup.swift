/// A ``PureLoadableGroup`` that can also be asked to sync: it syncs its syncable members.
///
/// Members may mix pure and syncable loadables; only the syncable ones (found once, when
/// ``PureLoadableGroup/members`` is set) are asked to sync. The group has no sync of its own: its
/// state changes only through its members' notifications, under its ``PureLoadableGroup/Policy``.
///
/// Isolated to the main actor; observers are called on the main actor.
///
/// ```swift
/// let screen = LoadableGroup([profile, settings])    // .strict by default
/// let token = screen.observe { screen in
///     switch screen.loadableState {
///     case .didSyncSuccessfully: show(profile.contents!, settings.contents!)
///     case .didFailToSync: showError(screen.groupError!)
///     case .idle, .syncing: showSpinner()
///     }
/// }
/// screen.syncIfNeeded()
/// ```
///
/// And in a test, with `TestLoadable`s standing for the members:
///
/// ```swift
/// @Test @MainActor func screenFailsWhenSettingsFail() {
///     let profile = TestLoadable<String>(), settings = TestLoadable<Int>()
///     let screen = LoadableGroup([profile, settings])
///     screen.syncIfNeeded()
///     profile.setDidSyncSuccessfully("Ada")
///     settings.setDidFailToSync(nil)
///     #expect(screen.loadableState == .didFailToSync)
/// }
/// ```
///
/// - Complexity: Member notifications are O(1) each, as in ``PureLoadableGroup``; ``needsSync``,
///   ``sync()`` and ``syncIfNeeded()`` are O(n) in the number of syncable members.
@MainActor
open class LoadableGroup: PureLoadableGroup, SyncableLoadable {
    /// Creates a group following `members`.
    ///
    /// - Parameters:
    ///   - members: The loadables to follow, held strongly; may be empty and set later.
    ///   - policy: How the group's state and availability follow from its members'.
    /// - Complexity: O(n) in the number of members.
    public override init(_ members: [any PureLoadable], policy: Policy = .strict) {
        super.init(members, policy: policy)
    }

    /// Whether any syncable member needs to sync.
    ///
    /// - Complexity: O(n) in the number of syncable members (stops at the first that needs it).
    public final var needsSync: Bool {
        syncableMembers.contains { $0.needsSync }
    }

    /// Calls `sync()` on every syncable member, in member order.
    ///
    /// Members decide for themselves (a member already syncing ignores it). The members asked are
    /// those of the moment the call starts, even if an observer reassigns
    /// ``PureLoadableGroup/members`` meanwhile.
    ///
    /// - Complexity: O(n) in the number of syncable members, plus their own work.
    public final func sync() {
        forEachSyncableMember(.sync)
    }

    /// Calls `syncIfNeeded()` on every syncable member, in member order.
    ///
    /// Each member decides whether it needs to sync; the group's own ``needsSync`` is not
    /// consulted.
    ///
    /// - Complexity: O(n) in the number of syncable members, plus their own work.
    public final func syncIfNeeded() {
        forEachSyncableMember(.syncIfNeeded)
    }

    /// Calls `invalidate()` on every syncable member, in member order.
    ///
    /// Each member applies the rule itself: one syncing now syncs once more when it ends; one in
    /// use syncs at once (a group in use passes "in use" to its members); others are marked stale.
    ///
    /// - Complexity: O(n) in the number of syncable members, plus their own work.
    public final func invalidate() {
        forEachSyncableMember(.invalidate)
    }

    /// Cancels the member syncs that this group started (through ``sync()`` or
    /// ``syncIfNeeded()``) and that still run; a member sync someone else started is left alone.
    ///
    /// - Complexity: O(n) in the number of members when the group started any sync that still
    ///   runs (O(1) otherwise), plus the members' own work.
    public final func cancelSync() {
        cancelStartedSyncs()
    }
}
