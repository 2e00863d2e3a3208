import Foundation
import Loadable
import LoadableCaching
import LoadableTestSupport
import LoadableTesting
import Testing

// MARK: - Helpers shared by the persistence tests

/// A loadable whose syncs the test finishes by hand; counts `doSync()` (one per sync started).
final class PersistedLoadable<Contents>: Loadable<Contents> {
    private(set) var doSyncCount = 0

    override func doSync() {
        doSyncCount += 1
    }
}

/// The wall-clock time a test gives a persistence as `now`: fixed until the test moves it.
final class PersistenceWallClock: Sendable {
    /// The first instant of every test: a round number of seconds, so that ages are exact.
    static let start = Date(timeIntervalSinceReferenceDate: 700_000_000)

    private let date = Locked(PersistenceWallClock.start)

    /// The time now.
    var now: Date { date.withLock { $0 } }

    /// What `persist(now:)` is given.
    var function: @Sendable () -> Date { { self.now } }

    /// The time `seconds` from the start (negative: before it).
    func at(_ seconds: TimeInterval) -> Date { Self.start.addingTimeInterval(seconds) }

    /// Moves the time by `seconds`.
    func advance(by seconds: TimeInterval) {
        date.withLock { $0 += seconds }
    }
}

/// A cache whose loads and saves the test can hold, each on a `CheckedContinuation` that the test
/// resumes; it records every call in order, and can be told to fail a kind of call.
actor ScriptedPersistenceCache: LoadableCache {
    /// A kind of call.
    enum Operation: String, Sendable, CustomStringConvertible {
        case load, save, remove, removeAll
        var description: String { rawValue }
    }

    /// One call, as it arrived.
    struct Call: Sendable, Equatable, CustomStringConvertible {
        var operation: Operation
        var key: String?
        /// The entry of a save.
        var entry: CachedEntry?

        /// The saved value, for a save of an `Int`.
        var savedInt: Int? { entry.flatMap { try? JSONDecoder().decode(Int.self, from: $0.data) } }

        var description: String {
            var text = "\(operation)(\(key ?? ""))"
            if let entry {
                text +=
                    " \(String(decoding: entry.data, as: UTF8.self)) @\(entry.savedAt.timeIntervalSinceReferenceDate)"
            }
            return text
        }
    }

    private var entries: [String: CachedEntry]
    /// Every call, in the order the calls arrived (a held call is recorded when it arrives).
    private(set) var calls: [Call] = []
    /// Saves that wrote their entry.
    private(set) var completedSaveCount = 0
    private var held: Set<Operation> = []
    private var parked: [(call: Call, continuation: CheckedContinuation<Void, Never>)] = []
    private var failures: [Operation: any Error] = [:]

    init(entries: [String: CachedEntry] = [:]) {
        self.entries = entries
    }

    // MARK: Scripting

    /// Holds every later call of `operations` until the test resumes it.
    func hold(_ operations: Operation...) {
        held.formUnion(operations)
    }

    /// Stops holding every kind of call and lets every held call go on, oldest first.
    func releaseAll() {
        held.removeAll()
        let waiting = parked
        parked.removeAll()
        for (_, continuation) in waiting { continuation.resume() }
    }

    /// Lets the oldest held call go on; returns it (`nil` when none is held).
    @discardableResult
    func resumeNext() -> Call? {
        guard !parked.isEmpty else { return nil }
        let (call, continuation) = parked.removeFirst()
        continuation.resume()
        return call
    }

    /// The calls held now, oldest first.
    var heldCalls: [Call] { parked.map(\.call) }

    /// Makes every later call of `operation` throw `error` (`nil`: succeed again).
    func fail(_ operation: Operation, with error: (any Error)?) {
        failures[operation] = error
    }

    /// The keys that have an entry, sorted.
    var keys: [String] { entries.keys.sorted() }

    /// The entry of `key`.
    func entry(_ key: String) -> CachedEntry? { entries[key] }

    /// The kinds of the calls so far, in order.
    var operations: [Operation] { calls.map(\.operation) }

    /// The `Int` values saved under `key`, in the order the saves arrived.
    func savedInts(_ key: String) -> [Int?] {
        calls.filter { $0.operation == .save && $0.key == key }.map(\.savedInt)
    }

    // MARK: LoadableCache

    func load(key: String) async throws -> CachedEntry? {
        try await arrive(Call(operation: .load, key: key))
        return entries[key]
    }

    func save(_ entry: CachedEntry, key: String) async throws {
        try await arrive(Call(operation: .save, key: key, entry: entry))
        entries[key] = entry
        completedSaveCount += 1
    }

    func remove(key: String) async throws {
        try await arrive(Call(operation: .remove, key: key))
        entries[key] = nil
    }

    func removeAll() async throws {
        try await arrive(Call(operation: .removeAll))
        entries.removeAll()
    }

    /// Records `call`, waits while its kind is held, then throws the failure set for its kind.
    private func arrive(_ call: Call) async throws {
        calls.append(call)
        if held.contains(call.operation) {
            await withCheckedContinuation { parked.append((call, $0)) }
        }
        if let failure = failures[call.operation] { throw failure }
    }
}

