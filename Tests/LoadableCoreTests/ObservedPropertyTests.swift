import Foundation
import Loadable
import LoadableCaching
import LoadableSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

/// One public observed property of one type: how a view reads it, and a change that alters it.
///
/// ``EveryLoadableTests`` covers `loadableState`, `error`, `isContentsAvailable` and `contents` on
/// every loadable kind; this table covers the other observed properties of the loadables and every
/// observed property of the types that are not loadables (stores, outboxes, actions, syncers,
/// monitors).
struct ObservedProperty: Sendable, CustomTestStringConvertible {
    /// `Type.property`.
    let name: String
    let make: @MainActor @Sendable () async -> Probe

    var testDescription: String { name }

    /// An instance under test.
    @MainActor
    struct Probe {
        /// A view's read of the property.
        let read: @MainActor () -> Void
        /// Changes the property; each call alters it again.
        let change: @MainActor () async -> Void
        /// What must live as long as the test (the instance, what drives it).
        let keep: [AnyObject]
    }
}

/// A `Loadable` whose sync the test finishes.
private final class ManualSyncLoadable: Loadable<Int> {
    override func doSync() {}
}

/// A send of an outbox that waits on a manual clock, so that a test decides when it ends.
@MainActor
private final class HeldSends {
    let clock = ManualClock()

    func send(_: Int, _: String) async throws {
        try await clock.sleep(for: .seconds(1))
    }
}

/// A counter of Observation's change reports (its `onChange` closure is `@Sendable`).
private typealias ChangeReports = Locked<Int>

/// Tracks `read` once; the returned counter counts the change reports that follow.
@MainActor
private func track(_ read: () -> Void) -> ChangeReports {
    let reports = ChangeReports(0)
    withObservationTracking {
        read()
    } onChange: {
        reports.withLock { $0 += 1 }
    }
    return reports
}

extension ObservedProperty {
    /// A property of a `PushLoadable<Int>`, changed by `change`.
    private static func pushLoadable(
        _ property: String, read: @escaping @MainActor (PushLoadable<Int>) -> Void,
        change: @escaping @MainActor (PushLoadable<Int>) -> Void
    ) -> ObservedProperty {
        ObservedProperty(name: "PushLoadable.\(property)") {
            let loadable = PushLoadable<Int>()
            return Probe(read: { read(loadable) }, change: { change(loadable) }, keep: [loadable])
        }
    }

    /// A property of a `Loadable<Int>` that a success and an invalidation alter in turn.
    private static func freshness(
        _ property: String, read: @escaping @MainActor (Loadable<Int>) -> Void
    )
        -> ObservedProperty
    {
        ObservedProperty(name: "Loadable.\(property)") {
            let loadable = ManualSyncLoadable()
            var fresh = false
            return Probe(
                read: { read(loadable) },
                change: {
                    if fresh { loadable.invalidate() } else { loadable.setDidSyncSuccessfully(1) }
                    fresh.toggle()
                },
                keep: [loadable])
        }
    }

    /// `isInUse` of `loadable`, which a lease taken and released in turn alters.
    private static func inUse<Used: SyncableLoadable>(
        _ name: String, _ make: @escaping @MainActor @Sendable () -> Used
    ) -> ObservedProperty {
        ObservedProperty(name: "\(name).isInUse") {
            let loadable = make()
            var lease: LoadableLease<Used>?
            return Probe(
                read: { _ = loadable.isInUse },
                change: {
                    if let held = lease {
                        held.release()
                        lease = nil
                    } else {
                        lease = loadable.lease()
                    }
                },
                keep: [loadable])
        }
    }

    /// A property of a `LoadableAction<Int, Int>` whose work fails on odd inputs; `change` alters it.
    private static func action(
        _ property: String, read: @escaping @MainActor (LoadableAction<Int, Int>) -> Void,
        change: @escaping @MainActor (LoadableAction<Int, Int>, Int) async -> Void
    ) -> ObservedProperty {
        ObservedProperty(name: "LoadableAction.\(property)") {
            let action = LoadableAction<Int, Int> { input in
                if input % 2 == 1 { throw TestError("odd") }
                return input
            }
            var calls = 0
            return Probe(
                read: { read(action) },
                change: {
                    calls += 1
                    await change(action, calls)
                },
                keep: [action])
        }
    }

    /// A store of manually synced loadables on a manual clock.
    @MainActor
    private static func makeStore() -> LoadableStore<Int, ManualSyncLoadable> {
        LoadableStore(clock: ManualClock()) { _ in ManualSyncLoadable() }
    }

