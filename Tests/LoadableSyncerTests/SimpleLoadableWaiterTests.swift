import LoadableSyncer
import LoadableTesting
import Testing

@MainActor
@Suite struct SimpleLoadableWaiterTests {
    let token = TestLoadable<String>()

    @Test("The completion runs once, when the loadable stops syncing, whatever the outcome")
    func completesOnce() {
        token.sync()
        var calls = 0
        let waiter = SimpleLoadableWaiter.whenDoneSyncing(token) { calls += 1 }
        #expect(waiter.isPending)
        token.notifyDidChange()
        #expect(calls == 0)
        token.setDidFailToSync(nil)
        #expect(calls == 1)
        #expect(!waiter.isPending)
        token.sync()
        token.setDidSyncSuccessfully("a")
        #expect(calls == 1)
        #expect(!token.hasObservers)
    }

    @Test(
        "A loadable that is not syncing completes at once, before whenDoneSyncing returns",
        arguments: [LoadableState.idle, .didSyncSuccessfully, .didFailToSync])
    func completesSynchronously(state: LoadableState) {
        token.loadableState = state
        var calls = 0
        let waiter = SimpleLoadableWaiter.whenDoneSyncing(token) { calls += 1 }
        #expect(calls == 1)
        #expect(!waiter.isPending)
        #expect(token.addObserverCount == 0)
    }

    @Test("cancel() drops the completion and the observer; calling it again does nothing")
    func cancel() {
        token.sync()
        var calls = 0
        let waiter = SimpleLoadableWaiter.whenDoneSyncing(token) { calls += 1 }
        waiter.cancel()
        waiter.cancel()
        #expect(!token.hasObservers)
        token.setDidSyncSuccessfully("a")
        #expect(calls == 0)
    }

    @Test("A discarded waiter still completes")
    func discardedResult() {
        token.sync()
        var calls = 0
        SimpleLoadableWaiter.whenDoneSyncing(token) { calls += 1 }
        token.setDidSyncSuccessfully("a")
        #expect(calls == 1)
    }

    @Test("The waiter keeps the loadable alive until it completes or is cancelled")
    func keepsLoadableAlive() {
        var loadable: PushLoadable<Int>? = PushLoadable()
        loadable?.setSyncing()
        let waiter = SimpleLoadableWaiter.whenDoneSyncing(loadable!) {}
        weak let weakLoadable = loadable
        loadable = nil
        #expect(weakLoadable != nil)
        waiter.cancel()
        #expect(weakLoadable == nil)
    }

    @Test("A completion that syncs the loadable again is not called a second time")
    func reentrantCompletion() {
        token.sync()
        var calls = 0
        SimpleLoadableWaiter.whenDoneSyncing(token) {
            calls += 1
            token.sync()
            token.setDidFailToSync(nil)
        }
        token.setDidSyncSuccessfully("a")
        #expect(calls == 1)
        #expect(token.loadableState == .didFailToSync)
    }
}
