import Foundation
import LoadableSupport
import LoadableSync
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Crash safety of `SyncedCollection` with real processes, a real file cache and a server kept in
/// a file (``SyncFileServer``): a collection killed with SIGKILL while it pulls and applies pages,
/// or while it pushes, loses no saved change, applies none twice, and, relaunched, ends with the
/// server's records.
///
/// For each of 20 seeds (`SYNC_CRASH_SEEDS` for more; two under ThreadSanitizer), in a folder of
/// its own: the server starts with eight records (`l0`, `l1` and `r0`…`r5`), in pages of two. A
/// child process makes a collection on a `FileLoadableCache` and runs a seeded plan (``Plan``): a
/// first pull, then pulls, local inserts, edits and deletes of `l0`…`l3`, each reported to a file
/// once `saved()` returned for it, pairs of writes of one record (the second made while the server
/// holds back the answer to the first), and a third party's writes of `r0`…`r5` straight into the
/// server. Local and third-party records never meet, so no change of the child conflicts. A killing
/// thread of the child kills it with SIGKILL at the seed's moment (``Moment``: once the server made
/// so many pages or answered so many pushes, or so many writes were reported saved, or the first
/// pair's answer was let go, then after a seeded spin), as the cache's crash tests do; a child that
/// ran its whole plan kills itself once nothing is left to push. Then the test relaunches the
/// collection on the same cache and server — pulling first (offline for pushes until the pull
/// ended), or letting the pushes go first, by seed — lets it settle, and checks: no conflict,
/// error or change left to push, its records are the server's, no idempotency key and no written
/// title was applied twice, and each local record is what the last write reported saved made of
/// it, or a later write's (whose save may have finished as the child died).
@Suite("SyncedCollection: processes killed while pulling and pushing lose no saved change", .serialized)
struct SyncCrashTests {
    /// The records the child writes.
    static let localIDs = ["l0", "l1", "l2", "l3"]
    /// The records the third party writes.
    static let remoteIDs = ["r0", "r1", "r2", "r3", "r4", "r5"]
    /// Seconds a child may run before `alarm` stops it.
    static let bound: UInt32 = 60

    // MARK: - The plan

    /// A local write.
    enum Write: Equatable {
        case insert(title: String)
        case update(title: String)
        case delete

        /// The title the record has after it; `nil`: deleted.
        var title: String? {
            switch self {
            case .insert(let title), .update(let title): title
            case .delete: nil
            }
        }
    }

    /// A write of the plan: its number (the report names it), its record, and what it does.
    struct PlannedWrite: Equatable {
        var number: Int
        var id: String
        var write: Write
    }

    /// One step of a child.
    enum Step: Equatable {
        case pull
        case write(PlannedWrite)
        /// Two writes of one record, the second made once the server applied the first and while
        /// its answer is held back: the relaunch finds the second after a change the server has.
        case pair(PlannedWrite, PlannedWrite)
        /// The third party writes (or deletes, `nil`) a record.
        case remote(id: String, title: String?)
    }

    /// A seed's steps: a first pull, then writes (one pair at least), pulls and the third party's
    /// writes. Write number `n` gives the title `w<n>`; an edit or a delete is planned only for a
    /// record that exists then (the child is the only writer of its records).
    struct Plan {
        let steps: [Step]

        init(seed: UInt64) {
            var random = SeededRandomNumberGenerator(seed: seed)
            var exists = ["l0": true, "l1": true, "l2": false, "l3": false]
            var steps: [Step] = [.pull]
            var number = 0
            func write(_ id: String) -> PlannedWrite {
                number += 1
                let write: Write
                if exists[id] == true {
                    write = random.next() % 3 == 0 ? .delete : .update(title: "w\(number)")
                } else {
                    write = .insert(title: "w\(number)")
                }
                exists[id] = write != .delete
                return PlannedWrite(number: number, id: id, write: write)
            }
            let pairStep = 1 + Int(random.next() % 12)
            for index in 1..<14 {
                let id = SyncCrashTests.localIDs[Int(random.next() % 4)]
                if index == pairStep {
                    steps.append(.pair(write(id), write(id)))
                    continue
                }
                switch random.next() % 20 {
                case 0..<3: steps.append(.pair(write(id), write(id)))
                case 3..<11: steps.append(.write(write(id)))
                case 11..<15: steps.append(.pull)
                default:
                    let id = SyncCrashTests.remoteIDs[Int(random.next() % 6)]
                    steps.append(.remote(id: id, title: random.next() % 4 == 0 ? nil : "x\(index)"))
                }
            }
            self.steps = steps
        }

