import LoadableGroup
import LoadableTestSupport
import LoadableTesting
import Testing

/// Model-based randomized tests: random operation sequences run against a `LoadableGroup` of
/// `TestLoadable<Int>` members and against a reference model written from `Docs/Groups.md`
/// ("Policies", "When a group notifies", "Errors"), the observer rules of `Docs/Concepts.md` and
/// the doc comments of `PureLoadableGroup` and `LoadableGroupError`.
///
/// The model computes the group's state and availability from the policy table by rescanning
/// every member (the opposite of the real counts), follows the notification rule (notify when
/// the state or availability changes, and on every member notification while successful), runs
/// notification rounds as the concurrency model says (never nested; a change made during a round
/// is applied at once and queues one more round), and lists failed members as
/// `LoadableGroupError` does (every failed member in member order, only while the group failed).
/// After every step it compares what every group observer saw, the group's state, availability,
/// error, `needsSync` and members, and every member's sync counts and observers.
@Suite("Groups against a reference model")
@MainActor
struct GroupModelTests {
    typealias Policy = PureLoadableGroup.Policy

    /// A change made to one member.
    enum MemberChange: Equatable, CustomStringConvertible {
        case setIdle, setSyncing, succeed, fail(Int?), flipAvailability, notify, sync, syncIfNeeded

        var description: String {
            switch self {
            case .setIdle: "setIdle"
            case .setSyncing: "setSyncing"
            case .succeed: "succeed"
            case .fail(let code): "fail(\(code.map(String.init) ?? "nil"))"
            case .flipAvailability: "flipAvailability+notify"
            case .notify: "notify"
            case .sync: "sync"
            case .syncIfNeeded: "syncIfNeeded"
            }
        }
    }

    /// How a member is made before it joins a group.
    struct NewMember: Equatable, CustomStringConvertible {
        var state: LoadableState
        var isContentsAvailable: Bool
        var errorCode: Int?
        /// Joins as a pure loadable (a wrapper that is not `SyncableLoadable`).
        var isPure: Bool

        var description: String {
            "new(\(state)\(isContentsAvailable ? "+contents" : "")\(errorCode.map { " e\($0)" } ?? "")"
                + "\(isPure ? " pure" : ""))"
        }
    }

    /// One element of a new `members` array.
    enum Pick: Equatable, CustomStringConvertible {
        /// A loadable made earlier (index into every member ever made, modulo their number).
        case existing(Int)
        case new(NewMember)

        var description: String {
            switch self {
            case .existing(let index): "#\(index)"
            case .new(let member): member.description
            }
        }
    }

    /// What a group observer does when called.
    enum Reaction: Equatable, CustomStringConvertible {
        case none
        case cancelSelf
        /// Adds a plain observer (once).
        case addObserver
        /// Calls `sync()` on the group (at most `reactionLimit` times).
        case syncGroup
        /// Changes the member at `position` (modulo the member count; at most `reactionLimit` times).
        case change(position: Int, MemberChange)

        var description: String {
            switch self {
            case .none: "none"
            case .cancelSelf: "cancelSelf"
            case .addObserver: "addObserver"
            case .syncGroup: "syncGroup"
            case .change(let position, let change): "change(@\(position), \(change))"
            }
        }
    }

    enum Operation: Equatable, CustomStringConvertible {
        /// Changes a member, or a former member (index into every member ever made, modulo).
        case change(member: Int, MemberChange)
        case syncGroup, syncGroupIfNeeded
        case reassign([Pick])
        case addObserver(Reaction)
        case cancelObserver(Int)
        case releaseObserver(Int)

        var description: String {
            switch self {
            case .change(let member, let change): "#\(member).\(change)"
            case .syncGroup: "group.sync"
            case .syncGroupIfNeeded: "group.syncIfNeeded"
            case .reassign(let picks): "members = \(picks)"
            case .addObserver(let reaction): "addObserver(\(reaction))"
            case .cancelObserver(let index): "cancelObserver(\(index))"
            case .releaseObserver(let index): "releaseObserver(\(index))"
            }
        }
    }

    /// A failed member as a group error lists it.
    struct FailureSeen: Equatable, CustomStringConvertible {
        var index: Int
        var code: Int?
        var description: String { "\(index):\(code.map(String.init) ?? "nil")" }
    }

    /// One call of a group observer: who was called and what it read.
    struct Seen: Equatable, CustomStringConvertible {
        var observer: Int
        var state: LoadableState
        var isContentsAvailable: Bool
        var failures: [FailureSeen]?
        var description: String {
            "#\(observer):\(state)\(isContentsAvailable ? "+c" : "")\(failures.map { "\($0)" } ?? "")"
        }
    }

    struct CodedError: Error, Equatable {
        var code: Int
    }

    nonisolated static let reactionLimit = 2