    /// An outbox of `Int` changes over an in-memory cache, restored, whose sends end when `sends`
    /// says.
    @MainActor
    private static func makeOutbox(activity: ActivityMonitor, sends: HeldSends) async -> LoadableOutbox<Int> {
        let outbox = LoadableOutbox<Int>(cache: InMemoryLoadableCache(), activity: activity, clock: ManualClock()) {
            try await sends.send($0, $1)
        }
        await outbox.restored()
        return outbox
    }

    /// A syncer of a manually synced loadable, with a refresh period and retries, on a manual
    /// clock, following `activity`.
    @MainActor
    private static func makeSyncer(activity: ActivityMonitor) -> (ManualSyncLoadable, LoadableSyncer) {
        let loadable = ManualSyncLoadable()
        let policy = BackoffTimeoutPolicy(period: .seconds(60), min: .seconds(1), max: .seconds(10))
        let syncer = LoadableSyncer(loadable, timeoutPolicy: policy, clock: ManualClock(), activity: activity)
        return (loadable, syncer)
    }

    static let all: [ObservedProperty] = [
        // Loadables: the properties EveryLoadableTests does not read.
        pushLoadable("snapshot", read: { _ = $0.snapshot }, change: { $0.setContents(($0.baseContents ?? 0) + 1) }),
        pushLoadable(
            "lastError", read: { _ = $0.lastError }, change: { $0.setDidFailToSync(TestError("failed")) }),
        pushLoadable(
            "consecutiveFailures", read: { _ = $0.consecutiveFailures },
            change: { $0.setDidFailToSync(TestError("failed")) }),
        freshness("isStale") { _ = $0.isStale },
        freshness("needsSync") { _ = $0.needsSync },
        inUse("Loadable") { ManualSyncLoadable() },
        inUse("AsyncLoadable") { AsyncLoadable<Int> { 1 } },
        inUse("LoadableProxy") { LoadableProxy(target: ManualSyncLoadable()) },
        ObservedProperty(name: "LoadableProxy.needsSync") {
            let target = ManualSyncLoadable()
            let proxy = LoadableProxy(target: target)
            var fresh = false
            return Probe(
                read: { _ = proxy.needsSync },
                change: {
                    if fresh { target.invalidate() } else { target.setDidSyncSuccessfully(1) }
                    fresh.toggle()
                },
                keep: [target, proxy])
        },
        ObservedProperty(name: "LoadableProxy.target") {
            let targets = [ManualSyncLoadable(), ManualSyncLoadable()]
            let proxy = LoadableProxy(target: targets[0])
            var next = 1
            return Probe(
                read: { _ = proxy.target },
                change: {
                    proxy.target = targets[next]
                    next = 1 - next
                },
                keep: targets + [proxy])
        },
        ObservedProperty(name: "LoadableLease.needsSync") {
            let target = ManualSyncLoadable()
            let lease = target.lease()
            var fresh = false
            return Probe(
                read: { _ = lease.needsSync },
                change: {
                    if fresh { target.invalidate() } else { target.setDidSyncSuccessfully(1) }
                    fresh.toggle()
                },
                keep: [target, lease])
        },

        // Actions.
        action("loadableState", read: { _ = $0.loadableState }) { action, call in _ = try? await action.run(call) },
        action("error", read: { _ = $0.error }) { action, call in _ = try? await action.run(call) },
        action("contents", read: { _ = $0.contents }) { action, call in _ = try? await action.run(2 * call) },
        action("isContentsAvailable", read: { _ = $0.isContentsAvailable }) { action, call in
            // The first success brings contents; an action keeps them, and a later run's change is
            // reported to every read of the action (one observed state).
            _ = try? await action.run(2 * call)
        },
        action("isRunning", read: { _ = $0.isRunning }) { action, call in _ = try? await action.run(2 * call) },
        action("isEnabled", read: { _ = $0.isEnabled }) { action, _ in action.isEnabled.toggle() },
        action("canRun", read: { _ = $0.canRun }) { action, _ in action.isEnabled.toggle() },

        // Stores.
        ObservedProperty(name: "LoadableStore.count") {
            let store = makeStore()
            var next = 0
            return Probe(
                read: { _ = store.count },
                change: {
                    next += 1
                    store.lease(next).release()
                },
                keep: [store])
        },
        ObservedProperty(name: "KeyedLoadableProxy.key") {
            let store = makeStore()
            let proxy = KeyedLoadableProxy(store: store, key: 1)
            var next = 2
            return Probe(
                read: { _ = proxy.key },
                change: {
                    proxy.key = next
                    next = 3 - next
                },
                keep: [store, proxy])
        },
        ObservedProperty(name: "LoadableStore.syncingCount") {
            let store = makeStore()
            let lease = store.lease(1)
            return Probe(
                read: { _ = store.syncingCount },
                change: {
                    if lease.loadable.loadableState == .syncing {
                        lease.loadable.setDidSyncSuccessfully(1)
                    } else {
                        lease.sync()
                    }
                },
                keep: [store, lease])
        },

        // Outboxes.
        ObservedProperty(name: "LoadableOutbox.items") {
            let outbox = await makeOutbox(activity: ActivityMonitor(connectivity: .offline), sends: HeldSends())
            return Probe(read: { _ = outbox.items }, change: { outbox.enqueue(outbox.items.count) }, keep: [outbox])
        },
        ObservedProperty(name: "LoadableOutbox.pendingCount") {
            let outbox = await makeOutbox(activity: ActivityMonitor(connectivity: .offline), sends: HeldSends())
            return Probe(
                read: { _ = outbox.pendingCount },
                change: {
                    if let first = outbox.items.first { outbox.discard(first.id) } else { outbox.enqueue(1) }
                },
                keep: [outbox])
        },
        ObservedProperty(name: "LoadableOutbox.isPaused") {
            let activity = ActivityMonitor()
            let outbox = await makeOutbox(activity: activity, sends: HeldSends())
            return Probe(
                read: { _ = outbox.isPaused },
                change: { activity.connectivity = activity.connectivity == .online ? .offline : .online },
                keep: [outbox, activity])
        },
        ObservedProperty(name: "LoadableOutbox.isSending") {
            let sends = HeldSends()
            let outbox = await makeOutbox(activity: ActivityMonitor(), sends: sends)
            return Probe(
                read: { _ = outbox.isSending },
                change: {
                    if outbox.isSending {
                        await sends.clock.waitForSleepers()
                        await sends.clock.advance(by: .seconds(1))
                        await settle { !outbox.isSending }
                    } else {
                        outbox.enqueue(1)
                        await settle { outbox.isSending }
                    }
                },
                keep: [outbox, sends])
        },

        // Syncers and monitors.
        ObservedProperty(name: "LoadableSyncer.nextSyncIn") {
            let (loadable, syncer) = makeSyncer(activity: ActivityMonitor())
            return Probe(
                read: { _ = syncer.nextSyncIn },
                change: {
                    // A success arms the refresh; a failure arms a retry, sooner.
                    let refreshArmed = syncer.nextSyncIn == .seconds(60)
                    loadable.sync()
                    if refreshArmed {
                        loadable.setDidFailToSync(TestError("failed"))
                    } else {
                        loadable.setDidSyncSuccessfully(1)
                    }
                },
                keep: [loadable, syncer])
        },
        ObservedProperty(name: "LoadableSyncer.isWaitingForNetwork") {
            let activity = ActivityMonitor()
            let (loadable, syncer) = makeSyncer(activity: activity)
            return Probe(
                read: { _ = syncer.isWaitingForNetwork },
                change: {
                    if syncer.isWaitingForNetwork {
                        activity.connectivity = .online  // retries at once
                    } else {
                        activity.connectivity = .offline
                        if loadable.loadableState != .syncing { loadable.sync() }
                        loadable.setDidFailToSync(TestError("offline"))
                    }
                },
                keep: [loadable, syncer, activity])
        },
        ObservedProperty(name: "ActivityMonitor.isActive") {
            let monitor = ActivityMonitor()
            return Probe(read: { _ = monitor.isActive }, change: { monitor.isActive.toggle() }, keep: [monitor])
        },
        ObservedProperty(name: "ActivityMonitor.connectivity") {
            let monitor = ActivityMonitor()
            return Probe(
                read: { _ = monitor.connectivity },
                change: { monitor.connectivity = monitor.connectivity == .online ? .offline : .online },
                keep: [monitor])
        },
    ]
}

@Suite("Observation fires for every property of every type")
@MainActor
struct ObservedPropertyTests {
    @Test(
        "a tracked read is told of a change of the property, on a fresh instance and on one read before",
        arguments: ObservedProperty.all, [false, true])
    func changeIsReported(property: ObservedProperty, readBefore: Bool) async {
        let probe = await property.make()
        if readBefore {
            // A view's earlier read, told of a change since: the registrar stays, nothing tracks.
            let earlier = track(probe.read)
            await probe.change()
            #expect(earlier.withLock { $0 } == 1, "the earlier read was not told")
        }
        let reports = track(probe.read)
        #expect(reports.withLock { $0 } == 0)
        await probe.change()
        #expect(reports.withLock { $0 } == 1)
        // Tracking ends with the first report: a later change is not reported to it.
        await probe.change()
        #expect(reports.withLock { $0 } == 1)
        withExtendedLifetime(probe.keep) {}
    }
}