/// Gives the cache's queue turns until `count` calls are held in `cache`; returns whether they
/// were within `rounds` turns. Never sleeps.
@MainActor
func waitUntilHeld(_ cache: ScriptedPersistenceCache, count: Int = 1, rounds: Int = 2_000) async -> Bool {
    for _ in 0..<rounds {
        if await cache.heldCalls.count >= count { return true }
        await Task.yield()
    }
    return await cache.heldCalls.count >= count
}

/// Gives the main actor and `cache` `rounds` turns each, so that work queued by mistake would
/// reach the cache by the time the test looks. Never sleeps.
@MainActor
func letCacheRun(_ cache: ScriptedPersistenceCache, rounds: Int = 20) async {
    for _ in 0..<rounds {
        await Task.yield()
        _ = await cache.heldCalls
    }
}

/// An entry holding `value` encoded as JSON.
func persistedEntry<Value: Encodable>(_ value: Value, savedAt: Date, version: Int = 1) throws -> CachedEntry {
    CachedEntry(data: try JSONEncoder().encode(value), savedAt: savedAt, version: version)
}

/// The `Int` in `entry`, if it holds one.
func persistedInt(_ entry: CachedEntry?) -> Int? {
    entry.flatMap { try? JSONDecoder().decode(Int.self, from: $0.data) }
}

/// The errors a persistence reported, in order.
@MainActor
final class PersistenceErrorLog {
    private(set) var errors: [any Error] = []

    /// What `persist(onError:)` is given.
    var handler: @MainActor (any Error) -> Void { { [weak self] in self?.errors.append($0) } }

    /// Each error as "case key", e.g. "versionMismatch k"; "other" for one that is not a
    /// `LoadableCacheError`.
    var summaries: [String] { errors.map(Self.summary) }

    static func summary(_ error: any Error) -> String {
        guard let error = error as? LoadableCacheError else { return "other \(error)" }
        return "\(FileCacheFixtures.kind(of: error)) \(error.key ?? "-")"
    }
}

// MARK: - Types of these tests

/// Contents that cannot be encoded.
private struct Unencodable: Codable, Sendable, Equatable {
    var value: Int

    func encode(to encoder: any Encoder) throws {
        throw TestError("cannot encode")
    }
}

/// Contents with a date, for the encoder's and decoder's date strategies.
private struct Event: Codable, Sendable, Equatable {
    var name: String
    var at: Date
}

/// Holds a loadable for an observer that releases it.
@MainActor
private final class Holder {
    var loadable: PersistedLoadable<Int>?
    /// The contents each notification showed.
    var seen: [Int?] = []
}

/// The state a loadable is in when its restore lands.
enum StateAtRestore: String, CaseIterable, Sendable {
    case idle, syncing, failed

    var state: LoadableState {
        switch self {
        case .idle: .idle
        case .syncing: .syncing
        case .failed: .didFailToSync
        }
    }

    /// Puts `loadable` in this state.
    @MainActor
    func apply(to loadable: PersistedLoadable<Int>) {
        switch self {
        case .idle: break
        case .syncing: loadable.sync()
        case .failed:
            loadable.sync()
            loadable.setDidFailToSync(TestError("offline"))
        }
    }
}

/// A confirmation of the contents: what a restore must not go back from, and what is saved.
enum ContentsConfirmation: String, CaseIterable, Sendable {
    /// `setDidSyncSuccessfully(2)`.
    case syncWithContents
    /// A sync that ends with `setDidSyncSuccessfully()`, keeping the contents 1.
    case syncKeepingContents
    case setContents
    /// `updateContents { $0 += 1 }` on the contents 1.
    case updateContents

    /// Confirms the contents of `loadable`, which holds 1: afterwards it holds ``expected``.
    @MainActor
    func apply(to loadable: PersistedLoadable<Int>) {
        switch self {
        case .syncWithContents:
            loadable.sync()
            loadable.setDidSyncSuccessfully(2)
        case .syncKeepingContents:
            loadable.sync()
            loadable.setDidSyncSuccessfully()
        case .setContents: loadable.setContents(2)
        case .updateContents: loadable.updateContents { $0 += 1 }
        }
    }

    var expected: Int { self == .syncKeepingContents ? 1 : 2 }
}

/// A change that is not a change of the base contents: nothing is saved after it.
enum UnsavedChange: String, CaseIterable, Sendable {
    case failure, cancelSync, setSyncing, setIdle, invalidate

    @MainActor
    func apply(to loadable: PersistedLoadable<Int>) {
        switch self {
        case .failure:
            loadable.sync()
            loadable.setDidFailToSync(TestError("offline"))
        case .cancelSync:
            loadable.sync()
            loadable.cancelSync()
        case .setSyncing: loadable.setSyncing()
        case .setIdle:
            loadable.setSyncing()
            loadable.setIdle()
        case .invalidate: loadable.invalidate()
        }
    }
}

// MARK: - Restore

