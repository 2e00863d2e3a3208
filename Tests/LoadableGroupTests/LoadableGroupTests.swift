import LoadableGroup
import LoadableTestSupport
import LoadableTesting
import Testing

/// Truth tables in MMMLoadable's text format: `output <- [first, second]`, sorted by output, then
/// by inputs (`false` < `true`; `idle` < `syncing` < `did-sync-successfully` < `did-fail-to-sync`).
@MainActor
private func table<Input: Hashable, Output: Hashable>(
    _ outputs: [[Input]: Output],
    rank: (Input) -> Int,
    outputRank: (Output) -> Int
) -> String {
    outputs
        .sorted { left, right in
            let leftKey = [outputRank(left.value)] + left.key.map(rank)
            let rightKey = [outputRank(right.value)] + right.key.map(rank)
            return leftKey.lexicographicallyPrecedes(rightKey)
        }
        .map { "\($0.value) <- [\($0.key.map { "\($0)" }.joined(separator: ", "))]" }
        .joined(separator: "\n")
}

private func stateRank(_ state: LoadableState) -> Int {
    LoadableState.allCases.firstIndex(of: state)!
}

private func boolRank(_ value: Bool) -> Int { value ? 1 : 0 }

private let expectedStateTables: [PureLoadableGroup.Policy: String] = [
    .strict: """
    idle <- [idle, idle]
    idle <- [idle, did-sync-successfully]
    idle <- [did-sync-successfully, idle]
    syncing <- [idle, syncing]
    syncing <- [syncing, idle]
    syncing <- [syncing, syncing]
    syncing <- [syncing, did-sync-successfully]
    syncing <- [did-sync-successfully, syncing]
    did-sync-successfully <- [did-sync-successfully, did-sync-successfully]
    did-fail-to-sync <- [idle, did-fail-to-sync]
    did-fail-to-sync <- [syncing, did-fail-to-sync]
    did-fail-to-sync <- [did-sync-successfully, did-fail-to-sync]
    did-fail-to-sync <- [did-fail-to-sync, idle]
    did-fail-to-sync <- [did-fail-to-sync, syncing]
    did-fail-to-sync <- [did-fail-to-sync, did-sync-successfully]
    did-fail-to-sync <- [did-fail-to-sync, did-fail-to-sync]
    """,
    .never: """
    idle <- [idle, idle]
    idle <- [idle, did-sync-successfully]
    idle <- [idle, did-fail-to-sync]
    idle <- [did-sync-successfully, idle]
    idle <- [did-fail-to-sync, idle]
    syncing <- [idle, syncing]
    syncing <- [syncing, idle]
    syncing <- [syncing, syncing]
    syncing <- [syncing, did-sync-successfully]
    syncing <- [syncing, did-fail-to-sync]
    syncing <- [did-sync-successfully, syncing]
    syncing <- [did-fail-to-sync, syncing]
    did-sync-successfully <- [did-sync-successfully, did-sync-successfully]
    did-sync-successfully <- [did-sync-successfully, did-fail-to-sync]
    did-sync-successfully <- [did-fail-to-sync, did-sync-successfully]
    did-sync-successfully <- [did-fail-to-sync, did-fail-to-sync]
    """,
    .any: """
    idle <- [idle, idle]
    idle <- [idle, did-fail-to-sync]
    idle <- [did-fail-to-sync, idle]
    syncing <- [idle, syncing]
    syncing <- [syncing, idle]
    syncing <- [syncing, syncing]
    syncing <- [syncing, did-sync-successfully]
    syncing <- [syncing, did-fail-to-sync]
    syncing <- [did-sync-successfully, syncing]
    syncing <- [did-fail-to-sync, syncing]
    did-sync-successfully <- [idle, did-sync-successfully]
    did-sync-successfully <- [did-sync-successfully, idle]
    did-sync-successfully <- [did-sync-successfully, did-sync-successfully]
    did-sync-successfully <- [did-sync-successfully, did-fail-to-sync]
    did-sync-successfully <- [did-fail-to-sync, did-sync-successfully]
    did-fail-to-sync <- [did-fail-to-sync, did-fail-to-sync]
    """,
]