        /// The writes of record `id`, in order.
        func writes(of id: String) -> [PlannedWrite] {
            steps.flatMap { step -> [PlannedWrite] in
                switch step {
                case .write(let write): [write]
                case .pair(let first, let second): [first, second]
                case .pull, .remote: []
                }
            }
            .filter { $0.id == id }
        }
    }

    /// The server's records before the child.
    static func startServer(in folder: String) {
        let server = SyncFileServer(folder: folder)
        for id in ["l0", "l1"] + remoteIDs { server.put(TaskRecord(id: id, title: "init-\(id)")) }
    }

    static func policy(of seed: UInt64) -> ConflictPolicy<TaskRecord> {
        [.serverWins, .clientWins, .fieldwise, .manual, .merge { _, local, _ in local }][Int(seed % 5)]
    }

    // MARK: - The child

    /// What a killed child did so far, shared with its killing thread and the server's calls.
    /// The killing thread waits on a condition, not spinning: a spinning thread would take a
    /// processor from the child (and the machine may have two).
    final class Progress: Sendable {
        struct State {
            var operations = 0
            var pushes = 0
            var saved = 0
            var pairs = 0
            /// The record whose next push is held back once applied (a pair's first write).
            var holds: String?
            /// The held push, waiting for ``release()``.
            var held: CheckedContinuation<Void, Never>?
        }

        private let state = Locked(State())
        private let changed = NSCondition()

        /// Changes the state, and wakes the killing thread.
        private func change<Result>(_ body: (inout State) -> Result) -> Result {
            let result = state.withLock(body)
            changed.lock()
            changed.broadcast()
            changed.unlock()
            return result
        }

        /// Blocks the calling thread until `condition` holds.
        func wait(until condition: (State) -> Bool) {
            changed.lock()
            while !state.withLock({ condition($0) }) { changed.wait() }
            changed.unlock()
        }

        /// Whether the server holds back the answer of a push of the record ``hold(_:)`` named.
        var isHolding: Bool { state.withLock { $0.held != nil } }

        /// Counts `operation`; holds a push of the record named by ``hold(_:)`` back until
        /// ``release()``.
        func operate(_ operation: SyncFileServer.Operation) async {
            let holds = change { state -> Bool in
                state.operations += 1
                guard case .push(let id) = operation else { return false }
                state.pushes += 1
                guard state.holds == id else { return false }
                state.holds = nil
                return true
            }
            guard holds else { return }
            await withCheckedContinuation { continuation in
                change { $0.held = continuation }
            }
        }

        func save() { change { $0.saved += 1 } }
        func hold(_ id: String) { change { $0.holds = id } }
        func release() {
            let held = change { state -> CheckedContinuation<Void, Never>? in
                state.pairs += 1
                defer { state.held = nil }
                return state.held
            }
            held?.resume()
        }
    }

    /// When a child kills itself.
    enum Moment: CustomStringConvertible {
        /// Once the server made `operations` pages or answered pushes in all, then after `spins`
        /// yields of the thread: while a page is applied and saved, or a push's answer is.
        case afterOperations(Int, spins: Int)
        /// Once the server answered `pushes` pushes, then after a few `spins`: mostly before the
        /// answer is saved, so that the relaunch sends the change again or pulls it first.
        case afterPushes(Int, spins: Int)
        /// Once `writes` writes were reported saved, then after `spins` yields: while later writes
        /// are saved and pushed.
        case afterWrites(Int, spins: Int)
        /// Once the first pair's held answer was let go, then after a few `spins`: before or
        /// while the answer of its first write is saved.
        case afterPair(spins: Int)

        init(seed: UInt64) {
            var random = SeededRandomNumberGenerator(seed: ~seed)
            self =
                switch seed % 4 {
                case 0:
                    .afterOperations(
                        Int.random(in: 1...16, using: &random), spins: Int.random(in: 0..<3_000, using: &random))
                case 1:
                    .afterPushes(Int.random(in: 1...6, using: &random), spins: Int.random(in: 0..<300, using: &random))
                case 2:
                    .afterWrites(
                        Int.random(in: 1...6, using: &random), spins: Int.random(in: 0..<3_000, using: &random))
                default: .afterPair(spins: Int.random(in: 0..<300, using: &random))
                }
        }

        var description: String {
            switch self {
            case .afterOperations(let count, let spins): "after \(count) pages or pushes and \(spins) spins"
            case .afterPushes(let count, let spins): "after \(count) pushes and \(spins) spins"
            case .afterWrites(let count, let spins): "after \(count) writes saved and \(spins) spins"
            case .afterPair(let spins): "after the first pair of writes and \(spins) spins"
            }
        }

