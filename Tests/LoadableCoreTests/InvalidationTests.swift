import Loadable
import LoadableTestSupport
import LoadableTesting
import Testing

/// The rule of `Loadable.invalidate()`: during a sync, exactly one more sync when it ends (begun in
/// the notification that ends it); otherwise marked stale, and synced at once only when in use.
@Suite("Loadable.invalidate()")
@MainActor
struct InvalidationTests {
    /// A loadable whose syncs the test finishes; counts `doSync()` and `doCancelSync()`.
    final class Manual: Loadable<Int> {
        var doSyncCount = 0
        var doCancelSyncCount = 0
        /// Called inside each `doSync()`, after it was counted.
        var onDoSync: (@MainActor (Manual) -> Void)?

        override func doSync() {
            doSyncCount += 1
            onDoSync?(self)
        }

        override func doCancelSync() {
            doCancelSyncCount += 1
        }
    }

    /// What an observer sees at a notification: `"<state> <contents>"`, then `stale` when stale.
    static func describe(_ loadable: Manual) -> String {
        let contents = loadable.contents.map { "\($0)" } ?? "nil"
        return "\(loadable.loadableState) \(contents)" + (loadable.isStale ? " stale" : "")
    }

    /// Records what observers of a loadable see, one line per notification.
    @MainActor
    final class Seen {
        var lines: [String] = []
        private var observation: LoadableObservation?

        init(_ loadable: Manual) {
            observation = loadable.addObserver { [weak self] loadable in
                guard let loadable = loadable as? Manual else { return }
                self?.lines.append(InvalidationTests.describe(loadable))
            }
        }
    }

    // MARK: - During a sync

    @Test("three invalidations during one sync give exactly one more sync, and no notification")
    func manyInvalidationsOneExtraSync() {
        let loadable = Manual()
        let seen = Seen(loadable)
        loadable.sync()
        loadable.invalidate()
        loadable.invalidate()
        loadable.invalidate()
        #expect(seen.lines == ["syncing nil stale"])
        #expect(loadable.doSyncCount == 1)

        loadable.setDidSyncSuccessfully(1)
        #expect(loadable.doSyncCount == 2)
        #expect(loadable.loadableState == .syncing)

        loadable.setDidSyncSuccessfully(2)
        #expect(loadable.doSyncCount == 2)
        #expect(loadable.loadableState == .didSyncSuccessfully)
        #expect(!loadable.isStale)
        #expect(seen.lines == ["syncing nil stale", "syncing 1 stale", "did-sync-successfully 2"])
    }

    @Test("an invalidation during the extra sync gives one more after it")
    func invalidationDuringExtraSync() {
        let loadable = Manual()
        loadable.sync()
        loadable.invalidate()
        loadable.setDidSyncSuccessfully(1)
        loadable.invalidate()
        loadable.invalidate()
        loadable.setDidSyncSuccessfully(2)
        #expect(loadable.doSyncCount == 3)
        loadable.setDidSyncSuccessfully(3)
        #expect(loadable.doSyncCount == 3)
        #expect(loadable.loadableState == .didSyncSuccessfully)
        #expect(loadable.contents == 3)
    }

    @Test("an invalidation during a sync that fails still syncs once more; the failure is recorded")
    func invalidationDuringFailingSync() {
        let loadable = Manual(contents: 0)
        let seen = Seen(loadable)
        loadable.sync()
        loadable.invalidate()
        loadable.setDidFailToSync(TestError("offline"))
        #expect(loadable.doSyncCount == 2)
        #expect(loadable.loadableState == .syncing)
        #expect(loadable.error == nil)
        #expect(loadable.lastError as? TestError == TestError("offline"))
        #expect(loadable.consecutiveFailures == 1)
        #expect(loadable.isStale)
        #expect(seen.lines == ["syncing 0", "syncing 0 stale"])

        loadable.setDidSyncSuccessfully(1)
        #expect(loadable.doSyncCount == 2)
        #expect(loadable.loadableState == .didSyncSuccessfully)
        #expect(loadable.lastError == nil)
        #expect(loadable.consecutiveFailures == 0)
        #expect(!loadable.isStale)
    }

