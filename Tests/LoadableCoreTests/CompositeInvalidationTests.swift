import Loadable
import LoadableGroup
import LoadableTestSupport
import LoadableTesting
import Testing

/// `invalidate()` and `cancelSync()` on loadables made of others: groups, chains, proxies, mapped
/// and combined loadables; and on `TestLoadable`.
@Suite("invalidate() and cancelSync() on composites")
@MainActor
struct CompositeInvalidationTests {
    /// A loadable whose syncs the test finishes; counts `doSync()` and `doCancelSync()`.
    final class Manual: Loadable<Int> {
        var doSyncCount = 0
        var doCancelSyncCount = 0
        /// Called inside each `doSync()`.
        var onDoSync: (@MainActor () -> Void)?

        override func doSync() {
            doSyncCount += 1
            onDoSync?()
        }

        override func doCancelSync() {
            doCancelSyncCount += 1
        }

        /// A loadable that succeeded with `contents`.
        static func synced(_ contents: Int) -> Manual {
            let loadable = Manual()
            loadable.setDidSyncSuccessfully(contents)
            return loadable
        }
    }

    // MARK: - LoadableGroup

    @Test("group invalidate() invalidates every syncable member: those in use sync, the others are only marked")
    func groupInvalidate() {
        let used = Manual.synced(1)
        let unused = Manual.synced(1)
        let counted = TestLoadable<Int>()
        let pure = PushLoadable<Int>(contents: 1)
        let lease = used.lease()
        let group = LoadableGroup([used, pure, unused, counted], policy: .any)
        group.invalidate()
        #expect(used.doSyncCount == 1)
        #expect(used.loadableState == .syncing)
        #expect(unused.doSyncCount == 0)
        #expect(unused.loadableState == .didSyncSuccessfully)
        #expect(unused.isStale)
        #expect(counted.invalidateCount == 1)
        #expect(counted.syncCount == 0)
        #expect(group.loadableState == .syncing)
        withExtendedLifetime(lease) {}
    }

    @Test("a group in use: its invalidate() syncs every member at once")
    func groupInUseInvalidate() {
        let a = Manual.synced(1)
        let b = Manual.synced(1)
        let group = LoadableGroup([a, b])
        let lease = group.lease()
        group.invalidate()
        #expect(a.doSyncCount == 1 && b.doSyncCount == 1)
        #expect(group.loadableState == .syncing)
        withExtendedLifetime(lease) {}
    }

    @Test("group cancelSync() cancels the member syncs the group started, never one someone else started")
    func groupCancelSync() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let group = LoadableGroup([a, b])
        a.sync()  // someone else's sync
        group.sync()
        #expect(b.loadableState == .syncing)
        group.cancelSync()
        #expect(a.cancelSyncCount == 0)
        #expect(a.loadableState == .syncing)
        #expect(b.cancelSyncCount == 1)
        #expect(b.loadableState == .idle)

