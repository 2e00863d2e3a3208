import Foundation
import Loadable
import LoadableCaching
import LoadableSync
import LoadableSyncer
import LoadableTesting

/// An item of the shopping list that two devices share.
struct ShoppingItem: Identifiable, Codable, Sendable, Equatable {
    var id: String
    var title: String
    var done = false
}

/// The sync episode's server, in the process: one version counter for every write, the last change
/// of each item, answers after a latency on the tour's clock, and a line for each push it answers.
@MainActor
final class DemoSyncServer {
    private var rows: [String: (version: Int, item: ShoppingItem?)] = [:]
    private var lastVersion = 0
    private let clock: ManualClock
    private let timeline: Timeline
    /// The pushes refused because the item changed since the version they were made on.
    private(set) var refusedPushes = 0

    init(clock: ManualClock, timeline: Timeline) {
        self.clock = clock
        self.timeline = timeline
    }

    /// An item that was there before the episode.
    func put(_ item: ShoppingItem) {
        lastVersion += 1
        rows[item.id] = (lastVersion, item)
    }

    func pull(since cursor: String?, by device: String) async throws -> SyncPage<ShoppingItem> {
        try await clock.sleep(for: .milliseconds(200))
        let since = cursor.flatMap { Int($0) } ?? 0
        let ids = rows.filter { $0.value.version > since }.sorted { $0.value.version < $1.value.version }.map(\.key)
        timeline.log(
            "sync server", "pull since v\(since)",
            "\(device): \(ids.count) changed, the server is at v\(lastVersion)")
        return SyncPage(
            changed: ids.compactMap { remote($0) }, deleted: cursor == nil ? [] : ids.filter { rows[$0]?.item == nil },
            cursor: String(lastVersion), hasMore: false)
    }

    func push(_ change: RecordChange<ShoppingItem>, by device: String) async throws -> PushResult<ShoppingItem> {
        try await clock.sleep(for: .milliseconds(300))
        let current = remote(change.id)
        let title = change.record.map { "\"\($0.title)\"\($0.done ? " ✓" : "")" } ?? "delete"
        guard change.base == current?.version else {
            refusedPushes += 1
            timeline.log(
                "sync server", "refused: conflict",
                "\(device): \(title) was made on v\(change.base ?? "-"), the item is at v\(current?.version ?? "-")")
            return .conflict(remote: current)
        }
        lastVersion += 1
        rows[change.id] = (lastVersion, change.record)
        timeline.log("sync server", "applied as v\(lastVersion)", "\(device): \(title)")
        return remote(change.id).map { .applied($0) } ?? .deleted
    }

    private func remote(_ id: String) -> RemoteRecord<ShoppingItem>? {
        rows[id].flatMap { row in row.item.map { RemoteRecord(record: $0, version: String(row.version)) } }
    }
}

/// One device's view of the server.
struct DemoSyncRemote: SyncRemote {
    let server: DemoSyncServer
    let device: String

    func pull(since cursor: String?) async throws -> SyncPage<ShoppingItem> {
        try await server.pull(since: cursor, by: device)
    }

    func push(_ change: RecordChange<ShoppingItem>, idempotencyKey: String) async throws -> PushResult<ShoppingItem> {
        try await server.push(change, by: device)
    }
}

/// The sync episode: a phone and a laptop share a shopping list (two synced collections on one
/// server). Both go offline and change it; the laptop comes back first, then the phone, whose
/// tick meets the laptop's rename of the same item: its policy (`.fieldwise`) keeps both. Then the
/// laptop renames an item the phone renamed, without having pulled: its policy (`.manual`) holds
/// the conflict, and the user resolves it. A last pull shows both devices the same list.
extension Tour {
    /// The list on the server when the episode starts.
    static let shoppingList = [
        ShoppingItem(id: "milk", title: "Milk"), ShoppingItem(id: "bread", title: "Bread"),
        ShoppingItem(id: "coffee", title: "Coffee"), ShoppingItem(id: "eggs", title: "Eggs"),
    ]

