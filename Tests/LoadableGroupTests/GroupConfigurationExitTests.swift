import LoadableGroup
import LoadableTesting
import Testing

/// A group inside itself would notify itself and recurse forever: the assignment that closes the
/// loop stops the program with a message naming `members`.
@Suite("A group that would be its own member stops with a clear message")
struct GroupConfigurationExitTests {
    static let message = "members: a group cannot be its own member, directly or through other groups"

    @Test("A group made its own member")
    func directly() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let group = LoadableGroup([TestLoadable<Int>()])
                group.members.append(group)
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("LoadableGroup.\(Self.message)"))
        }
    }

    @Test("A group made a member of a group inside it, two levels down")
    func throughOtherGroups() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let outer = PureLoadableGroup([TestLoadable<Int>()], policy: .never)
                let middle = LoadableGroup([TestLoadable<Int>()])
                let inner = LoadableGroup([TestLoadable<Int>(), middle])
                middle.members = [inner]
                outer.members = [middle]
                inner.members.append(outer)
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("LoadableGroup.\(Self.message)"))
        }
    }

    @Test("A loop closed at the bottom of a deep chain built top-down")
    func deepLoopTopDown() async {
        // The search runs from both ends and stops when either side runs out: here the lower
        // group's nested groups run out at once, so the loop is found going up.
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                var chain: [LoadableGroup] = [LoadableGroup([])]
                for _ in 0..<50 {
                    let child = LoadableGroup([])
                    chain.last!.members = [child]
                    chain.append(child)
                }
                chain[50].members = [chain[0]]
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("LoadableGroup.\(Self.message)"))
        }
    }

    @Test("A loop closed at the top of a deep chain built bottom-up")
    func deepLoopBottomUp() async {
        // Here the upper group's enclosing groups run out at once, so the loop is found going
        // down.
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let bottom = LoadableGroup([])
                var top = bottom
                for _ in 0..<50 { top = LoadableGroup([top]) }
                bottom.members = [top]
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("LoadableGroup.\(Self.message)"))
        }
    }
}

@MainActor
@Suite struct GroupNestingTests {
    @Test("The same group nested twice, or shared by sibling groups, is not a loop")
    func sharedGroupsAreFine() {
        let shared = LoadableGroup([TestLoadable<Int>()])
        let left = LoadableGroup([shared])
        let right = LoadableGroup([shared, shared])
        let top = LoadableGroup([left, right, shared])
        top.members.append(LoadableGroup([left]))
        #expect(top.members.count == 4)
        #expect(top.loadableState == .idle)
    }
}
