import Foundation
import LoadableSync
import LoadableTestSupport
import LoadableTesting
import Observation
import Synchronization
import Testing

/// A remote that answers through a `SyncTestServer`, except for what a test makes it throw, and
/// pulls it holds.
final class ScriptedFailures: SyncRemote {
    let server: SyncTestServer<TaskRecord>
    let pullError = Mutex<(any Error)?>(nil)
    let pushError = Mutex<(any Error)?>(nil)
    /// The pull that waits for `releasePull()`.
    let heldPull = Mutex<CheckedContinuation<Void, Never>?>(nil)
    let holdsPulls = Mutex(false)

    init(server: SyncTestServer<TaskRecord>) {
        self.server = server
    }

    func pull(since cursor: String?) async throws -> SyncPage<TaskRecord> {
        if holdsPulls.withLock({ $0 }) {
            await withCheckedContinuation { continuation in heldPull.withLock { $0 = continuation } }
        }
        if let error = pullError.withLock({ $0 }) { throw error }
        return try server.pull(since: cursor)
    }

    func push(_ change: RecordChange<TaskRecord>, idempotencyKey: String) async throws -> PushResult<TaskRecord> {
        if let error = pushError.withLock({ $0 }) { throw error }
        return try await server.push(change, idempotencyKey: idempotencyKey)
    }

    var isHoldingAPull: Bool { heldPull.withLock { $0 != nil } }

    func releasePull() {
        holdsPulls.withLock { $0 = false }
        let held = heldPull.withLock { held in
            defer { held = nil }
            return held
        }
        held?.resume()
    }
}

struct ServerRefused: Error, Equatable {}

struct ServerBusy: Error, RetryAfterProviding {
    var isRetryable: Bool { true }
    var retryAfter: Duration? { .seconds(30) }
}

/// The collection as a loadable: states, errors with records kept, invalidation, a syncer,
/// Observation, observers, status.
@MainActor
@Suite struct SyncedCollectionLoadableTests {
    let server = SyncTestServer<TaskRecord>()
    let clock = ManualClock()

