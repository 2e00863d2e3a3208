import LoadableGroup
import LoadableTestSupport
import LoadableTesting
import Testing

/// The actions an item's callback can return, with a name for test output.
enum ChainActionCase: String, CaseIterable, Sendable {
    case proceed, fail, completeSuccessfully

    var action: LoadableChain.NextAction {
        switch self {
        case .proceed: .proceed
        case .fail: .fail(TestError("Simulated error"))
        case .completeSuccessfully: .completeSuccessfully
        }
    }
}

/// Lets an item's callback reach the chain it belongs to.
@MainActor
private final class ChainHolder {
    weak var chain: LoadableChain?
}

@Suite("Chains")
@MainActor
struct LoadableChainTests {
    @Test("Items sync one by one; a failure stops the chain; a new sync resumes from the failed item")
    func basics() throws {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let c = TestLoadable<Int>()
        let chain = LoadableChain([.init(a), .init(b), .init(c)])
        #expect(chain.loadableState == .idle)
        #expect(!chain.isContentsAvailable)
        #expect(chain.needsSync)

        chain.syncIfNeeded()
        #expect(a.loadableState == .syncing)
        #expect(b.loadableState == .idle)
        #expect(chain.loadableState == .syncing)
        #expect(chain.currentIndex == 0)

        a.setDidSyncSuccessfully(1)
        #expect(b.loadableState == .syncing)
        #expect(chain.currentIndex == 1)
        #expect(!a.hasObservers)  // only the current item is observed

        b.setDidFailToSync(TestError("Simulated error"))
        #expect(chain.loadableState == .didFailToSync)
        #expect(c.loadableState == .idle)
        #expect(!chain.isContentsAvailable)
        let error = try #require(chain.error as? LoadableChainError)
        #expect(error.index == 1)
        #expect(error.underlying as? TestError == TestError("Simulated error"))
        #expect(error.description == "Could not sync item #1 of the chain: Simulated error")
        #expect(chain.currentIndex == nil)

        chain.syncIfNeeded()
        #expect(a.syncCount == 1)  // passed through: it does not need a sync
        #expect(b.loadableState == .syncing)
        #expect(chain.loadableState == .syncing)
        #expect(chain.error == nil)

        c.setDidSyncSuccessfully(3)  // on its own
        #expect(chain.loadableState == .syncing)
        b.setDidSyncSuccessfully(2)
        #expect(chain.loadableState == .didSyncSuccessfully)
        #expect(chain.isContentsAvailable)
        #expect(chain.error == nil)
        #expect(c.syncCount == 0)
        #expect(!chain.needsSync)
    }

    @Test("An item's callback decides what follows it", arguments: ChainActionCase.allCases)
    func callbacks(actionCase: ChainActionCase) {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let c = TestLoadable<Int>()
        a.setDidSyncSuccessfully(1)
        var callbackCount = 0
        let chain = LoadableChain([
            .init(a),
            .init(b) {
                callbackCount += 1
                return actionCase.action
            },
            .init(c),
        ])
        chain.syncIfNeeded()
        #expect(a.syncCount == 0)
        #expect(b.loadableState == .syncing)
        b.setDidSyncSuccessfully(2)
        #expect(callbackCount == 1)
        switch actionCase {
        case .completeSuccessfully:
            #expect(chain.loadableState == .didSyncSuccessfully)
            #expect(chain.isContentsAvailable)
            #expect(c.loadableState == .idle)
        case .fail:
            #expect(chain.loadableState == .didFailToSync)
            #expect(chain.error as? TestError == TestError("Simulated error"))
            #expect(c.loadableState == .idle)
            #expect(!chain.isContentsAvailable)
        case .proceed:
            #expect(c.loadableState == .syncing)
            #expect(chain.loadableState == .syncing)
            #expect(chain.error == nil)
        }
    }

    @Test("An empty chain succeeds as soon as it syncs", arguments: [false, true])
    func emptyChain(ifNeeded: Bool) {
        let chain = LoadableChain([])
        let recorder = Recorder(chain)
        if ifNeeded { chain.syncIfNeeded() } else { chain.sync() }
        #expect(chain.loadableState == .didSyncSuccessfully)
        #expect(chain.isContentsAvailable)
        #expect(recorder.states == [.syncing, .didSyncSuccessfully])
        #expect(!chain.needsSync)
    }

