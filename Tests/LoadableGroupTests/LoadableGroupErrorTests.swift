import LoadableGroup
import LoadableTestSupport
import LoadableTesting
import Testing

@Suite("Group errors")
@MainActor
struct LoadableGroupErrorTests {
    @Test("A failed group lists every failed member in member order, with or without an error")
    func listsEveryFailedMember() throws {
        let members = (0..<4).map { _ in TestLoadable<Int>() }
        let group = LoadableGroup(members)
        members[3].setDidFailToSync(TestError("four"))
        members[1].setDidFailToSync(nil)
        members[0].setDidSyncSuccessfully(1)
        let error = try #require(group.groupError)
        #expect(error.failures.map(\.index) == [1, 3])
        #expect(error.failures[0].error == nil)
        #expect(error.failures[1].error as? TestError == TestError("four"))
        #expect((group.error as? LoadableGroupError)?.failures.count == 2)
        #expect(
            error.description
                == "Could not sync 2 members of the group: member #1 failed without an error; member #3: four"
        )
    }

    @Test("The error reads the failed members' current errors")
    func readsCurrentErrors() {
        let a = TestLoadable<Int>()
        let group = PureLoadableGroup([a])
        a.setDidFailToSync(TestError("first"))
        #expect(group.error.map { "\($0)" } == "Could not sync a member of the group: member #0: first")
        a.setDidFailToSync(TestError("second"))
        #expect(group.error.map { "\($0)" } == "Could not sync a member of the group: member #0: second")
        a.setSyncing()
        #expect(group.error == nil)
    }

    @Test(
        "The error is nil unless the group itself failed",
        arguments: PureLoadableGroup.Policy.allCases
    )
    func nilUnlessFailed(policy: PureLoadableGroup.Policy) {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let group = LoadableGroup([a, b], policy: policy)
        a.setDidFailToSync(TestError("a"))
        b.setDidSyncSuccessfully(2)
        // .strict fails; .never and .any succeed, and then report no error.
        #expect((group.error != nil) == (policy == .strict))
        #expect((group.error != nil) == (group.loadableState == .didFailToSync))
        b.setDidFailToSync(nil)
        // .strict and .any fail with both members; .never never fails.
        #expect((group.error != nil) == (policy != .never))
        #expect(group.groupError?.failures.map(\.index) ?? [] == (policy == .never ? [] : [0, 1]))
    }

    @Test("Each failure and the error read well on their own")
    func descriptions() {
        #expect(LoadableGroupError.Failure(index: 2, error: nil).description == "member #2 failed without an error")
        #expect(LoadableGroupError.Failure(index: 0, error: TestError("boom")).description == "member #0: boom")
        #expect(LoadableGroupError(failures: []).description == "Could not sync the group")
    }
}
