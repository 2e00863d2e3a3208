import Foundation
import LoadableSync
import LoadableTestSupport
import LoadableTesting
import Testing

/// Remote delete against a local edit, and local delete against a remote edit: the outcome of
/// each under every policy (the table of `ConflictPolicy`), found by a pull or by the push.
@MainActor
@Suite struct SyncDeleteConflictTests {
    let server = SyncTestServer<TaskRecord>()
    let clock = ManualClock()

    static func policy(_ name: String) -> ConflictPolicy<TaskRecord> {
        switch name {
        case "serverWins": .serverWins
        case "clientWins": .clientWins
        case "fieldwise": .fieldwise
        case "merge": .merge { _, local, remote in local ?? remote }
        default: .manual
        }
    }

    /// Runs one conflict and returns the collection once settled.
    func conflict(policy name: String, foundBy: String, localDeletes: Bool) async -> TestCollection {
        server.put(TaskRecord(id: "a", title: "A"))
        let activity = ActivityMonitor()
        let tasks = makeCollection(
            server: server, cache: InMemoryLoadableCache(), conflicts: Self.policy(name), activity: activity,
            clock: clock)
        await tasks.pullAndSettle()
        if foundBy == "pull" { activity.connectivity = .offline } else { server.holdPushes() }
        if localDeletes {
            tasks.delete("a")
            server.put(TaskRecord(id: "a", title: "theirs"))
        } else {
            tasks.update("a") { $0.title = "mine" }
            server.remove("a")
        }
        if foundBy == "push" { _ = await settle { server.heldPushCount == 1 } }
        tasks.sync()
        _ = await settle { tasks.loadableState != .syncing }
        if foundBy == "pull" { activity.connectivity = .online } else { server.releasePushes() }
        _ = await settle { !tasks.status.isPushing && tasks.status.pendingCount == 0 }
        return tasks
    }

    @Test(arguments: ["serverWins", "clientWins", "fieldwise", "merge", "manual"], ["pull", "push"])
    func aLocalEditAgainstARemoteDelete(_ name: String, foundBy: String) async {
        let tasks = await conflict(policy: name, foundBy: foundBy, localDeletes: false)
        switch name {
        case "serverWins", "fieldwise":
            #expect(server.records["a"] == nil)
            #expect(tasks.contents?[id: "a"] == nil)
        case "clientWins", "merge":
            // Created again.
            #expect(server.records["a"]?.title == "mine")
            #expect(tasks.contents?[id: "a"]?.title == "mine")
        default:
            #expect(tasks.conflicts.map(\.id) == ["a"])
            #expect(tasks.conflicts.first?.remote == nil)
            #expect(tasks.conflicts.first?.local?.title == "mine")
            #expect(tasks.contents?[id: "a"]?.title == "mine")
            #expect(server.records["a"] == nil)
            tasks.resolve("a", with: nil)
            #expect(tasks.conflicts.isEmpty)
            #expect(tasks.contents?[id: "a"] == nil)
        }
        if name != "manual" { #expect(tasks.conflicts.isEmpty) }
        await tasks.pullAndSettle()
        #expect(tasks.contents?[id: "a"] == server.records["a"])
    }

    @Test(arguments: ["serverWins", "clientWins", "fieldwise", "merge", "manual"], ["pull", "push"])
    func aLocalDeleteAgainstARemoteEdit(_ name: String, foundBy: String) async {
        let tasks = await conflict(policy: name, foundBy: foundBy, localDeletes: true)
        switch name {
        case "serverWins", "fieldwise", "merge":
            #expect(server.records["a"]?.title == "theirs")
            #expect(tasks.contents?[id: "a"]?.title == "theirs")
        case "clientWins":
            #expect(server.records["a"] == nil)
            #expect(tasks.contents?[id: "a"] == nil)
        default:
            #expect(tasks.conflicts.map(\.id) == ["a"])
            #expect(tasks.conflicts.first?.local == nil)
            #expect(tasks.conflicts.first?.remote?.title == "theirs")
            #expect(tasks.contents?[id: "a"] == nil)
            tasks.resolve("a", with: TaskRecord(id: "a", title: "theirs"))
            #expect(tasks.conflicts.isEmpty)
            #expect(tasks.contents?[id: "a"]?.title == "theirs")
        }
        await tasks.pullAndSettle()
        #expect(tasks.conflicts.isEmpty)
        #expect(tasks.contents?[id: "a"] == server.records["a"])
    }

    @Test(arguments: ["pull", "push"])
    func bothSidesDeletingIsNoConflict(_ foundBy: String) async {
        server.put(TaskRecord(id: "a", title: "A"))
        let activity = ActivityMonitor()
        let tasks = makeCollection(
            server: server, cache: InMemoryLoadableCache(), conflicts: .manual, activity: activity, clock: clock)
        await tasks.pullAndSettle()
        if foundBy == "pull" { activity.connectivity = .offline } else { server.holdPushes() }
        tasks.delete("a")
        server.remove("a")
        if foundBy == "push" { _ = await settle { server.heldPushCount == 1 } }
        tasks.sync()
        _ = await settle { tasks.loadableState != .syncing }
        if foundBy == "pull" { activity.connectivity = .online } else { server.releasePushes() }
        _ = await settle { !tasks.status.isPushing && tasks.status.pendingCount == 0 }
        #expect(tasks.conflicts.isEmpty)
        #expect(tasks.contents?[id: "a"] == nil)
    }
}
