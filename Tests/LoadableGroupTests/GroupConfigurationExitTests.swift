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
