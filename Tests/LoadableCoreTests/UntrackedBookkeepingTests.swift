import Loadable
import LoadableCaching
import LoadableGroup
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// The package's own bookkeeping (a sync, a result, an invalidation, a cancel, a next page, a
/// timer's tick, a group or proxy following a loadable, a store's entries, streams and waits)
/// reads loadables without telling Observation.
///
/// A read that registers creates the loadable's Observation registrar, and from then on every
/// change of the loadable pays a registrar mutation. So a loadable that nothing reads through
/// Observation (no SwiftUI view, no `withObservationTracking`) must never get one, however much
/// the package itself works with it. Each test drives loadables through their bookkeeping with no
/// Observation read of its own (it reads through the package's untracked accessors) and checks
/// that no loadable involved has a registrar. (The HTTP loadable has the same test in
/// `LoadableHTTPTests`.)
@Suite("Bookkeeping reads loadables without Observation: nothing gets a registrar unless read")
@MainActor
struct UntrackedBookkeepingTests {
    @Test(
        "each kind driven through its states, syncs, invalidations, cancels, leases and streams",
        arguments: LoadableKind.all)
    func everyKind(kind: LoadableKind) async {
        let subject = kind.make()
        let loadable = subject.loadable
        await observing(loadable, { _ in }) {
            for state in [
                LoadableState.syncing, .didSyncSuccessfully, .syncing, .didFailToSync, .idle, .didSyncSuccessfully,
            ] {
                subject.set(state)
            }
            if let syncable = loadable as? any SyncableLoadable {
                drive(syncable)
            }
            _ = String(describing: loadable)
            await consumeStreams(of: loadable)
            expectNoRegistrar(subject.involved)
        }
    }

