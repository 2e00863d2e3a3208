import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSQLite
import LoadableSupport
import LoadableTestSupport
import LoadableTesting
import Testing

/// Holds a cache queue: a job that waits until ``open()``, so that the jobs asked for meanwhile
/// wait behind it, as a burst does while the queue is busy. The queue then finds them in a row.
@MainActor
final class QueueGate {
    /// Whether the gate is open, and the waiting job while it is not: one lock for both, so that
    /// an `open()` between the job's check and its wait cannot miss the job (it would wait
    /// forever).
    private enum State {
        case closed(CheckedContinuation<Void, Never>?)
        case open
    }

    private let state = Locked(State.closed(nil))

    /// Queues the waiting job on `cache`'s queue.
    init(holding cache: any LoadableCache) {
        CacheQueue.enqueue(in: cache, key: nil) { [state] in
            await withCheckedContinuation { waiting in
                let resumeNow = state.withLock { state -> Bool in
                    guard case .closed = state else { return true }
                    state = .closed(waiting)
                    return false
                }
                if resumeNow { waiting.resume() }
            }
            return nil
        }
    }

    /// Lets the queue go on.
    func open() {
        let waiting = state.withLock { state -> CheckedContinuation<Void, Never>? in
            defer { state = .open }
            guard case .closed(let waiting) = state else { return nil }
            return waiting
        }
        waiting?.resume()
    }
}

/// Saves and restores that the cache queue has waiting in a row for one `SQLiteLoadableCache`
/// are written in one transaction (`CacheWriteGroup`), each still with its own result.
@Suite("SQLiteLoadableCache: the queue's saves and restores in a row, written in groups")
@MainActor
struct SQLiteCacheGroupTests {
    let directory = FileCacheFixtures.temporaryDirectory("sqlite-groups")
    var path: URL { directory.appendingPathComponent("cache.sqlite") }

    func cleanUp() { FileCacheFixtures.removeDirectory(directory) }

    /// `count` loadables persisted under `k0`, `k1`… in `cache`, their restores run.
    func persisted(
        _ count: Int, in cache: any LoadableCache, from first: Int = 0, log: PersistenceErrorLog
    ) async -> [(loadable: PersistedLoadable<Int>, persistence: LoadablePersistence)] {
        var made: [(PersistedLoadable<Int>, LoadablePersistence)] = []
        for index in first..<(first + count) {
            let loadable = PersistedLoadable<Int>(clock: ManualClock())
            made.append((loadable, loadable.persist(in: cache, key: "k\(index)", onError: log.handler)))
        }
        for (_, persistence) in made { await persistence.restored() }
        return made
    }

    /// The `Int` saved under each of `keys`, read by a new object on the file.
    func saved(_ keys: [String]) async throws -> [Int?] {
        let reader = try SQLiteLoadableCache(path: path)
        var values: [Int?] = []
        for key in keys { values.append(persistedInt(try await reader.load(key: key))) }
        return values
    }

    @Test("a burst of restores and saves waiting in a row commits once per 64 jobs; every entry is written")
    func burstCommitsInGroups() async throws {
        defer { cleanUp() }
        let cache = try SQLiteLoadableCache(path: path)
        let log = PersistenceErrorLog()
        let gate = QueueGate(holding: cache)
        // 100 restores and 100 saves, in turn: 200 jobs behind the gate.
        var made: [(PersistedLoadable<Int>, LoadablePersistence)] = []
        for index in 0..<100 {
            let loadable = PersistedLoadable<Int>(clock: ManualClock())
            made.append((loadable, loadable.persist(in: cache, key: "k\(index)", onError: log.handler)))
            loadable.setContents(index)
        }
        let before = await cache.commitCount()
        gate.open()
        await made.last?.1.saved()
        #expect(await cache.commitCount() - before == 4)  // 64 + 64 + 64 + 8 jobs
        #expect(try await saved((0..<100).map { "k\($0)" }) == (0..<100).map { $0 })
        #expect(log.summaries.isEmpty)
        // A job's step holds its persistence weakly: a persistence released sooner (as a release
        // build may, after its last use) reports nothing.
        withExtendedLifetime(made) {}
    }