/// Availability with both members not failed (idle): `.never` then agrees with `.strict`.
private let expectedAvailabilityTables: [PureLoadableGroup.Policy: String] = [
    .strict: """
    false <- [false, false]
    false <- [false, true]
    false <- [true, false]
    true <- [true, true]
    """,
    .never: """
    false <- [false, false]
    false <- [false, true]
    false <- [true, false]
    true <- [true, true]
    """,
    .any: """
    false <- [false, false]
    true <- [false, true]
    true <- [true, false]
    true <- [true, true]
    """,
]

@Suite("Groups: truth tables, notifications, members")
@MainActor
struct LoadableGroupTests {
    // MARK: - Truth tables

    @Test(
        "The group's state follows the policy's table for every pair of member states, in any order",
        arguments: PureLoadableGroup.Policy.allCases, [1, 2, 3] as [UInt64]
    )
    func stateTruthTable(policy: PureLoadableGroup.Policy, seed: UInt64) {
        let first = TestLoadable<Int>()
        let second = TestLoadable<Int>()
        let group = LoadableGroup([first, second], policy: policy)
        var pairs: [[LoadableState]] = []
        for a in LoadableState.allCases {
            for b in LoadableState.allCases { pairs.append([a, b]) }
        }
        var random = SeededRandomNumberGenerator(seed: seed)
        var outputs: [[LoadableState]: LoadableState] = [:]
        for pair in pairs.shuffled(using: &random) {
            first.loadableState = pair[0]
            second.loadableState = pair[1]
            outputs[pair] = group.loadableState
        }
        #expect(table(outputs, rank: stateRank, outputRank: stateRank) == expectedStateTables[policy])
    }

    @Test(
        "The group's availability follows the policy's table for every pair of member flags, in any order",
        arguments: PureLoadableGroup.Policy.allCases, [1, 2, 3] as [UInt64]
    )
    func availabilityTruthTable(policy: PureLoadableGroup.Policy, seed: UInt64) {
        let first = TestLoadable<Int>()
        let second = TestLoadable<Int>()
        let group = LoadableGroup([first, second], policy: policy)
        let pairs: [[Bool]] = [[false, false], [false, true], [true, false], [true, true]]
        var random = SeededRandomNumberGenerator(seed: seed)
        var outputs: [[Bool]: Bool] = [:]
        // Visit every pair three times over, so that each is reached from several others.
        for pair in (pairs + pairs + pairs).shuffled(using: &random) {
            first.isContentsAvailable = pair[0]
            second.isContentsAvailable = pair[1]
            first.notifyDidChange()
            second.notifyDidChange()
            outputs[pair] = group.isContentsAvailable
        }
        #expect(table(outputs, rank: boolRank, outputRank: boolRank) == expectedAvailabilityTables[policy])
    }

    @Test(
        "Under .never, members that failed do not count for availability",
        arguments: [
            // (first state, first available, second state, second available) → group available
            (LoadableState.didFailToSync, false, LoadableState.didSyncSuccessfully, true, true),
            (.didFailToSync, false, .didFailToSync, false, true),
            (.didFailToSync, true, .idle, false, false),
            (.syncing, true, .didFailToSync, false, true),
            (.idle, false, .didFailToSync, true, false),
            (.didSyncSuccessfully, true, .syncing, false, false),
        ]
    )
    func neverPolicyAvailability(
        firstState: LoadableState, firstAvailable: Bool,
        secondState: LoadableState, secondAvailable: Bool,
        expected: Bool
    ) {
        let first = TestLoadable<Int>()
        let second = TestLoadable<Int>()
        let group = PureLoadableGroup([first, second], policy: .never)
        first.isContentsAvailable = firstAvailable
        second.isContentsAvailable = secondAvailable
        first.loadableState = firstState
        second.loadableState = secondState
        #expect(group.isContentsAvailable == expected)
    }

