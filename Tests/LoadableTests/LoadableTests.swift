import Loadable
import LoadableTestSupport
import LoadableTesting
import Testing

@Suite("Loadable: states, setters and sync")
@MainActor
struct LoadableTests {
    @Test("a new loadable is idle, without contents or error, and needs a sync")
    func initialState() {
        let loadable = ManualLoadable()
        #expect(loadable.loadableState == .idle)
        #expect(loadable.contents == nil)
        #expect(loadable.error == nil)
        #expect(!loadable.isContentsAvailable)
        #expect(loadable.needsSync)
        #expect(loadable.description == "<ManualLoadable: idle, contents available: no>")
    }

    @Test("initial contents make contents available but keep the loadable idle and needing a sync")
    func initialContents() {
        let loadable = ManualLoadable(contents: 7)
        #expect(loadable.loadableState == .idle)
        #expect(loadable.contents == 7)
        #expect(loadable.isContentsAvailable)
        #expect(loadable.needsSync)
    }

    @Test("sync clears the error, notifies syncing, then calls doSync")
    func syncOrder() {
        let loadable = ManualLoadable()
        loadable.setDidFailToSync(TestError())
        var seen: [(LoadableState, Bool, Int)] = []
        observing(loadable, { seen.append(($0.loadableState, $0.error == nil, $0.doSyncCount)) }) {
            loadable.sync()
            #expect(seen.count == 1)
            #expect(seen.first?.0 == .syncing)
            #expect(seen.first?.1 == true)  // error cleared before observers ran
            #expect(seen.first?.2 == 0)  // doSync runs after observers
            #expect(loadable.doSyncCount == 1)
        }
    }

    @Test("sync while syncing does nothing")
    func syncWhileSyncing() {
        let loadable = ManualLoadable()
        let recorder = Recorder()
        observing(loadable, recorder.record) {
            loadable.sync()
            loadable.sync()
            loadable.syncIfNeeded()
            #expect(loadable.doSyncCount == 1)
            #expect(recorder.states == [.syncing])
        }
    }

    @Test("doSync may finish synchronously: observers see syncing then the outcome")
    func synchronousFinish() {
        let loadable = ManualLoadable()
        loadable.finishInDoSync = .succeed(5)
        let recorder = Recorder()
        observing(loadable, recorder.record) {
            loadable.sync()
            #expect(recorder.states == [.syncing, .didSyncSuccessfully])
            #expect(loadable.contents == 5)
            #expect(!loadable.needsSync)
        }
    }

    @Test("contents are kept across re-syncs and failures")
    func contentsKept() {
        let loadable = ManualLoadable()
        loadable.sync()
        loadable.setDidSyncSuccessfully(1)
        loadable.sync()
        #expect(loadable.loadableState == .syncing)
        #expect(loadable.contents == 1)
        #expect(loadable.isContentsAvailable)
        loadable.setDidFailToSync(TestError("offline"))
        #expect(loadable.loadableState == .didFailToSync)
        #expect(loadable.contents == 1)
        #expect(loadable.error as? TestError == TestError("offline"))
        #expect(loadable.needsSync)
        guard case .failed(_, cached: 1) = loadable.snapshot.phase else {
            Issue.record("expected failed with cached contents")
            return
        }
    }

    @Test("a repeated failure replaces the error and notifies again")
    func repeatedFailure() {
        let loadable = ManualLoadable()
        let recorder = Recorder()
        observing(loadable, recorder.record) {
            loadable.setDidFailToSync(TestError("a"))
            loadable.setDidFailToSync(TestError("b"))
            #expect(recorder.states == [.didFailToSync, .didFailToSync])
            #expect(loadable.error as? TestError == TestError("b"))
        }
    }