/// A restore sets the contents of an entry of the same version, young enough, without changing
/// the state, with one notification, and with the entry's real age; too old an entry is left
/// alone.
@Suite("Persistence: restore")
@MainActor
struct PersistenceRestoreTests {
    @Test(
        "a young entry of the same version sets the contents and the age, leaves the state, notifies once",
        arguments: StateAtRestore.allCases)
    func restores(state: StateAtRestore) async throws {
        let clock = ManualClock()
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(7, savedAt: wall.at(-30))])
        let loadable = PersistedLoadable<Int>(clock: clock)
        state.apply(to: loadable)
        let recorder = Recorder(loadable)
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function)
        #expect(loadable.contents == nil)
        await persistence.flush()

        #expect(loadable.contents == 7)
        #expect(loadable.loadableState == state.state)
        #expect(recorder.states == [state.state])
        if state == .failed {
            #expect((loadable.error as? TestError) == TestError("offline"))
        } else {
            #expect(loadable.error == nil)
        }
        #expect(loadable.doSyncCount == (state == .idle ? 0 : 1))
        #expect(loadable.age == .seconds(30))
        await clock.advance(by: .seconds(10))
        #expect(loadable.age == .seconds(40))
        // The restore itself is not saved.
        #expect(await cache.operations == [.load])
        #expect(await cache.keys == ["k"])
    }

    @Test(
        "with maxAge, the restored contents are stale when the entry is older than it (equal is stale)",
        arguments: zip([90.0, 60, 59, 30], [true, true, false, false]))
    func restoredContentsJudgedByMaxAge(savedSecondsAgo: Double, isStale: Bool) async throws {
        let wall = PersistenceWallClock()
        let cache = InMemoryLoadableCache(entries: ["k": try persistedEntry(7, savedAt: wall.at(-savedSecondsAgo))])
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        loadable.maxAge = .seconds(60)
        await loadable.persist(in: cache, key: "k", now: wall.function).flush()
        #expect(loadable.contents == 7)
        #expect(loadable.isStale == isStale)
        #expect(loadable.needsSync)  // idle: a restore never stands for a sync
    }

    @Test(
        "maxRestoreAge: an entry exactly that old is restored, one 1 ms older is not (no error, entry left)",
        arguments: zip([60.0, 60.001, 0], [60.0, 60, 0]))
    func maxRestoreAgeBoundary(savedSecondsAgo: Double, maxRestoreAgeSeconds: Double) async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(7, savedAt: wall.at(-savedSecondsAgo))])
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let recorder = Recorder(loadable)
        let log = PersistenceErrorLog()
        let persistence = loadable.persist(
            in: cache, key: "k", maxRestoreAge: .seconds(maxRestoreAgeSeconds), now: wall.function,
            onError: log.handler)
        await persistence.flush()
        let restores = savedSecondsAgo <= maxRestoreAgeSeconds
        #expect(loadable.contents == (restores ? 7 : nil))
        #expect(recorder.count == (restores ? 1 : 0))
        #expect(loadable.age == (restores ? .seconds(savedSecondsAgo) : nil))
        #expect(log.errors.isEmpty)
        #expect(await cache.operations == [.load])
        #expect(await cache.keys == ["k"])
        #expect(!persistence.isRestoring)
    }

    @Test("no maxRestoreAge: an entry of any age is restored")
    func noMaxRestoreAge() async throws {
        let wall = PersistenceWallClock()
        let tenYears: Double = 10 * 365 * 24 * 3600
        let cache = InMemoryLoadableCache(entries: ["k": try persistedEntry(7, savedAt: wall.at(-tenYears))])
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        await loadable.persist(in: cache, key: "k", now: wall.function).flush()
        #expect(loadable.contents == 7)
        #expect(loadable.age == .seconds(tenYears))
    }

    @Test(
        "an entry saved longer ago than Duration counts in nanoseconds has a large positive age, also later",
        arguments: [
            Date.distantPast, PersistenceWallClock.start - 1e10, PersistenceWallClock.start - 1e12,
        ])
    func restoredFromBeforeTheClockCounts(savedAt: Date) async throws {
        let clock = ManualClock()
        let wall = PersistenceWallClock()
        let cache = InMemoryLoadableCache(entries: ["k": try persistedEntry(7, savedAt: savedAt)])
        let loadable = PersistedLoadable<Int>(clock: clock)
        loadable.maxAge = .seconds(3600)
        await loadable.persist(in: cache, key: "k", now: wall.function).flush()
        #expect(loadable.contents == 7)
        let centuries = Duration.seconds(200 * 365 * 24 * 3600)
        let restoredAge = try #require(loadable.age)
        #expect(restoredAge > centuries)
        await clock.advance(by: .seconds(1))
        let laterAge = try #require(loadable.age)
        #expect(laterAge >= restoredAge, "the age went from \(restoredAge) to \(laterAge)")
        #expect(loadable.isStale)
    }

    @Test("an entry saved in the future (the wall clock went back) is restored with age zero")
    func savedInTheFuture() async throws {
        let wall = PersistenceWallClock()
        let cache = InMemoryLoadableCache(entries: ["k": try persistedEntry(7, savedAt: wall.at(100))])
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        loadable.maxAge = .seconds(60)
        await loadable.persist(in: cache, key: "k", maxRestoreAge: .seconds(1), now: wall.function).flush()
        #expect(loadable.contents == 7)
        #expect(loadable.age == .zero)
        #expect(!loadable.isStale)
    }

    @Test("no entry: nothing changes, no notification, no error")
    func noEntry() async {
        let cache = ScriptedPersistenceCache()
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let recorder = Recorder(loadable)
        let log = PersistenceErrorLog()
        let persistence = loadable.persist(
            in: cache, key: "k", now: PersistenceWallClock().function, onError: log.handler)
        await persistence.flush()
        #expect(loadable.contents == nil)
        #expect(loadable.age == nil)
        #expect(recorder.count == 0)
        #expect(log.errors.isEmpty)
        #expect(await cache.operations == [.load])
    }

    @Test("isRestoring is true until the restore finished, then false")
    func isRestoring() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(7, savedAt: wall.now)])
        await cache.hold(.load)
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function)
        #expect(persistence.isRestoring)
        try #require(await waitUntilHeld(cache))
        #expect(persistence.isRestoring)
        #expect(loadable.contents == nil)
        await cache.releaseAll()
        await persistence.flush()
        #expect(!persistence.isRestoring)
        #expect(loadable.contents == 7)
    }
}