    @Test("Items that finish synchronously are stepped through before sync() returns")
    func synchronousItems() {
        let items = (0..<3).map { ImmediateLoadable(.success($0)) }
        let chain = LoadableChain(items.map { LoadableChain.Item($0) })
        let recorder = Recorder(chain)
        chain.sync()
        #expect(chain.loadableState == .didSyncSuccessfully)
        #expect(items.allSatisfy { $0.loadableState == .didSyncSuccessfully })
        #expect(recorder.states == [.syncing, .didSyncSuccessfully])  // no progress notifications
    }

    @Test("A long chain of synchronous items loops instead of recursing")
    func longSynchronousChain() {
        let items = (0..<20_000).map { _ in LoadableChain.Item(ImmediateLoadable()) }
        let chain = LoadableChain(items)
        chain.sync()
        #expect(chain.loadableState == .didSyncSuccessfully)
    }

    @Test("A synchronous item that fails without contents fails the chain with its error")
    func synchronousFailure() throws {
        let chain = LoadableChain([.init(ImmediateLoadable()), .init(ImmediateLoadable(.failure(TestError("x"))))])
        chain.sync()
        let error = try #require(chain.error as? LoadableChainError)
        #expect(error.index == 1)
        #expect(error.underlying as? TestError == TestError("x"))
    }

    @Test("An item that ends without contents and without an error still fails the chain")
    func failureWithoutError() throws {
        let a = TestLoadable<Int>()
        let chain = LoadableChain([.init(a)])
        chain.sync()
        a.setIdle()  // not syncing any more, no contents
        let error = try #require(chain.error as? LoadableChainError)
        #expect(error.index == 0)
        #expect(error.underlying == nil)
        #expect(error.description == "Could not sync item #0 of the chain: it has no contents and gave no error")
    }

    @Test("An item that fails fails the chain even when it keeps earlier contents")
    func staleContentsFail() throws {
        let a = TestLoadable<Int>(contents: 1)
        let b = TestLoadable<Int>()
        let chain = LoadableChain([.init(a), .init(b)])
        chain.sync()
        #expect(a.loadableState == .syncing)  // idle items need a sync even with contents
        a.setDidFailToSync(TestError("offline"))
        #expect(b.syncCount == 0)
        #expect(chain.loadableState == .didFailToSync)
        let error = try #require(chain.error as? LoadableChainError)
        #expect(error.index == 0)
        #expect(error.underlying as? TestError == TestError("offline"))
    }

    @Test("An item that is already syncing is waited for")
    func itemAlreadySyncing() {
        let a = TestLoadable<Int>()
        a.sync()
        let recorder = Recorder(a)
        let chain = LoadableChain([.init(a)])
        chain.sync()
        #expect(a.syncIfNeededCount == 1)
        #expect(recorder.count == 0)  // the running sync goes on undisturbed
        #expect(chain.loadableState == .syncing)
        a.notifyDidChange()  // progress while syncing: ignored
        #expect(chain.loadableState == .syncing)
        a.setDidSyncSuccessfully(1)
        #expect(chain.loadableState == .didSyncSuccessfully)
    }

    @Test("needsSync: idle or failed chains need a sync; successful ones only when an item does")
    func needsSync() {
        let a = TestLoadable<Int>()
        a.setDidSyncSuccessfully(1)
        let chain = LoadableChain([.init(a) { .fail(TestError("no")) }])
        #expect(chain.needsSync)  // idle, even though every item is synced
        chain.syncIfNeeded()
        #expect(chain.loadableState == .didFailToSync)
        #expect(chain.needsSync)  // failed through a callback: can be retried
        chain.items = [.init(a)]
        chain.syncIfNeeded()
        #expect(chain.loadableState == .didSyncSuccessfully)
        #expect(!chain.needsSync)
        a.needsSync = true
        #expect(chain.needsSync)
        #expect(a.syncCount == 0)
    }