    // MARK: - The policy table, by rescanning every member

    static func expectedState(_ states: [LoadableState], policy: Policy) -> LoadableState {
        guard !states.isEmpty else { return .idle }
        switch policy {
        case .strict:
            if states.contains(.didFailToSync) { return .didFailToSync }
            if states.contains(.syncing) { return .syncing }
            if states.allSatisfy({ $0 == .didSyncSuccessfully }) { return .didSyncSuccessfully }
            return .idle
        case .never:
            if states.contains(.syncing) { return .syncing }
            if states.contains(.idle) { return .idle }
            return .didSyncSuccessfully
        case .any:
            if states.contains(.syncing) { return .syncing }
            if states.contains(.didSyncSuccessfully) { return .didSyncSuccessfully }
            if states.allSatisfy({ $0 == .didFailToSync }) { return .didFailToSync }
            return .idle
        }
    }

    static func expectedAvailability(
        _ members: [(state: LoadableState, isContentsAvailable: Bool)], policy: Policy
    ) -> Bool {
        guard !members.isEmpty else { return false }
        switch policy {
        case .strict: return members.allSatisfy(\.isContentsAvailable)
        case .never: return members.allSatisfy { $0.isContentsAvailable || $0.state == .didFailToSync }
        case .any: return members.contains(where: \.isContentsAvailable)
        }
    }

    // MARK: - The real thing

    /// A member seen by the group as a pure loadable: it forwards to a `TestLoadable` but is not
    /// `SyncableLoadable`, so a group must not sync it.
    @MainActor final class PureMember: PureLoadable {
        let inner: TestLoadable<Int>
        init(_ inner: TestLoadable<Int>) { self.inner = inner }
        var loadableState: LoadableState { inner.loadableState }
        var error: (any Error)? { inner.error }
        var isContentsAvailable: Bool { inner.isContentsAvailable }
        func addObserver(_ handler: @escaping @MainActor (any PureLoadable) -> Void) -> LoadableObservation {
            inner.addObserver(handler)
        }
    }

    @MainActor final class Real {
        /// Every member ever made: the test loadable, and what the group is given.
        var pool: [(loadable: TestLoadable<Int>, member: any PureLoadable)] = []
        var group: LoadableGroup?
        var tokens: [LoadableObservation?] = []
        var reactions: [Int] = []
        var addedChild: [Bool] = []
        var log: [Seen] = []

        init(policy: Policy, initial: [NewMember]) {
            pool = initial.map(Self.make)
            group = LoadableGroup(pool.map(\.member), policy: policy)
        }

        static func make(_ new: NewMember) -> (loadable: TestLoadable<Int>, member: any PureLoadable) {
            let loadable = TestLoadable<Int>(contents: new.isContentsAvailable ? 1 : nil)
            loadable.loadableState = new.state
            loadable.error = new.errorCode.map(CodedError.init(code:))
            return (loadable, new.isPure ? PureMember(loadable) : loadable)
        }

        static func failures(_ error: (any Error)?) -> [FailureSeen]? {
            guard let error else { return nil }
            guard let groupError = error as? LoadableGroupError else { return [FailureSeen(index: -1, code: nil)] }
            return groupError.failures.map { FailureSeen(index: $0.index, code: ($0.error as? CodedError)?.code) }
        }

        static func change(_ loadable: TestLoadable<Int>, _ change: MemberChange) {
            switch change {
            case .setIdle: loadable.setIdle()
            case .setSyncing: loadable.setSyncing()
            case .succeed: loadable.setDidSyncSuccessfully()
            case .fail(let code): loadable.setDidFailToSync(code.map(CodedError.init(code:)))
            case .flipAvailability:
                loadable.isContentsAvailable.toggle()
                loadable.notifyDidChange()
            case .notify: loadable.notifyDidChange()
            case .sync: loadable.sync()
            case .syncIfNeeded: loadable.syncIfNeeded()
            }
        }

        static func testLoadable(_ member: any PureLoadable) -> TestLoadable<Int> {
            if let member = member as? PureMember { return member.inner }
            return member as! TestLoadable<Int>
        }

        func addObserver(_ reaction: Reaction) {
            guard let group else { return }
            let id = tokens.count
            tokens.append(nil)
            reactions.append(0)
            addedChild.append(false)
            tokens[id] = group.addObserver { [unowned self] observed in
                log.append(
                    Seen(
                        observer: id, state: observed.loadableState, isContentsAvailable: observed.isContentsAvailable,
                        failures: Self.failures(observed.error)))
                switch reaction {
                case .none: break
                case .cancelSelf: tokens[id]?.cancel()
                case .addObserver:
                    if !addedChild[id] {
                        addedChild[id] = true
                        addObserver(.none)
                    }
                case .syncGroup:
                    if reactions[id] < GroupModelTests.reactionLimit {
                        reactions[id] += 1
                        self.group?.sync()
                    }
                case .change(let position, let change):
                    let members = self.group?.members ?? []
                    if reactions[id] < GroupModelTests.reactionLimit, !members.isEmpty {
                        reactions[id] += 1
                        Self.change(Self.testLoadable(members[position % members.count]), change)
                    }
                }
            }
        }