// MARK: - Restore races

/// A restore never takes contents backwards and never holds anything up: it is dropped when the
/// contents were confirmed before it landed, or when it was stopped, or when the loadable is gone;
/// a failure or a sync meanwhile does not stop it.
@Suite("Persistence: a restore racing with changes")
@MainActor
struct PersistenceRestoreRaceTests {
    @Test(
        "a confirmation while the load is held wins: the restore is dropped, no extra notification",
        arguments: ContentsConfirmation.allCases)
    func confirmationWins(confirmation: ContentsConfirmation) async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(100, savedAt: wall.at(-5))])
        await cache.hold(.load)
        let loadable = PersistedLoadable<Int>(contents: 1, clock: ManualClock())
        let recorder = Recorder(loadable)
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function)
        try #require(await waitUntilHeld(cache))
        confirmation.apply(to: loadable)
        let notifications = recorder.count
        #expect(notifications >= 1)
        await cache.releaseAll()
        await persistence.flush()

        #expect(loadable.contents == confirmation.expected)
        #expect(recorder.count == notifications)
        #expect(loadable.age == .zero)  // confirmed now, not 5 s ago
        #expect(!persistence.isRestoring)
        // The confirmation was saved, after the restore read the entry.
        #expect(await cache.operations == [.load, .save])
        #expect(persistedInt(await cache.entry("k")) == confirmation.expected)
    }

    @Test("a failed sync while the load is held does not stop the restore; the state stays failed")
    func failureDoesNotStopRestore() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(100, savedAt: wall.at(-5))])
        await cache.hold(.load)
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let recorder = Recorder(loadable)
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function)
        try #require(await waitUntilHeld(cache))
        loadable.sync()
        loadable.setDidFailToSync(TestError("offline"))
        await cache.releaseAll()
        await persistence.flush()

        #expect(loadable.contents == 100)
        #expect(loadable.loadableState == .didFailToSync)
        #expect((loadable.error as? TestError) == TestError("offline"))
        #expect(recorder.states == [.syncing, .didFailToSync, .didFailToSync])
        #expect(loadable.age == .seconds(5))
        #expect(await cache.operations == [.load])  // nothing saved
    }

    @Test("a sync asked for during the restore starts at once; the restore lands while it runs")
    func syncStartsAtOnce() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(100, savedAt: wall.at(-5))])
        await cache.hold(.load)
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let recorder = Recorder(loadable)
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function)
        try #require(await waitUntilHeld(cache))
        loadable.syncIfNeeded()
        #expect(loadable.doSyncCount == 1)
        #expect(loadable.loadableState == .syncing)
        #expect(await cache.heldCalls.map(\.operation) == [.load])  // the load is still held
        await cache.releaseAll()
        await persistence.flush()

        #expect(loadable.contents == 100)
        #expect(loadable.loadableState == .syncing)
        #expect(recorder.states == [.syncing, .syncing])
        #expect(loadable.doSyncCount == 1)
        loadable.setDidSyncSuccessfully(3)
        await persistence.flush()
        #expect(persistedInt(await cache.entry("k")) == 3)
    }

    @Test("a restore still held when stop() is called is dropped; later changes are not saved")
    func stopDropsRestore() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(100, savedAt: wall.now)])
        await cache.hold(.load)
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let recorder = Recorder(loadable)
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function)
        try #require(await waitUntilHeld(cache))
        persistence.stop()
        #expect(persistence.isStopped)
        await cache.releaseAll()
        await persistence.flush()

        #expect(loadable.contents == nil)
        #expect(recorder.count == 0)
        #expect(!persistence.isRestoring)
        loadable.setContents(5)
        await persistence.flush()
        #expect(await cache.operations == [.load])
        #expect(persistedInt(await cache.entry("k")) == 100)
    }

    @Test("a loadable released before its restore lands: nothing happens, nothing leaks")
    func releasedBeforeRestoreLands() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(100, savedAt: wall.now)])
        await cache.hold(.load)
        var loadable: PersistedLoadable<Int>? = PersistedLoadable(clock: ManualClock())
        weak let weakLoadable = loadable
        var handle = loadable?.persist(in: cache, key: "k", now: wall.function)
        weak let weakPersistence = handle
        try #require(await waitUntilHeld(cache))
        loadable = nil
        #expect(weakLoadable == nil)  // the persistence holds its loadable weakly
        await cache.releaseAll()
        await handle?.flush()
        #expect(handle?.isRestoring == false)
        handle = nil
        #expect(weakPersistence == nil)
        #expect(await cache.operations == [.load])
        #expect(await cache.keys == ["k"])
    }

    @Test("the loadable owns its persistence: both go at the loadable's release, before the restore lands")
    func persistenceGoesWithLoadable() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(100, savedAt: wall.now)])
        await cache.hold(.load)
        var loadable: PersistedLoadable<Int>? = PersistedLoadable(clock: ManualClock())
        weak let weakLoadable = loadable
        weak let weakPersistence = loadable?.persist(in: cache, key: "k", now: wall.function)
        #expect(weakPersistence != nil)  // alive while the loadable is
        try #require(await waitUntilHeld(cache))
        loadable = nil
        #expect(weakLoadable == nil)
        #expect(weakPersistence == nil)
        await cache.releaseAll()
        // Another loadable's restore of the same cache runs after the dropped one.
        let next = PersistedLoadable<Int>(clock: ManualClock())
        await next.persist(in: cache, key: "k", now: wall.function).flush()
        #expect(next.contents == 100)
        #expect(await cache.operations == [.load, .load])
    }

    @Test("a restore onto a loadable that was persisted, restored and persisted again is dropped")
    func secondRestoreOfSameLoadableIsDropped() async throws {
        let wall = PersistenceWallClock()
        let cache = InMemoryLoadableCache(entries: [
            "a": try persistedEntry(1, savedAt: wall.now), "b": try persistedEntry(2, savedAt: wall.now),
        ])
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let recorder = Recorder(loadable)
        await loadable.persist(in: cache, key: "a", now: wall.function).flush()
        #expect(loadable.contents == 1)
        await loadable.persist(in: cache, key: "b", now: wall.function).flush()
        #expect(loadable.contents == 1)
        #expect(recorder.count == 1)
    }
}