    @Test("Under .never, a group made successful by failed members still has contents", arguments: [1, 2] as [UInt64])
    func neverPolicyKeepsSuccessImpliesContents(seed: UInt64) {
        var random = SeededRandomNumberGenerator(seed: seed)
        let members = (0..<6).map { _ in TestLoadable<Int>() }
        let group = PureLoadableGroup(members, policy: .never)
        for member in members.shuffled(using: &random) {
            if Bool.random(using: &random) { member.setDidSyncSuccessfully(1) } else { member.setDidFailToSync(nil) }
            if group.loadableState == .didSyncSuccessfully { #expect(group.isContentsAvailable) }
        }
        #expect(group.loadableState == .didSyncSuccessfully)
        #expect(group.isContentsAvailable)
    }

    @Test("A group of three follows the policy for mixed states", arguments: PureLoadableGroup.Policy.allCases)
    func threeMembers(policy: PureLoadableGroup.Policy) {
        let members = (0..<3).map { _ in TestLoadable<Int>() }
        let group = PureLoadableGroup(members, policy: policy)
        members[0].setDidSyncSuccessfully(1)
        members[1].setDidFailToSync(nil)
        members[2].setDidSyncSuccessfully(3)
        let expected: [PureLoadableGroup.Policy: (LoadableState, Bool)] = [
            .strict: (.didFailToSync, false),
            .never: (.didSyncSuccessfully, true),
            .any: (.didSyncSuccessfully, true),
        ]
        #expect(group.loadableState == expected[policy]!.0)
        #expect(group.isContentsAvailable == expected[policy]!.1)
    }

    @Test("An empty group is idle with no contents and never notifies", arguments: PureLoadableGroup.Policy.allCases)
    func emptyGroup(policy: PureLoadableGroup.Policy) {
        let group = LoadableGroup([], policy: policy)
        let recorder = Recorder(group)
        #expect(group.loadableState == .idle)
        #expect(!group.isContentsAvailable)
        #expect(group.error == nil)
        #expect(!group.needsSync)
        group.sync()
        group.syncIfNeeded()
        group.members = []
        #expect(recorder.count == 0)
        #expect(group.loadableState == .idle)
    }

    // MARK: - Notifications

    @Test("The group notifies on state changes and on every member notification while successful, never otherwise")
    func notificationRule() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let group = LoadableGroup([a, b])
        let recorder = Recorder(group)

        a.setSyncing()  // idle → syncing
        #expect(recorder.states == [.syncing])
        b.setSyncing()  // still syncing
        a.setDidSyncSuccessfully(1)  // still syncing (b), still not all available
        a.notifyDidChange()
        #expect(recorder.states == [.syncing])
        b.setDidSyncSuccessfully(2)  // → succeeded
        #expect(recorder.states == [.syncing, .didSyncSuccessfully])
        a.notifyDidChange()  // while successful: forwarded
        b.setDidSyncSuccessfully(3)  // while successful: forwarded
        #expect(recorder.states == [.syncing, .didSyncSuccessfully, .didSyncSuccessfully, .didSyncSuccessfully])
        a.setDidFailToSync(nil)  // → failed
        a.setDidFailToSync(TestError("again"))  // still failed
        a.notifyDidChange()
        #expect(recorder.states.count == 5)
        #expect(recorder.states.last == .didFailToSync)
        a.setIdle()  // failed → idle (b succeeded; strict: not all succeeded)
        a.setIdle()
        #expect(recorder.states.count == 6)
        #expect(recorder.states.last == .idle)
    }