    @Test("a restore in a group reads the saves before it in the group")
    func restoreReadsTheGroupsSaves() async throws {
        defer { cleanUp() }
        let cache = try SQLiteLoadableCache(path: path)
        let log = PersistenceErrorLog()
        let first = await persisted(1, in: cache, log: log)
        let gate = QueueGate(holding: cache)
        first[0].loadable.setContents(7)
        let again = PersistedLoadable<Int>(clock: ManualClock())
        let persistence = again.persist(in: cache, key: "k0", onError: log.handler)
        gate.open()
        await persistence.restored()
        #expect(again.contents == 7)
        #expect(log.summaries.isEmpty)
        withExtendedLifetime(first) {}
    }

    @Test("a save refused in a group fails alone: its old entry stays, the others are written, one error")
    func refusedSaveFailsAlone() async throws {
        defer { cleanUp() }
        let cache = try SQLiteLoadableCache(path: path)
        let log = PersistenceErrorLog()
        let made = await persisted(5, in: cache, log: log)
        for (index, item) in made.enumerated() { item.loadable.setContents(index) }
        await made.last?.persistence.saved()
        await cache.failInGroups(saveOf: "k2", commit: false)
        let gate = QueueGate(holding: cache)
        for (index, item) in made.enumerated() { item.loadable.setContents(100 + index) }
        gate.open()
        await made.last?.persistence.saved()
        #expect(log.summaries == ["saveFailed k2"])
        #expect(try await saved((0..<5).map { "k\($0)" }) == [100, 101, 2, 103, 104])
        withExtendedLifetime(made) {}
    }

    @Test("a group whose commit fails is rolled back and each of its saves runs again alone: all written, no error")
    func failedCommitRunsEachAgain() async throws {
        defer { cleanUp() }
        let cache = try SQLiteLoadableCache(path: path)
        let log = PersistenceErrorLog()
        let made = await persisted(5, in: cache, log: log)
        await cache.failInGroups(saveOf: nil, commit: true)
        let gate = QueueGate(holding: cache)
        for (index, item) in made.enumerated() { item.loadable.setContents(index) }
        let before = await cache.commitCount()
        gate.open()
        await made.last?.persistence.saved()
        #expect(log.summaries.isEmpty)
        #expect(await cache.commitCount() - before == 5)  // the failed group's commit counts none
        #expect(try await saved((0..<5).map { "k\($0)" }) == [0, 1, 2, 3, 4])
        withExtendedLifetime(made) {}
    }

    @Test("a call from another task while a group's transaction is open commits the group first")
    func outsideCallCommitsTheGroup() async throws {
        defer { cleanUp() }
        let cache = try SQLiteLoadableCache(path: path)
        let other = try SQLiteLoadableCache(path: path)
        let group = CacheWriteGroup(writer: ObjectIdentifier(cache))
        let savedAt = PersistenceWallClock.start
        try await group.run {
            try await cache.save(try persistedEntry(1, savedAt: savedAt), key: "a")
        }
        #expect(try await other.load(key: "a") == nil)  // not committed yet
        #expect(try await cache.load(key: "b") == nil)  // outside the group: commits it first
        #expect(persistedInt(try await other.load(key: "a")) == 1)

        // A save outside, then one more in the group (a new transaction), then the group's end.
        try await cache.save(try persistedEntry(2, savedAt: savedAt), key: "c")
        try await group.run {
            try await cache.save(try persistedEntry(3, savedAt: savedAt), key: "d")
        }
        #expect(try await other.load(key: "d") == nil)
        #expect(await group.end())
        #expect(try await saved(["a", "c", "d"]) == [1, 2, 3])
        // A group for another object is not this object's: its saves are written alone.
        let foreign = CacheWriteGroup(writer: ObjectIdentifier(other))
        try await foreign.run {
            try await cache.save(try persistedEntry(4, savedAt: savedAt), key: "e")
        }
        #expect(persistedInt(try await other.load(key: "e")) == 4)
        #expect(await foreign.end())
        // A task that a job's work started, calling after the work returned, is not in the group.
        let late = CacheWriteGroup(writer: ObjectIdentifier(cache))
        let (after, returned) = AsyncStream<Void>.makeStream()
        let task = await late.run {
            Task {
                for await _ in after { break }
                try await cache.save(try persistedEntry(5, savedAt: savedAt), key: "f")
            }
        }
        returned.yield()
        returned.finish()
        try await task.value
        #expect(persistedInt(try await other.load(key: "f")) == 5)
        #expect(await late.end())
    }