// MARK: - Save

/// Every change of the base contents is saved, with `savedAt` the wall-clock time of the change
/// and the given version, through the given encoder; nothing else is.
@Suite("Persistence: save")
@MainActor
struct PersistenceSaveTests {
    @Test(
        "a change of the contents is saved, with savedAt the time of the change and the version",
        arguments: ContentsConfirmation.allCases)
    func changeIsSaved(confirmation: ContentsConfirmation) async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache()
        let loadable = PersistedLoadable<Int>(contents: 1, clock: ManualClock())
        let persistence = loadable.persist(in: cache, key: "k", version: 3, now: wall.function)
        await persistence.flush()
        #expect(await cache.operations == [.load])
        wall.advance(by: 10)
        confirmation.apply(to: loadable)
        wall.advance(by: 60)  // the write runs later: savedAt is still the time of the change
        await persistence.flush()

        #expect(await cache.operations == [.load, .save])
        let entry = try #require(await cache.entry("k"))
        #expect(persistedInt(entry) == confirmation.expected)
        #expect(entry.savedAt == wall.at(10))
        #expect(entry.version == 3)
    }

    @Test(
        "no save after a failure, a cancel, setSyncing, setIdle or an invalidation", arguments: UnsavedChange.allCases)
    func notSaved(change: UnsavedChange) async {
        let cache = ScriptedPersistenceCache()
        let loadable = PersistedLoadable<Int>(contents: 1, clock: ManualClock())
        let persistence = loadable.persist(in: cache, key: "k", now: PersistenceWallClock().function)
        change.apply(to: loadable)
        await persistence.flush()
        #expect(await cache.operations == [.load])
        #expect(await cache.completedSaveCount == 0)
        // The persistence still saves the next change.
        loadable.setContents(2)
        await persistence.flush()
        #expect(await cache.completedSaveCount == 1)
    }

    @Test("a next page of a PagedLoadable is not saved: paging is not a confirmation; the next refresh saves")
    func nextPageIsNotSaved() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache()
        let list = PagedLoadable<Int, Int>(clock: ManualClock()) { cursor in
            cursor == nil ? .init(items: [1, 2], nextCursor: 3) : .init(items: [3], nextCursor: nil)
        }
        let persistence = list.persist(in: cache, key: "k", now: wall.function)
        list.sync()
        try await list.doneSyncing()
        await persistence.flush()
        #expect(await cache.operations == [.load, .save])
        wall.advance(by: 60)
        list.loadNextPage()
        try await list.doneLoadingNextPage()
        #expect(list.contents == [1, 2, 3])
        await persistence.flush()
        #expect(await cache.operations == [.load, .save])
        let entry = try #require(await cache.entry("k"))
        #expect(try JSONDecoder().decode([Int].self, from: entry.data) == [1, 2])
        #expect(entry.savedAt == wall.at(0))
    }

    @Test("the restored contents are not saved; a later setDidSyncSuccessfully() saves them")
    func restoreIsUnsavedChange() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(7, savedAt: wall.at(-100))])
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function)
        await persistence.flush()
        #expect(loadable.contents == 7)
        #expect(await cache.operations == [.load])
        loadable.sync()
        loadable.setDidSyncSuccessfully()
        await persistence.flush()
        #expect(await cache.operations == [.load, .save])
        #expect(await cache.entry("k")?.savedAt == wall.now)
    }

    @Test("the encoder and the decoder given are the ones used (a date strategy)")
    func encoderAndDecoder() async throws {
        let wall = PersistenceWallClock()
        let cache = InMemoryLoadableCache()
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        let event = Event(name: "launch", at: Date(timeIntervalSince1970: 0))

        let writer = PersistedLoadable<Event>(clock: ManualClock())
        let persistence = writer.persist(in: cache, key: "event", encoder: encoder, now: wall.function)
        writer.setContents(event)
        await persistence.flush()
        let entry = try #require(await cache.load(key: "event"))
        #expect(String(decoding: entry.data, as: UTF8.self).contains("\"1970-01-01T00:00:00Z\""))

        let reader = PersistedLoadable<Event>(clock: ManualClock())
        await reader.persist(in: cache, key: "event", decoder: decoder, now: wall.function).flush()
        #expect(reader.contents == event)

        // The default decoder reads dates as numbers: that entry is not for it.
        await cache.save(entry, key: "event")
        let log = PersistenceErrorLog()
        let other = PersistedLoadable<Event>(clock: ManualClock())
        await other.persist(in: cache, key: "event", now: wall.function, onError: log.handler).flush()
        #expect(other.contents == nil)
        #expect(log.summaries == ["decodingFailed event"])
    }
}