    @Test("The group notifies when only its availability changes, and keeps availability fresh")
    func availabilityChangeNotifies() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let group = PureLoadableGroup([a, b])
        a.setSyncing()
        b.setSyncing()
        let recorder = Recorder(group)
        a.contents = 1
        a.isContentsAvailable = true
        a.notifyDidChange()
        #expect(!group.isContentsAvailable)
        #expect(recorder.count == 0)
        b.isContentsAvailable = true
        b.notifyDidChange()
        #expect(group.loadableState == .syncing)
        #expect(group.isContentsAvailable)
        #expect(recorder.states == [.syncing])
        b.isContentsAvailable = false
        b.notifyDidChange()
        #expect(!group.isContentsAvailable)
        #expect(recorder.count == 2)
    }

    @Test("groupDidChange runs with the new state, before the observers")
    func groupDidChangeRunsFirst() {
        final class LoggingGroup: LoadableGroup {
            var log: [String] = []
            override func groupDidChange() { log.append("hook: \(loadableState)") }
        }
        let a = TestLoadable<Int>()
        let group = LoggingGroup([a])
        observing(group, { group in group.log.append("observer: \(group.loadableState)") }) {
            a.setSyncing()
            a.setSyncing()  // no change: neither runs
            #expect(group.log == ["hook: syncing", "observer: syncing"])
        }
    }

    @Test("An observer that changes the notifying member sees the group change at once, then a queued round")
    func reentrantChangeOfNotifyingMember() {
        let a = TestLoadable<Int>()
        let group = LoadableGroup([a])
        var seenByFirst: [LoadableState] = []
        var seenBySecond: [LoadableState] = []
        let first: @MainActor (LoadableGroup) -> Void = { group in
            seenByFirst.append(group.loadableState)
            if group.loadableState == .syncing { a.setDidSyncSuccessfully(1) }
        }
        observing(group, first) {
            observing(group, { group in seenBySecond.append(group.loadableState) }) {
                a.setSyncing()
                // The group follows `a` at every change, so its state is up to date at once and the
                // second observer already reads it; the group's own notification is queued as one more
                // round after the current one: no nesting, nothing lost.
                #expect(seenByFirst == [.syncing, .didSyncSuccessfully])
                #expect(seenBySecond == [.didSyncSuccessfully, .didSyncSuccessfully])
                #expect(group.loadableState == .didSyncSuccessfully)
            }
        }
    }

    @Test("An observer that changes another member while the group notifies gets a second round, not a nested one")
    func reentrantChangeOfOtherMember() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let group = LoadableGroup([a, b])
        var seenByFirst: [LoadableState] = []
        var seenBySecond: [LoadableState] = []
        var depth = 0
        var maxDepth = 0
        let first: @MainActor (LoadableGroup) -> Void = { group in
            depth += 1
            maxDepth = max(maxDepth, depth)
            seenByFirst.append(group.loadableState)
            if group.loadableState == .syncing { b.setDidFailToSync(TestError("b")) }
            depth -= 1
        }
        observing(group, first) {
            observing(group, { group in seenBySecond.append(group.loadableState) }) {
                a.setSyncing()
                #expect(seenByFirst == [.syncing, .didFailToSync])
                // The second observer runs after the change: it reads the latest state in both rounds.
                #expect(seenBySecond == [.didFailToSync, .didFailToSync])
                #expect(maxDepth == 1)
                #expect(group.loadableState == .didFailToSync)
            }
        }
    }

    @Test("An observer that reassigns the members while the group notifies does not break the group")
    func reentrantReassignment() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let group = LoadableGroup([a])
        observing(
            group,
            { group in
                if group.members.first === a { group.members = [b] }
            }
        ) {
            a.setSyncing()
            #expect(group.members.count == 1 && group.members[0] === b)
            #expect(group.loadableState == .idle)
            #expect(!a.hasObservers)
            a.setDidFailToSync(nil)
            #expect(group.loadableState == .idle)
            b.setDidSyncSuccessfully(2)
            #expect(group.loadableState == .didSyncSuccessfully)
        }
    }

    @Test("A member that notifies while it is being subscribed to is counted with its latest state")
    func memberNotifyingDuringSubscription() {
        final class EagerLoadable: PushLoadable<Int> {
            override func didAddFirstObserver() { setSyncing() }
        }
        let eager = EagerLoadable()
        let other = TestLoadable<Int>()
        let group = LoadableGroup([other])
        let recorder = Recorder(group)
        group.members = [eager, other]
        #expect(group.loadableState == .syncing)
        #expect(recorder.states == [.syncing])
        eager.setDidSyncSuccessfully(1)
        other.setDidSyncSuccessfully(2)
        #expect(group.loadableState == .didSyncSuccessfully)
    }

    // MARK: - Members

    @Test("Reassigning members stops observing the old ones and follows the new ones")
    func reassignment() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let c = TestLoadable<Int>(contents: 3)
        let group = LoadableGroup([a, b])
        a.setSyncing()
        let recorder = Recorder(group)
        group.members = [c]
        #expect(a.removeObserverCount == 1 && b.removeObserverCount == 1)
        #expect(!a.hasObservers && !b.hasObservers)
        #expect(group.loadableState == .idle)  // syncing → idle: notified
        #expect(group.isContentsAvailable)
        #expect(recorder.states == [.idle])
        a.setDidFailToSync(nil)
        b.setSyncing()
        #expect(recorder.count == 1)
        #expect(group.loadableState == .idle)
        c.setDidSyncSuccessfully(4)
        #expect(recorder.states == [.idle, .didSyncSuccessfully])
    }

    @Test("Reassigning members that keep the group's state and availability does not notify")
    func reassignmentWithoutChange() {
        let group = LoadableGroup([TestLoadable<Int>()])
        let recorder = Recorder(group)
        group.members = [TestLoadable<Int>(), TestLoadable<Int>()]
        #expect(recorder.count == 0)
    }

    @Test("The group holds its members strongly, until they are replaced")
    func holdsMembersStrongly() {
        weak var weakMember: TestLoadable<Int>?
        let group = LoadableGroup([])
        do {
            let member = TestLoadable<Int>()
            weakMember = member
            group.members = [member]
        }
        #expect(weakMember != nil)
        weakMember?.setSyncing()
        #expect(group.loadableState == .syncing)
        group.members = []
        #expect(weakMember == nil)
    }

    @Test("Releasing the group stops observing its members")
    func releaseStopsObservation() {
        let a = TestLoadable<Int>()
        var group: LoadableGroup? = LoadableGroup([a, a])
        #expect(a.addObserverCount == 2)
        weak let weakGroup = group
        group = nil
        #expect(weakGroup == nil)
        #expect(a.removeObserverCount == 2)
        #expect(!a.hasObservers)
        a.setSyncing()  // nothing observes it: no crash
    }

    @Test("The same member twice counts twice")
    func duplicateMembers() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let group = LoadableGroup([a, b, a])
        a.setDidSyncSuccessfully(1)
        #expect(group.loadableState == .idle)
        b.setDidSyncSuccessfully(2)
        #expect(group.loadableState == .didSyncSuccessfully)
        a.setDidFailToSync(TestError("a"))
        #expect(group.groupError?.failures.map(\.index) == [0, 2])
        group.members = [b]
        #expect(a.removeObserverCount == 2)
        #expect(group.loadableState == .didSyncSuccessfully)
    }

    @Test("A group observes a pure member and a group member like any other")
    func mixedAndNestedMembers() {
        let pure = PushLoadable<Int>()
        let inner = LoadableGroup([TestLoadable<Int>(contents: 1)])
        let syncable = TestLoadable<Int>()
        let group = LoadableGroup([pure, inner, syncable])
        pure.setDidSyncSuccessfully(1)
        (inner.members[0] as! TestLoadable<Int>).setDidSyncSuccessfully()
        syncable.setDidSyncSuccessfully(3)
        #expect(group.loadableState == .didSyncSuccessfully)
        #expect(group.isContentsAvailable)
    }

    // MARK: - Syncing

    @Test("sync() and syncIfNeeded() reach every syncable member, and needsSync asks them")
    func syncing() {
        let pure = PushLoadable<Int>()
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>(contents: 2)
        let group = LoadableGroup([pure, a, b])
        #expect(group.needsSync)  // idle members need a sync
        group.syncIfNeeded()
        #expect(a.syncIfNeededCount == 1 && b.syncIfNeededCount == 1)
        #expect(a.syncCount == 1 && b.syncCount == 1)
        #expect(pure.loadableState == .idle)
        #expect(group.loadableState == .syncing)  // syncing wins over the idle pure member
        pure.setDidSyncSuccessfully(0)
        a.setDidSyncSuccessfully(1)
        b.setDidSyncSuccessfully()
        #expect(!group.needsSync)
        group.syncIfNeeded()
        #expect(a.syncCount == 1 && b.syncCount == 1)
        #expect(a.syncIfNeededCount == 2)
        b.needsSync = true
        #expect(group.needsSync)
        group.syncIfNeeded()
        #expect(a.syncCount == 1 && b.syncCount == 2)
        group.sync()
        #expect(a.syncCount == 2 && b.syncCount == 3)
    }

    @Test("A group of only pure members never needs a sync")
    func pureMembersOnly() {
        let group = LoadableGroup([PushLoadable<Int>(), PushLoadable<String>()])
        #expect(!group.needsSync)
        group.sync()
        #expect(group.loadableState == .idle)
    }

    // MARK: - Complexity

    @Test("Handling one member's notification reads only that member, once per property")
    func memberNotificationIsConstantTime() {
        let members = (0..<100).map { _ in TestLoadable<Int>() }
        let group = LoadableGroup(members, policy: .strict)
        observing(group, { group in _ = (group.loadableState, group.isContentsAvailable) }) {
            let changes: [(TestLoadable<Int>) -> Void] = [
                { $0.setSyncing() }, { $0.setDidSyncSuccessfully(1) }, { $0.setDidFailToSync(nil) },
                { $0.notifyDidChange() }, { $0.setIdle() },
            ]
            var random = SeededRandomNumberGenerator(seed: 7)
            for step in 0..<50 {
                members.forEach { $0.resetReadCounts() }
                let changed = members[Int.random(in: 0..<members.count, using: &random)]
                changes[step % changes.count](changed)
                for member in members where member !== changed {
                    #expect(member.loadableStateReadCount == 0)
                    #expect(member.isContentsAvailableReadCount == 0)
                    #expect(member.errorReadCount == 0)
                }
                #expect(changed.loadableStateReadCount == 1)
                #expect(changed.isContentsAvailableReadCount == 1)
                #expect(changed.errorReadCount == 0)
            }
        }
    }

    @Test("A group of 100,000 members that all sync reads each member a constant number of times")
    func largeGroupIsLinear() {
        let members = (0..<100_000).map { _ in TestLoadable<Int>() }
        let group = LoadableGroup(members)
        let recorder = Recorder(group)
        group.sync()
        for member in members { member.setDidSyncSuccessfully(1) }
        #expect(group.loadableState == .didSyncSuccessfully)
        #expect(recorder.states == [.syncing, .didSyncSuccessfully])
        // One read when subscribed, one per notification (syncing, succeeded).
        #expect(members.allSatisfy { $0.loadableStateReadCount == 3 && $0.isContentsAvailableReadCount == 3 })
    }

    // MARK: - Description

    @Test("The description names the type, the state and the availability")
    func description() {
        let a = TestLoadable<Int>()
        let group = LoadableGroup([a])
        #expect(group.description == "<LoadableGroup: idle, contents available: no>")
        a.setDidSyncSuccessfully(1)
        #expect(String(describing: group) == "<LoadableGroup: did-sync-successfully, contents available: yes>")
        #expect(PureLoadableGroup([]).description == "<PureLoadableGroup: idle, contents available: no>")
        #expect(PureLoadableGroup.Policy.allCases.map(\.description) == ["strict", "never", "any"])
        #expect(group.policy == .strict)
    }
}
