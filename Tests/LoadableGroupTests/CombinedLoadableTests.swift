import LoadableGroup
import LoadableTestSupport
import LoadableTesting
import Testing

@Suite("Typed combination")
@MainActor
struct CombinedLoadableTests {
    @Test("Two members: contents exist once both have contents, and follow their changes")
    func combineTwo() {
        let name = TestLoadable<String>()
        let age = TestLoadable<Int>()
        var transformCount = 0
        let person = LoadableGroup.combine(name, age) { name, age in
            transformCount += 1
            return "\(name) (\(age))"
        }
        let recorder = Recorder(person)
        #expect(person.contents == nil && !person.isContentsAvailable)
        #expect(person.loadableState == .idle)
        person.syncIfNeeded()
        #expect(name.syncCount == 1 && age.syncCount == 1)
        #expect(person.loadableState == .syncing)
        name.setDidSyncSuccessfully("Ada")
        #expect(person.contents == nil)
        #expect(transformCount == 0)
        age.setDidSyncSuccessfully(36)
        #expect(person.contents == "Ada (36)")
        #expect(person.isContentsAvailable)
        #expect(person.loadableState == .didSyncSuccessfully)
        #expect(recorder.states == [.syncing, .didSyncSuccessfully])

        age.contents = 37
        age.notifyDidChange()
        #expect(person.contents == "Ada (37)")
        #expect(recorder.count == 3)
        #expect(transformCount == 2)
    }

    @Test("Contents are recomputed on member notifications while all are available, even while syncing")
    func recomputedWhileSyncing() {
        let a = TestLoadable<Int>(contents: 1)
        let b = TestLoadable<Int>(contents: 2)
        let sum = LoadableGroup.combine(a, b) { $0 + $1 }
        #expect(sum.contents == 3)  // stale contents count: available at once
        #expect(sum.loadableState == .idle)
        sum.sync()
        #expect(sum.loadableState == .syncing)
        #expect(sum.contents == 3)
        let recorder = Recorder(sum)
        a.contents = 10
        a.notifyDidChange()  // the group stays syncing, but the contents changed
        #expect(sum.contents == 12)
        #expect(recorder.states == [.syncing])
        b.isContentsAvailable = false
        b.notifyDidChange()
        #expect(sum.contents == nil && !sum.isContentsAvailable)
        #expect(recorder.count == 2)
        a.notifyDidChange()  // not all available, same state: nothing to tell
        #expect(recorder.count == 2)
    }

    @Test("Three members")
    func combineThree() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<String>()
        let c = TestLoadable<Bool>()
        let combined = LoadableGroup.combine(a, b, c) { "\($0)-\($1)-\($2)" }
        a.setDidSyncSuccessfully(1)
        b.setDidSyncSuccessfully("b")
        #expect(combined.contents == nil)
        c.setDidSyncSuccessfully(true)
        #expect(combined.contents == "1-b-true")
        #expect(combined.members.count == 3)
    }

    @Test("Four members")
    func combineFour() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let c = TestLoadable<Int>()
        let d = TestLoadable<Int>()
        let combined = LoadableGroup.combine(a, b, c, d) { [$0, $1, $2, $3] }
        combined.sync()
        for (index, member) in [a, b, c, d].enumerated() { member.setDidSyncSuccessfully(index) }
        #expect(combined.contents == [0, 1, 2, 3])
        #expect(combined.loadableState == .didSyncSuccessfully)
        #expect(!combined.needsSync)
        c.setDidFailToSync(TestError("c"))
        #expect(combined.loadableState == .didFailToSync)
        #expect(combined.needsSync)
        #expect((combined.error as? LoadableGroupError)?.failures.map(\.index) == [2])
        #expect(combined.contents == [0, 1, 2, 3])  // stale contents stay
    }

    @Test("Mixing a pushed member and a syncable one: only the syncable one is synced")
    func pushAndSync() {
        let feed = PushLoadable<[String]>()
        let user = TestLoadable<String>()
        let combined = LoadableGroup.combine(feed, user) { "\($1): \($0.count)" }
        combined.sync()
        #expect(user.syncCount == 1)
        #expect(feed.loadableState == .idle)
        feed.setDidSyncSuccessfully(["a", "b"])
        user.setDidSyncSuccessfully("ada")
        #expect(combined.contents == "ada: 2")
        #expect(combined.description == "<CombinedLoadable<String>: did-sync-successfully, contents available: yes>")
    }

    @Test("Releasing a combined loadable stops observing its members")
    func releaseStopsObservation() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        var combined: CombinedLoadable<Int>? = LoadableGroup.combine(a, b) { $0 + $1 }
        #expect(a.hasObservers && b.hasObservers)
        weak let weakCombined = combined
        combined = nil
        #expect(weakCombined == nil)
        #expect(!a.hasObservers && !b.hasObservers)
        a.setDidSyncSuccessfully(1)
    }
}