    /// Runs the episode, and records its summary line.
    func syncEpisode() async {
        let server = DemoSyncServer(clock: clock, timeline: timeline)
        for item in Self.shoppingList { server.put(item) }
        // The demo's own monitors: a replay must not depend on the machine's network.
        let phoneActivity = ActivityMonitor()
        let laptopActivity = ActivityMonitor()
        let phone = makeSyncedList("phone", on: server, activity: phoneActivity, conflicts: .fieldwise)
        let laptop = makeSyncedList("laptop", on: server, activity: laptopActivity, conflicts: .manual)
        // Live views: what each screen shows, kept current by the collections; the phone's "to buy"
        // list counts its redraws.
        let phoneView = phone.view(sortedBy: Self.byTitle)
        let laptopView = laptop.view(sortedBy: Self.byTitle)
        let toBuy = phone.view(where: { !$0.done }, sortedBy: Self.byTitle)
        var toBuyRedraws = 0
        let toBuyObservation = toBuy.observe { _ in toBuyRedraws += 1 }
        defer { toBuyObservation.cancel() }
        timeline.log(
            "phone + laptop", "opened",
            "one shopping list; the phone settles conflicts field by field, the laptop holds them")
        // Both devices pull, and the timeline shows what each list holds then.
        func pullBoth() async {
            phone.sync()
            laptop.sync()
            await advance(
                until: { phone.loadableState != .syncing && laptop.loadableState != .syncing }, atMost: .seconds(5))
            timeline.log("phone list", "pulled", Self.describe(phone, phoneView))
            timeline.log("laptop list", "pulled", Self.describe(laptop, laptopView))
        }
        await pullBoth()

        phoneActivity.connectivity = .offline
        laptopActivity.connectivity = .offline
        timeline.log("phone + laptop", "offline", "each shows its own changes at once and keeps them to push")
        phone.update("milk") { $0.done = true }
        timeline.log("user (phone)", "ticks \"Milk\"", Self.describe(phone, phoneView))
        phone.update("bread") { $0.title = "Rye bread" }
        timeline.log("user (phone)", "renames \"Bread\"", Self.describe(phone, phoneView))
        laptop.update("milk") { $0.title = "Oat milk" }
        timeline.log("user (laptop)", "renames \"Milk\"", Self.describe(laptop, laptopView))
        laptop.update("coffee") { $0.title = "Decaf coffee" }
        timeline.log("user (laptop)", "renames \"Coffee\"", Self.describe(laptop, laptopView))

        laptopActivity.connectivity = .online
        timeline.log("laptop", "online", "its outbox pushes its 2 changes, one item each")
        await advance(until: { laptop.status.pendingCount == 0 && !laptop.status.isPushing }, atMost: .seconds(10))
        phoneActivity.connectivity = .online
        timeline.log("phone", "online", "its tick of \"Milk\" was made on the version before the laptop's rename")
        await advance(until: { phone.status.pendingCount == 0 && !phone.status.isPushing }, atMost: .seconds(10))
        timeline.log(
            "phone list", "settled", Self.describe(phone, phoneView) + " (.fieldwise: the rename and the tick)")

        laptop.update("bread") { $0.title = "Sourdough bread" }
        timeline.log("user (laptop)", "renames \"Bread\"", "the laptop has not pulled the phone's rename")
        await advance(until: { laptop.status.pendingCount == 0 && !laptop.status.isPushing }, atMost: .seconds(10))
        let held = laptop.conflicts.first
        if let held {
            timeline.log(
                "laptop list", "conflict held",
                "\"\(held.local?.title ?? "deleted")\" here, \"\(held.remote?.title ?? "deleted")\" on the server "
                    + "(.manual: the user decides)")
            laptop.resolve(held.id, with: ShoppingItem(id: held.id, title: "Rye sourdough bread"))
            timeline.log("user (laptop)", "resolves", "keeps \"Rye sourdough bread\": pushed on the server's version")
            await advance(until: { laptop.status.pendingCount == 0 && !laptop.status.isPushing }, atMost: .seconds(10))
        }

        await pullBoth()
        let same = phoneView.contents == laptopView.contents
        timeline.log(
            "phone", "\"to buy\" view",
            "\(toBuy.count) items, redrawn \(toBuyRedraws) times: only when its rows changed")
        stats.syncSummary =
            "2 devices, 4 changes made offline, \(server.refusedPushes) pushes refused as conflicts, "
            + "1 settled by .fieldwise, \(held == nil ? 0 : 1) resolved by hand, the two lists "
            + (same ? "equal" : "differ")
    }

    /// A device's shopping list, on `server`, in a cache of its own.
    private func makeSyncedList(
        _ device: String, on server: DemoSyncServer, activity: ActivityMonitor, conflicts: ConflictPolicy<ShoppingItem>
    ) -> SyncedCollection<DemoSyncRemote> {
        SyncedCollection(
            remote: DemoSyncRemote(server: server, device: device), cache: InMemoryLoadableCache(), key: "shopping",
            conflicts: conflicts, activity: activity, clock: clock, now: simulatedDate)
    }

    /// The order of the lists' views (the collection keeps the order the items first appeared in).
    private static let byTitle: (ShoppingItem, ShoppingItem) -> Bool = { $0.title < $1.title }

    /// What a device's list shows (its view, by title), and what waits.
    private static func describe(_ list: SyncedCollection<DemoSyncRemote>, _ view: RecordView<ShoppingItem>) -> String {
        let items = (view.contents ?? []).map { $0.title + ($0.done ? " ✓" : "") }.joined(separator: ", ")
        let status = list.status
        var notes: [String] = []
        if status.pendingCount > 0 { notes.append("\(status.pendingCount) waiting") }
        if status.conflictCount > 0 { notes.append("\(status.conflictCount) conflict") }
        return notes.isEmpty ? items : "\(items) (\(notes.joined(separator: ", ")))"
    }
}