    @Test("Cancelling the chain stops observing the current item")
    func cancel() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let chain = LoadableChain([.init(a), .init(b)])
        chain.sync()
        #expect(a.hasObservers)
        chain.cancelSync()
        #expect(chain.loadableState == .idle)
        #expect(chain.currentIndex == nil)
        #expect(!a.hasObservers)
        #expect(a.removeObserverCount == 1)
        a.setDidSyncSuccessfully(1)
        #expect(b.loadableState == .idle)
        #expect(chain.loadableState == .idle)
    }

    @Test("Reassigning the items mid-sync restarts with the new items and forgets the old current one")
    func reassignMidSync() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let chain = LoadableChain([.init(a)])
        chain.sync()
        chain.items = [.init(b)]
        #expect(!a.hasObservers)
        #expect(b.loadableState == .syncing)
        #expect(chain.currentIndex == 0)
        a.setDidFailToSync(nil)
        #expect(chain.loadableState == .syncing)
        b.setDidSyncSuccessfully(2)
        #expect(chain.loadableState == .didSyncSuccessfully)
        chain.items = []  // not syncing: used by the next sync only
        #expect(chain.loadableState == .didSyncSuccessfully)
    }

    @Test("Releasing the chain mid-sync stops observing the current item")
    func releaseMidSync() {
        let a = TestLoadable<Int>()
        var chain: LoadableChain? = LoadableChain([.init(a), .init(TestLoadable<Int>())])
        chain?.sync()
        weak let weakChain = chain
        chain = nil
        #expect(weakChain == nil)
        #expect(!a.hasObservers)
        a.setDidSyncSuccessfully(1)  // no crash
    }

    @Test("A callback that changes the chain ends the step it was called for")
    func reentrantCallbacks() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let c = TestLoadable<Int>()
        let holder = ChainHolder()
        let chain = LoadableChain([
            .init(a) {
                holder.chain?.cancelSync()
                return .completeSuccessfully  // ignored: the chain was cancelled
            },
            .init(b),
        ])
        holder.chain = chain
        chain.sync()
        a.setDidSyncSuccessfully(1)
        #expect(chain.loadableState == .idle)
        #expect(b.loadableState == .idle)

        chain.items = [
            .init(a) {
                holder.chain?.items = [.init(c)]  // restarts with the new items at once
                return .completeSuccessfully  // ignored: the step is over
            }
        ]
        chain.sync()
        #expect(chain.loadableState == .syncing)
        #expect(c.loadableState == .syncing)
        c.setDidSyncSuccessfully(3)
        #expect(chain.loadableState == .didSyncSuccessfully)
    }

    @Test("An observer of an item that restarts the chain while the item notifies does not confuse it")
    func reentrantRestartFromItemObserver() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let chain = LoadableChain([.init(a), .init(b)])
        var restarted = false
        observing(
            a,
            { a in
                guard a.loadableState == .syncing, !restarted else { return }
                restarted = true
                chain.cancelSync()
                chain.sync()
            }
        ) {
            chain.sync()
            #expect(restarted)
            #expect(chain.loadableState == .syncing)
            #expect(chain.currentIndex == 0)
            a.setDidSyncSuccessfully(1)
            #expect(b.loadableState == .syncing)
            b.setDidSyncSuccessfully(2)
            #expect(chain.loadableState == .didSyncSuccessfully)
        }
    }

    @Test("A chain that is one of its own items does not crash; it waits for itself")
    func chainContainingItself() {
        let chain = LoadableChain([])
        chain.items = [.init(chain)]
        chain.sync()
        #expect(chain.loadableState == .syncing)
        #expect(chain.needsSync == false)
        chain.cancelSync()
        #expect(chain.loadableState == .idle)
        chain.items = []  // breaks the cycle so that the chain can be released
    }

    @Test("The chain's notifications: syncing when it starts, the outcome when it ends")
    func notifications() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let chain = LoadableChain([.init(a), .init(b)])
        let recorder = Recorder(chain)
        chain.sync()
        a.setDidSyncSuccessfully(1)
        b.setDidFailToSync(nil)
        #expect(recorder.states == [.syncing, .didFailToSync])
        #expect(chain.description == "<LoadableChain: did-fail-to-sync, contents available: no>")
    }

    @Test("syncedContents() waits for the chain and throws its error")
    func asyncUse() async throws {
        let chain = LoadableChain([.init(ImmediateLoadable())])
        try await chain.syncedContents()
        #expect(chain.loadableState == .didSyncSuccessfully)

        let failing = LoadableChain([.init(ImmediateLoadable(.failure(TestError("down"))))])
        await #expect(throws: LoadableChainError.self) { try await failing.syncedContents() }
    }
}
