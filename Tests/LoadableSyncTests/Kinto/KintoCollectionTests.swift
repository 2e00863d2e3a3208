import Foundation
import Loadable
import LoadableHTTP
import LoadableSQLite
import LoadableSupport
import LoadableSync
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A synced collection of Kinto notes.
typealias KintoCollection = SyncedCollection<KintoRemote<KintoNote>>

/// `SyncedCollection` with `KintoRemote` against a real Kinto (memory backend, `paginate_by` 5,
/// history plugin): two devices editing one record under every conflict policy, offline changes
/// that survive a relaunch and reach the server once (a lost answer too), pulls over many pages
/// (and changes between two of them), and a wrong password that fails at once. The fixtures share
/// one account (``KintoServer/fixtureInSharedAccount()``), each with a bucket of its own.
///
/// Every wait is bounded in real time: the server answers in its own time, so the waits give the
/// main actor turns until a condition holds or a deadline read from `ContinuousClock` passes
/// (never a sleep), and each test runs under ``withRealTimeLimit(_:seconds:_:)``, 120 s: Kinto
/// checks each password with bcrypt (about a second each, never cached for a wrong one), and while
/// the whole suite runs on two cores its checks queue (a test of a few seconds alone took 59 s
/// there). The collections' own time (push retries, ages) is a `ManualClock`.
@MainActor
@Suite(.enabled(if: KintoServer.isInstalled, KintoServer.notInstalled), .timeLimit(.minutes(5)))
struct KintoCollectionTests {
    /// The record both devices edit, as the server first has it.
    static let original = KintoNote(id: "n1", title: "Milk")
    /// Device A's edit.
    static let editA = KintoNote(id: "n1", title: "Oat milk")
    /// Device B's edit: the title too, and `done`, which A left alone.
    static let editB = KintoNote(id: "n1", title: "Soy milk", done: true)

    // MARK: - Two devices, one record