// MARK: - Through a file cache

/// The same save and restore through a `FileLoadableCache`: what one loadable saved, a loadable
/// made later (the next launch) restores, with its age.
@Suite("Persistence: through a FileLoadableCache")
@MainActor
struct PersistenceFileCacheTests {
    @Test("a loadable's saved contents are restored by the next one, with the entry's age")
    func roundTrip() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("persistence-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let wall = PersistenceWallClock()
        let cache = FileLoadableCache(directory: directory)
        let writer = PersistedLoadable<[String]>(clock: ManualClock())
        let persistence = writer.persist(in: cache, key: "hello", now: wall.function)
        writer.sync()
        writer.setDidSyncSuccessfully(["a", "b"])
        await persistence.flush()
        let files = try FileManager.default.contentsOfDirectory(atPath: cache.entriesDirectory.path)
        #expect(files == [FileLoadableCache.fileName(forKey: "hello")])

        wall.advance(by: 30)
        let reader = PersistedLoadable<[String]>(clock: ManualClock())
        let recorder = Recorder(reader)
        await reader.persist(in: cache, key: "hello", now: wall.function).flush()
        #expect(reader.contents == ["a", "b"])
        #expect(reader.loadableState == .idle)
        #expect(reader.age == .seconds(30))
        #expect(recorder.count == 1)
    }
}

// MARK: - Ordering

/// The jobs of one cache run one at a time in the order asked for: a save waiting for its turn is
/// replaced by a newer one, a restore reads the last save asked for before it, and two caches do
/// not wait for each other.
@Suite("Persistence: order of the cache's work")
@MainActor
struct PersistenceOrderTests {
    @Test("saves asked for while one is held are coalesced: the cache sees the first and the last")
    func savesCoalesce() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache()
        await cache.hold(.save)
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function)
        loadable.setContents(1)
        try #require(await waitUntilHeld(cache))
        wall.advance(by: 1)
        loadable.setContents(2)
        wall.advance(by: 1)
        loadable.setContents(3)
        await cache.releaseAll()
        await persistence.flush()

        #expect(await cache.savedInts("k") == [1, 3])
        #expect(await cache.completedSaveCount == 2)
        let entry = try #require(await cache.entry("k"))
        #expect(persistedInt(entry) == 3)
        #expect(entry.savedAt == wall.at(2))
        #expect(loadable.contents == 3)
    }

    @Test("a restore of the key queued between two saves keeps them apart and reads the first")
    func restoreBetweenSavesIsNotCoalescedOver() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache()
        await cache.hold(.save)
        let writer = PersistedLoadable<Int>(clock: ManualClock())
        let persistence = writer.persist(in: cache, key: "k", now: wall.function)
        writer.setContents(1)
        try #require(await waitUntilHeld(cache))
        writer.setContents(2)
        let reader = PersistedLoadable<Int>(clock: ManualClock())
        reader.persist(in: cache, key: "k", now: wall.function)
        writer.setContents(3)
        await cache.releaseAll()
        await persistence.flush()

        #expect(await cache.savedInts("k") == [1, 2, 3])
        #expect(await cache.operations == [.load, .save, .save, .load, .save])
        #expect(reader.contents == 2)
        #expect(persistedInt(await cache.entry("k")) == 3)
    }

    @Test("a restore asked for while a save of the key is held reads the saved value (read-your-writes)")
    func readYourWrites() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache()
        await cache.hold(.save)
        let writer = PersistedLoadable<Int>(clock: ManualClock())
        let persistence = writer.persist(in: cache, key: "k", now: wall.function)
        writer.setContents(7)
        try #require(await waitUntilHeld(cache))
        let reader = PersistedLoadable<Int>(clock: ManualClock())
        let readerPersistence = reader.persist(in: cache, key: "k", now: wall.function)
        // The reader's load waits behind the held save.
        await letCacheRun(cache)
        #expect(await cache.operations == [.load, .save])
        #expect(readerPersistence.isRestoring)
        await cache.releaseAll()
        await persistence.flush()
        #expect(reader.contents == 7)
        #expect(await cache.operations == [.load, .save, .load])
    }

    @Test("two caches are independent: a held save in one does not hold up the other")
    func cachesAreIndependent() async throws {
        let wall = PersistenceWallClock()
        let slow = ScriptedPersistenceCache()
        let fast = ScriptedPersistenceCache()
        await slow.hold(.save)
        let first = PersistedLoadable<Int>(clock: ManualClock())
        let second = PersistedLoadable<Int>(clock: ManualClock())
        let slowPersistence = first.persist(in: slow, key: "k", now: wall.function)
        let fastPersistence = second.persist(in: fast, key: "k", now: wall.function)
        first.setContents(1)
        try #require(await waitUntilHeld(slow))
        second.setContents(2)
        await fastPersistence.flush()
        #expect(persistedInt(await fast.entry("k")) == 2)
        #expect(await slow.entry("k") == nil)
        await slow.releaseAll()
        await slowPersistence.flush()
        #expect(persistedInt(await slow.entry("k")) == 1)
        #expect(persistedInt(await fast.entry("k")) == 2)
    }
}