        group.cancelSync()  // nothing the group started still runs
        #expect(a.cancelSyncCount == 0 && b.cancelSyncCount == 1)
    }

    @Test("a member sync the group started, finished, then started again by someone else is not cancelled")
    func groupCancelSyncAfterMemberFinished() {
        let a = TestLoadable<Int>()
        let group = LoadableGroup([a])
        group.syncIfNeeded()
        a.setDidSyncSuccessfully(1)
        a.sync()  // someone else's
        group.cancelSync()
        #expect(a.cancelSyncCount == 0)
        #expect(a.loadableState == .syncing)
    }

    // MARK: - LoadableChain

    /// A chain of a token and a profile that needs it, whose syncs are logged in order.
    @MainActor
    struct SignIn {
        let token = Manual()
        let profile = Manual()
        let chain: LoadableChain
        let log = Log()

        @MainActor
        final class Log {
            var entries: [String] = []
        }

        init() {
            chain = LoadableChain([.init(token), .init(profile)])
            token.onDoSync = { [log] in log.entries.append("token") }
            profile.onDoSync = { [log] in log.entries.append("profile") }
        }

        /// Runs the chain once to success.
        func signIn() {
            chain.sync()
            token.setDidSyncSuccessfully(1)
            profile.setDidSyncSuccessfully(1)
            log.entries = []
        }
    }

    @Test("chain invalidate() in use: items are marked stale, then the chain runs again in order")
    func chainInvalidateInUse() {
        let signIn = SignIn()
        let lease = signIn.chain.lease()
        signIn.signIn()
        #expect(signIn.chain.loadableState == .didSyncSuccessfully)

        signIn.chain.invalidate()
        // The profile, in use through the chain, waits for the new token instead of syncing at once.
        #expect(signIn.log.entries == ["token"])
        #expect(signIn.profile.isStale)
        #expect(signIn.profile.loadableState == .didSyncSuccessfully)
        #expect(signIn.chain.loadableState == .syncing)

        signIn.token.setDidSyncSuccessfully(2)
        #expect(signIn.log.entries == ["token", "profile"])
        signIn.profile.setDidSyncSuccessfully(2)
        #expect(signIn.chain.loadableState == .didSyncSuccessfully)
        #expect(!signIn.chain.isStale && !signIn.token.isStale && !signIn.profile.isStale)
        #expect(signIn.log.entries == ["token", "profile"])
        withExtendedLifetime(lease) {}
    }

    @Test("chain invalidate() not in use: the chain and its items are only marked stale")
    func chainInvalidateNotInUse() {
        let signIn = SignIn()
        signIn.signIn()
        let recorder = Recorder(signIn.chain)
        signIn.chain.invalidate()
        #expect(signIn.log.entries.isEmpty)
        #expect(signIn.chain.isStale && signIn.token.isStale && signIn.profile.isStale)
        #expect(signIn.chain.loadableState == .didSyncSuccessfully)
        #expect(recorder.states == [.didSyncSuccessfully])
        #expect(signIn.chain.needsSync)

        signIn.chain.syncIfNeeded()
        #expect(signIn.log.entries == ["token"])
        signIn.token.setDidSyncSuccessfully(2)
        #expect(signIn.log.entries == ["token", "profile"])
    }

    @Test("chain invalidate() while the chain syncs: it runs once more when it ends")
    func chainInvalidateWhileSyncing() {
        let signIn = SignIn()
        signIn.signIn()
        signIn.chain.sync()  // nothing needs a sync: the chain succeeds at once
        #expect(signIn.chain.loadableState == .didSyncSuccessfully)

        signIn.profile.invalidate()
        signIn.chain.sync()
        #expect(signIn.log.entries == ["profile"])
        signIn.chain.invalidate()
        #expect(signIn.token.isStale)
        #expect(signIn.log.entries == ["profile"])  // no item synced one by one

        signIn.profile.setDidSyncSuccessfully(2)  // the profile runs once more: it was invalidated too
        signIn.profile.setDidSyncSuccessfully(3)
        // The chain's own extra run, from the first item.
        #expect(signIn.chain.loadableState == .syncing)
        #expect(signIn.log.entries == ["profile", "profile", "token"])
        signIn.token.setDidSyncSuccessfully(2)
        #expect(signIn.log.entries == ["profile", "profile", "token"])  // the profile is fresh
        #expect(signIn.chain.loadableState == .didSyncSuccessfully)
    }

    @Test("chain cancelSync() cancels the current item only when the chain started its sync")
    func chainCancelSync() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let chain = LoadableChain([.init(a), .init(b)])
        a.sync()  // someone else's sync
        chain.sync()
        #expect(chain.currentIndex == 0)
        chain.cancelSync()
        #expect(a.cancelSyncCount == 0)
        #expect(a.loadableState == .syncing)
        #expect(chain.loadableState == .idle)
        a.setDidSyncSuccessfully(1)
        #expect(chain.loadableState == .idle)  // the chain no longer follows it
        #expect(b.syncCount == 0)

        chain.sync()
        #expect(chain.currentIndex == 1)
        #expect(b.loadableState == .syncing)
        chain.cancelSync()
        #expect(b.cancelSyncCount == 1)
        #expect(b.loadableState == .idle)
        #expect(chain.loadableState == .idle)
    }

    // MARK: - Proxies, mapped and combined loadables

    @Test("LoadableProxy, MappedLoadable and CombinedLoadable forward invalidate() and cancelSync()")
    func forwarding() {
        let proxyTarget = TestLoadable<Int>()
        let proxy = LoadableProxy(target: proxyTarget)
        proxy.invalidate()
        proxy.sync()
        proxy.cancelSync()
        #expect(proxyTarget.invalidateCount == 1)
        #expect(proxyTarget.cancelSyncCount == 1)
        #expect(proxyTarget.loadableState == .idle)

        let source = TestLoadable<Int>()
        let mapped = source.map { $0 + 1 }
        mapped.invalidate()
        mapped.sync()
        mapped.cancelSync()
        #expect(source.invalidateCount == 1)
        #expect(source.cancelSyncCount == 1)
        #expect(source.loadableState == .idle)

        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let c = TestLoadable<Int>()
        let combined = LoadableGroup.combine(a, b, c) { $0 + $1 + $2 }
        combined.invalidate()
        #expect([a, b, c].map(\.invalidateCount) == [1, 1, 1])
        c.sync()  // someone else's sync
        combined.sync()
        combined.cancelSync()
        #expect([a, b, c].map(\.cancelSyncCount) == [1, 1, 0])
        #expect(c.loadableState == .syncing)
    }

    @Test("invalidating a proxy in use syncs its target at once")
    func proxyInUseInvalidate() {
        let target = Manual.synced(1)
        let proxy = LoadableProxy(target: target)
        let lease = proxy.lease()
        proxy.invalidate()
        #expect(target.doSyncCount == 1)
        #expect(proxy.loadableState == .syncing)
        withExtendedLifetime(lease) {}
    }

    @Test("a proxy without target: invalidate() does nothing; cancelSync() drops a sync asked for meanwhile")
    func proxyWithoutTarget() {
        let proxy = LoadableProxy<TestLoadable<Int>>()
        let recorder = Recorder(proxy)
        proxy.invalidate()
        proxy.cancelSync()
        #expect(recorder.count == 0)
        #expect(proxy.loadableState == .idle)

        proxy.sync()
        proxy.cancelSync()
        #expect(recorder.states == [.syncing, .idle])
        let target = TestLoadable<Int>()
        proxy.target = target
        #expect(target.syncCount == 0)
        #expect(target.syncIfNeededCount == 0)
    }

    // MARK: - TestLoadable

    @Test("TestLoadable counts invalidate() and changes nothing else")
    func testLoadableInvalidate() {
        let loadable = TestLoadable(contents: 1)
        loadable.setDidSyncSuccessfully()
        let recorder = Recorder(loadable)
        loadable.invalidate()
        loadable.invalidate()
        #expect(loadable.invalidateCount == 2)
        #expect(recorder.count == 0)
        #expect(loadable.loadableState == .didSyncSuccessfully)
        #expect(loadable.syncCount == 0)
        loadable.resetCounters()
        #expect(loadable.invalidateCount == 0)
    }

    @Test(
        "TestLoadable cancelSync() counts, and while syncing goes back to the state and error from before",
        arguments: [LoadableState.idle, .didSyncSuccessfully, .didFailToSync])
    func testLoadableCancelSync(before: LoadableState) {
        let loadable = TestLoadable<Int>()
        switch before {
        case .idle, .syncing: loadable.setIdle()
        case .didSyncSuccessfully: loadable.setDidSyncSuccessfully(1)
        case .didFailToSync: loadable.setDidFailToSync(TestError("offline"))
        }
        let recorder = Recorder(loadable)
        loadable.sync()
        #expect(loadable.error == nil)
        loadable.cancelSync()
        #expect(loadable.cancelSyncCount == 1)
        #expect(loadable.loadableState == before)
        #expect(recorder.states == [.syncing, before])
        if before == .didFailToSync {
            #expect(loadable.error as? TestError == TestError("offline"))
        } else {
            #expect(loadable.error == nil)
        }

        loadable.cancelSync()  // not syncing: counted, nothing else
        #expect(loadable.cancelSyncCount == 2)
        #expect(recorder.count == 2)
        loadable.resetCounters()
        #expect(loadable.cancelSyncCount == 0)
    }
}