    // Was "every setter notifies, even without a change of state": since "Equal contents notify
    // nothing", a setter that changes nothing a reader can see tells nobody; new contents and
    // `notifyDidChange()` still notify without a change of state.
    @Test("a setter notifies when it changes something; notifyDidChange() always")
    func settersNotify() {
        let loadable = ManualLoadable()
        let recorder = Recorder()
        observing(loadable, recorder.record) {
            loadable.setSyncing()
            loadable.setDidSyncSuccessfully(1)
            loadable.setDidSyncSuccessfully()
            loadable.setDidSyncSuccessfully(1)
            loadable.setDidSyncSuccessfully(2)
            loadable.notifyDidChange()
            loadable.setIdle()
            loadable.setIdle()
            #expect(
                recorder.states == [
                    .syncing, .didSyncSuccessfully, .didSyncSuccessfully, .didSyncSuccessfully, .idle,
                ])
        }
    }

    @Test("setIdle and setSyncing clear the error and keep the contents")
    func idleClearsError() {
        let loadable = ManualLoadable(contents: 2)
        loadable.setDidFailToSync(TestError())
        loadable.setIdle()
        #expect(loadable.error == nil)
        #expect(loadable.contents == 2)
        loadable.setDidFailToSync(TestError())
        loadable.setSyncing()
        #expect(loadable.error == nil)
    }

    @Test(
        "needsSync follows the state and availability",
        arguments: [
            (LoadableState.idle, false, true), (.idle, true, true),
            (.syncing, false, true), (.syncing, true, false),
            (.didSyncSuccessfully, true, false),
            (.didFailToSync, false, true), (.didFailToSync, true, true),
        ])
    func needsSync(state: LoadableState, hasContents: Bool, expected: Bool) {
        let loadable = ManualLoadable(contents: hasContents ? 1 : nil)
        switch state {
        case .idle: loadable.setIdle()
        case .syncing: loadable.setSyncing()
        case .didSyncSuccessfully: loadable.setDidSyncSuccessfully()
        case .didFailToSync: loadable.setDidFailToSync(nil)
        }
        #expect(loadable.needsSync == expected)
    }

    @Test("syncIfNeeded syncs only when needed")
    func syncIfNeeded() {
        let loadable = ManualLoadable()
        loadable.finishInDoSync = .succeed(1)
        loadable.syncIfNeeded()
        #expect(loadable.doSyncCount == 1)
        loadable.syncIfNeeded()
        #expect(loadable.doSyncCount == 1)
        loadable.sync()
        #expect(loadable.doSyncCount == 2)
    }

    @Test("cancelSync calls doCancelSync and restores the state and error from before the sync")
    func cancelRestores() {
        let loadable = ManualLoadable(contents: 3)
        loadable.setDidFailToSync(TestError("old"))
        loadable.sync()
        #expect(loadable.error == nil)
        loadable.cancelSync()
        #expect(loadable.doCancelSyncCount == 1)
        #expect(loadable.loadableState == .didFailToSync)
        #expect(loadable.error as? TestError == TestError("old"))
        #expect(loadable.contents == 3)
    }

    @Test("cancelSync when not syncing does nothing")
    func cancelWhenIdle() {
        let loadable = ManualLoadable()
        let recorder = Recorder()
        observing(loadable, recorder.record) {
            loadable.cancelSync()
            #expect(loadable.doCancelSyncCount == 0)
            #expect(recorder.count == 0)
        }
    }

    @Test("cancelling a sync started from success goes back to success")
    func cancelFromSuccess() {
        let loadable = ManualLoadable()
        loadable.setDidSyncSuccessfully(1)
        loadable.sync()
        loadable.cancelSync()
        #expect(loadable.loadableState == .didSyncSuccessfully)
        #expect(!loadable.needsSync)
    }

    @Test("an observer that leaves syncing while told of the sync prevents doSync")
    func observerCancelsBeforeDoSync() {
        let loadable = ManualLoadable()
        observing(
            loadable,
            { loadable in
                if loadable.loadableState == .syncing { loadable.cancelSync() }
            }
        ) {
            loadable.sync()
            #expect(loadable.doSyncCount == 0)
            #expect(loadable.loadableState == .idle)
        }
    }

    @Test("hooks run when the first observer arrives and the last one leaves")
    func hooks() {
        final class Hooked: Loadable<Int> {
            var events: [String] = []
            override func doSync() {}
            override func didAddFirstObserver() { events.append("first") }
            override func didRemoveLastObserver() { events.append("last") }
        }
        let loadable = Hooked()
        var first: LoadableObservation? = loadable.addObserver { _ in }
        let second = loadable.addObserver { _ in }
        #expect(loadable.events == ["first"])
        #expect(loadable.hasObservers)
        first = nil
        #expect(loadable.events == ["first"])
        second.cancel()
        #expect(loadable.events == ["first", "last"])
        #expect(!loadable.hasObservers)
        _ = loadable.addObserver { _ in }  // released at once
        #expect(loadable.events == ["first", "last", "first", "last"])
        withExtendedLifetime(first) {}
    }

    @Test("a PushLoadable is driven only by its owner")
    func pushLoadable() {
        let feed = PushLoadable<[String]>()
        let pure: any PureLoadable = feed
        let recorder = Recorder()
        observing(pure, recorder.record) {
            feed.setSyncing()
            feed.setDidSyncSuccessfully(["a"])
            feed.setDidFailToSync(nil)
            #expect(recorder.states == [.syncing, .didSyncSuccessfully, .didFailToSync])
            #expect(feed.contents == ["a"])
            #expect(!(pure is any SyncableLoadable))
            #expect(feed.description == "<PushLoadable<Array<String>>: did-fail-to-sync, contents available: yes>")
        }
    }

    @Test("doSync not overridden stops with a message naming doSync()")
    func doSyncNotOverridden() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                final class Forgetful: Loadable<Int> {}
                Forgetful().sync()
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("must override doSync()"))
        }
    }

    @Test("success without contents stops with a message naming isContentsAvailable")
    func successWithoutContents() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                PushLoadable<Int>().setDidSyncSuccessfully()
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("isContentsAvailable is false"))
        }
    }
}
