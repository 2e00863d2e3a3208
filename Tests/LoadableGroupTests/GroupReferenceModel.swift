import LoadableGroup
import LoadableTestSupport
import LoadableTesting
import Testing

// The reference model that `GroupModelTests` runs every sequence against, written from
// `Docs/Groups.md` and the observer rules alone.
extension GroupModelTests {
    @MainActor final class Model {
        struct Subscription {
            var index: Int
            var generation: Int
            var isActive = true
        }

        struct Member {
            var state: LoadableState
            var isContentsAvailable: Bool
            var errorCode: Int?
            var isPure: Bool
            var syncCount = 0
            var syncIfNeededCount = 0
            /// How many calls of the group's observations of this member are running, nested.
            var visiting = 0
            /// For a member of the app's own type (a pure wrapper): a round is running.
            var isNotifying = false
            /// For a member of the app's own type: one more round was asked for.
            var hasQueuedRound = false
            /// The group's observations of this member, in the order they were added.
            var subscriptions: [Subscription] = []

            init(_ new: NewMember) {
                state = new.state
                isContentsAvailable = new.isContentsAvailable
                errorCode = new.errorCode
                isPure = new.isPure
            }

            var needsSync: Bool {
                switch state {
                case .idle, .didFailToSync: true
                case .syncing, .didSyncSuccessfully: !isContentsAvailable
                }
            }
        }

        struct Observer {
            var id: Int
            var reaction: Reaction
            var isActive = true
            var reactions = 0
            var addedChild = false
        }

        let policy: Policy
        /// Every member ever made, in order.
        var pool: [Member] = []
        /// The group's members, as indices into `pool`.
        var members: [Int] = []
        /// What the group last heard from each member (it learns only through notifications).
        var heard: [(state: LoadableState, isContentsAvailable: Bool)] = []
        var generation = 0
        var syncable: [Int] = []
        var state = LoadableState.idle
        var isContentsAvailable = false
        var isNotifying = false
        var hasQueuedRound = false
        var observers: [Observer] = []
        var log: [Seen] = []

        init(policy: Policy, initial: [NewMember]) {
            self.policy = policy
            pool = initial.map(Member.init)
            members = Array(pool.indices)
            subscribe()
            state = GroupModelTests.expectedState(heard.map(\.state), policy: policy)
            isContentsAvailable = GroupModelTests.expectedAvailability(heard, policy: policy)
        }

        var needsSync: Bool { syncable.contains { pool[$0].needsSync } }

        var failures: [FailureSeen]? {
            guard state == .didFailToSync else { return nil }
            return heard.indices.filter { heard[$0].state == .didFailToSync }
                .map { FailureSeen(index: $0, code: pool[members[$0]].errorCode) }
        }

        // Members

        func change(_ member: Int, _ change: MemberChange) {
            switch change {
            case .setIdle: set(member, .idle)
            case .setSyncing: set(member, .syncing)
            case .succeed:
                pool[member].isContentsAvailable = true
                pool[member].errorCode = nil
                set(member, .didSyncSuccessfully)
            case .fail(let code):
                pool[member].errorCode = code
                set(member, .didFailToSync)
            case .flipAvailability:
                pool[member].isContentsAvailable.toggle()
                notifyMember(member)
            case .notify:
                notifyMember(member)
            case .sync:
                sync(member)
            case .syncIfNeeded:
                pool[member].syncIfNeededCount += 1
                if pool[member].needsSync { sync(member) }
            }
        }

        func sync(_ member: Int) {
            pool[member].syncCount += 1
            guard pool[member].state != .syncing else { return }
            pool[member].errorCode = nil
            set(member, .syncing)
        }

        func set(_ member: Int, _ state: LoadableState) {
            pool[member].state = state
            notifyMember(member)
        }

        /// A group follows the package's loadables at every change (it observes them as an
        /// immediate observer): no rounds, so a change made while the member's observations run is
        /// seen at once, in a nested call. Observations added meanwhile are not called for this
        /// change. A loadable of the app's own type (the pure wrapper) is observed through its
        /// `addObserver`, in rounds: a change made during a round is seen in one more round.
        func notifyMember(_ member: Int) {
            guard !pool[member].isPure else { return notifyInRounds(member) }
            pool[member].visiting += 1
            let end = pool[member].subscriptions.count
            for index in 0..<end where pool[member].subscriptions[index].isActive {
                let subscription = pool[member].subscriptions[index]
                memberDidNotify(at: subscription.index, generation: subscription.generation)
            }
            pool[member].visiting -= 1
            if pool[member].visiting == 0 { pool[member].subscriptions.removeAll { !$0.isActive } }
        }