    func make(
        _ remote: ScriptedFailures, cache: any LoadableCache = InMemoryLoadableCache()
    ) -> SyncedCollection<ScriptedFailures> {
        SyncedCollection(
            remote: remote, cache: cache, conflicts: .manual, activity: ActivityMonitor(),
            retryPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(8), multiplier: 2), clock: clock,
            now: { Date(timeIntervalSinceReferenceDate: 800_000_000) })
    }

    @Test func aFailedPullKeepsTheRecordsAndSaysWhy() async {
        server.put(TaskRecord(id: "a", title: "A"))
        let remote = ScriptedFailures(server: server)
        let tasks = make(remote)
        await tasks.pullAndSettle()
        remote.pullError.withLock { $0 = URLError(.timedOut) }
        await tasks.pullAndSettle()
        #expect(tasks.loadableState == .didFailToSync)
        #expect((tasks.error as? URLError)?.code == .timedOut)
        #expect(tasks.contents?.ids == ["a"])
        #expect(tasks.status.hasSynced)
    }

    @Test func aPushRefusedForGoodStaysShownAsFailedIsToldAndCanBeResolved() async {
        server.put(TaskRecord(id: "a", title: "A"))
        let remote = ScriptedFailures(server: server)
        let tasks = make(remote)
        var errors: [any Error] = []
        tasks.onError = { errors.append($0) }
        await tasks.pullAndSettle()
        remote.pushError.withLock { $0 = ServerRefused() }
        tasks.update("a") { $0.title = "refused" }
        await tasks.settlePushes()
        #expect(tasks.contents?[id: "a"]?.title == "refused")
        #expect(tasks.status.pendingCount == 0)
        #expect(errors.count == 1)
        #expect(errors.first is ServerRefused)
        // Listed for the app to settle, with the server's side as last pulled.
        #expect(tasks.status.conflictCount == 1)
        #expect(
            tasks.conflicts
                == [
                    SyncConflict(
                        id: "a", base: TaskRecord(id: "a", title: "A"), local: TaskRecord(id: "a", title: "refused"),
                        remote: TaskRecord(id: "a", title: "A"), isRefused: true)
                ])
        #expect(server.records["a"]?.title == "A")
        remote.pushError.withLock { $0 = nil }
        tasks.resolve("a", with: TaskRecord(id: "a", title: "accepted"))
        await tasks.settlePushes()
        #expect(server.records["a"]?.title == "accepted")
        #expect(tasks.contents?[id: "a"]?.title == "accepted")
        #expect(errors.count == 1)
        #expect(tasks.conflicts.isEmpty)
    }

    @Test func aChangeRefusedForGoodWhoseRecordChangesOnTheServerBecomesAConflict() async {
        server.put(TaskRecord(id: "a", title: "A"))
        let remote = ScriptedFailures(server: server)
        let tasks = make(remote)
        await tasks.pullAndSettle()
        remote.pushError.withLock { $0 = ServerRefused() }
        tasks.update("a") { $0.title = "refused" }
        await tasks.settlePushes()
        server.put(TaskRecord(id: "a", title: "theirs"))
        await tasks.pullAndSettle()
        #expect(tasks.conflicts.map(\.id) == ["a"])
        #expect(tasks.conflicts.first?.remote?.title == "theirs")
        #expect(tasks.conflicts.first?.local?.title == "refused")
        remote.pushError.withLock { $0 = nil }
        tasks.resolve("a", with: TaskRecord(id: "a", title: "both"))
        await tasks.settlePushes()
        #expect(server.records["a"]?.title == "both")
        #expect(tasks.conflicts.isEmpty)
    }

    @Test func aRetryablePushFailureWaitsForTheServersRetryAfter() async {
        let remote = ScriptedFailures(server: server)
        let tasks = make(remote)
        remote.pushError.withLock { $0 = ServerBusy() }
        tasks.insert(TaskRecord(id: "n", title: "N"))
        await tasks.settlePushes()
        _ = await settle { clock.pendingSleepCount == 1 }
        remote.pushError.withLock { $0 = nil }
        let pushes = server.pushCount
        await clock.advance(by: .seconds(29))
        await tasks.settlePushes()
        #expect(server.pushCount == pushes)
        await clock.advance(by: .seconds(1))
        _ = await settle { tasks.status.pendingCount == 0 }
        #expect(server.records["n"]?.title == "N")
    }

    @Test func anInvalidationDuringAPullGivesOneMorePull() async {
        let remote = ScriptedFailures(server: server)
        let tasks = make(remote)
        remote.holdsPulls.withLock { $0 = true }
        tasks.sync()
        _ = await settle { remote.isHoldingAPull }
        server.put(TaskRecord(id: "late", title: "after the page was read"))
        tasks.invalidate()
        let pulls = server.pullCount
        remote.releasePull()
        _ = await settle { tasks.loadableState == .didSyncSuccessfully && server.pullCount == pulls + 2 }
        _ = await settle { tasks.loadableState == .didSyncSuccessfully }
        #expect(server.pullCount == pulls + 2)
        #expect(tasks.contents?[id: "late"] != nil)
    }

    @Test func aSyncerPullsAgainAfterTheServersRetryAfter() async {
        server.put(TaskRecord(id: "a", title: "A"))
        let remote = ScriptedFailures(server: server)
        let tasks = make(remote)
        remote.pullError.withLock { $0 = ServerBusy() }
        let syncer = LoadableSyncer(
            tasks, timeoutPolicy: BackoffTimeoutPolicy(period: .seconds(600), min: .seconds(1), max: .seconds(8)),
            clock: clock, activity: ActivityMonitor())
        tasks.sync()
        _ = await settle { tasks.loadableState == .didFailToSync && clock.pendingSleepCount == 1 }
        remote.pullError.withLock { $0 = nil }
        await clock.advance(by: .seconds(10))
        _ = await settle { tasks.loadableState == .didFailToSync }
        #expect(tasks.contents == nil)
        await clock.advance(by: .seconds(20))
        _ = await settle { tasks.loadableState == .didSyncSuccessfully }
        #expect(tasks.contents?.ids == ["a"])
        withExtendedLifetime(syncer) {}
    }

    @Test func observersAndObservationAreToldOfLocalChangesAndOfTheStatus() async {
        server.put(TaskRecord(id: "a", title: "A"))
        let remote = ScriptedFailures(server: server)
        let tasks = make(remote)
        await tasks.pullAndSettle()
        var notifications = 0
        await observing(tasks, { _ in notifications += 1 }) {
            let changed = Mutex(false)
            withObservationTracking {
                _ = tasks.contents
                _ = tasks.status
            } onChange: {
                changed.withLock { $0 = true }
            }
            tasks.update("a") { $0.title = "B" }
            #expect(notifications >= 1)
            #expect(changed.withLock { $0 })
            let before = notifications
            tasks.update("a") { $0.title = "B" }
            #expect(notifications == before)
            await tasks.settlePushes()
        }
    }

    @Test func updatesThatChangeNothingOrTheIDAndDeletesOfMissingRecordsDoNothing() async {
        server.put(TaskRecord(id: "a", title: "A"))
        let remote = ScriptedFailures(server: server)
        let tasks = make(remote)
        await tasks.pullAndSettle()
        tasks.update("a") { $0.id = "b" }
        tasks.update("missing") { $0.title = "x" }
        tasks.delete("missing")
        tasks.insert(TaskRecord(id: "a", title: "A"))
        #expect(tasks.status.pendingCount == 0)
        #expect(tasks.contents?.ids == ["a"])
        tasks.resolve("a", with: nil)
        #expect(server.records["a"] != nil)
        #expect(server.pushCount == 0)
    }
}
