import Foundation
import Loadable
import LoadableCaching
import LoadableSupport
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
        case load, save, touch, remove, removeAll
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

    func touch(key: String, savedAt: Date, metadata: [String: String]) async throws -> Bool {
        try await arrive(Call(operation: .touch, key: key))
        guard entries[key] != nil else { return false }
        entries[key]?.savedAt = savedAt
        entries[key]?.metadata = metadata
        return true
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
struct Unencodable: Codable, Sendable, Equatable {
    var value: Int

    func encode(to encoder: any Encoder) throws {
        throw TestError("cannot encode")
    }
}

/// Contents with a date, for the encoder's and decoder's date strategies.
struct Event: Codable, Sendable, Equatable {
    var name: String
    var at: Date
}

/// Holds a loadable for an observer that releases it.
@MainActor
final class Holder {
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