    @Test(
        "two devices edit one record offline: the policy's outcome on Kinto and on both devices",
        arguments: Policy.allCases, Discovery.allCases)
    func anEditAgainstAnEdit(_ policy: Policy, foundBy discovery: Discovery) async throws {
        let kinto = try await KintoServer.fixtureInSharedAccount()
        try await withRealTimeLimit("an edit against an edit (\(policy), \(discovery))", seconds: 120) {
            let outcome = try await twoDevices(
                kinto, policy: policy, discovery: discovery, editA: { $0.update("n1") { $0 = Self.editA } },
                editB: { $0.update("n1") { $0 = Self.editB } },
                resolve: { _ in KintoNote(id: "n1", title: "Oat or soy milk", done: true) })
            let merged = KintoNote(id: "n1", title: "Oat milk / Soy milk", done: true)
            let expected: (KintoNote?, [String]) =
                switch policy {
                case .serverWins: (Self.editA, ["create", "update"])
                case .clientWins: (Self.editB, ["create", "update", "update"])
                // Both changed the title: the server's; only B changed `done`: B's.
                case .fieldwise: (KintoNote(id: "n1", title: "Oat milk", done: true), ["create", "update", "update"])
                case .merge: (merged, ["create", "update", "update"])
                case .manual:
                    (KintoNote(id: "n1", title: "Oat or soy milk", done: true), ["create", "update", "update"])
                }
            #expect(outcome.record == expected.0)
            #expect(outcome.history == expected.1)
            if policy == .merge {
                #expect(outcome.mergeCalls == [MergeCall(base: Self.original, local: Self.editB, remote: Self.editA)])
            }
            if policy == .manual {
                #expect(
                    outcome.conflicts
                        == [SyncConflict(id: "n1", base: Self.original, local: Self.editB, remote: Self.editA)])
            }
        }
    }

    @Test(
        "a local edit against a remote delete: the policy's outcome on Kinto and on both devices",
        arguments: Policy.allCases, Discovery.allCases)
    func aLocalEditAgainstARemoteDelete(_ policy: Policy, foundBy discovery: Discovery) async throws {
        let kinto = try await KintoServer.fixtureInSharedAccount()
        try await withRealTimeLimit("a local edit against a remote delete (\(policy), \(discovery))", seconds: 120) {
            let outcome = try await twoDevices(
                kinto, policy: policy, discovery: discovery, editA: { $0.delete("n1") },
                editB: { $0.update("n1") { $0 = Self.editB } }, resolve: { $0.local })
            let expected: (KintoNote?, [String]) =
                switch policy {
                case .serverWins, .fieldwise: (nil, ["create", "delete"])
                // Created again.
                case .clientWins, .manual: (Self.editB, ["create", "delete", "create"])
                case .merge:
                    (KintoNote(id: "n1", title: "Soy milk (kept)", done: true), ["create", "delete", "create"])
                }
            #expect(outcome.record == expected.0)
            #expect(outcome.history == expected.1)
            if policy == .merge {
                #expect(outcome.mergeCalls == [MergeCall(base: Self.original, local: Self.editB, remote: nil)])
            }
            if policy == .manual {
                #expect(
                    outcome.conflicts == [SyncConflict(id: "n1", base: Self.original, local: Self.editB, remote: nil)])
            }
        }
    }

    @Test(
        "a local delete against a remote edit: the policy's outcome on Kinto and on both devices",
        arguments: Policy.allCases, Discovery.allCases)
    func aLocalDeleteAgainstARemoteEdit(_ policy: Policy, foundBy discovery: Discovery) async throws {
        let kinto = try await KintoServer.fixtureInSharedAccount()
        try await withRealTimeLimit("a local delete against a remote edit (\(policy), \(discovery))", seconds: 120) {
            // Manual: the app keeps the server's record, which needs no push.
            let outcome = try await twoDevices(
                kinto, policy: policy, discovery: discovery, editA: { $0.update("n1") { $0 = Self.editA } },
                editB: { $0.delete("n1") }, resolve: { $0.remote })
            let expected: (KintoNote?, [String]) =
                switch policy {
                case .serverWins, .fieldwise, .manual: (Self.editA, ["create", "update"])
                // Deleted on the new version (the merge closure says delete).
                case .clientWins, .merge: (nil, ["create", "update", "delete"])
                }
            #expect(outcome.record == expected.0)
            #expect(outcome.history == expected.1)
            if policy == .merge {
                #expect(outcome.mergeCalls == [MergeCall(base: Self.original, local: nil, remote: Self.editA)])
            }
            if policy == .manual {
                #expect(
                    outcome.conflicts == [SyncConflict(id: "n1", base: Self.original, local: nil, remote: Self.editA)])
            }
        }
    }

    /// What a two-device scenario ended with.
    struct TwoDeviceOutcome {
        /// Record `n1` as Kinto has it at the end (`nil`: deleted), equal on both devices.
        var record: KintoNote?
        /// The history plugin's actions on `n1`, oldest first.
        var history: [String]
        /// The calls of the `.merge` closure.
        var mergeCalls: [MergeCall]
        /// The conflicts device B held before it resolved them (`.manual`).
        var conflicts: [SyncConflict<KintoNote>]
    }

    /// Record `n1` on Kinto; devices A and B pull it, go offline, change it (`editA`, `editB`); A
    /// comes back online and pushes; B finds the conflict by a pull while still offline, or by its
    /// push once online; `.manual` then resolves B's conflict with `resolve`. Both devices pull
    /// at the end. Checks what every policy shares: both devices show Kinto's record, before and
    /// after that last pull, with nothing pending and no conflict left, and no error told.
    func twoDevices(
        _ kinto: KintoServer.Fixture,
        policy: Policy,
        discovery: Discovery,
        editA: (KintoCollection) -> Void,
        editB: (KintoCollection) -> Void,
        resolve: (SyncConflict<KintoNote>) -> KintoNote?,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> TwoDeviceOutcome {
        try await kinto.put(Self.original)
        let mergeCalls = MergeCalls()
        let a = Device(kinto, conflicts: .serverWins)
        let b = Device(kinto, conflicts: policy.policy(mergeCalls))
        await a.pull(sourceLocation: sourceLocation)
        await b.pull(sourceLocation: sourceLocation)
        #expect(a.tasks.contents?[id: "n1"] == Self.original, sourceLocation: sourceLocation)
        #expect(b.tasks.contents?[id: "n1"] == Self.original, sourceLocation: sourceLocation)

        a.activity.connectivity = .offline
        b.activity.connectivity = .offline
        editA(a.tasks)
        editB(b.tasks)
        #expect(a.tasks.status.pendingCount == 1, sourceLocation: sourceLocation)
        #expect(b.tasks.status.pendingCount == 1, sourceLocation: sourceLocation)

        a.activity.connectivity = .online
        await a.pushes(sourceLocation: sourceLocation)
        if discovery == .pull {
            await b.pull(sourceLocation: sourceLocation)
            #expect(b.tasks.loadableState == .didSyncSuccessfully, sourceLocation: sourceLocation)
        }
        b.activity.connectivity = .online
        await b.pushes(sourceLocation: sourceLocation)

        var conflicts: [SyncConflict<KintoNote>] = []
        if policy == .manual {
            conflicts = b.tasks.conflicts
            #expect(b.tasks.status.conflictCount == 1, sourceLocation: sourceLocation)
            // Nothing of it pushed meanwhile; the local side shown.
            #expect(
                try await kinto.records(KintoNote.self).map(\.record) == a.tasks.contents.map { Array($0) },
                sourceLocation: sourceLocation)
            #expect(b.tasks.contents?[id: "n1"] == conflicts.first?.local, sourceLocation: sourceLocation)
            if let conflict = conflicts.first { b.tasks.resolve("n1", with: resolve(conflict)) }
            await b.pushes(sourceLocation: sourceLocation)
        }

        let record = try await kinto.records(KintoNote.self).first { $0.record.id == "n1" }?.record
        #expect(b.tasks.contents?[id: "n1"] == record, sourceLocation: sourceLocation)
        await a.pull(sourceLocation: sourceLocation)
        await b.pull(sourceLocation: sourceLocation)
        for device in [a, b] {
            #expect(device.tasks.contents?[id: "n1"] == record, sourceLocation: sourceLocation)
            #expect(device.tasks.contents?.count == (record == nil ? 0 : 1), sourceLocation: sourceLocation)
            #expect(device.tasks.conflicts.isEmpty, sourceLocation: sourceLocation)
            #expect(device.tasks.status.pendingCount == 0, sourceLocation: sourceLocation)
            #expect(device.errors.isEmpty, "errors told: \(device.errors)", sourceLocation: sourceLocation)
        }
        let history = try await kinto.history().filter { $0.recordID == "n1" }.map(\.action)
        return TwoDeviceOutcome(record: record, history: history, mergeCalls: mergeCalls.calls, conflicts: conflicts)
    }

    // MARK: - Offline changes, a relaunch, each change once

    @Test("changes made offline survive a relaunch and reach Kinto once each")
    func offlineChangesSurviveARelaunchAndReachKintoOnce() async throws {
        let kinto = try await KintoServer.fixtureInSharedAccount()
        let folder = temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try await withRealTimeLimit("offline changes and a relaunch", seconds: 120) {
            let pulled = [
                KintoNote(id: "e1", title: "Edit me"), KintoNote(id: "d1", title: "Delete me"),
                KintoNote(id: "k1", title: "Keep me"),
            ]
            for note in pulled { try await kinto.put(note) }
            let cache = try SQLiteLoadableCache(path: folder.appendingPathComponent("cache.sqlite"))
            let expected = [
                KintoNote(id: "e1", title: "Edited", done: true), KintoNote(id: "k1", title: "Keep me"),
                KintoNote(id: "c1", title: "Created"), KintoNote(id: "c2", title: "Created, then edited"),
            ]

            weak var released: KintoCollection?
            do {
                let device = Device(kinto, cache: cache)
                released = device.tasks
                await device.pull()
                device.activity.connectivity = .offline
                device.tasks.insert(KintoNote(id: "c1", title: "Created"))
                device.tasks.insert(KintoNote(id: "c2", title: "Created"))
                device.tasks.update("c2") { $0.title = "Created, then edited" }
                device.tasks.update("e1") { $0.title = "Edited" }
                device.tasks.update("e1") { $0.done = true }
                device.tasks.delete("d1")
                device.tasks.insert(KintoNote(id: "c3", title: "Created, then deleted"))
                device.tasks.delete("c3")
                #expect(device.tasks.contents.map { Array($0) } == expected)
                #expect(device.tasks.status.pendingCount == 4)
                await device.tasks.saved()
                #expect(device.wire.writes.isEmpty)
            }
            await settle("the first launch's collection is released") { released == nil }

            let relaunched = Device(kinto, cache: cache, connectivity: .offline)
            await relaunched.tasks.restored()
            // The records created offline in any order: see `offlineCreatesKeepTheirOrderAcrossARelaunch`.
            #expect(relaunched.tasks.contents.map { $0.sorted(by: Self.byID) } == expected.sorted(by: Self.byID))
            #expect(relaunched.tasks.contents.map { Array($0.prefix(2)) } == Array(expected.prefix(2)))
            #expect(relaunched.tasks.status.pendingCount == 4)
            #expect(relaunched.tasks.status.hasSynced)
            relaunched.activity.connectivity = .online
            await relaunched.pushes()

            // One request per change, and one history entry per change.
            #expect(relaunched.wire.writes.count == 4)
            let onServer = try await kinto.records(KintoNote.self).map(\.record)
            #expect(onServer.sorted(by: Self.byID) == expected.sorted(by: Self.byID))
            let history = try await kinto.history()
            #expect(
                Set(history.map { "\($0.action) \($0.recordID ?? "?")" }) == [
                    "create e1", "create d1", "create k1", "create c1", "create c2", "update e1", "delete d1",
                ])
            #expect(history.count == 7)

            await relaunched.pull()
            #expect(relaunched.tasks.contents.map { $0.sorted(by: Self.byID) } == expected.sorted(by: Self.byID))
            #expect(relaunched.tasks.conflicts.isEmpty)
            #expect(relaunched.errors.isEmpty, "errors told: \(relaunched.errors)")
            #expect(relaunched.wire.writes.count == 4)
        }
    }

    @Test("records created offline keep their order across a relaunch")
    func offlineCreatesKeepTheirOrderAcrossARelaunch() async throws {
        let kinto = try await KintoServer.fixtureInSharedAccount()
        try await withRealTimeLimit("offline creates and a relaunch", seconds: 120) {
            let cache = InMemoryLoadableCache()
            let notes = (1...8).map { KintoNote(id: "c\($0)", title: "Created \($0)") }
            weak var released: KintoCollection?
            do {
                let device = Device(kinto, cache: cache, connectivity: .offline)
                released = device.tasks
                for note in notes { device.tasks.insert(note) }
                #expect(device.tasks.contents.map { Array($0) } == notes)
                await device.tasks.saved()
            }
            await settle("the first launch's collection is released") { released == nil }
            let relaunched = Device(kinto, cache: cache, connectivity: .offline)
            await relaunched.tasks.restored()
            #expect(relaunched.tasks.contents.map { Array($0) } == notes)
        }
    }

    @Test(
        "a change whose answer is lost is sent again and counts as applied: Kinto has it once, no conflict",
        arguments: [
            LostAnswer(change: .create, relaunches: false), LostAnswer(change: .create, relaunches: true),
            LostAnswer(change: .update, relaunches: false), LostAnswer(change: .delete, relaunches: true),
        ])
    func aChangeWhoseAnswerIsLost(_ lost: LostAnswer) async throws {
        let kinto = try await KintoServer.fixtureInSharedAccount()
        let folder = temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try await withRealTimeLimit("a change whose answer is lost (\(lost.testDescription))", seconds: 120) {
            let cache = try SQLiteLoadableCache(path: folder.appendingPathComponent("cache.sqlite"))
            let original = KintoNote(id: "c1", title: "Sent once")
            let edited = KintoNote(id: "c1", title: "Sent twice", done: true)
            if lost.change != .create { try await kinto.put(original) }
            let expected: KintoNote? = lost.change == .delete ? nil : edited
            let lossy = Wire(losing: lost.change)
            weak var firstLaunch: KintoCollection?
            var sameLaunch: Device?
            do {
                // `.manual`: a change the server has already is no conflict.
                let device = Device(kinto, cache: cache, wire: lossy)
                firstLaunch = device.tasks
                await device.pull()
                switch lost.change {
                case .create: device.tasks.insert(edited)
                case .update: device.tasks.update("c1") { $0 = edited }
                case .delete: device.tasks.delete("c1")
                }
                await settle("the answer lost") { lossy.lostAnswers == 1 && !device.tasks.status.isPushing }
                // Kinto applied it; the collection does not know, and keeps it to send again.
                let onServer = try await kinto.records(KintoNote.self).map(\.record)
                #expect(onServer == (expected.map { [$0] } ?? []))
                #expect(device.tasks.status.pendingCount == 1)
                #expect(device.errors.isEmpty, "a lost answer is retried, not told: \(device.errors)")
                if lost.relaunches {
                    device.activity.connectivity = .offline
                    await device.tasks.saved()
                } else {
                    sameLaunch = device
                }
            }
            let device: Device
            if let sameLaunch {
                device = sameLaunch
            } else {
                await settle("the first launch's collection is released") { firstLaunch == nil }
                device = Device(kinto, cache: cache, connectivity: .offline)
                await device.tasks.restored()
                #expect(device.tasks.status.pendingCount == 1)
                #expect(device.tasks.contents?[id: "c1"] == expected)
                device.activity.connectivity = .online
            }
            // The retry falls due on the collection's clock.
            await device.retries()

            let sent = lossy.writes.count + (lost.relaunches ? device.wire.writes.count : 0)
            #expect(sent == 2)
            let onServer = try await kinto.records(KintoNote.self).map(\.record)
            #expect(onServer == (expected.map { [$0] } ?? []))
            let history = try await kinto.history().map(\.action)
            #expect(history == (lost.change == .create ? ["create"] : ["create", lost.change.rawValue]))
            #expect(device.tasks.contents?[id: "c1"] == expected)
            #expect(device.tasks.conflicts.isEmpty)
            #expect(device.tasks.status.pendingCount == 0)
            await device.pull()
            #expect(device.tasks.contents.map { Array($0) } == (expected.map { [$0] } ?? []))
            #expect(device.tasks.conflicts.isEmpty)
            #expect(device.errors.isEmpty, "errors told: \(device.errors)")
        }
    }

    // MARK: - Pages

    @Test("23 records over five pages: every record once, in Kinto's order; then a delta of 7 over two pages")
    func pullsBeyondAPage() async throws {
        let kinto = try await KintoServer.fixtureInSharedAccount()
        try await withRealTimeLimit("pulls over many pages", seconds: 120) {
            let ids = (1...23).map { String(format: "r%02d", $0) }
            for id in ids { try await kinto.put(KintoNote(id: id, title: "Title \(id)")) }
            let device = Device(kinto)
            await device.pull()
            #expect(device.tasks.loadableState == .didSyncSuccessfully)
            #expect(device.tasks.contents.map { Array($0) } == ids.map { KintoNote(id: $0, title: "Title \($0)") })
            let firstPull = device.wire.lists
            #expect(firstPull.map(\.ids.count) == [5, 5, 5, 5, 3])
            #expect(firstPull.flatMap(\.ids) == ids)
            #expect(firstPull.map { $0.since == nil } == [true, false, false, false, false])

            // 4 edits and 3 deletes, interleaved: 7 entries, so two pages (5 and 2).
            let edited = ["r03", "r07", "r11", "r19"]
            let deleted = ["r02", "r15", "r23"]
            for (index, id) in edited.enumerated() {
                try await kinto.put(KintoNote(id: id, title: "Edited \(id)", done: true))
                if index < deleted.count { try await kinto.delete(deleted[index]) }
            }
            await device.pull()
            #expect(device.tasks.loadableState == .didSyncSuccessfully)
            let delta = Array(device.wire.lists.dropFirst(firstPull.count))
            #expect(delta.map(\.ids.count) == [5, 2])
            #expect(delta.map(\.ids).joined().sorted() == (edited + deleted).sorted())
            #expect(delta.allSatisfy { $0.since != nil })
            // An update keeps the record's place; a delete removes it.
            let expected = ids.filter { !deleted.contains($0) }.map { id in
                edited.contains(id)
                    ? KintoNote(id: id, title: "Edited \(id)", done: true) : KintoNote(id: id, title: "Title \(id)")
            }
            #expect(device.tasks.contents.map { Array($0) } == expected)
            let onServer = try await kinto.records(KintoNote.self).map(\.record)
            #expect(onServer.sorted(by: Self.byID) == expected)

            // Nothing changed since: one empty page.
            await device.pull()
            #expect(device.wire.lists.count == firstPull.count + delta.count + 1)
            #expect(device.wire.lists.last?.ids == [])
            #expect(device.tasks.contents.map { Array($0) } == expected)
            #expect(device.errors.isEmpty, "errors told: \(device.errors)")
        }
    }

    @Test("records changed on the server between two pages of a pull are neither lost nor doubled")
    func changesBetweenPages() async throws {
        let kinto = try await KintoServer.fixtureInSharedAccount()
        try await withRealTimeLimit("changes between pages", seconds: 120) {
            let ids = (1...12).map { String(format: "r%02d", $0) }
            for id in ids { try await kinto.put(KintoNote(id: id, title: "Title \(id)")) }
            // After the second page (r01...r10): one pulled record edited, one deleted, one not
            // pulled yet edited, one created.
            let wire = Wire { number in
                guard number == 2 else { return }
                try await kinto.put(KintoNote(id: "r01", title: "Edited r01", done: true))
                try await kinto.delete("r02")
                try await kinto.put(KintoNote(id: "r12", title: "Edited r12", done: true))
                try await kinto.put(KintoNote(id: "r13", title: "Title r13"))
            }
            let device = Device(kinto, wire: wire)
            await device.pull()
            #expect(device.tasks.loadableState == .didSyncSuccessfully)
            let onServer = try await kinto.records(KintoNote.self).map(\.record)
            #expect(onServer.count == 12)
            #expect(device.tasks.contents.map { $0.sorted(by: Self.byID) } == onServer.sorted(by: Self.byID))
            // The pages after the change brought each changed record once, and the tombstone.
            let later = wire.lists.dropFirst(2).flatMap(\.ids)
            #expect(later.sorted() == ["r01", "r02", "r11", "r12", "r13"])
            // An edit keeps the record's place; a new record comes last.
            #expect(device.tasks.contents?.first?.id == "r01")
            #expect(device.tasks.contents?.last?.id == "r13")

            let lists = wire.lists.count
            await device.pull()
            #expect(wire.lists.count == lists + 1)
            #expect(wire.lists.last?.ids == [])
            #expect(device.tasks.contents.map { $0.sorted(by: Self.byID) } == onServer.sorted(by: Self.byID))
            #expect(device.errors.isEmpty, "errors told: \(device.errors)")
        }
    }

    // MARK: - A wrong password

    @Test("a pull with a wrong password fails with the server's 401 at once and keeps the records it had")
    func aPullWithAWrongPassword() async throws {
        let kinto = try await KintoServer.fixtureInSharedAccount()
        try await withRealTimeLimit("a pull with a wrong password", seconds: 120) {
            let notes = [KintoNote(id: "a", title: "A"), KintoNote(id: "b", title: "B")]
            for note in notes { try await kinto.put(note) }
            let cache = InMemoryLoadableCache()
            weak var released: KintoCollection?
            do {
                let device = Device(kinto, cache: cache)
                released = device.tasks
                await device.pull()
                #expect(device.tasks.contents.map { Array($0) } == notes)
                await device.tasks.saved()
            }
            await settle("the first launch's collection is released") { released == nil }

            let device = Device(kinto, cache: cache, password: "not-the-password")
            await device.tasks.restored()
            #expect(device.tasks.contents.map { Array($0) } == notes)
            let started = ContinuousClock.now
            await device.pull()
            let elapsed = ContinuousClock.now - started
            #expect(elapsed < .seconds(15), "a 401 took \(elapsed)")
            #expect(device.tasks.loadableState == .didFailToSync)
            let error = device.tasks.error as? HTTPLoadableError
            guard case .status(401, _, _)? = error else {
                Issue.record("expected HTTP 401, got \(String(describing: device.tasks.error))")
                return
            }
            #expect(error?.isRetryable == false)
            #expect(device.tasks.contents.map { Array($0) } == notes)
            #expect(device.tasks.status.hasSynced)
            // Sent once: the credentials loaded again are the same, so the 401 stands.
            #expect(device.wire.lists.count == 1)
        }
    }

    @Test("a push with a wrong password fails the change at once: kept as failed, not retried, until resolved")
    func aPushWithAWrongPassword() async throws {
        let kinto = try await KintoServer.fixtureInSharedAccount()
        try await withRealTimeLimit("a push with a wrong password", seconds: 120) {
            let password = Locked("not-the-password")
            let device = Device(kinto, password: password)
            let note = KintoNote(id: "c1", title: "Refused")
            device.tasks.insert(note)
            await settle("the push refused") { !device.errors.isEmpty && !device.tasks.status.isPushing }
            let error = device.errors.first as? HTTPLoadableError
            guard case .status(401, _, _)? = error else {
                Issue.record("expected HTTP 401, got \(device.errors)")
                return
            }
            #expect(device.errors.count == 1, "told: \(device.errors)")
            // Refused: not pending, listed for the app to settle, still shown; nothing on the server.
            #expect(device.tasks.status.pendingCount == 0)
            #expect(device.tasks.status.conflictCount == 1)
            #expect(device.tasks.conflicts.map(\.isRefused) == [true])
            #expect(device.tasks.contents?[id: "c1"] == note)
            let refused = try await kinto.records(KintoNote.self)
            #expect(refused.isEmpty)
            #expect(try await kinto.history().isEmpty)

            // Not retried, however long the collection waits.
            let writes = device.wire.writes.count
            #expect(writes == 1)  // Sent once: the credentials loaded again are the same.
            for _ in 0..<4 { await device.clock.advance(by: .seconds(900)) }
            _ = await settle { device.wire.writes.count > writes }
            #expect(device.wire.writes.count == writes)

            // The right password, then `resolve`: sent again, with a new key, and applied.
            password.withLock { $0 = kinto.password }
            device.tasks.resolve("c1", with: note)
            await device.pushes()
            #expect(try await kinto.records(KintoNote.self).map(\.record) == [note])
            #expect(try await kinto.history().map(\.action) == ["create"])
            #expect(device.tasks.status.pendingCount == 0)
            #expect(device.tasks.conflicts.isEmpty)
            #expect(device.tasks.contents?[id: "c1"] == note)
            let keys = Set(device.wire.writes.compactMap { $0.idempotencyKey })
            #expect(keys.count == 2)
            #expect(device.errors.count == 1, "told: \(device.errors)")
        }
    }

    // MARK: - Support

    static func byID(_ lhs: KintoNote, _ rhs: KintoNote) -> Bool { lhs.id < rhs.id }

    func temporaryFolder() -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("kinto-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

// MARK: - Devices

extension KintoCollectionTests {
    /// The conflict policies, by name (arguments of the tests).
    enum Policy: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case serverWins, clientWins, fieldwise, merge, manual

        var testDescription: String { rawValue }

        /// The policy; `.merge` keeps its calls in `calls` and returns, for an edit against an
        /// edit, both titles and either side's `done`; for an edit against a delete, the edit
        /// marked kept; for a delete against an edit, a delete.
        @MainActor
        func policy(_ calls: MergeCalls) -> ConflictPolicy<KintoNote> {
            switch self {
            case .serverWins: .serverWins
            case .clientWins: .clientWins
            case .fieldwise: .fieldwise
            case .manual: .manual
            case .merge:
                .merge { base, local, remote in
                    calls.calls.append(MergeCall(base: base, local: local, remote: remote))
                    guard var local else { return nil }
                    if let remote {
                        local.title = "\(remote.title) / \(local.title)"
                        local.done = local.done || remote.done
                    } else {
                        local.title += " (kept)"
                    }
                    return local
                }
            }
        }
    }

    /// How device B finds the conflict: by a pull while its change waits (offline), or by the
    /// server's `412` to its push.
    enum Discovery: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case pull, push

        var testDescription: String { "found by \(rawValue)" }
    }

    /// A kind of change.
    enum ChangeKind: String, Sendable {
        case create, update, delete
    }

    /// Whose answer is lost, and whether the app is relaunched before it is sent again.
    struct LostAnswer: Sendable, CustomTestStringConvertible {
        var change: ChangeKind
        var relaunches: Bool

        var testDescription: String { "\(change.rawValue)\(relaunches ? ", relaunched" : "")" }
    }

    /// One call of a `.merge` closure.
    struct MergeCall: Equatable {
        var base: KintoNote?
        var local: KintoNote?
        var remote: KintoNote?
    }

    /// The calls of a `.merge` closure.
    @MainActor
    final class MergeCalls {
        var calls: [MergeCall] = []
    }

    /// One device: a collection of `kinto`'s notes on a cache of its own (or the one given, for a
    /// relaunch), with its own activity monitor and clock, whose requests go through a ``Wire``.
    @MainActor
    final class Device {
        let tasks: KintoCollection
        let activity: ActivityMonitor
        let clock: ManualClock
        let wire: Wire
        /// What the collection told its `onError`.
        private(set) var errors: [any Error] = []

        convenience init(
            _ kinto: KintoServer.Fixture,
            cache: any LoadableCache = InMemoryLoadableCache(),
            conflicts: ConflictPolicy<KintoNote> = .manual,
            connectivity: NetworkConnectivity = .online,
            password: String? = nil,
            wire: Wire = Wire()
        ) {
            self.init(
                kinto, cache: cache, conflicts: conflicts, connectivity: connectivity,
                password: Locked(password ?? kinto.password), wire: wire)
        }

        /// A device whose credentials loadable reads `password` at each load.
        init(
            _ kinto: KintoServer.Fixture,
            cache: any LoadableCache = InMemoryLoadableCache(),
            conflicts: ConflictPolicy<KintoNote> = .manual,
            connectivity: NetworkConnectivity = .online,
            password: Locked<String>,
            wire: Wire = Wire()
        ) {
            let activity = ActivityMonitor()
            let clock = ManualClock()
            activity.connectivity = connectivity
            self.activity = activity
            self.clock = clock
            self.wire = wire
            let user = kinto.user
            let credentials = AsyncLoadable<HTTPBasicCredentials>(clock: clock) {
                HTTPBasicCredentials(user: user, password: password.withLock { $0 })
            }
            let service = HTTPService(
                baseURL: kinto.server.baseURL, transport: wire,
                authorization: .basic(LoadableWaiter(credentials, timeout: .seconds(30), clock: clock)))
            tasks = SyncedCollection(
                remote: KintoRemote(service: service, bucket: kinto.bucket, collection: kinto.collection),
                cache: cache, key: "notes", conflicts: conflicts, activity: activity,
                retryPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(8), multiplier: 2), clock: clock,
                now: { Date(timeIntervalSinceReferenceDate: 800_000_000) })
            tasks.onError = { [weak self] in self?.errors.append($0) }
        }

        /// Pulls, and waits for the pull to end.
        func pull(sourceLocation: SourceLocation = #_sourceLocation) async {
            tasks.sync()
            await settle("the pull ended", sourceLocation: sourceLocation) { self.tasks.loadableState != .syncing }
        }

        /// Waits until no push runs and nothing is pending.
        func pushes(sourceLocation: SourceLocation = #_sourceLocation) async {
            await settle("the pushes ended", sourceLocation: sourceLocation) {
                !self.tasks.status.isPushing && self.tasks.status.pendingCount == 0
            }
        }

        /// Moves the clock on until the pending changes' retries have gone and ended.
        func retries(sourceLocation: SourceLocation = #_sourceLocation) async {
            let deadline = ContinuousClock.now + .seconds(60)
            while tasks.status.pendingCount > 0 || tasks.status.isPushing, ContinuousClock.now < deadline {
                await clock.advance(by: .seconds(10))
                _ = await settle(rounds: 20) { self.tasks.status.isPushing }
                _ = await settle(rounds: 20) { !self.tasks.status.isPushing }
            }
            await pushes(sourceLocation: sourceLocation)
        }
    }
}