        func notifyInRounds(_ member: Int) {
            if pool[member].isNotifying {
                pool[member].hasQueuedRound = true
                return
            }
            pool[member].isNotifying = true
            repeat {
                pool[member].hasQueuedRound = false
                let end = pool[member].subscriptions.count
                for index in 0..<end where pool[member].subscriptions[index].isActive {
                    let subscription = pool[member].subscriptions[index]
                    memberDidNotify(at: subscription.index, generation: subscription.generation)
                }
            } while pool[member].hasQueuedRound
            pool[member].isNotifying = false
            pool[member].subscriptions.removeAll { !$0.isActive }
        }

        // The group

        func subscribe() {
            generation += 1
            for member in pool.indices {
                for index in pool[member].subscriptions.indices {
                    pool[member].subscriptions[index].isActive = false
                }
                if pool[member].visiting == 0, !pool[member].isNotifying {
                    pool[member].subscriptions.removeAll { !$0.isActive }
                }
            }
            heard = members.map { (pool[$0].state, pool[$0].isContentsAvailable) }
            for (index, member) in members.enumerated() {
                pool[member].subscriptions.append(Subscription(index: index, generation: generation))
            }
            syncable = members.filter { !pool[$0].isPure }
        }

        func memberDidNotify(at index: Int, generation: Int) {
            guard generation == self.generation, index < members.count else { return }
            let member = pool[members[index]]
            heard[index] = (member.state, member.isContentsAvailable)
            update()
        }

        func update() {
            let newState = GroupModelTests.expectedState(heard.map(\.state), policy: policy)
            let newAvailability = GroupModelTests.expectedAvailability(heard, policy: policy)
            let shouldNotify =
                newState != state || newAvailability != isContentsAvailable || newState == .didSyncSuccessfully
            state = newState
            isContentsAvailable = newAvailability
            if shouldNotify { notifyGroup() }
        }

        func notifyGroup() {
            if isNotifying {
                hasQueuedRound = true
                return
            }
            isNotifying = true
            repeat {
                hasQueuedRound = false
                let end = observers.count
                for index in 0..<end where observers[index].isActive { call(index) }
            } while hasQueuedRound
            isNotifying = false
        }

        func call(_ index: Int) {
            log.append(
                Seen(
                    observer: observers[index].id, state: state, isContentsAvailable: isContentsAvailable,
                    failures: failures))
            switch observers[index].reaction {
            case .none: break
            case .cancelSelf: observers[index].isActive = false
            case .addObserver:
                if !observers[index].addedChild {
                    observers[index].addedChild = true
                    addObserver(.none)
                }
            case .syncGroup:
                if observers[index].reactions < GroupModelTests.reactionLimit {
                    observers[index].reactions += 1
                    syncGroup()
                }
            case .change(let position, let change):
                if observers[index].reactions < GroupModelTests.reactionLimit, !members.isEmpty {
                    observers[index].reactions += 1
                    self.change(members[position % members.count], change)
                }
            }
        }

        func syncGroup() {
            for member in syncable { sync(member) }
        }

        func syncGroupIfNeeded() {
            for member in syncable { change(member, .syncIfNeeded) }
        }

        func addObserver(_ reaction: Reaction) {
            observers.append(Observer(id: observers.count, reaction: reaction))
        }

        func apply(_ operation: Operation) {
            switch operation {
            case .change(let member, let change):
                if !pool.isEmpty { self.change(member % pool.count, change) }
            case .syncGroup: syncGroup()
            case .syncGroupIfNeeded: syncGroupIfNeeded()
            case .reassign(let picks):
                var newMembers: [Int] = []
                for pick in picks {
                    switch pick {
                    case .existing(let index):
                        if !pool.isEmpty { newMembers.append(index % pool.count) }
                    case .new(let new):
                        pool.append(Member(new))
                        newMembers.append(pool.count - 1)
                    }
                }
                members = newMembers
                subscribe()
                update()
            case .addObserver(let reaction): addObserver(reaction)
            case .cancelObserver(let index), .releaseObserver(let index):
                if !observers.isEmpty { observers[index % observers.count].isActive = false }
            }
        }
    }
}