    @Test("the extra sync begins in the notification that ends the running one, before doSync()")
    func extraSyncInSameNotification() {
        let loadable = Manual()
        var log: [String] = []
        loadable.onDoSync = { _ in log.append("doSync") }
        observing(
            loadable,
            { (loadable: any PureLoadable) in
                guard let loadable = loadable as? Manual else { return }
                let failures = loadable.consecutiveFailures
                log.append(Self.describe(loadable) + (failures > 0 ? " failures \(failures)" : ""))
            }
        ) {
            loadable.sync()
            loadable.invalidate()
            loadable.setDidSyncSuccessfully(1)
            #expect(log == ["syncing nil stale", "doSync", "syncing 1 stale", "doSync"])

            log = []
            loadable.invalidate()  // during the extra sync: one more after it
            loadable.setDidFailToSync(TestError())
            #expect(log == ["syncing 1 stale failures 1", "doSync"])
        }
    }

    @Test("an invalidation during a sync marks the contents stale at once, without a notification")
    func staleDuringSync() {
        let loadable = Manual()
        loadable.setDidSyncSuccessfully(1)
        let seen = Seen(loadable)
        loadable.sync()
        #expect(!loadable.isStale)
        loadable.invalidate()
        #expect(loadable.isStale)
        #expect(loadable.needsSync)
        #expect(seen.lines == ["syncing 1"])
    }

    @Test("cancelSync() drops the pending sync; the contents stay stale")
    func cancelDropsPendingSync() {
        let loadable = Manual()
        loadable.setDidSyncSuccessfully(1)
        loadable.sync()
        loadable.invalidate()
        loadable.cancelSync()
        #expect(loadable.loadableState == .didSyncSuccessfully)
        #expect(loadable.doCancelSyncCount == 1)
        #expect(loadable.doSyncCount == 1)
        // The invalidation is not forgotten: only the sync that was to follow is.
        #expect(loadable.isStale)

        loadable.syncIfNeeded()
        #expect(loadable.doSyncCount == 2)
        loadable.setDidSyncSuccessfully(2)
        #expect(loadable.doSyncCount == 2)
        #expect(loadable.loadableState == .didSyncSuccessfully)
        #expect(!loadable.isStale)
    }

    @Test("a sync that times out after an invalidation syncs once more")
    func invalidationDuringTimedOutSync() async {
        let clock = ManualClock()
        let loadable = Manual(contents: 0, clock: clock)
        loadable.syncTimeout = .seconds(10)
        loadable.sync()
        loadable.invalidate()
        #expect(await settle { clock.pendingSleepCount == 1 })  // the watchdog is armed
        await clock.advance(by: .seconds(10))
        #expect(loadable.doCancelSyncCount == 1)
        #expect(loadable.doSyncCount == 2)
        #expect(loadable.loadableState == .syncing)
        #expect(loadable.lastError as? LoadableError == .timedOut)
        loadable.setDidSyncSuccessfully(1)
        #expect(loadable.doSyncCount == 2)
        #expect(loadable.loadableState == .didSyncSuccessfully)
    }

    // MARK: - Not syncing

    @Test("not syncing and not in use: marked stale with one notification, no sync; syncIfNeeded() syncs")
    func notInUseOnlyMarks() {
        let loadable = Manual()
        loadable.setDidSyncSuccessfully(1)
        #expect(!loadable.isStale)
        #expect(!loadable.needsSync)
        let seen = Seen(loadable)
        loadable.invalidate()
        #expect(seen.lines == ["did-sync-successfully 1 stale"])
        #expect(loadable.doSyncCount == 0)
        #expect(loadable.needsSync)

        loadable.syncIfNeeded()
        #expect(loadable.doSyncCount == 1)
        loadable.setDidSyncSuccessfully(2)
        #expect(!loadable.isStale)
        #expect(seen.lines == ["did-sync-successfully 1 stale", "syncing 1 stale", "did-sync-successfully 2"])
    }