/// Gives the main actor and the global executor turns until `condition` holds or `seconds` of
/// real time pass (the server answers in its own time); records an issue naming `what` when it
/// does not hold by then. Never sleeps: it reads the clock between short rounds of `settle`.
@MainActor
@discardableResult
private func settle(
    _ what: String, seconds: Int = 60, sourceLocation: SourceLocation = #_sourceLocation,
    until condition: @MainActor () -> Bool
) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if await settle(rounds: 10, until: condition) { return true }
    }
    if condition() { return true }
    Issue.record("\(what): not within \(seconds) s of real time", sourceLocation: sourceLocation)
    return false
}

// MARK: - The wire

/// `URLSession.shared`, keeping what went out: the writes (method, path, idempotency key) and
/// the lists of records (their `_since`, and the ids of each page). With `losing`, the answer to
/// the first change of that kind (a create: `PUT` with `If-None-Match: *`; an update: `PUT` with
/// `If-Match`; a delete: `DELETE`) is lost after the server applied it:
/// `URLError(.networkConnectionLost)`.
final class Wire: HTTPTransport, Sendable {
    /// A `PUT` or `DELETE`, as sent.
    struct Write: Sendable {
        var method: String
        var path: String
        var idempotencyKey: String?
    }

    /// A list of records, as answered.
    struct List: Sendable {
        var since: String?
        var ids: [String]
    }

