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

    /// One of the package's syncable loadables, with its core.
    public override var loadableCapabilities: LoadableCapabilities {
        LoadableCapabilities(owner: self, syncable: self)
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

    // MARK: - Syncs the group started

    // Unchecked, as the entries of `PureLoadableGroup`: every access to these two is
    // instantaneous, on the main actor, and runs no other code (members are asked to sync or
    // cancel only outside them).
    /// Whether the running sync of the member at each index was started by this group (see
    /// ``forEachSyncableMember(_:)``): the only member syncs ``cancelSync()`` may cancel. Made by
    /// the first sync the group starts after ``PureLoadableGroup/members`` was set; an entry is
    /// cleared when its member stops syncing.
    @exclusivity(unchecked) private var isSyncStartedByGroup: [Bool] = []

    /// The number of `true` entries of ``isSyncStartedByGroup``.
    @exclusivity(unchecked) private var startedSyncCount = 0

    override func membersWereReassigned() {
        isSyncStartedByGroup = []
        startedSyncCount = 0
    }

    override func memberDidStopSyncing(at index: Int) {
        guard startedSyncCount > 0, isSyncStartedByGroup[index] else { return }
        isSyncStartedByGroup[index] = false
        startedSyncCount -= 1
    }

    /// What ``forEachSyncableMember(_:)`` asks each member.
    private enum MemberRequest {
        case sync, syncIfNeeded, invalidate
    }

    /// One group being walked by ``forEachSyncableMember(_:)``.
    private struct Walk {
        let group: LoadableGroup
        let members: [any SyncableLoadable]
        let indices: [Int]
        let generation: Int
        /// Whether any member may be a group (see ``PureLoadableGroup/hasNestedGroups``).
        let hasNestedGroups: Bool
        var next = 0
        /// The nested group being walked for the member at this index, and whether that member
        /// was syncing before.
        var nested: (index: Int, wasSyncing: Bool)?

        @MainActor
        init(_ group: LoadableGroup) {
            self.group = group
            members = group.syncableMembers
            indices = group.syncableIndices
            generation = group.generation
            hasNestedGroups = group.hasNestedGroups
        }
    }

    /// Asks each syncable member, in member order, to sync (noting the members whose sync that
    /// started), sync if needed (likewise) or invalidate itself.
    ///
    /// A member that is a ``LoadableGroup`` is walked in turn, depth first, with the same request,
    /// as its own `sync()`, `syncIfNeeded()` or `invalidate()` would do, but in a loop rather than
    /// by recursion: 10,000 nested groups need no deep stack. The members asked are those of the
    /// moment each group is reached, even if an observer reassigns ``members`` meanwhile (their
    /// syncs are then not noted).
    private func forEachSyncableMember(_ request: MemberRequest) {
        // The groups above the one being walked; the walk itself stays in a local, so that
        // stepping from one member to the next copies nothing.
        var enclosing: [Walk] = []
        var walk = Walk(self)
        while true {
            guard walk.next < walk.members.count else {
                guard var parent = enclosing.popLast() else { return }
                if let (index, wasSyncing) = parent.nested {
                    parent.nested = nil
                    parent.group.noteSyncStarted(at: index, wasSyncing: wasSyncing, generation: parent.generation)
                }
                walk = parent
                continue
            }
            let member = walk.members[walk.next]
            let index = walk.indices[walk.next]
            walk.next += 1
            // (Entries are read only while the walk's members are still the group's.)
            let wasSyncing = walk.generation == walk.group.generation && walk.group.memberState(at: index) == .syncing
            if walk.hasNestedGroups, let nested = member as? LoadableGroup {
                walk.nested = (index, wasSyncing)
                enclosing.append(walk)
                walk = Walk(nested)
                continue
            }
            switch request {
            case .sync: member.sync()
            case .syncIfNeeded: member.syncIfNeeded()
            case .invalidate: member.invalidate()
            }
            if request != .invalidate {
                walk.group.noteSyncStarted(at: index, wasSyncing: wasSyncing, generation: walk.generation)
            }
        }
    }

    /// Notes that the member at `index` syncs because this group asked it, if it was not syncing
    /// before and the members were not reassigned meanwhile.
    private func noteSyncStarted(at index: Int, wasSyncing: Bool, generation: Int) {
        guard generation == self.generation, !wasSyncing, memberState(at: index) == .syncing else { return }
        if isSyncStartedByGroup.isEmpty { isSyncStartedByGroup = Array(repeating: false, count: members.count) }
        guard !isSyncStartedByGroup[index] else { return }
        isSyncStartedByGroup[index] = true
        startedSyncCount += 1
    }

    /// Cancels the member syncs this group started that still run, in member order; never a
    /// sync another user of the member started.
    private func cancelStartedSyncs() {
        guard startedSyncCount > 0 else { return }
        var indices: [Int] = []
        for index in isSyncStartedByGroup.indices where isSyncStartedByGroup[index] {
            isSyncStartedByGroup[index] = false
            indices.append(index)
        }
        startedSyncCount = 0
        let members = members
        for index in indices {
            members[index].loadableCapabilities.syncable?.cancelSync()
        }
    }

}
