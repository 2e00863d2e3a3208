import Loadable
import LoadableTestSupport
import LoadableTesting
import Testing

@Suite("Proxies")
@MainActor
struct ProxyTests {
    @Test("a proxy without target is idle, without contents or error")
    func noTarget() {
        let proxy = PureLoadableProxy<TestLoadable<Int>>()
        #expect(proxy.loadableState == .idle)
        #expect(!proxy.isContentsAvailable)
        #expect(proxy.error == nil)
        #expect(proxy.contents == nil)
    }

    @Test("with a target, state, error, availability and contents are the target's")
    func followsTarget() {
        let target = TestLoadable(contents: 3)
        target.setDidFailToSync(TestError("x"))
        let proxy = PureLoadableProxy(target: target)
        #expect(proxy.loadableState == .didFailToSync)
        #expect(proxy.error as? TestError == TestError("x"))
        #expect(proxy.isContentsAvailable)
        #expect(proxy.contents == 3)
    }

    @Test("every target notification is forwarded, after proxyDidChange")
    func forwards() {
        final class Recording: PureLoadableProxy<TestLoadable<Int>> {
            var log: [String] = []
            override func proxyDidChange() { log.append("didChange \(loadableState)") }
        }
        let target = TestLoadable<Int>()
        let proxy = Recording(target: target)
        observing(proxy, { proxy in proxy.log.append("observer \(proxy.loadableState)") }) {
            target.setSyncing()
            target.notifyDidChange()
            #expect(
                proxy.log == [
                    "didChange syncing", "observer syncing", "didChange syncing", "observer syncing",
                ])
        }
    }

    @Test("setting a different target notifies once; the same target does nothing")
    func targetChanges() {
        let proxy = PureLoadableProxy<TestLoadable<Int>>()
        let recorder = Recorder()
        observing(proxy, recorder.record) {
            let first = TestLoadable<Int>()
            first.setDidSyncSuccessfully()
            proxy.target = first
            #expect(recorder.states == [.didSyncSuccessfully])
            proxy.target = first
            #expect(recorder.count == 1)
            let second = TestLoadable<Int>()
            proxy.target = second
            #expect(recorder.states == [.didSyncSuccessfully, .idle])
            // The old target is no longer observed.
            first.notifyDidChange()
            #expect(recorder.count == 2)
            #expect(first.removeObserverCount == 1)
            proxy.target = nil
            #expect(recorder.count == 3)
        }
    }

    @Test("the proxy holds its target strongly and releases it with itself")
    func ownership() {
        var target: TestLoadable<Int>? = TestLoadable<Int>()
        weak let weakTarget = target
        var proxy: PureLoadableProxy<TestLoadable<Int>>? = PureLoadableProxy(target: target)
        target = nil
        #expect(weakTarget != nil)
        proxy = nil
        #expect(weakTarget == nil)
        withExtendedLifetime(proxy) {}
    }

    @Test("a sync asked for before the target exists shows syncing and is replayed as syncIfNeeded")
    func pendingSync() {
        let proxy = LoadableProxy<TestLoadable<Int>>()
        let recorder = Recorder()
        observing(proxy, recorder.record) {
            #expect(proxy.needsSync)
            proxy.sync()
            proxy.syncIfNeeded()
            #expect(proxy.loadableState == .syncing)
            #expect(recorder.states == [.syncing])
            let target = TestLoadable<Int>()
            proxy.target = target
            #expect(target.syncIfNeededCount == 1)
            #expect(target.syncCount == 1)
            #expect(proxy.loadableState == .syncing)
            #expect(recorder.states == [.syncing, .syncing])
            target.setDidSyncSuccessfully(1)
            #expect(proxy.loadableState == .didSyncSuccessfully)
        }
    }

    @Test("a pending sync survives setting the target to nil")
    func pendingSurvivesNil() {
        let proxy = LoadableProxy<TestLoadable<Int>>()
        proxy.sync()
        proxy.target = nil
        #expect(proxy.loadableState == .syncing)
        let target = TestLoadable<Int>()
        proxy.target = target
        #expect(target.syncIfNeededCount == 1)
    }

    @Test("with a target, sync and syncIfNeeded are forwarded as they are")
    func forwardsSync() {
        let target = TestLoadable<Int>()
        let proxy = LoadableProxy(target: target)
        target.setSyncing()
        proxy.sync()
        proxy.syncIfNeeded()
        // Both reach the target (its syncIfNeeded calls sync again: it has no contents).
        #expect(target.syncCount == 2)
        #expect(target.syncIfNeededCount == 1)
        target.needsSync = false
        #expect(!proxy.needsSync)
    }

    @Test("a proxy describes itself and its target")
    func description() {
        let proxy = PureLoadableProxy(target: TestLoadable<Int>())
        #expect(
            proxy.description
                == "<PureLoadableProxy<TestLoadable<Int>>: idle, contents available: no, "
                + "target: <TestLoadable<Int>: idle, contents available: no>>")
    }
}

@Suite("map")
@MainActor
struct MapTests {
    @Test("map follows the source and transforms its contents")
    func follows() {
        let source = TestLoadable<[Int]>()
        let count = source.map { $0.count }
        let recorder = Recorder()
        observing(count, recorder.record) {
            #expect(count.contents == nil)
            #expect(!count.isContentsAvailable)
            source.sync()
            source.setDidSyncSuccessfully([1, 2, 3])
            #expect(count.loadableState == .didSyncSuccessfully)
            #expect(count.contents == 3)
            #expect(recorder.states == [.syncing, .didSyncSuccessfully])
            source.setDidFailToSync(TestError())
            #expect(count.contents == 3)
            #expect(count.error as? TestError == TestError())
            source.isContentsAvailable = false
            source.notifyDidChange()
            #expect(count.contents == nil)
        }
    }

    @Test("map transforms existing contents at once and runs only when the source has contents")
    func transformCalls() {
        let source = TestLoadable(contents: 2)
        var calls = 0
        let doubled = source.map { value -> Int in
            calls += 1
            return value * 2
        }
        #expect(doubled.contents == 4)
        #expect(calls == 1)
        source.isContentsAvailable = false
        source.setSyncing()
        #expect(calls == 1)
    }

    @Test("a mapped syncable loadable forwards sync")
    func syncForwarded() {
        let source = TestLoadable<Int>()
        let mapped = source.map { "\($0)" }
        #expect(mapped.needsSync)
        mapped.syncIfNeeded()
        mapped.sync()
        #expect(source.syncIfNeededCount == 1)
        #expect(source.syncCount == 2)
        source.setDidSyncSuccessfully(5)
        #expect(mapped.contents == "5")
    }
}
