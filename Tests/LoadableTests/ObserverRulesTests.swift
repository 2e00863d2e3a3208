import Loadable
import LoadableTestSupport
import Testing

/// The observer rules of `Docs/Concepts.md` ("The observer rules", with what releasing a token
/// does), one test each.
@Suite("Observer rules")
@MainActor
struct ObserverRulesTests {
    @Test("observers are called in the order they were added")
    func registrationOrder() {
        let loadable = ManualLoadable()
        var calls: [Int] = []
        let tokens = (0..<5).map { index in loadable.addObserver { _ in calls.append(index) } }
        loadable.notifyDidChange()
        #expect(calls == [0, 1, 2, 3, 4])
        withExtendedLifetime(tokens) {}
    }

    @Test("an observer added during a round is not called in that round, but in the next")
    func addedDuringRound() {
        let loadable = ManualLoadable()
        var calls: [String] = []
        var late: LoadableObservation?
        let first = loadable.addObserver { loadable in
            calls.append("first")
            if late == nil { late = loadable.addObserver { _ in calls.append("late") } }
        }
        loadable.notifyDidChange()
        #expect(calls == ["first"])
        loadable.notifyDidChange()
        #expect(calls == ["first", "first", "late"])
        withExtendedLifetime((first, late)) {}
    }

    @Test("an observer removed during a round and not yet called is skipped")
    func removedDuringRound() {
        let loadable = ManualLoadable()
        var calls: [String] = []
        var second: LoadableObservation?
        let first = loadable.addObserver { _ in
            calls.append("first")
            second?.cancel()
        }
        second = loadable.addObserver { _ in calls.append("second") }
        let third = loadable.addObserver { _ in calls.append("third") }
        loadable.notifyDidChange()
        #expect(calls == ["first", "third"])
        withExtendedLifetime((first, third)) {}
    }

    @Test("an observer released (not cancelled) during a round is skipped")
    func releasedDuringRound() {
        let loadable = ManualLoadable()
        var calls: [String] = []
        var second: LoadableObservation?
        let first = loadable.addObserver { _ in
            calls.append("first")
            second = nil
        }
        second = loadable.addObserver { _ in calls.append("second") }
        loadable.notifyDidChange()
        loadable.notifyDidChange()
        #expect(calls == ["first", "first"])
        withExtendedLifetime((first, second)) {}
    }

