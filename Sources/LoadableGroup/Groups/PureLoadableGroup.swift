public import Observation

/// A loadable made of other loadables: its state and availability follow its members' under a
/// failure ``Policy``.
///
/// Members may mix pure and syncable loadables. The group holds them strongly and observes each
/// of them; you observe the group like any loadable. To sync the members through the group, use
/// the ``LoadableGroup`` subclass.
///
/// | policy | state | contents available |
/// |---|---|---|
/// | ``Policy/strict`` | any member failed → failed; else any syncing → syncing; else all succeeded → succeeded; else idle | every member's contents available |
/// | ``Policy/never`` | any syncing → syncing; else any idle → idle; else succeeded (a failed member counts as done) | every member that did not fail has contents available |
/// | ``Policy/any`` | any syncing → syncing; else any succeeded → succeeded; else all failed → failed; else idle | at least one member's contents available |
///
/// A group with no members is `LoadableState.idle` with no contents available.
///
/// The group notifies its observers when its state or its availability changes, and on every
/// member notification while it is `LoadableState.didSyncSuccessfully` (a member's contents
/// may have changed); never otherwise. ``groupDidChange()`` runs just before observers are told.
///
/// Isolated to the main actor; observers are called on the main actor, synchronously, inside
/// the member change that caused it. The group follows each member at every change, before the
/// member's own observers are called and even while the member is notifying, so its state is
/// never stale; its own notifications follow the observer rules of every loadable (a change made
/// during one of its rounds queues one more round).
///
/// ```swift
/// let header = PureLoadableGroup([profileFeed, badgeFeed], policy: .never)
/// let token = header.observe { header in
///     if header.loadableState == .didSyncSuccessfully { render(profileFeed.contents, badgeFeed.contents) }
/// }
/// ```
///
/// It is `Observable`: a SwiftUI view (or `withObservationTracking`) that reads its
/// ``loadableState``, ``error`` or ``isContentsAvailable`` is updated whenever the group notifies.
///
/// - Complexity: Each member notification is handled in O(1): the group keeps the last state and
///   availability it saw for each member and counts of members per state, and never rescans the
///   other members. Setting ``members`` is O(n) in the number of members, plus the check that the
///   group does not end up inside itself (see ``members``).
@MainActor
open class PureLoadableGroup: PureLoadable, Observable, @MainActor CustomStringConvertible {
    /// How a group's state and availability follow from its members'.
    ///
    /// ```swift
    /// let dashboard = LoadableGroup([weather, news], policy: .any)  // show whatever loaded
    /// ```
    public enum Policy: Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// All or nothing: any failed member fails the group; the group succeeds when every
        /// member did; contents are available when every member's are.
        case strict
        /// Failures are ignored: the group succeeds once no member is idle or syncing, even if
        /// some failed; contents are available when every member that did not fail has them,
        /// so success still implies contents.
        case never
        /// Anything will do: the group succeeds when no member is syncing and at least one
        /// succeeded, fails when all failed; contents are available when any member's are.
        case any

