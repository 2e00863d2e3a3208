/// Counts of a group's members by last-seen state and availability.
///
/// A pure value: the group adds a member's (state, availability) when it starts observing it,
/// and on each member notification removes the old pair and adds the new one. The group's state
/// and availability follow from the counts alone, so every update and every question is O(1),
/// whatever the number of members.
struct MemberTally: Sendable, Hashable {
    /// The number of members counted.
    private(set) var memberCount = 0
    private var idleCount = 0
    private var syncingCount = 0
    private var succeededCount = 0
    private var failedCount = 0
    /// Members whose contents are available.
    private var availableCount = 0
    /// Members that did not fail and have no contents available (what blocks `.never`).
    private var unavailableNotFailedCount = 0

    /// Counts one member.
    mutating func add(_ state: LoadableState, isContentsAvailable: Bool) {
        apply(state, isContentsAvailable: isContentsAvailable, delta: 1)
    }

    /// Stops counting one member (with the values it was counted with).
    mutating func remove(_ state: LoadableState, isContentsAvailable: Bool) {
        apply(state, isContentsAvailable: isContentsAvailable, delta: -1)
    }

    private mutating func apply(_ state: LoadableState, isContentsAvailable: Bool, delta: Int) {
        memberCount += delta
        switch state {
        case .idle: idleCount += delta
        case .syncing: syncingCount += delta
        case .didSyncSuccessfully: succeededCount += delta
        case .didFailToSync: failedCount += delta
        }
        if isContentsAvailable {
            availableCount += delta
        } else if state != .didFailToSync {
            unavailableNotFailedCount += delta
        }
    }

    /// The group's state under `policy`; `LoadableState.idle` when there are no members.
    func state(for policy: PureLoadableGroup.Policy) -> LoadableState {
        guard memberCount > 0 else { return .idle }
        switch policy {
        case .strict:
            if failedCount > 0 { return .didFailToSync }
            if syncingCount > 0 { return .syncing }
            if succeededCount == memberCount { return .didSyncSuccessfully }
            return .idle
        case .never:
            if syncingCount > 0 { return .syncing }
            if idleCount > 0 { return .idle }
            return .didSyncSuccessfully
        case .any:
            if syncingCount > 0 { return .syncing }
            if succeededCount > 0 { return .didSyncSuccessfully }
            if failedCount == memberCount { return .didFailToSync }
            return .idle
        }
    }

    /// The group's availability under `policy`; `false` when there are no members.
    func isContentsAvailable(for policy: PureLoadableGroup.Policy) -> Bool {
        guard memberCount > 0 else { return false }
        switch policy {
        case .strict: return availableCount == memberCount
        case .never: return unavailableNotFailedCount == 0
        case .any: return availableCount > 0
        }
    }
}