    @Test("saves for two objects on one file, in a row in their shared queue, are grouped per object")
    func twoObjectsOnOneFile() async throws {
        defer { cleanUp() }
        let first = try SQLiteLoadableCache(path: path)
        let second = try SQLiteLoadableCache(path: path)
        let log = PersistenceErrorLog()
        let onFirst = await persisted(6, in: first, log: log)
        let onSecond = await persisted(6, in: second, from: 6, log: log)
        let gate = QueueGate(holding: first)
        // Two for one object, two for the other, and so on: each pair a group, none waiting on
        // the other object's transaction (which would fail after the 10-second busy timeout).
        for pair in 0..<3 {
            for item in onFirst[(pair * 2)..<(pair * 2 + 2)] { item.loadable.setContents(pair) }
            for item in onSecond[(pair * 2)..<(pair * 2 + 2)] { item.loadable.setContents(10 + pair) }
        }
        gate.open()
        await onSecond.last?.persistence.saved()
        #expect(log.summaries.isEmpty)
        #expect(try await saved((0..<12).map { "k\($0)" }) == [0, 0, 1, 1, 2, 2, 10, 10, 11, 11, 12, 12])
        withExtendedLifetime((onFirst, onSecond)) {}
    }

    @Test("the file and in-memory caches write no groups: their entries carry no writer")
    func otherCachesWriteNoGroups() throws {
        defer { cleanUp() }
        #expect(FileLoadableCache(directory: directory).sharedEntries.groupWriter == nil)
        #expect(InMemoryLoadableCache().sharedEntries.groupWriter == nil)
        let cache = try SQLiteLoadableCache(path: path)
        #expect(cache.sharedEntries.groupWriter == ObjectIdentifier(cache))
        #expect(cache.scoped("a/").sharedEntries.groupWriter == ObjectIdentifier(cache))
        // Two objects on one file: the same entries, two writers.
        let other = try SQLiteLoadableCache(path: path)
        #expect(cache.sharedEntries == other.sharedEntries)
        #expect(cache.sharedEntries.hashValue == other.sharedEntries.hashValue)
    }
}

/// The queue's groups against a reference model: what a new object on the file reads after each
/// step is what the model's last written value of each key says, whatever groups formed, failed
/// a save, failed their commit or were cut by a call from outside.
@Suite("SQLiteLoadableCache: groups of saves against a reference model")
@MainActor
struct SQLiteCacheGroupModelTests {
    enum Step: CustomStringConvertible, Sendable {
        /// Holds the queue behind a gate (if it is not held).
        case hold
        /// Sets the loadable of key `key` to `value` (a queued save).
        case set(key: Int, value: Int)
        /// Saves `value` under `key` from the test's task, outside any group.
        case direct(key: Int, value: Int)
        /// Makes the next save of `key` in a group fail.
        case failSave(key: Int)
        /// Makes the next commit of a group fail.
        case failCommit
        /// Opens the gate and waits until the queue has run everything.
        case release
        /// A new object and new loadables on the file; their restores read the model.
        case relaunch

        var description: String {
            switch self {
            case .hold: "hold"
            case .set(let key, let value): "set(k\(key) = \(value))"
            case .direct(let key, let value): "direct(k\(key) = \(value))"
            case .failSave(let key): "failSave(k\(key))"
            case .failCommit: "failCommit"
            case .release: "release"
            case .relaunch: "relaunch"
            }
        }
    }

    static let keys = 0..<5

    static func randomStep(_ random: inout SeededRandomNumberGenerator) -> Step {
        let key = Int(random.next() % UInt64(keys.count))
        let value = Int(random.next() % 1_000)
        switch random.next() % 20 {
        case 0..<3: return .hold
        case 3..<10: return .set(key: key, value: value)
        case 10..<12: return .direct(key: key, value: value)
        case 12..<14: return .failSave(key: key)
        case 14: return .failCommit
        case 15..<19: return .release
        default: return .relaunch
        }
    }

