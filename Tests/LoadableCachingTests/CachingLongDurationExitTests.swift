import Foundation
import LoadableCaching
import LoadableTestSupport
import Testing

/// Every duration of the caching module up to `.seconds(Int64.max)` ("practically never") is
/// accepted on the real clock: a store's retention, a persistence's `maxRestoreAge`, and the age
/// of an entry saved longer ago than `Duration` can count.
///
/// Each test runs in a child process on a `ContinuousClock`, gives the timer tasks turns until
/// their sleeps have started, and ends cleanly. Nothing waits for real time.
@Suite("Caching durations of centuries never trap on the real clock")
struct CachingLongDurationExitTests {
    @Test("a store with a retention of .seconds(Int64.max) retains a released entry without trapping")
    func storeRetention() async {
        await #expect(processExitsWith: .success) {
            await CachingLongDurationExitTests.retainForCenturies()
        }
    }

    @Test("maxRestoreAge .seconds(Int64.max) restores an entry from Date.distantPast, stale by maxAge")
    func maxRestoreAge() async {
        await #expect(processExitsWith: .success) {
            await CachingLongDurationExitTests.restoreFromDistantPast()
        }
    }

    @MainActor
    static func retainForCenturies() async {
        let store = LoadableStore<Int, IdleLoadable>(retention: .seconds(Int64.max)) { _ in IdleLoadable() }
        let lease = store.lease(1)
        lease.release()
        await letTimersStartSleeping()
        #expect(store.count == 1)
    }

    @MainActor
    static func restoreFromDistantPast() async {
        let entry = CachedEntry(data: Data("7".utf8), savedAt: .distantPast, version: 1)
        let cache = InMemoryLoadableCache(entries: ["k": entry])
        let loadable = IdleLoadable()
        loadable.maxAge = .seconds(Int64.max)
        await observing(loadable, { _ in }) {
            await loadable.persist(in: cache, key: "k", maxRestoreAge: .seconds(Int64.max)).saved()
            await letTimersStartSleeping()
            #expect(loadable.contents == 7)
            #expect(loadable.age.map { $0 > .seconds(100 * 365 * 24 * 3600) } == true)
        }
    }
}

/// A loadable whose sync never ends.
private final class IdleLoadable: Loadable<Int> {
    override func doSync() {}
}

/// Gives the main actor and the global executor turns, so that a timer task armed before starts
/// its sleep.
@MainActor
private func letTimersStartSleeping() async {
    for _ in 0..<50 {
        await Task.yield()
        await Task.detached {}.value
    }
}
