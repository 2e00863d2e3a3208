import Loadable
import LoadableGroup
import LoadableTestSupport
import Observation
import Testing

/// "Equal contents notify nothing", seen from a group and a combined loadable that follow a
/// member.
@Suite("Equal contents of a group's member")
@MainActor
struct EqualContentsGroupTests {
    @Test("a member's equal write that keeps its state notifies neither it nor its group")
    func equalWrite() {
        let member = PushLoadable<Int>()
        member.setDidSyncSuccessfully(1)
        let group = LoadableGroup([member])
        var groupNotifications = 0
        var memberNotifications = 0
        observing(group, { _ in groupNotifications += 1 }) {
            observing(member, { _ in memberNotifications += 1 }) {
                member.setDidSyncSuccessfully(1)
                member.setContents(1)
            }
        }
        #expect(memberNotifications == 0)
        #expect(groupNotifications == 0)
        #expect(group.loadableState == .didSyncSuccessfully)
    }

    @Test("a member's sync with equal contents still moves the group through syncing")
    func equalSync() {
        let member = PushLoadable<Int>()
        member.setDidSyncSuccessfully(1)
        let group = LoadableGroup([member])
        var states: [LoadableState] = []
        observing(group, { states.append($0.loadableState) }) {
            member.setSyncing()
            member.setDidSyncSuccessfully(1)
        }
        #expect(states == [.syncing, .didSyncSuccessfully])
    }

    @Test("a combined loadable's contents readers are told of a member's new contents")
    func combined() {
        let first = PushLoadable<Int>()
        let second = PushLoadable<Int>()
        first.setDidSyncSuccessfully(1)
        second.setDidSyncSuccessfully(2)
        let sum = LoadableGroup.combine(first, second) { $0 + $1 }
        #expect(sum.contents == 3)
        let contents = trackObservationChanges { _ = sum.contents }
        first.setDidSyncSuccessfully(1)
        #expect(contents.count == 0)
        first.setContents(5)
        #expect(contents.count == 1)
        #expect(sum.contents == 7)
    }
}
