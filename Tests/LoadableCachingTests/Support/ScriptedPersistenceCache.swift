import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSupport
import LoadableTestSupport
import LoadableTesting
import Testing

// MARK: - A scripted cache, for the persistence, store and outbox tests

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
