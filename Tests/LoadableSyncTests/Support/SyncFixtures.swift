import Foundation
import LoadableSync
import LoadableTestSupport
import LoadableTesting

/// A task record, as the guides use.
struct TaskRecord: Identifiable, Codable, Sendable, Equatable {
    var id: String
    var title: String
    var done = false
    var note = ""
}

typealias TestCollection = SyncedCollection<SyncTestRemote<TaskRecord>>

/// One "device": a collection on `server`, over `cache` (shared across relaunches).
@MainActor
func makeCollection(
    server: SyncTestServer<TaskRecord>,
    cache: any LoadableCache,
    conflicts: ConflictPolicy<TaskRecord> = .manual,
    key: String = "tasks",
    activity: ActivityMonitor = ActivityMonitor(),
    clock: ManualClock = ManualClock()
) -> TestCollection {
    SyncedCollection(
        remote: server.remote, cache: cache, key: key, conflicts: conflicts, activity: activity,
        retryPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(8), multiplier: 2), clock: clock,
        now: { Date(timeIntervalSinceReferenceDate: 800_000_000) })
}

extension SyncTestServer {
    /// Back online: the collection's retries fall due (the clock moves past any backoff) and its
    /// pushes end.
    @MainActor
    func comeBackOnline<R>(_ collection: SyncedCollection<R>, clock: ManualClock) async {
        isOffline = false
        for _ in 0..<8 {
            await clock.advance(by: .seconds(10))
            await collection.settlePushes()
            if collection.status.pendingCount == 0 { return }
        }
    }
}

extension SyncedCollection {
    /// Pulls and waits for the pull, and for the pushes it may start, to end.
    func pullAndSettle() async {
        sync()
        _ = await settle { self.loadableState != .syncing }
        await settlePushes()
    }

    /// Waits until no push runs and nothing pending can be sent (offline, or nothing left).
    func settlePushes() async {
        _ = await settle { !self.status.isPushing && (self.status.pendingCount == 0 || !self.canPush) }
        _ = await settle { !self.status.isPushing }
    }

    private var canPush: Bool { true }
}

extension Array where Element == TaskRecord {
    var titles: [String] { map(\.title) }
}