// MARK: - Bad input and failures

/// An entry that cannot be used is removed and reported once, naming the key; a save that fails
/// is reported once per failure; the loadable's state never changes because of either, and it
/// keeps working.
@Suite("Persistence: errors")
@MainActor
struct PersistenceErrorTests {
    @Test("an entry of another version is removed and reported once; the loadable keeps working")
    func versionMismatch() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(7, savedAt: wall.now, version: 1)])
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let recorder = Recorder(loadable)
        let log = PersistenceErrorLog()
        let persistence = loadable.persist(
            in: cache, key: "k", version: 2, now: wall.function, onError: log.handler)
        await persistence.flush()

        #expect(log.summaries == ["versionMismatch k"])
        let error = try #require(log.errors.first as? LoadableCacheError)
        guard case .versionMismatch(let key, let found, let expected) = error else {
            Issue.record("\(error)")
            return
        }
        #expect(key == "k")
        #expect(found == 1)
        #expect(expected == 2)
        #expect(error.description.contains("\"k\""))
        #expect(await cache.keys.isEmpty)
        #expect(await cache.operations == [.load, .remove])
        #expect(loadable.contents == nil)
        #expect(loadable.loadableState == .idle)
        #expect(recorder.count == 0)

        loadable.sync()
        loadable.setDidSyncSuccessfully(8)
        await persistence.flush()
        let entry = try #require(await cache.entry("k"))
        #expect(persistedInt(entry) == 8)
        #expect(entry.version == 2)
        #expect(log.errors.count == 1)
    }

    @Test("an entry that is not JSON of the contents is removed and reported as decodingFailed")
    func undecodable() async {
        let wall = PersistenceWallClock()
        let garbage = CachedEntry(data: Data("not json".utf8), savedAt: wall.now, version: 1)
        let cache = ScriptedPersistenceCache(entries: ["k": garbage])
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let recorder = Recorder(loadable)
        let log = PersistenceErrorLog()
        await loadable.persist(in: cache, key: "k", now: wall.function, onError: log.handler).flush()
        #expect(log.summaries == ["decodingFailed k"])
        #expect(await cache.keys.isEmpty)
        #expect(loadable.contents == nil)
        #expect(loadable.loadableState == .idle)
        #expect(recorder.count == 0)
    }

    @Test("a load that throws: the entry is removed, reported as loadFailed, or as the LoadableCacheError thrown")
    func loadThrows() async throws {
        let wall = PersistenceWallClock()
        for (thrown, summary) in [
            (TestError("disk") as any Error, "loadFailed k"),
            (LoadableCacheError.corrupt(key: "k", reason: "cut short") as any Error, "corrupt k"),
        ] {
            let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(7, savedAt: wall.now)])
            await cache.fail(.load, with: thrown)
            let loadable = PersistedLoadable<Int>(clock: ManualClock())
            loadable.sync()
            let log = PersistenceErrorLog()
            await loadable.persist(in: cache, key: "k", now: wall.function, onError: log.handler).flush()
            #expect(log.summaries == [summary])
            if case .loadFailed(_, let underlying) = log.errors.first as? LoadableCacheError {
                #expect((underlying as? TestError) == TestError("disk"))
            }
            #expect(await cache.operations == [.load, .remove])
            #expect(await cache.keys.isEmpty)
            #expect(loadable.loadableState == .syncing)
            #expect(loadable.contents == nil)
        }
    }

    @Test("a save that throws is reported once per failing save; the previous entry and the state stay")
    func saveThrows() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(7, savedAt: wall.now)])
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let log = PersistenceErrorLog()
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function, onError: log.handler)
        await persistence.flush()
        await cache.fail(.save, with: TestError("disk full"))
        loadable.sync()
        loadable.setDidSyncSuccessfully(1)
        await persistence.flush()
        #expect(log.summaries == ["saveFailed k"])
        loadable.setContents(2)
        await persistence.flush()
        #expect(log.summaries == ["saveFailed k", "saveFailed k"])
        if case .saveFailed(_, let underlying) = log.errors.first as? LoadableCacheError {
            #expect((underlying as? TestError) == TestError("disk full"))
        } else {
            Issue.record("not saveFailed: \(log.summaries)")
        }
        #expect(loadable.loadableState == .didSyncSuccessfully)
        #expect(loadable.error == nil)
        #expect(loadable.contents == 2)
        #expect(persistedInt(await cache.entry("k")) == 7)

        await cache.fail(.save, with: nil)
        loadable.setContents(3)
        await persistence.flush()
        #expect(persistedInt(await cache.entry("k")) == 3)
        #expect(log.errors.count == 2)
    }

    @Test("contents that cannot be encoded: encodingFailed, nothing saved, the state stays")
    func encodingThrows() async {
        let cache = ScriptedPersistenceCache()
        let loadable = PersistedLoadable<Unencodable>(clock: ManualClock())
        let log = PersistenceErrorLog()
        let persistence = loadable.persist(
            in: cache, key: "k", now: PersistenceWallClock().function, onError: log.handler)
        loadable.sync()
        loadable.setDidSyncSuccessfully(Unencodable(value: 1))
        await persistence.flush()
        #expect(log.summaries == ["encodingFailed k"])
        #expect(await cache.operations == [.load])
        #expect(loadable.loadableState == .didSyncSuccessfully)
        #expect(loadable.contents == Unencodable(value: 1))
    }

    @Test("onError can be set on the handle after persist")
    func onErrorSetLater() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(7, savedAt: wall.now, version: 5)])
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function)
        #expect(persistence.onError == nil)
        let log = PersistenceErrorLog()
        persistence.onError = log.handler
        await persistence.flush()
        #expect(log.summaries == ["versionMismatch k"])
    }

    @Test("persist twice: the first stops, the second saves")
    func persistTwice() async {
        let cache = ScriptedPersistenceCache()
        let wall = PersistenceWallClock()
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let first = loadable.persist(in: cache, key: "first", now: wall.function)
        let second = loadable.persist(in: cache, key: "second", now: wall.function)
        #expect(first.isStopped)
        #expect(!second.isStopped)
        #expect(first.key == "first")
        #expect(second.key == "second")
        #expect(second.cache === cache)
        loadable.setContents(4)
        await second.flush()
        #expect(await cache.keys == ["second"])
        #expect(await cache.savedInts("second") == [4])
        #expect(await cache.savedInts("first").isEmpty)
    }
}