        func apply(_ operation: Operation) {
            switch operation {
            case .change(let member, let change):
                if !pool.isEmpty { Self.change(pool[member % pool.count].loadable, change) }
            case .syncGroup: group?.sync()
            case .syncGroupIfNeeded: group?.syncIfNeeded()
            case .reassign(let picks):
                var newMembers: [any PureLoadable] = []
                for pick in picks {
                    switch pick {
                    case .existing(let index):
                        if !pool.isEmpty { newMembers.append(pool[index % pool.count].member) }
                    case .new(let new):
                        pool.append(Self.make(new))
                        newMembers.append(pool[pool.count - 1].member)
                    }
                }
                group?.members = newMembers
            case .addObserver(let reaction): addObserver(reaction)
            case .cancelObserver(let index):
                if !tokens.isEmpty { tokens[index % tokens.count]?.cancel() }
            case .releaseObserver(let index):
                if !tokens.isEmpty { tokens[index % tokens.count] = nil }
            }
        }
    }

    // MARK: - Comparing

    /// Everything that must match after a step; returns the first difference.
    static func difference(_ model: Model, _ real: Real) -> String? {
        guard let group = real.group else { return "the group is gone" }
        if model.log != real.log { return "observers saw \(real.log), model says \(model.log)" }
        // The members' own states (checks the model of the members, not the group).
        for (index, member) in model.pool.enumerated() {
            let loadable = real.pool[index].loadable
            if member.state != loadable.loadableState || member.isContentsAvailable != loadable.isContentsAvailable
                || member.errorCode != (loadable.error as? CodedError)?.code
            {
                return "member #\(index) is \(loadable), model says \(member.state)"
            }
            if member.syncCount != loadable.syncCount || member.syncIfNeededCount != loadable.syncIfNeededCount {
                return "member #\(index)\(member.isPure ? " (pure)" : "") got sync \(loadable.syncCount), "
                    + "syncIfNeeded \(loadable.syncIfNeededCount); model says \(member.syncCount), "
                    + "\(member.syncIfNeededCount)"
            }
            // The group observes each occurrence of a current member once, and no former member.
            let occurrences = model.members.count(where: { $0 == index })
            let observers = loadable.addObserverCount - loadable.removeObserverCount
            if observers != occurrences || loadable.hasObservers != (occurrences > 0) {
                return "member #\(index) has \(observers) observers, expected \(occurrences)"
            }
        }
        if group.members.count != model.members.count
            || zip(group.members, model.members).contains(where: { $0 !== real.pool[$1].member })
        {
            return "group.members differ from \(model.members)"
        }
        // The table applied to the members as they are now (independent of notifications).
        let current: [(state: LoadableState, isContentsAvailable: Bool)] = model.members.map {
            (real.pool[$0].loadable.loadableState, real.pool[$0].loadable.isContentsAvailable)
        }
        let tableState = expectedState(current.map(\.state), policy: model.policy)
        let tableAvailability = expectedAvailability(current, policy: model.policy)
        if group.loadableState != model.state || group.loadableState != tableState {
            return "group state \(group.loadableState), model \(model.state), table \(tableState)"
        }
        if group.isContentsAvailable != model.isContentsAvailable || group.isContentsAvailable != tableAvailability {
            return "group availability \(group.isContentsAvailable), model \(model.isContentsAvailable)"
        }
        let failures = Real.failures(group.error)
        if failures != model.failures || Real.failures(group.groupError) != model.failures {
            let expected = model.failures.map { "\($0)" } ?? "nil"
            return "group error lists \(failures.map { "\($0)" } ?? "nil"), model \(expected)"
        }
        if group.needsSync != model.needsSync {
            return "group.needsSync \(group.needsSync), model \(model.needsSync)"
        }
        for (index, observer) in model.observers.enumerated()
        where (real.tokens[index]?.isActive ?? false) != observer.isActive {
            return "observer #\(index)'s token is \(observer.isActive ? "inactive" : "still active")"
        }
        return nil
    }

