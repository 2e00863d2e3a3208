import LoadableGroup
import LoadableTestSupport
import LoadableTesting
import Testing

/// The composites of `LoadableGroup` own what their documentation says they own, release it with
/// themselves, and leave nothing alive or observed after the last reference and token go away.
@Suite("Leaks in groups, combinations and chains")
@MainActor
struct GroupLeakTests {
    // MARK: - PureLoadableGroup

    @Test("A pure group is released while its members live on, and stops observing them")
    func pureGroupReleased() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        var group: PureLoadableGroup? = PureLoadableGroup([a, b, a], policy: .never)
        weak let weakGroup = group
        #expect(a.addObserverCount == 2 && b.addObserverCount == 1)
        let token = group?.addObserver { _ in }
        group = nil
        #expect(weakGroup == nil)
        #expect(!a.hasObservers && !b.hasObservers)
        #expect(a.removeObserverCount == 2 && b.removeObserverCount == 1)
        #expect(token?.isActive == false)
        // Members changing afterwards reach nobody.
        a.setDidSyncSuccessfully()
        b.setDidFailToSync(nil)
        #expect(a.removeObserverCount == 2)
    }

    @Test("A pure group holds its members strongly and releases them with itself")
    func pureGroupOwnsMembers() {
        var member: PushLoadable<Int>? = PushLoadable<Int>()
        weak let weakMember = member
        var group: PureLoadableGroup? = PureLoadableGroup([member!])
        member = nil
        #expect(weakMember != nil)
        #expect(group?.members.count == 1)
        group = nil
        #expect(weakMember == nil)
        withExtendedLifetime(member) {}
    }

    @Test("An observer that captures its group weakly does not keep it alive")
    func groupObserverDoesNotRetain() {
        let member = TestLoadable<Int>()
        var group: PureLoadableGroup? = PureLoadableGroup([member])
        weak let weakGroup = group
        var calls = 0
        let token = group?.observe { _ in calls += 1 }
        member.setSyncing()
        #expect(calls == 1)
        group = nil
        #expect(weakGroup == nil)
        #expect(token?.isActive == false)
        #expect(!member.hasObservers)
        member.setIdle()
        #expect(calls == 1)
        withExtendedLifetime(token) {}
    }

    @Test("A group released by its own observer does not crash and stops observing its members")
    func groupReleasedInsideItsCallback() {
        let member = TestLoadable<Int>()
        var group: LoadableGroup? = LoadableGroup([member])
        weak let weakGroup = group
        var calls = 0
        let token = group?.addObserver { _ in
            calls += 1
            group = nil
        }
        member.setSyncing()
        #expect(calls == 1)
        #expect(weakGroup == nil)
        #expect(!member.hasObservers)
        #expect(token?.isActive == false)
        member.setIdle()
        #expect(calls == 1)
        withExtendedLifetime(token) {}
    }

    // MARK: - LoadableGroup

    @Test("A group is released while its members live on, and its observers' tokens end")
    func groupReleased() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>(contents: 1)
        var group: LoadableGroup? = LoadableGroup([a, b])
        weak let weakGroup = group
        let first = group?.addObserver { _ in }
        let second = group?.addObserver { _ in }
        group?.sync()
        #expect(a.loadableState == .syncing && b.loadableState == .syncing)
        group = nil
        #expect(weakGroup == nil)
        #expect(first?.isActive == false && second?.isActive == false)
        #expect(!a.hasObservers && !b.hasObservers)
        #expect(a.removeObserverCount == a.addObserverCount && b.removeObserverCount == b.addObserverCount)
        withExtendedLifetime((first, second)) {}
    }

    @Test("A group holds its members strongly, including pure ones, and releases them with itself")
    func groupOwnsMembers() {
        var syncable: TestLoadable<Int>? = TestLoadable<Int>()
        var pure: PushLoadable<Int>? = PushLoadable<Int>()
        weak let weakSyncable = syncable
        weak let weakPure = pure
        var group: LoadableGroup? = LoadableGroup([syncable!, pure!], policy: .any)
        syncable = nil
        pure = nil
        #expect(weakSyncable != nil && weakPure != nil)
        group?.syncIfNeeded()
        #expect(weakSyncable?.syncIfNeededCount == 1)
        group = nil
        #expect(weakSyncable == nil && weakPure == nil)
        withExtendedLifetime((syncable, pure)) {}
    }

    @Test("Reassigning members releases the old ones and stops observing those that live on")
    func reassignReleasesOldMembers() {
        var old: TestLoadable<Int>? = TestLoadable<Int>()
        weak let weakOld = old
        let survivor = TestLoadable<Int>()
        let group = LoadableGroup([old!, survivor])
        old = nil
        #expect(weakOld != nil)
        let replacement = TestLoadable<Int>()
        group.members = [replacement]
        #expect(weakOld == nil)
        #expect(!survivor.hasObservers)
        #expect(survivor.removeObserverCount == 1)
        #expect(replacement.hasObservers)
        // The former member no longer affects the group.
        let recorder = Recorder(group)
        survivor.setDidFailToSync(TestError("old"))
        #expect(group.loadableState == .idle)
        #expect(recorder.count == 0)
        group.members = []
        #expect(!replacement.hasObservers)
        withExtendedLifetime(old) {}
    }

    @Test("A group that is a member of another group is held by it and released with it")
    func nestedGroups() {
        let leaf = TestLoadable<Int>()
        var inner: LoadableGroup? = LoadableGroup([leaf])
        weak let weakInner = inner
        var outer: LoadableGroup? = LoadableGroup([inner!])
        weak let weakOuter = outer
        inner = nil
        #expect(weakInner != nil)
        leaf.setDidSyncSuccessfully()
        #expect(outer?.loadableState == .didSyncSuccessfully)
        outer = nil
        #expect(weakOuter == nil && weakInner == nil)
        #expect(!leaf.hasObservers)
        withExtendedLifetime(inner) {}
    }

    // MARK: - CombinedLoadable

    @Test("A combined loadable is released while its members live on, and stops observing them")
    func combinedReleased() {
        let name = TestLoadable<String>()
        let age = TestLoadable<Int>()
        var person: CombinedLoadable<String>? = LoadableGroup.combine(name, age) { "\($0) (\($1))" }
        weak let weakPerson = person
        let token = person?.addObserver { _ in }
        person?.syncIfNeeded()
        name.setDidSyncSuccessfully("Ada")
        person = nil
        #expect(weakPerson == nil)
        #expect(token?.isActive == false)
        #expect(!name.hasObservers && !age.hasObservers)
        #expect(name.removeObserverCount == name.addObserverCount)
        #expect(age.removeObserverCount == age.addObserverCount)
        age.setDidSyncSuccessfully(36)
        withExtendedLifetime(token) {}
    }

    @Test("A combined loadable holds its members strongly and releases them with itself")
    func combinedOwnsMembers() {
        var first: TestLoadable<Int>? = TestLoadable<Int>(contents: 1)
        var second: TestLoadable<Int>? = TestLoadable<Int>(contents: 2)
        var third: PushLoadable<Int>? = PushLoadable<Int>()
        weak let weakFirst = first
        weak let weakSecond = second
        weak let weakThird = third
        var sum: CombinedLoadable<Int>? = LoadableGroup.combine(first!, second!, third!) { $0 + $1 + $2 }
        first = nil
        second = nil
        third = nil
        #expect(weakFirst != nil && weakSecond != nil && weakThird != nil)
        weakThird?.setDidSyncSuccessfully(3)
        weakFirst?.setDidSyncSuccessfully()
        weakSecond?.setDidSyncSuccessfully()
        #expect(sum?.contents == 6)
        sum = nil
        #expect(weakFirst == nil && weakSecond == nil && weakThird == nil)
        withExtendedLifetime((first, second, third)) {}
    }

    // MARK: - LoadableChain

    @Test("A chain released mid-sync stops observing its current item and does not live on through it")
    func chainReleasedMidSync() {
        let first = TestLoadable<Int>()
        let second = TestLoadable<Int>()
        var chain: LoadableChain? = LoadableChain([.init(first), .init(second)])
        weak let weakChain = chain
        let token = chain?.addObserver { _ in }
        chain?.sync()
        #expect(chain?.loadableState == .syncing)
        #expect(chain?.currentIndex == 0)
        #expect(first.hasObservers)
        chain = nil
        #expect(weakChain == nil)
        #expect(!first.hasObservers)
        #expect(first.removeObserverCount == first.addObserverCount)
        #expect(token?.isActive == false)
        // The item finishing afterwards does not move a chain on.
        first.setDidSyncSuccessfully(1)
        #expect(second.syncIfNeededCount == 0 && second.syncCount == 0)
        #expect(!second.hasObservers)
        withExtendedLifetime(token) {}
    }

    @Test("A chain released on its second item stops observing it; the first is not observed any more")
    func chainReleasedOnSecondItem() {
        let first = TestLoadable<Int>()
        let second = TestLoadable<Int>()
        var chain: LoadableChain? = LoadableChain([.init(first), .init(second)])
        weak let weakChain = chain
        chain?.sync()
        first.setDidSyncSuccessfully(1)
        #expect(chain?.currentIndex == 1)
        #expect(!first.hasObservers && second.hasObservers)
        chain = nil
        #expect(weakChain == nil)
        #expect(!second.hasObservers)
    }

    @Test("A chain holds its items strongly and releases them, and their callbacks, with itself")
    func chainOwnsItems() {
        final class Marker {}
        var item: TestLoadable<Int>? = TestLoadable<Int>()
        var marker: Marker? = Marker()
        weak let weakItem = item
        weak let weakMarker = marker
        var chain: LoadableChain? = LoadableChain([
            .init(item!) { [marker] in
                withExtendedLifetime(marker) {}
                return .proceed
            }
        ])
        weak let weakChain = chain
        item = nil
        marker = nil
        #expect(weakItem != nil && weakMarker != nil)
        chain?.sync()
        weakItem?.setDidSyncSuccessfully(1)
        #expect(chain?.loadableState == .didSyncSuccessfully)
        chain = nil
        #expect(weakChain == nil)
        #expect(weakItem == nil)
        #expect(weakMarker == nil)
        withExtendedLifetime((item, marker)) {}
    }

    @Test("A chain released while an item's callback runs does not crash")
    func chainReleasedInsideCallback() {
        let first = TestLoadable<Int>()
        let second = TestLoadable<Int>()
        var chain: LoadableChain?
        weak var weakChain: LoadableChain?
        chain = LoadableChain([
            .init(first) {
                chain = nil
                return .proceed
            },
            .init(second),
        ])
        weakChain = chain
        chain?.sync()
        first.setDidSyncSuccessfully(1)
        #expect(weakChain == nil)
        #expect(!first.hasObservers && !second.hasObservers)
    }
}
