import LoadableTestSupport
import LoadableTesting
import Testing

@Suite("TestLoadable")
@MainActor
struct TestLoadableTests {
    @Test("setting the state notifies, even to the same value; other setters do not")
    func notifications() {
        let loadable = TestLoadable<Int>()
        var count = 0
        observing(loadable, { _ in count += 1 }) {
            loadable.loadableState = .idle
            loadable.loadableState = .idle
            #expect(count == 2)
            loadable.contents = 1
            loadable.error = nil
            loadable.isContentsAvailable = true
            loadable.needsSync = false
            #expect(count == 2)
            loadable.notifyDidChange()
            #expect(count == 3)
        }
    }

    @Test("sync counts, moves to syncing and never finishes by itself")
    func sync() {
        let loadable = TestLoadable<Int>()
        loadable.error = SomeError()
        loadable.sync()
        loadable.sync()
        #expect(loadable.syncCount == 2)
        #expect(loadable.loadableState == .syncing)
        #expect(loadable.error == nil)
    }

    @Test("syncIfNeeded counts and syncs only when needed")
    func syncIfNeeded() {
        let loadable = TestLoadable<Int>()
        loadable.needsSync = false
        loadable.syncIfNeeded()
        #expect(loadable.syncIfNeededCount == 1)
        #expect(loadable.syncCount == 0)
        loadable.resetNeedsSync()
        loadable.syncIfNeeded()
        #expect(loadable.syncCount == 1)
    }

    @Test("needsSync follows the default formula until set")
    func needsSyncFormula() {
        let loadable = TestLoadable<Int>()
        #expect(loadable.needsSync)
        loadable.setDidSyncSuccessfully()
        #expect(!loadable.needsSync)
        loadable.needsSync = true
        #expect(loadable.needsSync)
    }

    @Test("setDidSyncSuccessfully makes contents available and clears the error")
    func success() {
        let loadable = TestLoadable<Int>()
        loadable.setDidFailToSync(SomeError())
        #expect(loadable.error != nil)
        loadable.setDidSyncSuccessfully(3)
        #expect(loadable.isContentsAvailable)
        #expect(loadable.contents == 3)
        #expect(loadable.error == nil)
        #expect(loadable.loadableState == .didSyncSuccessfully)
    }

    @Test("observer and read counters count, and reset")
    func counters() {
        let loadable = TestLoadable<Int>()
        var token: LoadableObservation? = loadable.addObserver { _ in }
        let other = loadable.addObserver { _ in }
        token = nil
        other.cancel()
        #expect(loadable.addObserverCount == 2)
        #expect(loadable.removeObserverCount == 2)
        _ = loadable.loadableState
        _ = loadable.isContentsAvailable
        _ = loadable.error
        #expect(loadable.loadableStateReadCount == 1)
        #expect(loadable.isContentsAvailableReadCount == 1)
        #expect(loadable.errorReadCount == 1)
        loadable.resetCounters()
        #expect(loadable.addObserverCount == 0)
        #expect(loadable.removeObserverCount == 0)
        #expect(loadable.loadableStateReadCount == 0)
        withExtendedLifetime(token) {}
    }

    @Test("a test loadable describes itself")
    func description() {
        #expect(TestLoadable(contents: 1).description == "<TestLoadable<Int>: idle, contents available: yes>")
    }
}

private struct SomeError: Error {}