        /// Waits for the moment, on the killing thread. A moment the child never reaches does not
        /// matter: the child kills itself at the end of its plan.
        func wait(progress: Progress) {
            let spins: Int
            switch self {
            case .afterOperations(let count, let afterwards):
                progress.wait { $0.operations >= count }
                spins = afterwards
            case .afterPushes(let count, let afterwards):
                progress.wait { $0.pushes >= count }
                spins = afterwards
            case .afterWrites(let count, let afterwards):
                progress.wait { $0.saved >= count }
                spins = afterwards
            case .afterPair(let afterwards):
                progress.wait { $0.pairs >= 1 }
                spins = afterwards
            }
            // The spin never sleeps, so the moment falls anywhere in what follows.
            for _ in 0..<spins { sched_yield() }
        }
    }

    /// A collection on the folder's cache and server.
    @MainActor
    static func makeCollection(
        folder: String, server: SyncFileServer, seed: UInt64, clock: ManualClock,
        activity: ActivityMonitor = ActivityMonitor()
    ) -> SyncedCollection<SyncFileRemote> {
        SyncedCollection(
            remote: server.remote, cache: FileLoadableCache(directory: URL(fileURLWithPath: folder + "/cache")),
            key: "tasks", conflicts: policy(of: seed), activity: activity,
            retryPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(8), multiplier: 2), clock: clock,
            now: { Date(timeIntervalSinceReferenceDate: 800_000_000 + Double(clock.now.offset.components.seconds)) })
    }

    /// Gives other tasks turns until `condition` holds (the child's `alarm` bounds it).
    @MainActor
    static func wait(until condition: @MainActor () -> Bool) async {
        while !condition() {
            await Task.yield()
            await Task.detached {}.value
        }
    }

    /// The child: runs the plan of `seed` until its killing thread kills it.
    @MainActor
    static func runUntilKilled(folder: String, seed: UInt64) async {
        alarm(bound)
        let progress = Progress()
        let moment = Moment(seed: seed)
        Thread {
            moment.wait(progress: progress)
            kill(getpid(), SIGKILL)
        }
        .start()
        let server = SyncFileServer(folder: folder + "/server") { await progress.operate($0) }
        let collection = makeCollection(folder: folder, server: server, seed: seed, clock: ManualClock())
        collection.onError = { error in
            ChildReport.fail("onError: \(error)")
            fflush(nil)
        }
        await collection.restored()
        func perform(_ planned: PlannedWrite) {
            switch planned.write {
            case .insert(let title): collection.insert(TaskRecord(id: planned.id, title: title))
            case .update(let title): collection.update(planned.id) { $0.title = title }
            case .delete: collection.delete(planned.id)
            }
        }
        for step in Plan(seed: seed).steps {
            switch step {
            case .pull:
                collection.sync()
                await wait { collection.loadableState != .syncing }
            case .write(let planned):
                perform(planned)
                await collection.saved()
                reportSaved(planned.number, in: folder)
                progress.save()
            case .pair(let first, let second):
                progress.hold(first.id)
                perform(first)
                // The server applied the first write (or an earlier one of the record, still sent) and
                // holds its answer: the second write is an item of its own.
                await wait { progress.isHolding }
                perform(second)
                await collection.saved()
                for planned in [first, second] {
                    reportSaved(planned.number, in: folder)
                    progress.save()
                }
                progress.release()
            case .remote(let id, let title):
                if let title { server.put(TaskRecord(id: id, title: title)) } else { server.remove(id) }
            }
        }
        await wait { !collection.status.isPushing && collection.status.pendingCount == 0 }
        await collection.saved()
        kill(getpid(), SIGKILL)
    }

    // MARK: - The report

    static func reportPath(in folder: String) -> String { folder + "/saved.txt" }

    /// Appends write `number` to the report in one write (a kill leaves at most a last line cut).
    static func reportSaved(_ number: Int, in folder: String) {
        let descriptor = open(reportPath(in: folder), O_WRONLY | O_APPEND | O_CREAT, 0o644)
        guard descriptor >= 0 else {
            ChildReport.fail("cannot open the report file: errno \(errno)")
            fflush(nil)
            return
        }
        defer { close(descriptor) }
        let bytes = Array("\(number)\n".utf8)
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if written != bytes.count {
            ChildReport.fail("wrote \(written) of \(bytes.count) bytes of the report")
            fflush(nil)
        }
    }

    /// The writes the child reported saved, by number.
    static func savedWrites(in folder: String) -> Set<Int> {
        let text = (try? String(contentsOfFile: reportPath(in: folder), encoding: .utf8)) ?? ""
        return Set(text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().compactMap { Int($0) })
    }

    // MARK: - The test

    /// Gives the collection turns until `condition` holds, moving its clock past any retry;
    /// returns whether it held.
    @MainActor
    static func settle(
        _ collection: SyncedCollection<SyncFileRemote>, clock: ManualClock, until condition: @MainActor () -> Bool
    ) async -> Bool {
        for _ in 0..<40 {
            if await LoadableTestSupport.settle(rounds: 500, until: condition) { return true }
            await clock.advance(by: .seconds(10))
        }
        return condition()
    }

    /// The seeds: 20, `SYNC_CRASH_SEEDS` for more; a tenth under ThreadSanitizer.
    static let seedCount = StressScale.rounds(
        ProcessInfo.processInfo.environment["SYNC_CRASH_SEEDS"].flatMap { Int($0) } ?? 20)

    @Test(
        "killed at a seeded moment while pulling or pushing: relaunched, no saved change lost or applied twice",
        arguments: 0..<seedCount)
    @MainActor
    func killedWhilePullingOrPushing(iteration: Int) async throws {
        let seed: UInt64 = 0x5_C4A5_0000 &+ UInt64(iteration)
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("sync-crash-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let folder = root.path
        Self.startServer(in: folder + "/server")
        let plan = Plan(seed: seed)
        let pullsFirst = seed / 3 % 2 == 0
        let context =
            "seed \(seed) (iteration \(iteration)), killed \(Moment(seed: seed)), the relaunch "
            + (pullsFirst ? "pulls first" : "pushes first")

        let result = await #expect(
            processExitsWith: .signal(SIGKILL), observing: [\.standardOutputContent], "\(context)"
        ) { [folder = folder as String, seed = seed as UInt64] in
            await SyncCrashTests.runUntilKilled(folder: folder, seed: seed)
        }
        ChildReport.recordFailures(of: result, context: context)

        // The relaunch.
        let server = SyncFileServer(folder: folder + "/server")
        let clock = ManualClock()
        // Pulling first: offline for pushes until the pull ended, so that the pull meets the changes
        // the child left pending, some of which the server may have applied.
        let activity = ActivityMonitor(connectivity: pullsFirst ? .offline : .online)
        let collection = Self.makeCollection(
            folder: folder, server: server, seed: seed, clock: clock, activity: activity)
        var errors: [String] = []
        collection.onError = { errors.append("\($0)") }
        await collection.restored()
        if pullsFirst {
            collection.sync()
            #expect(await Self.settle(collection, clock: clock) { collection.loadableState != .syncing }, "\(context)")
            activity.connectivity = .online
        }
        let pushed = await Self.settle(collection, clock: clock) {
            !collection.status.isPushing && collection.status.pendingCount == 0
        }
        #expect(pushed, "\(context): changes left to push")
        collection.sync()
        #expect(await Self.settle(collection, clock: clock) { collection.loadableState != .syncing }, "\(context)")
        await collection.saved()

        let state = server.state
        let records = state.records.mapValues(\.record)
        let shown = Dictionary(
            (collection.contents ?? RecordSet()).map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        #expect(errors.isEmpty, "\(context): \(errors)")
        #expect(collection.error == nil, "\(context): \(String(describing: collection.error))")
        #expect(collection.conflicts.isEmpty, "\(context): conflicts \(collection.conflicts)")
        #expect(shown == records, "\(context): the collection shows \(shown), the server has \(records)")

        // Each change applied once: by idempotency key, and by the title it wrote.
        let keys = Dictionary(grouping: state.history, by: \.key).filter { $0.value.count > 1 }
        #expect(keys.isEmpty, "\(context): keys applied more than once: \(keys)")
        let titles = Dictionary(grouping: state.history.compactMap(\.title), by: { $0 }).filter { $0.value.count > 1 }
        #expect(titles.isEmpty, "\(context): titles applied more than once: \(titles.keys.sorted())")

        // Each local record is what its last saved write made of it, or a later write's.
        let saved = Self.savedWrites(in: folder)
        for id in Self.localIDs {
            let writes = plan.writes(of: id)
            let lastSaved = writes.last { saved.contains($0.number) }?.number
            var candidates = writes.filter { $0.number >= (lastSaved ?? 0) }.map(\.write.title)
            if lastSaved == nil { candidates.append(["l0", "l1"].contains(id) ? "init-\(id)" : nil) }
            let title = records[id]?.title
            let described = writes.map { "w\($0.number): \($0.write.title ?? "delete")" }
            #expect(
                candidates.contains(title),
                "\(context): \(id) is \(title ?? "deleted"); the last write saved is \(lastSaved.map { "w\($0)" } ?? "none") of \(described)"
            )
        }
    }
}