// MARK: - Releases during the work

/// A loadable released by an observer of its restore, or on another thread with a save pending,
/// goes without a crash; the save still lands.
@Suite("Persistence: releases during the work")
@MainActor
struct PersistenceReleaseTests {
    @Test("an observer that releases the loadable on the restore's notification")
    func releasedByRestoreObserver() async throws {
        let wall = PersistenceWallClock()
        let cache = InMemoryLoadableCache(entries: ["k": try persistedEntry(7, savedAt: wall.now)])
        let holder = Holder()
        holder.loadable = PersistedLoadable(clock: ManualClock())
        weak let weakLoadable = holder.loadable
        let observation = holder.loadable?.addObserver { [weak holder] loadable in
            holder?.seen.append((loadable as? PersistedLoadable<Int>)?.contents)
            holder?.loadable = nil
        }
        let persistence = try #require(holder.loadable?.persist(in: cache, key: "k", now: wall.function))
        #expect(weakLoadable != nil)
        await persistence.flush()
        #expect(holder.seen == [7])
        #expect(weakLoadable == nil)
        #expect(observation?.isActive == false)
    }

    @Test("a loadable released on another thread with a save held: the save still lands")
    func releasedOnAnotherThreadWithPendingSave() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache()
        await cache.hold(.save)
        let box = Locked<PersistedLoadable<Int>?>(PersistedLoadable(clock: ManualClock()))
        weak let weakLoadable = box.withLock { $0 }
        let persistence = try #require(box.withLock { $0?.persist(in: cache, key: "k", now: wall.function) })
        box.withLock { $0?.setContents(1) }
        try #require(await waitUntilHeld(cache))
        box.withLock { $0?.setContents(2) }  // waiting behind the held save
        releaseOnAnotherThread(box)
        #expect(weakLoadable == nil)
        await cache.releaseAll()
        await persistence.flush()
        #expect(await cache.savedInts("k") == [1, 2])
        #expect(persistedInt(await cache.entry("k")) == 2)
    }
}