    @Test("a change made by an observer is applied at once and notified in a round queued after the current one")
    func nestedChangeIsQueued() {
        let loadable = ManualLoadable()
        var log: [String] = []
        let first = loadable.addObserver { loadable in
            log.append("first sees \(loadable.loadableState)")
            if loadable.loadableState == .didFailToSync {
                // Retry from inside the failure callback: MMMLoadable asserts here.
                (loadable as? ManualLoadable)?.sync()
                // The change is applied at once...
                log.append("after sync: \(loadable.loadableState)")
            }
        }
        let second = loadable.addObserver { loadable in
            log.append("second sees \(loadable.loadableState)")
        }
        loadable.setDidFailToSync(TestError())
        #expect(
            log == [
                "first sees did-fail-to-sync",
                "after sync: syncing",
                // ...the current round goes on with the latest state (no nesting)...
                "second sees syncing",
                // ...and one more round follows.
                "first sees syncing",
                "second sees syncing",
            ])
        #expect(loadable.doSyncCount == 1)
        withExtendedLifetime((first, second)) {}
    }

    @Test("several changes during one round are coalesced into one more round with the latest state")
    func severalNestedChanges() {
        let loadable = ManualLoadable()
        var seen: [LoadableState] = []
        var changed = false
        observing(
            loadable,
            { (loadable: any PureLoadable) in
                seen.append(loadable.loadableState)
                guard !changed, let loadable = loadable as? ManualLoadable else { return }
                changed = true
                loadable.setSyncing()
                loadable.setDidSyncSuccessfully(1)
            }
        ) {
            // Not `setIdle()`: an idle loadable moved to idle again notifies nothing.
            loadable.setDidFailToSync(nil)
            #expect(seen == [.didFailToSync, .didSyncSuccessfully])
        }
    }

    @Test("a loadable released inside its own callback does not crash")
    func releaseInsideCallback() {
        @MainActor final class Owner {
            var loadable: ManualLoadable? = ManualLoadable()
        }
        let owner = Owner()
        weak let weakLoadable = owner.loadable
        var calls = 0
        let token = owner.loadable?.addObserver { loadable in
            calls += 1
            owner.loadable = nil
            // The loadable stays valid until the round ends.
            #expect(loadable.loadableState == .didSyncSuccessfully)
        }
        let second = owner.loadable?.addObserver { _ in calls += 1 }
        owner.loadable?.setDidSyncSuccessfully(1)
        #expect(calls == 2)
        #expect(weakLoadable == nil)
        #expect(token?.isActive == false)
        withExtendedLifetime(second) {}
    }

    @Test("a released token stops its observer at once")
    func releasedToken() {
        let loadable = ManualLoadable()
        var calls = 0
        var token: LoadableObservation? = loadable.addObserver { _ in calls += 1 }
        loadable.notifyDidChange()
        token = nil
        loadable.notifyDidChange()
        #expect(calls == 1)
        #expect(!loadable.hasObservers)
        withExtendedLifetime(token) {}
    }

    @Test("a cancelled token stops its observer, and cancelling twice is harmless")
    func cancelledToken() {
        let loadable = ManualLoadable()
        var calls = 0
        let token = loadable.addObserver { _ in calls += 1 }
        #expect(token.isActive)
        token.cancel()
        token.cancel()
        #expect(!token.isActive)
        loadable.notifyDidChange()
        #expect(calls == 0)
    }

    @Test("a token released on another thread hands the removal to the main actor")
    func tokenReleasedElsewhere() async {
        let loadable = ManualLoadable()
        var calls = 0
        // The only reference goes to code that does not run on the main actor.
        await releaseOffMainActor(loadable.addObserver { _ in calls += 1 })
        await yield(until: { !loadable.hasObservers })
        loadable.notifyDidChange()
        #expect(calls == 0)
    }

    @Test("observing does not keep the loadable alive; its token becomes inactive")
    func tokenHoldsLoadableWeakly() {
        var loadable: ManualLoadable? = ManualLoadable()
        weak let weakLoadable = loadable
        let token = loadable?.addObserver { _ in }
        loadable = nil
        #expect(weakLoadable == nil)
        #expect(token?.isActive == false)
        token?.cancel()
    }

    @Test("no lock is held while observers run: an observer may add, cancel, read and sync freely")
    func noLockHeld() {
        let loadable = ManualLoadable()
        loadable.finishInDoSync = .succeed(1)
        var inner: [LoadableObservation] = []
        var calls = 0
        observing(
            loadable,
            { (loadable: any PureLoadable) in
                calls += 1
                guard let loadable = loadable as? ManualLoadable, calls < 4 else { return }
                inner.append(loadable.addObserver { _ in })
                inner.first?.cancel()
                _ = loadable.snapshot
                _ = loadable.description
                loadable.syncIfNeeded()
            }
        ) {
            loadable.sync()
            #expect(loadable.loadableState == .didSyncSuccessfully)
            #expect(calls >= 2)
        }
    }

    @Test("observers of different loadables may change each other while being notified")
    func crossLoadableNesting() {
        let a = ManualLoadable()
        let b = ManualLoadable()
        var log: [String] = []
        observing(
            a,
            { a in
                log.append("a: \(a.loadableState)")
                if a.loadableState == .didSyncSuccessfully { b.setDidSyncSuccessfully(2) }
            }
        ) {
            observing(b, { b in log.append("b: \(b.loadableState)") }) {
                a.setDidSyncSuccessfully(1)
                #expect(log == ["a: did-sync-successfully", "b: did-sync-successfully"])
            }
        }
    }
}

/// Drops a reference from a task that does not run on the main actor.
private func releaseOffMainActor(_ token: LoadableObservation) async {
    await Task.detached { [token] in _ = token }.value
}