    @Test("in use through a lease: an invalidation syncs at once, in one notification")
    func inUseSyncsAtOnce() {
        let loadable = Manual()
        loadable.setDidSyncSuccessfully(1)
        let lease = loadable.lease()
        let seen = Seen(loadable)
        loadable.invalidate()
        #expect(seen.lines == ["syncing 1 stale"])
        #expect(loadable.doSyncCount == 1)

        // While that sync runs, the rule for a running sync applies: one more after it.
        lease.invalidate()
        #expect(loadable.doSyncCount == 1)
        loadable.setDidSyncSuccessfully(2)
        #expect(loadable.doSyncCount == 2)
        loadable.setDidSyncSuccessfully(3)
        #expect(seen.lines == ["syncing 1 stale", "syncing 2 stale", "did-sync-successfully 3"])
        withExtendedLifetime(lease) {}
    }

    @Test("an observation token alone does not make a loadable in use: no sync")
    func observationIsNotAUse() {
        let loadable = Manual()
        loadable.setDidSyncSuccessfully(1)
        let seen = Seen(loadable)
        #expect(!loadable.isInUse)
        loadable.invalidate()
        #expect(loadable.doSyncCount == 0)
        #expect(loadable.loadableState == .didSyncSuccessfully)
        #expect(seen.lines == ["did-sync-successfully 1 stale"])
    }

    // MARK: - Re-entrancy

    @Test("invalidate() from an observer of the syncing notification gives one more sync")
    func invalidateFromSyncingObserver() {
        let loadable = Manual()
        var invalidated = false
        observing(
            loadable,
            { (loadable: any PureLoadable) in
                guard loadable.loadableState == .syncing, !invalidated else { return }
                invalidated = true
                (loadable as? Manual)?.invalidate()
            }
        ) {
            loadable.sync()
            #expect(loadable.doSyncCount == 1)
            loadable.setDidSyncSuccessfully(1)
            #expect(loadable.doSyncCount == 2)
            #expect(loadable.loadableState == .syncing)
            loadable.setDidSyncSuccessfully(2)
            #expect(loadable.doSyncCount == 2)
            #expect(loadable.loadableState == .didSyncSuccessfully)
        }
    }

    @Test("invalidate() from inside doSync() gives one more sync")
    func invalidateFromDoSync() {
        let loadable = Manual()
        loadable.onDoSync = { loadable in
            if loadable.doSyncCount == 1 { loadable.invalidate() }
        }
        loadable.sync()
        loadable.setDidSyncSuccessfully(1)
        #expect(loadable.doSyncCount == 2)
        loadable.setDidSyncSuccessfully(2)
        #expect(loadable.doSyncCount == 2)
        #expect(loadable.loadableState == .didSyncSuccessfully)
    }

    @Test("invalidate() from inside a doSync() that then finishes at once: the extra sync follows it")
    func invalidateFromSynchronousDoSync() {
        let loadable = Manual()
        let seen = Seen(loadable)
        loadable.onDoSync = { loadable in
            if loadable.doSyncCount == 1 { loadable.invalidate() }
            loadable.setDidSyncSuccessfully(loadable.doSyncCount)
        }
        loadable.sync()
        #expect(loadable.doSyncCount == 2)
        #expect(loadable.loadableState == .didSyncSuccessfully)
        #expect(loadable.contents == 2)
        #expect(!loadable.isStale)
        #expect(seen.lines == ["syncing nil stale", "syncing 1 stale", "did-sync-successfully 2"])
    }

    @Test("a loadable released by an observer of the notification that restarts it does not crash")
    func releasedDuringRestart() {
        final class Holder {
            var loadable: Manual?
        }
        let holder = Holder()
        holder.loadable = Manual()
        weak let weakLoadable = holder.loadable
        var seen: [String] = []
        let observation = holder.loadable?.addObserver { loadable in
            guard let loadable = loadable as? Manual else { return }
            seen.append(Self.describe(loadable))
            if loadable.contents != nil { holder.loadable = nil }
        }
        holder.loadable?.sync()
        holder.loadable?.invalidate()
        holder.loadable?.setDidSyncSuccessfully(1)
        #expect(seen == ["syncing nil stale", "syncing 1 stale"])
        #expect(holder.loadable == nil)
        #expect(weakLoadable == nil)
        #expect(observation?.isActive == false)
    }
}
