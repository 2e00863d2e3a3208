import Foundation
import Loadable
import LoadableCaching
import LoadableSyncer
import LoadableTesting

/// An item added to a list: what the user did, kept by the outbox until the server has it.
struct ListItemAdded: Codable, Sendable {
    var item: String
}

/// The session came back later than the send wanted it: worth a retry, unlike a refusal.
struct SessionNotReady: RetryAfterProviding, CustomStringConvertible {
    var underlying: LoadableWaiterError
    var retryAfter: Duration? { nil }
    var description: String { "no session yet (\(underlying))" }
}

/// The offline episode: the app goes offline, the user adds three items to a list; they show at
/// once and wait in an outbox on disk. The app is relaunched (a new outbox and a new list on the
/// same folder): the list restores from disk and shows the three items again. Then the app goes
/// online: the outbox sends them in order, and the list from the server has all three.
extension Tour {
    /// What the user adds while offline.
    static let offlineItems = ["pack the charger", "buy the tickets", "book the hotel"]

    /// Runs the episode, and records its summary line.
    func offlineEpisode() async {
        let folder = postsCacheDirectory.appendingPathExtension("offline")
        defer { try? FileManager.default.removeItem(at: folder) }
        // The demo's own monitor: a replay must not depend on the machine's network.
        let activity = ActivityMonitor()
        await offlineFirstLaunch(folder: folder, activity: activity)
        timeline.log("app", "relaunched", "a new outbox and a new list on the same folder, still offline")
        let (relaunchedList, persistence) = makeTripList(folder: folder, syncs: false)
        let relaunched = makeOutbox(folder: folder, activity: activity)
        relaunched.show(on: relaunchedList, Self.add)
        await relaunched.restored()
        await persistence.restored()
        let restored = relaunched.items.count
        timeline.log("list trip", "restored", Self.describe(list: relaunchedList, relaunched))

        activity.connectivity = .online
        timeline.log("app", "online", "the outbox sends the changes, oldest first")
        await advance(until: { relaunched.items.isEmpty }, atMost: .seconds(60))
        await relaunched.saved()
        relaunchedList.sync()
        await advance(until: { relaunchedList.loadableState != .syncing }, atMost: .seconds(10))
        let onServer = Self.offlineItems.filter { relaunchedList.contents?.contains($0) == true }
        let lost = Self.offlineItems.count - onServer.count
        timeline.log(
            "list trip", "synced",
            "\(relaunchedList.contents?.count ?? 0) items from the server, the \(onServer.count) changes among them, "
                + "\(lost) lost")
        stats.offlineSummary =
            "\(Self.offlineItems.count) changes made offline, \(restored) restored after the relaunch, "
            + "\(stats.offlineSent.count) sent \(stats.offlineSent == Self.offlineItems ? "in order" : "out of order"), "
            + "\(onServer.count) on the server, \(lost) lost"
    }

    /// The launch that goes offline: the list loads, then the user adds the items while offline.
    /// Its outbox and list go when it returns, as they would with their process: a second live
    /// outbox on the same key would stop the program.
    private func offlineFirstLaunch(folder: URL, activity: ActivityMonitor) async {
        let (list, persistence) = makeTripList(folder: folder)
        let outbox = makeOutbox(folder: folder, activity: activity)
        outbox.show(on: list, Self.add)
        await advance(until: { list.loadableState != .syncing }, atMost: .seconds(10))
        timeline.log("list trip", "loaded", "\(list.contents?.count ?? 0) items")

        activity.connectivity = .offline
        timeline.log("app", "offline", "the outbox pauses; the list shows what it has")
        for item in Self.offlineItems {
            outbox.enqueue(ListItemAdded(item: item))
            timeline.log("user", "adds \"\(item)\"", "shown at once: \(Self.describe(list: list, outbox))")
        }
        await outbox.saved()
        await persistence.saved()
        timeline.log("outbox", "saved", "\(outbox.items.count) changes on disk, none sent (offline)")
    }

    /// The list of the episode, persisted in `folder`: its base contents survive the relaunch;
    /// the changes on top of it are the outbox's.
    private func makeTripList(
        folder: URL, syncs: Bool = true
    ) -> (loadable: AsyncLoadable<[String]>, persistence: LoadablePersistence) {
        let api = api
        let list = AsyncLoadable(clock: clock) { try await api.request("/lists/trip") }
        let persistence = list.persist(
            in: FileLoadableCache(directory: folder).scoped("lists/"), key: "trip", now: simulatedDate)
        if syncs { list.sync() }
        return (list, persistence)
    }

    /// The outbox of the episode, in a scope of its own in `folder`, sending to the simulated
    /// server on the tour's clock.
    private func makeOutbox(folder: URL, activity: ActivityMonitor) -> LoadableOutbox<ListItemAdded> {
        let api = api
        let stats = stats
        let timeline = timeline
        return LoadableOutbox(
            cache: FileLoadableCache(directory: folder).scoped("outbox/"), activity: activity, clock: clock
        ) { change, idempotencyKey in
            do {
                try await api.send(
                    "/lists/trip/items", adding: change.item, to: "/lists/trip", idempotencyKey: idempotencyKey)
            } catch let error as LoadableWaiterError {
                throw SessionNotReady(underlying: error)
            }
            stats.offlineSent.append(change.item)
            timeline.log("outbox", "sent", "the server has \"\(change.item)\"")
        }
    }

    /// Shows an added item on the list ("set to": added once, however often it is applied).
    private static func add(_ items: inout [String], _ change: ListItemAdded) -> Bool {
        if !items.contains(change.item) { items.append(change.item) }
        return true
    }

    /// Moves simulated time in steps of 100 ms until `condition` holds, for at most `limit`.
    func advance(until condition: () -> Bool, atMost limit: Duration) async {
        await clock.advance(by: .zero)
        let end = clock.now.advanced(by: limit)
        while !condition(), clock.now < end {
            await clock.advance(by: .milliseconds(100))
        }
    }

    /// What the list screen shows, and how many of its items wait to be sent.
    private static func describe(list: AsyncLoadable<[String]>, _ outbox: LoadableOutbox<ListItemAdded>) -> String {
        let count = list.contents?.count ?? 0
        return "\(count) items, \(outbox.pendingCount) of them waiting to be sent"
    }
}
