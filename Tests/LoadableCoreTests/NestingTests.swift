import Loadable
import LoadableGroup
import LoadableTestSupport
import LoadableTesting
import Testing

/// Deep structures: long cascades of observers changing other loadables, and deeply nested
/// groups, run in a bounded stack and in linear time.
@Suite("Deep cascades and nested groups")
@MainActor
struct NestingTests {
    @Test(
        "a cascade of 10,000 loadables, each observer setting the next, reaches the end without overflowing the stack")
    func longCascade() {
        let count = 10_000
        let loadables = (0..<count).map { _ in PushLoadable<Int>() }
        var calls = Array(repeating: 0, count: count)
        let tokens = (0..<count).map { index in
            loadables[index].observe { loadable in
                calls[index] += 1
                if index + 1 < count { loadables[index + 1].setDidSyncSuccessfully(loadable.contents! + 1) }
            }
        }
        loadables[0].setDidSyncSuccessfully(0)
        #expect(calls.allSatisfy { $0 == 1 })
        #expect(loadables.last?.contents == count - 1)
        #expect(loadables.allSatisfy { $0.loadableState == .didSyncSuccessfully })
        withExtendedLifetime(tokens) {}
    }

    @Test("rounds nest up to the limit; deeper ones are queued and run in order when the round at the limit ends")
    func nestingLimit() {
        let limit = LoadableCore.maxNestingDepth
        let count = limit * 3
        let loadables = (0..<count).map { _ in PushLoadable<Int>() }
        var entered: [Int] = []
        var open = 0
        var deepest = 0
        let tokens = (0..<count).map { index in
            loadables[index].observe { _ in
                entered.append(index)
                open += 1
                deepest = max(deepest, open)
                if index + 1 < count { loadables[index + 1].setDidSyncSuccessfully(index) }
                open -= 1
            }
        }
        loadables[0].setDidSyncSuccessfully(0)
        // Every observer once, in cascade order; never more than `limit` rounds open at once.
        #expect(entered == Array(0..<count))
        #expect(deepest == limit)
        withExtendedLifetime(tokens) {}
    }

    @Test("within the limit, a change made by an observer is notified at once, nested")
    func nestedWithinLimit() {
        let a = PushLoadable<Int>()
        let b = PushLoadable<Int>()
        var log: [String] = []
        observing(
            a,
            { _ in
                log.append("a begins")
                b.setDidSyncSuccessfully(1)
                log.append("a ends")
            }
        ) {
            observing(b, { _ in log.append("b") }) {
                a.setDidSyncSuccessfully(1)
                #expect(log == ["a begins", "b", "a ends"])
            }
        }
    }

    @Test(
        "10,000 nested groups, built bottom-up: a member change reaches the top, and the loop check costs O(1) per level"
    )
    func deepGroupsBottomUp() {
        let depth = 10_000
        let leaf = PushLoadable<Int>()
        let stepsBefore = PureLoadableGroup.loopSearchSteps
        var groups: [PureLoadableGroup] = [PureLoadableGroup([leaf])]
        for _ in 1..<depth { groups.append(PureLoadableGroup([groups.last!])) }
        // Through `init`: a new group cannot be inside its members, so there is nothing to search.
        #expect(PureLoadableGroup.loopSearchSteps == stepsBefore)
        // Through `members =` on a new, empty group: its enclosing groups (none) run out at once.
        let top = PureLoadableGroup([])
        let stepsBeforeAssigning = PureLoadableGroup.loopSearchSteps
        top.members = [groups.last!]
        #expect(PureLoadableGroup.loopSearchSteps - stepsBeforeAssigning <= 2)

        var notifications = 0
        observing(top, { _ in notifications += 1 }) {
            leaf.setDidSyncSuccessfully(1)
            #expect(top.loadableState == .didSyncSuccessfully)
            #expect(top.isContentsAvailable)
            #expect(notifications == 1)
        }
        withExtendedLifetime(groups) {}  // every level, as built, until the end
    }

    @Test("10,000 nested groups, built top-down with members =: the loop check costs O(1) per level")
    func deepGroupsTopDown() {
        let depth = 10_000
        var groups: [LoadableGroup] = [LoadableGroup([])]
        let stepsBefore = PureLoadableGroup.loopSearchSteps
        for _ in 1..<depth {
            let child = LoadableGroup([])
            // The child has no nested groups: the downward side runs out at once.
            groups.last!.members = [child]
            groups.append(child)
        }
        #expect(PureLoadableGroup.loopSearchSteps - stepsBefore <= 2 * depth)
        let leaf = TestLoadable<Int>()
        groups.last!.members = [leaf]
        groups[0].sync()
        #expect(leaf.syncCount == 1)
        #expect(groups[0].loadableState == .syncing)
        leaf.setDidSyncSuccessfully(1)
        #expect(groups[0].loadableState == .didSyncSuccessfully)
    }

    @Test("a group that left another, or whose enclosing group was released, may take it in without a false loop")
    func noFalseLoops() {
        let a = LoadableGroup([])
        let b = LoadableGroup([a])
        let c = LoadableGroup([b])
        // `a` leaves `b`: `b` may now go inside `a` (a stale link from `a` up to `b` would look
        // like a loop).
        b.members = []
        a.members = [b]
        #expect(a.members.count == 1)
        // A released enclosing group is no longer one.
        let d = LoadableGroup([])
        do {
            let temporary = LoadableGroup([d])
            _ = temporary
        }
        d.members = [LoadableGroup([])]
        // Moving a subtree under a sibling.
        c.members = []
        let e = LoadableGroup([])
        e.members = [c, d]
        #expect(e.members.count == 2)
    }
}