        /// `strict`, `never` or `any`.
        public var description: String {
            switch self {
            case .strict: "strict"
            case .never: "never"
            case .any: "any"
            }
        }
    }

    /// The group, held weakly for its member observers: one object they all share, where a
    /// `[weak self]` capture would box a weak reference for each member (one more allocation).
    @MainActor
    private final class WeakGroupReference {
        weak var group: PureLoadableGroup?
        init(_ group: PureLoadableGroup) { self.group = group }
    }

    /// What the group last saw of one member, and the observation of it.
    private struct MemberEntry {
        var state: LoadableState
        var isContentsAvailable: Bool
        /// The member again, if it is one of the package's loadables: it can be read without
        /// telling Observation (asked once, when subscribing, rather than on every
        /// notification).
        var untracked: (any LoadableCoreOwner)?
        var observation: LoadableObservation?
    }

    /// The group's state (`core.state`) and availability (`core.hasContents`), observers and
    /// Observation registrar.
    package final let core = LoadableCore()

    /// One of the package's loadables, with its core (a class member, so that a syncable subclass
    /// answers for itself).
    public var loadableCapabilities: LoadableCapabilities { LoadableCapabilities(owner: self) }
    // Unchecked: every access to these four is instantaneous and on the main actor (a read, a
    // field written, an append, a mutating method of `MemberTally`), and none runs other code:
    // member code runs only after what it needs was copied out (see `memberDidNotify`), and
    // `subscribe()` keeps the old entries alive while it empties the list, so no token is released
    // inside the access. Left checked, they cost each member about 1,000 instructions of runtime
    // calls (`swift_beginAccess`) over subscribing, a sync and a success: a sixth of the group's
    // cost per member.
    @exclusivity(unchecked) private var entries: [MemberEntry] = []
    @exclusivity(unchecked) private var tally = MemberTally()
    /// Grows with every assignment of ``members``; observers of older members carry an older one.
    @exclusivity(unchecked) private(set) var generation = 0
    /// Set while subscribing to new members: their notifications update the counts only.
    @exclusivity(unchecked) private var isSubscribing = false

    /// The group, held weakly, for its member observers and for the groups it is a member of.
    private lazy var weakReference = WeakGroupReference(self)

    /// The members that can be asked to sync, in member order; found once per assignment of
    /// ``members``.
    private(set) var syncableMembers: [any SyncableLoadable] = []

    /// The index in ``members`` of each of ``syncableMembers``.
    private(set) var syncableIndices: [Int] = []

    /// The members that are groups themselves, in member order (with repeats); found once per
    /// assignment of ``members``.
    private var nestedGroups: [PureLoadableGroup] = []

    /// Whether any member is a group: when none is, a walk over ``syncableMembers`` need not ask
    /// each member whether it is one.
    var hasNestedGroups: Bool { !nestedGroups.isEmpty }

    /// The groups this group is a member of, each with how many times, keyed by their
    /// ``weakReference``. A group that was released without leaving this one stays until
    /// ``pruneParents()`` drops it.
    private var parents: [ObjectIdentifier: (reference: WeakGroupReference, count: Int)] = [:]
    /// The size of ``parents`` at which released groups are dropped from it next.
    private var parentPruneThreshold = 8

    /// Called after every member notification (and assignment of ``members``) once the group's
    /// state is up to date, with whether the group is about to notify its own observers.
    var memberChangeHandler: (@MainActor (_ groupWillNotify: Bool) -> Void)?

    /// How the group's state and availability follow from its members'.
    public let policy: Policy

    /// The loadables the group follows, held strongly.
    ///
    /// Setting it stops observing the old members, observes the new ones and recomputes the
    /// group, which then notifies under the usual rule (state or availability changed, or the
    /// group is `LoadableState.didSyncSuccessfully`). The same object may appear more than
    /// once; each occurrence counts as a member.
    ///
    /// A group must not be its own member, directly or through other groups: the assignment that
    /// would close such a loop stops the program with a message. A loop through a proxy or a
    /// loadable of your own is not detected; do not make one.
    ///
    /// - Complexity: O(n) for each assignment (including an in-place `append`), where n is the
    ///   number of old plus new members; plus, for each group among the new members, a search for
    ///   a loop that stops as soon as either the groups nested in that member or the groups this
    ///   group is nested in are exhausted. Building nested groups level by level, bottom-up or
    ///   top-down, costs O(1) per level.
    public final var members: [any PureLoadable] {
        didSet {
            subscribe()
            requireNotOwnMember()
            update()
        }
    }

    /// Creates a group following `members`.
    ///
    /// Creating a group never notifies; its state is computed from the members at once.
    ///
    /// - Parameters:
    ///   - members: The loadables to follow, held strongly; may be empty and set later.
    ///   - policy: How the group's state and availability follow from its members'.
    /// - Complexity: O(n) in the number of members. (A new group cannot be inside its members, so
    ///   there is nothing to check for loops.)
    public init(_ members: [any PureLoadable], policy: Policy = .strict) {
        self.members = members
        self.policy = policy
        subscribe()
        core.store(state: tally.state(for: policy), error: nil)
        core.hasContents = tally.isContentsAvailable(for: policy)
    }

    // MARK: - Reading

    /// The group's state, computed from its members' under ``policy``.
    ///
    /// - Complexity: O(1); the value is kept up to date on each member notification.
    public final var loadableState: LoadableState {
        core.trackAccess()
        return core.state
    }

    /// Whether the group has contents to show, computed from its members' under ``policy``.
    ///
    /// Kept up to date on every member notification, even when the group's state does not
    /// change (MMMLoadable's groups refreshed it only with the state).
    ///
    /// - Complexity: O(1).
    public final var isContentsAvailable: Bool {
        core.trackAccess()
        return core.hasContents
    }

    /// Every failed member with its error, in member order; `nil` unless the group's state is
    /// `LoadableState.didFailToSync`.
    ///
    /// Under ``Policy/never`` the group never fails, so this is always `nil` there; read the
    /// members' errors yourself if you need them.
    ///
    /// - Complexity: O(n) in the number of members, on each read (not on member notifications).
    public final var groupError: LoadableGroupError? {
        core.trackAccess()
        guard core.state == .didFailToSync else { return nil }
        var failures: [LoadableGroupError.Failure] = []
        for (index, entry) in entries.enumerated() where entry.state == .didFailToSync {
            failures.append(LoadableGroupError.Failure(index: index, error: members[index].error))
        }
        return LoadableGroupError(failures: failures)
    }

    /// ``groupError``, as the `PureLoadable` requirement.
    ///
    /// - Complexity: O(n) in the number of members, on each read.
    public final var error: (any Error)? { groupError }

    /// `<TypeName: state, contents available: yes|no>`.
    open var description: String { loadableDescription() }

    // MARK: - Observation

    /// Calls `handler` after every change of the group until the returned token is cancelled or
    /// released.
    ///
    /// - Parameter handler: Called on the main actor with the group.
    /// - Returns: The token that keeps the observation alive.
    public final func addObserver(
        _ handler: @escaping @MainActor (any PureLoadable) -> Void
    ) -> LoadableObservation {
        registerObserver(handler)
    }

    /// Called after the group's state and availability were updated and just before its
    /// observers are notified.
    ///
    /// Does nothing by default; override it to update values derived from the members.
    open func groupDidChange() {}

    // MARK: - Bookkeeping

    /// Stops observing the old members and observes the current ones, rebuilding the counts.
    private func subscribe() {
        generation += 1
        let generation = generation
        let oldEntries = entries
        entries = []
        tally = MemberTally()
        // Cancel explicitly: `oldEntries` may be the last reference, but cancel at once anyway.
        for entry in oldEntries { entry.observation?.cancel() }
        for group in nestedGroups { group.removeParent(weakReference) }
        membersWereReassigned()

        let oldSyncable = syncableMembers
        let members = members
        entries.reserveCapacity(members.count)
        var syncable: [any SyncableLoadable] = []
        var syncableIndices: [Int] = []
        syncable.reserveCapacity(members.count)
        syncableIndices.reserveCapacity(members.count)
        let reference = weakReference
        var groups: [PureLoadableGroup] = []
        isSubscribing = true
        defer { isSubscribing = false }
        for (index, member) in members.enumerated() {
            if let group = member as? PureLoadableGroup { groups.append(group) }
            let capabilities = member.loadableCapabilities
            let untracked = capabilities.owner
            let (state, isContentsAvailable) = untracked?.untrackedStatus ?? Self.status(of: member)
            entries.append(
                MemberEntry(state: state, isContentsAvailable: isContentsAvailable, untracked: untracked))
            tally.add(state, isContentsAvailable: isContentsAvailable)
            if let member = capabilities.syncable {
                syncable.append(member)
                syncableIndices.append(index)
            }
            // Immediate: the group is up to date at every change of the member, even one made
            // while the member's observers are being notified.
            let handler: ObserverList.Handler = { _ in
                reference.group?.memberDidNotify(at: index, generation: generation)
            }
            let observation = untracked?.registerImmediateObserver(handler) ?? member.addObserver(handler)
            // A member may notify while being subscribed to, and that may reassign `members`.
            guard self.generation == generation else {
                observation.cancel()
                return
            }
            entries[index].observation = observation
        }
        syncableMembers = syncable
        self.syncableIndices = syncableIndices
        nestedGroups = groups
        for group in groups { group.addParent(reference) }
        if core.isInUse {
            // The new members first, so that a member in both lists stays in use throughout.
            for member in syncable { member.beginUseIfCounted() }
            for member in oldSyncable { member.endUseIfCounted() }
        }
    }

    // MARK: - Use, syncs and staleness

    /// Passes "in use" on to the syncable members.
    package func didBeginUse() {
        for member in syncableMembers { member.beginUseIfCounted() }
    }

    /// Ends the syncable members' use through this group.
    package func didEndUse() {
        for member in syncableMembers { member.endUseIfCounted() }
    }

    /// Whether any syncable member is stale.
    package var untrackedIsStale: Bool {
        syncableMembers.contains { $0.isStaleUntracked }
    }

    /// The state the group last saw of the member at `index` (of the current ``generation``).
    func memberState(at index: Int) -> LoadableState { entries[index].state }

    /// Called when ``members`` was assigned, before the new members are observed: what a subclass
    /// noted about the old members is void. Does nothing here.
    func membersWereReassigned() {}

    /// Called when the member at `index` was seen to stop syncing. Does nothing here.
    func memberDidStopSyncing(at index: Int) {}

    // MARK: - Loops

    private func addParent(_ reference: WeakGroupReference) {
        parents[ObjectIdentifier(reference), default: (reference, 0)].count += 1
        if parents.count >= parentPruneThreshold { pruneParents() }
    }

    private func removeParent(_ reference: WeakGroupReference) {
        let key = ObjectIdentifier(reference)
        guard let entry = parents[key] else { return }
        if entry.count > 1 {
            parents[key]?.count -= 1
        } else {
            parents[key] = nil
        }
    }

    /// Drops the groups that were released while this group was their member; amortized O(1) per
    /// ``addParent(_:)``.
    private func pruneParents() {
        parents = parents.filter { $0.value.reference.group != nil }
        parentPruneThreshold = Swift.max(8, parents.count * 2)
    }

    /// Stops the program if this group is among its nested groups, at any depth.
    ///
    /// A group inside itself would notify itself forever, and `needsSync` and `sync()` would
    /// recurse until the stack overflows: a configuration error, reported at the assignment that
    /// closes the loop. Only groups are searched (see ``members``).
    ///
    /// For each group `N` among the members, the loop exists when this group can be reached from
    /// `N` through nested groups. The search runs from both ends at once, one group at a time:
    /// down from `N` through nested groups and up from this group through the groups it is a
    /// member of; it finds a loop when the two meet, and stops without one as soon as either side
    /// runs out. So a deep tree costs little whichever way it is built.
    private func requireNotOwnMember() {
        var checked: Set<ObjectIdentifier> = []
        for group in nestedGroups where checked.insert(ObjectIdentifier(group)).inserted {
            if Self.canReach(self, from: group) {
                fatalError(
                    "\(type(of: self)).members: a group cannot be its own member, directly or through other groups")
            }
        }
    }

    /// The number of groups the loop check has looked at since the process started: for tests
    /// that check its cost.
    package private(set) static var loopSearchSteps = 0

    /// Whether `target` is `start` or nested in it, at any depth.
    private static func canReach(_ target: PureLoadableGroup, from start: PureLoadableGroup) -> Bool {
        if target === start { return true }
        var down = [start]
        var up = [target]
        var seenDown: Set<ObjectIdentifier> = [ObjectIdentifier(start)]
        var seenUp: Set<ObjectIdentifier> = [ObjectIdentifier(target)]
        while let lower = down.popLast() {
            loopSearchSteps += 1
            for child in lower.nestedGroups {
                let key = ObjectIdentifier(child)
                if seenUp.contains(key) { return true }
                if seenDown.insert(key).inserted { down.append(child) }
            }
            guard let upper = up.popLast() else { return false }
            loopSearchSteps += 1
            for (_, parent) in upper.parents {
                guard let group = parent.reference.group else { continue }
                let key = ObjectIdentifier(group)
                if seenDown.contains(key) { return true }
                if seenUp.insert(key).inserted { up.append(group) }
            }
            if up.isEmpty { return false }
        }
        return false
    }

    // MARK: - Member notifications

    /// Applies one member notification: O(1), reads only that member.
    private func memberDidNotify(at index: Int, generation: Int) {
        guard generation == self.generation, index < entries.count else { return }
        // Copied out first, so that no access to `entries` is held while member code runs.
        let untracked = entries[index].untracked
        let (state, isContentsAvailable) = untracked?.untrackedStatus ?? Self.status(of: members[index])
        tally.remove(entries[index].state, isContentsAvailable: entries[index].isContentsAvailable)
        tally.add(state, isContentsAvailable: isContentsAvailable)
        let wasSyncing = entries[index].state == .syncing
        entries[index].state = state
        entries[index].isContentsAvailable = isContentsAvailable
        if wasSyncing, state != .syncing { memberDidStopSyncing(at: index) }
        guard !isSubscribing else { return }
        update()
    }

    /// A member's state and availability, for a member that cannot be read without telling
    /// Observation. Members that can (``MemberEntry/untracked``) are read that way: the group's
    /// bookkeeping is not a read by a view, and a registrar created by it would make every later
    /// change of the member pay for an Observation mutation.
    private static func status(of member: any PureLoadable) -> (state: LoadableState, isContentsAvailable: Bool) {
        (member.loadableState, member.isContentsAvailable)
    }

    /// Recomputes the group from the counts and notifies under the group's rule.
    private func update() {
        let state = tally.state(for: policy)
        let isContentsAvailable = tally.isContentsAvailable(for: policy)
        let shouldNotify =
            state != core.state || isContentsAvailable != core.hasContents || state == .didSyncSuccessfully
        guard shouldNotify else {
            memberChangeHandler?(false)
            return
        }
        core.willChange()
        core.store(state: state, error: nil)
        core.hasContents = isContentsAvailable
        memberChangeHandler?(true)
        groupDidChange()
        core.didChange(NotificationSubject(self))
    }
}

extension PureLoadableGroup: LoadableCoreOwner {
    /// The group's state and availability (neither is a read of the members).
    package var untrackedStatus: (state: LoadableState, isContentsAvailable: Bool) {
        (core.state, core.hasContents)
    }
}
