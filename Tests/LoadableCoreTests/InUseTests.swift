import Loadable
import LoadableGroup
import LoadableSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

/// `SyncableLoadable.isInUse`: leases, syncers, and composites that pass their use on.
@Suite("isInUse")
@MainActor
struct InUseTests {
    /// A loadable whose syncs the test finishes; counts `doSync()`.
    final class Manual: Loadable<Int> {
        var doSyncCount = 0

        override func doSync() {
            doSyncCount += 1
        }
    }

    /// Counts Observation's change reports (its `onChange` closure must be `@Sendable`; here it
    /// runs synchronously on the main actor, inside the change).
    final class ChangeCounter: @unchecked Sendable {
        var count = 0
    }

    /// Tracks `loadable.isInUse` once with `withObservationTracking`; the counter counts the change
    /// reports that follow (at most one).
    static func trackInUse(of loadable: some SyncableLoadable) -> ChangeCounter {
        let counter = ChangeCounter()
        withObservationTracking {
            _ = loadable.isInUse
        } onChange: {
            counter.count += 1
        }
        return counter
    }

    static let policy = BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(8))

    // MARK: - Leases

    @Test("a lease makes its loadable in use until released; releasing twice ends nothing more")
    func leaseAndRelease() {
        let loadable = TestLoadable<Int>()
        #expect(!loadable.isInUse)
        let first = loadable.lease()
        let second = loadable.lease()
        #expect(loadable.isInUse)
        #expect(loadable.syncCount == 0)  // taking a lease does not sync

        first.release()
        #expect(first.isReleased)
        #expect(loadable.isInUse)
        first.release()
        #expect(loadable.isInUse)  // the second lease's use is not ended by a double release

        second.release()
        #expect(!loadable.isInUse)
    }

    @Test("a lease that goes away ends its use; a released lease that goes away ends nothing more")
    func leaseDeinit() {
        let loadable = TestLoadable<Int>()
        var first: LoadableLease<TestLoadable<Int>>? = loadable.lease()
        var second: LoadableLease<TestLoadable<Int>>? = loadable.lease()
        weak let weakFirst = first
        weak let weakSecond = second
        first?.release()
        first = nil
        #expect(weakFirst == nil)
        #expect(loadable.isInUse)
        second = nil
        #expect(weakSecond == nil)
        #expect(!loadable.isInUse)
    }

    @Test("a lease released on another thread ends the use on the main actor")
    func leaseReleasedOnAnotherThread() async {
        let loadable = Manual()
        loadable.setDidSyncSuccessfully(1)
        let box = Locked<LoadableLease<Manual>?>(loadable.lease())
        #expect(loadable.isInUse)
        releaseOnAnotherThread(box)
        await yield { !loadable.isInUse }
        loadable.invalidate()
        #expect(loadable.doSyncCount == 0)
        #expect(loadable.isStale)
    }

    @Test("a released lease still reads its loadable, but sync, syncIfNeeded, invalidate and cancelSync do nothing")
    func releasedLease() {
        let loadable = TestLoadable<Int>()
        let lease = loadable.lease()
        lease.sync()
        lease.cancelSync()
        lease.invalidate()
        lease.syncIfNeeded()
        #expect(loadable.syncCount == 2)
        #expect(loadable.cancelSyncCount == 1)
        #expect(loadable.invalidateCount == 1)
        #expect(loadable.syncIfNeededCount == 1)

        lease.release()
        loadable.setDidFailToSync(TestError("offline"))
        lease.sync()
        lease.syncIfNeeded()
        lease.invalidate()
        lease.cancelSync()
        #expect(loadable.syncCount == 2)
        #expect(loadable.syncIfNeededCount == 1)
        #expect(loadable.invalidateCount == 1)
        #expect(loadable.cancelSyncCount == 1)

        loadable.contents = 7
        loadable.isContentsAvailable = true
        #expect(lease.loadableState == .didFailToSync)
        #expect(lease.error as? TestError == TestError("offline"))
        #expect(lease.contents == 7)
        #expect(lease.isContentsAvailable)
        #expect(lease.needsSync)
        #expect(lease.loadable === loadable)
    }

    @Test("a lease forwards state, contents, error and notifications; its observers get the lease")
    func leaseForwards() {
        let loadable = Manual()
        let lease = loadable.lease()
        var seen: [String] = []
        observing(
            lease,
            { [weak lease] notified in
                #expect(notified === lease)
                let contents = lease?.contents.map { "\($0)" } ?? "nil"
                seen.append("\(notified.loadableState) \(contents)")
            }
        ) {
            lease.sync()
            loadable.setDidSyncSuccessfully(1)
            loadable.sync()
            loadable.setDidFailToSync(TestError("offline"))
            #expect(seen == ["syncing nil", "did-sync-successfully 1", "syncing 1", "did-fail-to-sync 1"])
            #expect(lease.error as? TestError == TestError("offline"))
            #expect(lease.loadableState == .didFailToSync)
        }
    }

    @Test("a lease of a lease keeps the loadable in use until both are released")
    func leaseOfLease() {
        let loadable = TestLoadable<Int>()
        let inner = loadable.lease()
        let outer = inner.lease()
        inner.release()
        #expect(loadable.isInUse)
        outer.release()
        #expect(!loadable.isInUse)
    }

    // MARK: - Syncers

    @Test("a LoadableSyncer keeps its loadable in use while it lives, and not after")
    func syncerUse() {
        let loadable = Manual()
        loadable.setDidSyncSuccessfully(1)
        var syncer: LoadableSyncer? = LoadableSyncer(loadable, timeoutPolicy: Self.policy, clock: ManualClock())
        weak let weakSyncer = syncer
        #expect(loadable.isInUse)
        loadable.invalidate()
        #expect(loadable.doSyncCount == 1)  // in use: synced at once
        loadable.setDidSyncSuccessfully(2)

        syncer = nil
        #expect(weakSyncer == nil)
        #expect(!loadable.isInUse)
        loadable.invalidate()
        #expect(loadable.doSyncCount == 1)
        #expect(loadable.isStale)
    }

    // MARK: - Composites

    @Test("a group in use passes the use to its syncable members, nested groups included, until it ends")
    func group() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let nested = TestLoadable<Int>()
        let pure = PushLoadable<Int>()
        let group = LoadableGroup([a, pure, b, LoadableGroup([nested])])
        #expect(!a.isInUse && !b.isInUse && !nested.isInUse)
        let lease = group.lease()
        #expect(group.isInUse)
        #expect(a.isInUse && b.isInUse && nested.isInUse)
        lease.release()
        #expect(!group.isInUse)
        #expect(!a.isInUse && !b.isInUse && !nested.isInUse)
    }

    @Test("a member in use on its own stays in use when the group's use ends")
    func groupAndOwnLease() {
        let a = TestLoadable<Int>()
        let group = LoadableGroup([a, a])
        let own = a.lease()
        let groupLease = group.lease()
        groupLease.release()
        #expect(a.isInUse)
        own.release()
        #expect(!a.isInUse)
    }

    @Test("changing the members of a group in use moves the use; a member in both lists stays in use throughout")
    func groupMembersChange() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let c = TestLoadable<Int>()
        let group = LoadableGroup([a, b])
        let lease = group.lease()
        let bChanges = Self.trackInUse(of: b)
        group.members = [b, c]
        #expect(!a.isInUse)
        #expect(b.isInUse && c.isInUse)
        #expect(bChanges.count == 0)

        lease.release()
        #expect(!b.isInUse && !c.isInUse)
        group.members = [a]  // not in use: nothing is passed on
        #expect(!a.isInUse)
    }

    @Test("a chain in use passes the use to its items; changing the items moves it")
    func chain() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let c = TestLoadable<Int>()
        let chain = LoadableChain([.init(a), .init(b)])
        #expect(!a.isInUse)
        let lease = chain.lease()
        #expect(a.isInUse && b.isInUse)

        let bChanges = Self.trackInUse(of: b)
        chain.items = [.init(b), .init(c)]
        #expect(!a.isInUse)
        #expect(b.isInUse && c.isInUse)
        #expect(bChanges.count == 0)

        lease.release()
        #expect(!b.isInUse && !c.isInUse)
        chain.items = [.init(a)]
        #expect(!a.isInUse)
    }

    @Test("a LoadableProxy in use passes the use to its target, and moves it when the target changes")
    func proxy() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<Int>()
        let c = TestLoadable<Int>()
        let proxy = LoadableProxy(target: a)
        proxy.target = b  // not in use: no use to move
        #expect(!a.isInUse && !b.isInUse)

        let lease = proxy.lease()
        #expect(b.isInUse)
        proxy.target = c
        #expect(!b.isInUse && c.isInUse)
        proxy.target = nil
        #expect(!c.isInUse)
        proxy.target = a
        #expect(a.isInUse)

        lease.release()
        #expect(!a.isInUse)
        #expect(!proxy.isInUse)
    }

    @Test("a mapped loadable in use passes the use to its source")
    func mapped() {
        let source = TestLoadable<Int>()
        let mapped = source.map { $0 * 2 }
        let lease = mapped.lease()
        #expect(source.isInUse)
        lease.release()
        #expect(!source.isInUse)
    }

    @Test("a combined loadable in use passes the use to its members")
    func combined() {
        let a = TestLoadable<Int>()
        let b = TestLoadable<String>()
        let combined = LoadableGroup.combine(a, b) { "\($0) \($1)" }
        let lease = combined.lease()
        #expect(a.isInUse && b.isInUse)
        lease.release()
        #expect(!a.isInUse && !b.isInUse)
    }

    @Test("a member of a group in use syncs at once when invalidated")
    func memberOfGroupInUseSyncs() {
        let member = Manual()
        member.setDidSyncSuccessfully(1)
        let group = LoadableGroup([member])
        let lease = group.lease()
        member.invalidate()
        #expect(member.doSyncCount == 1)
        withExtendedLifetime(lease) {}
    }

    // MARK: - Observation

    @Test("isInUse is tracked by Observation, but is not a notification of closure observers")
    func observation() {
        let loadable = TestLoadable<Int>()
        let recorder = Recorder(loadable)
        let beginning = Self.trackInUse(of: loadable)
        let lease = loadable.lease()
        #expect(beginning.count == 1)

        let second = Self.trackInUse(of: loadable)
        let another = loadable.lease()
        another.release()
        #expect(second.count == 0)  // still in use throughout

        let ending = Self.trackInUse(of: loadable)
        lease.release()
        #expect(ending.count == 1)
        #expect(!loadable.isInUse)
        #expect(recorder.count == 0)
    }
}