    private struct State {
        var writes: [Write] = []
        var lists: [List] = []
        var lostAnswers = 0
    }

    private let state = Locked(State())
    private let losing: KintoCollectionTests.ChangeKind?
    private let afterList: (@Sendable (_ number: Int) async throws -> Void)?

    /// - Parameters:
    ///   - losing: The kind of change whose first answer is lost, if any.
    ///   - afterList: Runs after the list of records `number` (from 1) came, before it is handed
    ///     on: what happens on the server between two pages.
    init(
        losing: KintoCollectionTests.ChangeKind? = nil,
        afterList: (@Sendable (_ number: Int) async throws -> Void)? = nil
    ) {
        self.losing = losing
        self.afterList = afterList
    }

    /// The writes sent, in order.
    var writes: [Write] { state.withLock { $0.writes } }
    /// The lists of records answered, in order.
    var lists: [List] { state.withLock { $0.lists } }
    /// The answers lost so far.
    var lostAnswers: Int { state.withLock { $0.lostAnswers } }

    private struct Page: Decodable {
        struct Entry: Decodable { var id: String }
        var data: [Entry]
    }

    func send(_ request: URLRequest, maxBodySize: Int) async throws -> (HTTPURLResponse, Data) {
        let method = request.httpMethod ?? "GET"
        let url = request.url!
        if method == "PUT" || method == "DELETE" {
            let write = Write(
                method: method, path: url.path, idempotencyKey: request.value(forHTTPHeaderField: "Idempotency-Key"))
            state.withLock { $0.writes.append(write) }
        }
        let (response, data) = try await URLSession.shared.send(request, maxBodySize: maxBodySize)
        if method == "GET", url.path.hasSuffix("/records"), response.statusCode == 200 || response.statusCode == 401 {
            let since = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?
                .first { $0.name == "_since" }?.value
            let ids = (try? JSONDecoder().decode(Page.self, from: data))?.data.map(\.id) ?? []
            let number = state.withLock { state in
                state.lists.append(List(since: since, ids: ids))
                return state.lists.count
            }
            try await afterList?(number)
        }
        let kind: KintoCollectionTests.ChangeKind? =
            switch method {
            case "PUT": request.value(forHTTPHeaderField: "If-None-Match") == "*" ? .create : .update
            case "DELETE": .delete
            default: nil
            }
        if let losing, kind == losing, (200..<300).contains(response.statusCode) {
            let loses = state.withLock { state in
                guard state.lostAnswers == 0 else { return false }
                state.lostAnswers += 1
                return true
            }
            if loses { throw URLError(.networkConnectionLost) }
        }
        return (response, data)
    }
}