    /// Runs a scenario; returns a description of the first mismatch, or `nil`.
    static func mismatch(policy: Policy, initial: [NewMember], operations: [Operation]) -> String? {
        let model = Model(policy: policy, initial: initial)
        let real = Real(policy: policy, initial: initial)
        if let difference = difference(model, real) { return "after init: \(difference)" }
        for (step, operation) in operations.enumerated() {
            model.apply(operation)
            real.apply(operation)
            if let difference = difference(model, real) { return "step \(step) \(operation): \(difference)" }
        }
        // Releasing the group ends every observation, of the group and of its members.
        weak let weakGroup = real.group
        real.group = nil
        if weakGroup != nil { return "the group outlived its owner" }
        if let index = real.pool.firstIndex(where: { $0.loadable.hasObservers }) {
            return "member #\(index) is still observed after the group was released"
        }
        if real.tokens.contains(where: { $0?.isActive == true }) { return "a token stayed active after release" }
        return nil
    }

    // MARK: - Generating

    static func randomChange(_ random: inout SeededRandomNumberGenerator) -> MemberChange {
        switch random.next() % 10 {
        case 0: .setIdle
        case 1: .setSyncing
        case 2, 3: .succeed
        case 4: .fail(random.next() % 3 == 0 ? nil : Int(random.next() % 100))
        case 5: .flipAvailability
        case 6: .notify
        case 7, 8: .sync
        default: .syncIfNeeded
        }
    }

    static func randomNewMember(_ random: inout SeededRandomNumberGenerator) -> NewMember {
        let state = LoadableState.allCases[Int(random.next() % 4)]
        let errorCode = state == .didFailToSync && random.next() % 2 == 0 ? Int(random.next() % 100) : nil
        return NewMember(
            state: state, isContentsAvailable: random.next() % 2 == 0, errorCode: errorCode,
            isPure: random.next() % 4 == 0)
    }

    static func randomReaction(_ random: inout SeededRandomNumberGenerator) -> Reaction {
        switch random.next() % 7 {
        case 0, 1: .none
        case 2: .cancelSelf
        case 3: .addObserver
        case 4: .syncGroup
        default: .change(position: Int(random.next() % 6), randomChange(&random))
        }
    }

    /// A random scenario: 0–6 initial members and 1–30 operations.
    static func randomScenario(seed: UInt64) -> (initial: [NewMember], operations: [Operation]) {
        var random = SeededRandomNumberGenerator(seed: seed)
        let initial = (0..<Int(random.next() % 7)).map { _ in randomNewMember(&random) }
        var poolCount = initial.count
        var members = Array(0..<poolCount)
        var observerCount = 0
        var operations: [Operation] = []
        for _ in 0..<(Int(random.next() % 30) + 1) {
            let operation: Operation
            switch random.next() % 16 {
            case 0..<7:
                if !members.isEmpty {
                    operation = .change(
                        member: members[Int(random.next() % UInt64(members.count))], randomChange(&random))
                } else {
                    operation = .syncGroup
                }
            case 7:
                // Any member ever made: often a former member, which must not affect the group.
                operation = .change(member: Int(random.next() % UInt64(max(poolCount, 1))), randomChange(&random))
            case 8: operation = .syncGroup
            case 9: operation = .syncGroupIfNeeded
            case 10:
                var picks: [Pick] = []
                members = []
                for _ in 0..<Int(random.next() % 7) {
                    if poolCount > 0, random.next() % 2 == 0 {
                        let index = Int(random.next() % UInt64(poolCount))
                        picks.append(.existing(index))
                        members.append(index)
                    } else {
                        picks.append(.new(randomNewMember(&random)))
                        members.append(poolCount)
                        poolCount += 1
                    }
                }
                operation = .reassign(picks)
            case 11, 12:
                operation = .addObserver(randomReaction(&random))
                observerCount += 1
            case 13: operation = .cancelObserver(Int(random.next() % UInt64(max(observerCount, 1))))
            case 14: operation = .releaseObserver(Int(random.next() % UInt64(max(observerCount, 1))))
            default:
                operation = .syncGroupIfNeeded
            }
            operations.append(operation)
        }
        return (initial, operations)
    }

    /// 3,400 sequences per policy: 10,200 in all.
    nonisolated static let sequencesPerPolicy = 3_400

    @Test(
        "Random operation sequences on groups of 0–6 members match the reference model",
        arguments: Policy.allCases)
    func randomSequences(policy: Policy) async {
        let baseSeed: UInt64 = 0x6120_0B5E_ED00 &+ UInt64(Policy.allCases.firstIndex(of: policy)!) << 32
        await checkRandomSequences(count: Self.sequencesPerPolicy, baseSeed: baseSeed) { seed in
            Self.randomScenario(seed: seed)
        } mismatch: { initial, operations in
            Self.mismatch(policy: policy, initial: initial, operations: operations)
        } shrinkSetup: { initial, stillFails in
            // The starting members shrink too, once the operations are as short as they get.
            await shrink(initial, stillFails: stillFails)
        } describeSetup: { _ in
            "policy .\(policy)"
        } describe: { initial, operations in
            "members \(initial), operations \(operations)"
        }
    }
}
