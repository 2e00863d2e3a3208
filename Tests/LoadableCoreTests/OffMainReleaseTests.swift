import Loadable
import LoadableGroup
import LoadableSupport
import LoadableTestSupport
import LoadableTesting
import Testing

/// A main-actor object is `Sendable`, so its last reference may drop on another thread. What it
/// observed must then never call it again, even before the main actor runs the removal that the
/// release hands to it. (Before this was fixed, each of these crashed with "unowned reference …
/// already destroyed", in release builds too, or called a released observer.)
@Suite("Objects released on another thread are never called again")
@MainActor
struct OffMainReleaseTests {
    @Test("a proxy released on another thread, then its target notifies")
    func proxy() {
        let target = PushLoadable<Int>()
        let box = Locked<PureLoadableProxy<PushLoadable<Int>>?>(PureLoadableProxy(target: target))
        weak let proxy = box.withLock { $0 }
        releaseOnAnotherThread(box)
        #expect(proxy == nil)
        target.setDidSyncSuccessfully(1)
        target.setIdle()
        #expect(target.loadableState == .idle)
    }

    @Test("a mapped loadable released on another thread, then its source notifies")
    func mapped() {
        let source = PushLoadable<Int>()
        let box = Locked<MappedLoadable<PushLoadable<Int>, Int>?>(source.map { $0 + 1 })
        weak let mapped = box.withLock { $0 }
        releaseOnAnotherThread(box)
        #expect(mapped == nil)
        source.setDidSyncSuccessfully(1)
        #expect(source.contents == 1)
    }

    @Test("a group and a combined loadable released on another thread, then a member notifies")
    func groups() {
        let member = PushLoadable<Int>()
        let other = PushLoadable<Int>(contents: 1)
        let group = Locked<LoadableGroup?>(LoadableGroup([member]))
        let combined = Locked<CombinedLoadable<Int>?>(LoadableGroup.combine(member, other) { $0 + $1 })
        releaseOnAnotherThread(group)
        releaseOnAnotherThread(combined)
        member.setDidSyncSuccessfully(1)
        #expect(member.loadableState == .didSyncSuccessfully)
    }

    /// The pattern older versions of the guides showed: a view model observing with
    /// `[unowned self]`, released off the main actor.
    @MainActor final class UnownedViewModel {
        var renders = 0
        private var observation: LoadableObservation?

        init(_ loadable: PushLoadable<Int>) {
            observation = loadable.observe { [unowned self] _ in self.renders += 1 }
        }
    }

    @Test("a view model observing with [unowned self], released on another thread, is not called")
    func unownedViewModel() {
        let loadable = PushLoadable<Int>()
        let box = Locked<UnownedViewModel?>(UnownedViewModel(loadable))
        releaseOnAnotherThread(box)
        loadable.setDidSyncSuccessfully(1)
        #expect(loadable.contents == 1)
    }

    @Test("a token released on another thread during a round is skipped for the rest of the round")
    func releasedDuringRound() {
        let loadable = PushLoadable<Int>()
        var calls: [String] = []
        let box = Locked<LoadableObservation?>(nil)
        let first = loadable.addObserver { _ in
            calls.append("first")
            releaseOnAnotherThread(box)
        }
        box.withLock { $0 = loadable.addObserver { _ in calls.append("second") } }
        loadable.setSyncing()
        #expect(calls == ["first"])
        withExtendedLifetime(first) {}
    }
}