    @Test("an AutosyncLoadable with observers: first observer, ticks, pauses and catch-ups, failures")
    func autosync() async {
        let clock = ManualClock()
        let activity = ActivityMonitor()
        let loadable = AnsweringAutosyncLoadable(autosyncInterval: .seconds(60), clock: clock, activity: activity)
        let token = loadable.observe { _ in }  // syncs if needed, then ticks
        loadable.answer(.success(1))
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(60))  // a tick: a sync
        loadable.answer(.failure(TestError("offline")))
        activity.connectivity = .offline
        activity.connectivity = .online  // a catch-up: syncIfNeeded
        loadable.answer(.success(2))
        activity.isActive = false
        await clock.advance(by: .seconds(120))
        activity.isActive = true  // a tick fell due: it runs now
        await clock.advance(by: .seconds(60))  // a tick while syncing: skipped
        loadable.answer(.success(3))
        let second = loadable.observe { _ in }
        token.cancel()
        second.cancel()
        expectNoRegistrar([loadable])
    }

    @Test("a PagedLoadable: refreshes, next pages loaded and failed, invalidations, cancels")
    func paged() async {
        let nextPages = NextPages()
        let list = PagedLoadable<Int, Int> { cursor in
            if cursor != nil, nextPages.fail { throw TestError("page") }
            return .init(items: [cursor ?? 0], nextCursor: (cursor ?? 0) + 1)
        }
        await observing(list, { _ in }) {
            list.syncIfNeeded()
            await settle { list.core.state != .syncing }
            list.loadNextPage()
            await settle { list.core.readUntracked { list.nextPageState } != .syncing }
            nextPages.fail = true
            list.loadNextPage()
            await settle { list.core.readUntracked { list.nextPageState } != .syncing }
            list.invalidate()
            list.syncIfNeeded()
            list.cancelSync()
            list.sync()
            await settle { list.core.state != .syncing }
        }
        expectNoRegistrar([list])
    }

    @Test("a LoadableChain runs its items, fails on one, is invalidated and cancelled")
    func chain() async {
        let first = AnsweringLoadable()
        let second = AnsweringLoadable()
        let chain = LoadableChain([.init(first), .init(second)])
        observing(chain, { _ in }) {
            chain.syncIfNeeded()
            first.answer(.success(1))
            second.answer(.success(2))
            let lease = chain.lease()
            chain.invalidate()  // in use: runs again in order
            first.answer(.success(3))
            second.answer(.failure(TestError("second")))
            chain.sync()
            chain.cancelSync()
            chain.items = [.init(second)]
            chain.sync()
            chain.items = [.init(first)]
            first.answer(.success(4))
            lease.release()
        }
        expectNoRegistrar([chain, first, second])
    }

    @Test("groups and a combined loadable of syncable members: syncs, invalidations, cancels, use, new members")
    func groups() async {
        let members = [AnsweringLoadable(), AnsweringLoadable(), AnsweringLoadable()]
        let group = LoadableGroup([members[0], members[1]], policy: .any)
        let pure = PureLoadableGroup([group, members[2]], policy: .strict)
        let combined = LoadableGroup.combine(members[0], members[2]) { $0 + $1 }
        let mapped = combined.map { $0 * 2 }
        let tokens = [group.observe { _ in }, pure.observe { _ in }, mapped.observe { _ in }]
        combined.syncIfNeeded()
        group.sync()
        for member in members { member.answer(.success(1)) }
        let lease = mapped.lease()
        combined.invalidate()
        members[0].answer(.failure(TestError("first")))
        members[2].answer(.success(2))
        group.sync()
        group.cancelSync()
        group.members = [members[1], members[2]]
        pure.members = [members[0]]
        group.invalidate()
        for member in members { member.answer(.success(3)) }
        lease.release()
        for token in tokens { token.cancel() }
        expectNoRegistrar(members + [group, pure, combined, combined.group, mapped])
    }

    @Test("proxies and leases follow targets that change, sync and are invalidated")
    func proxies() async {
        let first = AnsweringLoadable()
        let second = AnsweringLoadable()
        let proxy = LoadableProxy<AnsweringLoadable>(target: first)
        let pure = PureLoadableProxy(target: proxy)
        let tokens = [proxy.observe { _ in }, pure.observe { _ in }]
        let lease = proxy.lease()
        proxy.syncIfNeeded()
        first.answer(.success(1))
        proxy.target = second
        proxy.invalidate()
        second.answer(.failure(TestError("second")))
        proxy.syncIfNeeded()
        proxy.cancelSync()
        pure.target = nil
        lease.release()
        for token in tokens { token.cancel() }
        expectNoRegistrar([first, second, proxy, pure, lease])
    }

    @Test("a LoadableStore's entries and a KeyedLoadableProxy with a placeholder: leases, syncs, keys, expiry")
    func store() async {
        let clock = ManualClock()
        var made: [AnsweringLoadable] = []
        let store = LoadableStore<Int, AnsweringLoadable>(retention: .seconds(10), clock: clock) { _ in
            let loadable = AnsweringLoadable()
            made.append(loadable)
            return loadable
        }
        let proxy = KeyedLoadableProxy(store: store, key: 1, placeholder: .previousContents)
        await observing(proxy, { _ in }) {
            proxy.syncIfNeeded()
            made[0].answer(.success(1))
            proxy.key = 2  // the placeholder: key 1's contents
            proxy.syncIfNeeded()
            made[1].answer(.failure(TestError("two")))
            store.setContents(5, for: 3)
            store.invalidate { $0 == 2 }
            made[1].answer(.success(2))
            proxy.key = 1
            proxy.syncIfNeeded()
            store.remove(1)
            await clock.advance(by: .seconds(10))  // key 2 expires
            proxy.key = nil
            store.removeAll()
        }
        expectNoRegistrar(made + [proxy])
    }

    @Test("a LoadableAction runs, fails, is cancelled and reset")
    func action() async {
        let action = LoadableAction<Int, Int> { input in
            if input < 0 { throw TestError("negative") }
            return input * 2
        }
        await observing(action, { _ in }) {
            _ = try? await action.run(1)
            _ = try? await action.run(-1)
            let task = action.send(2)
            task.cancel()
            _ = try? await task.value
            action.reset()
        }
        expectNoRegistrar([action])
    }

    @Test("a LoadableSyncer and waits (SimpleLoadableWaiter, doneSyncing, synced) follow their loadable")
    func syncerAndWaits() async {
        let clock = ManualClock()
        let activity = ActivityMonitor()
        let loadable = AnsweringLoadable()
        let syncer = LoadableSyncer(
            loadable,
            timeoutPolicy: BackoffTimeoutPolicy(period: .seconds(60), min: .seconds(1), max: .seconds(4)),
            clock: clock,
            activity: activity
        )
        var simpleWaiterEnded = false
        SimpleLoadableWaiter.whenDoneSyncing(loadable) { simpleWaiterEnded = true }
        let synced = Task { try await loadable.synced() }
        await settle { loadable.core.state == .syncing }
        loadable.answer(.failure(TestError("offline")))
        _ = try? await synced.value
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(1))  // a retry
        loadable.answer(.success(1))
        try? await loadable.doneSyncing()
        activity.isActive = false
        activity.isActive = true
        #expect(simpleWaiterEnded)
        withExtendedLifetime(syncer) {}
        expectNoRegistrar([loadable])
    }

    @Test("a LoadableWaiter's waits, for either condition, follow their target", arguments: [false, true])
    func waiter(waitsForSuccess: Bool) async {
        let clock = ManualClock()
        let target = AnsweringLoadable()
        let waiter = LoadableWaiter(
            target, condition: waitsForSuccess ? .didSyncSuccessfully : .contentsAvailable, timeout: .seconds(5),
            clock: clock)
        var outcomes: [Bool] = []
        waiter.wait { outcomes.append((try? $0.get()) != nil) }
        target.answer(.failure(TestError("offline")))
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(1))  // the waiter's retry
        target.answer(.success(1))
        target.invalidate()
        waiter.wait { outcomes.append((try? $0.get()) != nil) }
        target.answer(.success(2))
        #expect(outcomes == [true, true])
        expectNoRegistrar([target])
    }

    // MARK: - Helpers

    /// Syncs, invalidates, cancels and leases `loadable`, in and out of use.
    private func drive(_ loadable: some SyncableLoadable) {
        loadable.syncIfNeeded()
        loadable.sync()
        loadable.invalidate()
        loadable.cancelSync()
        loadable.invalidate()
        loadable.syncIfNeeded()
        loadable.cancelSync()
        let lease = loadable.lease()
        loadable.invalidate()
        loadable.cancelSync()
        lease.release()
    }

    /// Takes a value from `states()` and waits for `doneSyncing()` when it would return at once.
    private func consumeStreams(of loadable: any PureLoadable) async {
        var states = loadable.states().makeAsyncIterator()
        _ = await states.next()
        if loadable.statusUntrackedWherePossible.state != .syncing {
            try? await loadable.doneSyncing()
        }
    }

    /// Records an issue for every loadable in `loadables` that has an Observation registrar.
    private func expectNoRegistrar(_ loadables: [any PureLoadable], sourceLocation: SourceLocation = #_sourceLocation) {
        for loadable in loadables {
            guard let owner = loadable as? any LoadableCoreOwner else {
                Issue.record("\(type(of: loadable)) has no core", sourceLocation: sourceLocation)
                continue
            }
            #expect(
                !owner.core.hasObservationRegistrar,
                "\(type(of: loadable)) got a registrar from the package's own reads",
                sourceLocation: sourceLocation)
        }
    }
}

/// Whether next pages fail.
@MainActor
private final class NextPages {
    var fail = false
}

/// A loadable whose syncs the test answers, synchronously: ``answer(_:)`` ends a running sync.
final class AnsweringLoadable: Loadable<Int> {
    override func doSync() {}

    /// Ends the running sync with `result`; does nothing when not syncing.
    func answer(_ result: Result<Int, any Error>) {
        guard core.state == .syncing else { return }
        switch result {
        case .success(let value): setDidSyncSuccessfully(value)
        case .failure(let error): setDidFailToSync(error)
        }
    }
}

/// An `AutosyncLoadable` whose syncs the test answers, as ``AnsweringLoadable``.
final class AnsweringAutosyncLoadable: AutosyncLoadable<Int> {
    override func doSync() {}

    /// Ends the running sync with `result`; does nothing when not syncing.
    func answer(_ result: Result<Int, any Error>) {
        guard core.state == .syncing else { return }
        switch result {
        case .success(let value): setDidSyncSuccessfully(value)
        case .failure(let error): setDidFailToSync(error)
        }
    }
}