    /// Runs `steps`; the first difference from the model, or `nil`.
    static func mismatch(_ steps: [Step]) async -> String? {
        let directory = FileCacheFixtures.temporaryDirectory("sqlite-group-model")
        defer { FileCacheFixtures.removeDirectory(directory) }
        let path = directory.appendingPathComponent("cache.sqlite")
        let savedAt = PersistenceWallClock.start
        do {
            var cache = try SQLiteLoadableCache(path: path)
            let log = PersistenceErrorLog()
            var loadables: [PersistedLoadable<Int>] = []
            var persistences: [LoadablePersistence] = []
            func launch() async {
                loadables = keys.map { _ in PersistedLoadable<Int>(clock: ManualClock()) }
                persistences = keys.map { loadables[$0].persist(in: cache, key: "k\($0)", onError: log.handler) }
                for persistence in persistences { await persistence.restored() }
            }
            await launch()
            // The model: what is written, what waits behind the gate, what is armed to fail.
            var written: [Int: Int] = [:]
            var pending: [Int: Int] = [:]
            var gate: QueueGate?
            var failingSave: Int?
            var failingCommit = false
            var expectedErrors: [String] = []
            func model(_ key: Int) -> String { String(describing: written[key]) }
            func release() async {
                let jobs = pending.count
                gate?.open()
                gate = nil
                await persistences.last?.saved()
                for (key, value) in pending {
                    // A save fails only in a group (two jobs or more in a row) that commits: when
                    // the commit fails, every save of the group runs again alone, and is written.
                    if jobs >= 2, key == failingSave, !failingCommit {
                        expectedErrors.append("saveFailed k\(key)")
                    } else {
                        written[key] = value
                    }
                }
                // A group used what was armed: the refusal of a save of it, and the commit's.
                if jobs >= 2 {
                    if let key = failingSave, pending[key] != nil { failingSave = nil }
                    failingCommit = false
                }
                pending = [:]
            }
            for (index, step) in steps.enumerated() {
                switch step {
                case .hold:
                    if gate == nil { gate = QueueGate(holding: cache) }
                case .set(let key, let value):
                    loadables[key].setContents(value)
                    if gate == nil {
                        await persistences[key].saved()
                        // Alone in the queue: never in a group.
                        written[key] = value
                    } else {
                        pending[key] = value
                    }
                case .direct(let key, let value):
                    try await cache.save(try persistedEntry(value, savedAt: savedAt), key: "k\(key)")
                    written[key] = value
                case .failSave(let key):
                    failingSave = key
                    await cache.failInGroups(saveOf: "k\(key)", commit: failingCommit)
                case .failCommit:
                    failingCommit = true
                    await cache.failInGroups(saveOf: failingSave.map { "k\($0)" }, commit: true)
                case .release:
                    await release()
                case .relaunch:
                    await release()
                    await persistences.last?.saved()
                    cache = try SQLiteLoadableCache(path: path)
                    failingSave = nil
                    failingCommit = false
                    await launch()
                    for key in keys where loadables[key].contents != written[key] {
                        let restored = String(describing: loadables[key].contents)
                        return "after step \(index), \(step): k\(key) restored \(restored), the model \(model(key))"
                    }
                }
                if gate == nil {
                    let reader = try SQLiteLoadableCache(path: path)
                    for key in keys {
                        let found = persistedInt(try await reader.load(key: "k\(key)"))
                        if found != written[key] {
                            let read = String(describing: found)
                            return "after step \(index), \(step): k\(key) reads \(read), the model \(model(key))"
                        }
                    }
                    if log.summaries != expectedErrors {
                        return "after step \(index), \(step): errors \(log.summaries), the model's \(expectedErrors)"
                    }
                }
            }
            await release()
            withExtendedLifetime((loadables, persistences)) {}
            return nil
        } catch {
            return "threw \(error)"
        }
    }

    @Test(
        "random sequences of queued saves behind a held queue, outside saves, refused saves and commits, and relaunches match the model"
    )
    func randomSequences() async {
        let matched = await checkRandomSequences(count: StressScale.rounds(150), baseSeed: 0x6209_C0A1) { seed in
            var random = SeededRandomNumberGenerator(seed: seed)
            return (0..<30).map { _ in Self.randomStep(&random) }
        } mismatch: { steps in
            await Self.mismatch(steps)
        }
        #expect(matched)
    }
}
