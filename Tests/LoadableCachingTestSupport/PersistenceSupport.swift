package import Foundation
package import Loadable
package import LoadableCaching
import LoadableSupport
import LoadableTestSupport

// MARK: - Helpers shared by the persistence tests of the caching and SQLite targets

/// A loadable whose syncs the test finishes by hand; counts `doSync()` (one per sync started).
package final class PersistedLoadable<Contents>: Loadable<Contents> {
    package private(set) var doSyncCount = 0

    override package func doSync() {
        doSyncCount += 1
    }
}

/// The wall-clock time a test gives a persistence as `now`: fixed until the test moves it.
package final class PersistenceWallClock: Sendable {
    /// The first instant of every test: a round number of seconds, so that ages are exact.
    package static let start = Date(timeIntervalSinceReferenceDate: 700_000_000)

    /// A clock at ``start``.
    package init() {}

    private let date = Locked(PersistenceWallClock.start)

    /// The time now.
    package var now: Date { date.withLock { $0 } }

    /// What `persist(now:)` is given.
    package var function: @Sendable () -> Date { { self.now } }

    /// The time `seconds` from the start (negative: before it).
    package func at(_ seconds: TimeInterval) -> Date { Self.start.addingTimeInterval(seconds) }

    /// Moves the time by `seconds`.
    package func advance(by seconds: TimeInterval) {
        date.withLock { $0 += seconds }
    }
}
/// An entry holding `value` encoded as JSON.
package func persistedEntry<Value: Encodable>(_ value: Value, savedAt: Date, version: Int = 1) throws -> CachedEntry {
    CachedEntry(data: try JSONEncoder().encode(value), savedAt: savedAt, version: version)
}

/// The `Int` in `entry`, if it holds one.
package func persistedInt(_ entry: CachedEntry?) -> Int? {
    entry.flatMap { try? JSONDecoder().decode(Int.self, from: $0.data) }
}

/// The errors a persistence reported, in order.
@MainActor
package final class PersistenceErrorLog {
    package private(set) var errors: [any Error] = []

    /// An empty log.
    package init() {}

    /// What `persist(onError:)` is given.
    package var handler: @MainActor (any Error) -> Void { { [weak self] in self?.errors.append($0) } }

    /// Each error as "case key", e.g. "versionMismatch k"; "other" for one that is not a
    /// `LoadableCacheError`.
    package var summaries: [String] { errors.map(Self.summary) }

    package static func summary(_ error: any Error) -> String {
        guard let error = error as? LoadableCacheError else { return "other \(error)" }
        return "\(FileCacheFixtures.kind(of: error)) \(error.key ?? "-")"
    }
}
