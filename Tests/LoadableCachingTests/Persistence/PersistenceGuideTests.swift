import Foundation
import LoadableCaching
import LoadableSQLite
import LoadableTestSupport
import LoadableTesting
import Testing

// Every sample of Docs/Persistence.md, verbatim (`GuideSamplesTests` checks it), compiled and run.

// MARK: - Guide types

struct Profile: Codable, Sendable, Equatable {
    var name: String
    var followers: Int
}

final class ProfileLoadable: Loadable<Profile> {
    private let fetch: @MainActor () async throws -> Profile
    init(clock: any Clock<Duration> = ContinuousClock(), fetch: @escaping @MainActor () async throws -> Profile) {
        self.fetch = fetch
        super.init(clock: clock)
    }
    override func doSync() {
        Task {
            do { setDidSyncSuccessfully(try await fetch()) } catch { setDidFailToSync(error) }
        }
    }
}

@MainActor
func makeProfile(cache: any LoadableCache, fetch: @escaping @MainActor () async throws -> Profile) -> ProfileLoadable {
    let profile = ProfileLoadable(fetch: fetch)
    profile.persist(in: cache, key: "profile", maxRestoreAge: .seconds(30 * 24 * 3600))
    profile.syncIfNeeded()  // starts at once: the restore does not hold it up
    return profile
}

@MainActor
func makeProfileStore(
    cache: any LoadableCache, fetch: @escaping @MainActor (Int) async throws -> Profile
) -> LoadableStore<Int, ProfileLoadable> {
    LoadableStore(cache: cache, cacheKey: { "profile-\($0)" }) { id in
        ProfileLoadable { try await fetch(id) }
    }
}

@MainActor
func logOut(_ profiles: LoadableStore<Int, ProfileLoadable>) async {
    profiles.removeAll()  // drops every entry and clears the cache
    await profiles.saved()  // nothing of this user is left on disk from here on
}

@MainActor
func openProfile(
    cache: any LoadableCache, fetch: @escaping @MainActor () async throws -> Profile
) async -> ProfileLoadable {
    let profile = ProfileLoadable(fetch: fetch)
    await profile.persist(in: cache, key: "profile").restored()
    profile.syncIfNeeded()  // the restored profile shows while this runs
    return profile
}

@MainActor
func makeAccountStores(
    cache: any LoadableCache, fetch: @escaping @MainActor (Int) async throws -> Profile
) -> (profiles: LoadableStore<Int, ProfileLoadable>, friends: LoadableStore<Int, ProfileLoadable>) {
    let profiles = LoadableStore(cache: cache.scoped("profiles/"), cacheKey: { "\($0)" }) { id in
        ProfileLoadable { try await fetch(id) }
    }
    let friends = LoadableStore(cache: cache.scoped("friends/"), cacheKey: { "\($0)" }) { id in
        ProfileLoadable { try await fetch(id) }
    }
    return (profiles, friends)
}

@MainActor
func makeFeedCache(in caches: URL) -> FileLoadableCache {
    FileLoadableCache(directory: caches.appendingPathComponent("loadables"), maxBytes: 50 * 1_024 * 1_024)
}

@MainActor
func makeLargeCache(in caches: URL) throws -> SQLiteLoadableCache {
    try SQLiteLoadableCache(path: caches.appendingPathComponent("loadables.sqlite"), maxBytes: 200 * 1_024 * 1_024)
}

/// Moves the entries of an earlier release's file cache into the SQLite cache, then deletes the
/// folder. An entry that does not read is left behind: it is a cache, the next sync fetches it.
func moveEntries(from files: FileLoadableCache, to database: SQLiteLoadableCache) async throws {
    for key in try await files.keys() {
        guard let entry = try? await files.load(key: key) else { continue }
        try await database.save(entry, key: key)
    }
    try FileManager.default.removeItem(at: files.directory)
}

@MainActor
func openCache(in caches: URL) async throws -> SQLiteLoadableCache {
    let database = try makeLargeCache(in: caches)
    let folder = caches.appendingPathComponent("loadables")
    if FileManager.default.fileExists(atPath: folder.path) {
        try await moveEntries(from: FileLoadableCache(directory: folder), to: database)
    }
    return database
}

/// A `fetch` the test answers by hand.
@MainActor
private final class HeldFetch {
    private var waiting: [CheckedContinuation<Profile, any Error>] = []
    var count: Int { waiting.count }

    func fetch() async throws -> Profile {
        try await withCheckedThrowingContinuation { waiting.append($0) }
    }

    func answer(_ profile: Profile) {
        waiting.removeFirst().resume(returning: profile)
    }
}

private let savedAt = Date(timeIntervalSinceReferenceDate: 800_000_000)

private func entry(_ profile: Profile, savedAt date: Date = savedAt, version: Int = 1) throws -> CachedEntry {
    CachedEntry(data: try JSONEncoder().encode(profile), savedAt: date, version: version)
}

@Suite("Docs/Persistence.md samples")
@MainActor
struct PersistenceGuideTests {
    @Test("persisting one loadable: the sync starts at once, the restore shows meanwhile, the result is saved")
    func persistingOneLoadable() async throws {
        // `makeProfile` reads the system's date and restores up to 30 days: an entry of an hour ago.
        let lastLaunch = try entry(Profile(name: "Ada", followers: 1), savedAt: Date().addingTimeInterval(-3600))
        let cache = InMemoryLoadableCache(entries: ["profile": lastLaunch])
        let held = HeldFetch()
        let profile = makeProfile(cache: cache) { try await held.fetch() }
        #expect(profile.loadableState == .syncing)
        #expect(profile.contents == nil)
        #expect(await settle { profile.contents != nil })
        #expect(profile.contents == Profile(name: "Ada", followers: 1))
        #expect(profile.loadableState == .syncing)
        #expect(await settle { held.count == 1 })
        held.answer(Profile(name: "Ada", followers: 5))
        #expect(await settle { profile.loadableState == .didSyncSuccessfully })
        // `makeProfile` kept no handle: a store-free way to wait is to ask the cache itself, which
        // runs its jobs in order, after the save.
        let probe = ProfileLoadable { Profile(name: "", followers: 0) }
        await probe.persist(in: cache, key: "probe").saved()
        let saved = try #require(await cache.load(key: "profile"))
        #expect(try JSONDecoder().decode(Profile.self, from: saved.data) == Profile(name: "Ada", followers: 5))
    }

    // "How age works after a restore".
    @Test @MainActor func aRestoredProfileIsAsOldAsItsEntry() async throws {
        let savedAt = Date(timeIntervalSinceReferenceDate: 800_000_000)
        let old = try JSONEncoder().encode(Profile(name: "Ada", followers: 1))
        let cache = InMemoryLoadableCache(entries: ["profile": CachedEntry(data: old, savedAt: savedAt, version: 1)])
        let clock = ManualClock()
        let profile = ProfileLoadable(clock: clock) { Profile(name: "Ada", followers: 1) }
        profile.maxAge = .seconds(60)
        // `now` is the wall clock: the system's by default, a fixed date in a test.
        let persistence = profile.persist(in: cache, key: "profile", now: { savedAt.addingTimeInterval(45) })
        await persistence.saved()
        #expect(profile.age == .seconds(45))
        #expect(!profile.isStale)
        await clock.advance(by: .seconds(15))
        #expect(profile.age == .seconds(60))
        #expect(profile.isStale)
    }

    @Test("with a store: entries restore from cacheKey(key), and logOut leaves nothing in the cache")
    func withAStore() async throws {
        let cache = InMemoryLoadableCache(entries: ["profile-7": try entry(Profile(name: "Grace", followers: 3))])
        let profiles = makeProfileStore(cache: cache) { id in Profile(name: "user \(id)", followers: id) }
        let seven = profiles.lease(7)
        await profiles.saved()
        #expect(seven.contents == Profile(name: "Grace", followers: 3))
        let eight = profiles.lease(8)
        try await eight.synced()
        await profiles.saved()
        #expect(await cache.keys == ["profile-7", "profile-8"])

        await logOut(profiles)
        #expect(await cache.keys.isEmpty)
        #expect(profiles.count == 0)
        // A lease kept past the logout no longer saves.
        seven.loadable.setContents(Profile(name: "Grace", followers: 4))
        await profiles.saved()
        #expect(await cache.keys.isEmpty)
    }

    @Test("waiting for the restore: the first frame shows the restored profile, with the sync running")
    func openProfileShowsTheRestoreFirst() async throws {
        let cache = InMemoryLoadableCache(entries: ["profile": try entry(Profile(name: "Ada", followers: 1))])
        let held = HeldFetch()
        let profile = await openProfile(cache: cache) { try await held.fetch() }
        #expect(profile.contents == Profile(name: "Ada", followers: 1))
        #expect(profile.loadableState == .syncing)
        #expect(await settle { held.count == 1 })
        held.answer(Profile(name: "Ada", followers: 2))
        #expect(await settle { profile.contents?.followers == 2 })
    }

    @Test("scopes: two stores on one cache; one's logout leaves the other's entries, earlier launches' included")
    func scopesAndLogout() async throws {
        let cache = InMemoryLoadableCache(entries: [
            "profiles/1": try entry(Profile(name: "Ada", followers: 1)),
            "friends/2": try entry(Profile(name: "Grace", followers: 2)),
        ])
        let stores = makeAccountStores(cache: cache) { id in Profile(name: "user \(id)", followers: id) }
        let friend = stores.friends.lease(2)
        await stores.friends.restored(2)
        #expect(friend.contents?.name == "Grace")
        let three = stores.profiles.lease(3)
        try await three.synced()
        await stores.profiles.saved()
        #expect(await cache.keys == ["friends/2", "profiles/1", "profiles/3"])
        await logOut(stores.profiles)
        #expect(await cache.keys == ["friends/2"])
    }

    @Test("limits: the guide's cache keeps 50 MB in loadables/v1, and entries saved before a date can be removed")
    func limitsAndEviction() async throws {
        let caches = FileManager.default.temporaryDirectory.appendingPathComponent("guide-\(UUID())")
        defer { try? FileManager.default.removeItem(at: caches) }
        let cache = makeFeedCache(in: caches)
        #expect(cache.maxBytes == 50 * 1_024 * 1_024)
        #expect(cache.entriesDirectory.path.hasSuffix("loadables/v1"))
        try await cache.save(try entry(Profile(name: "Ada", followers: 1)), key: "old")
        let recent = try entry(Profile(name: "Ada", followers: 2), savedAt: savedAt.addingTimeInterval(3600))
        try await cache.save(recent, key: "recent")
        try await cache.removeEntries(savedBefore: savedAt.addingTimeInterval(60))
        #expect(try await cache.load(key: "old") == nil)
        #expect(try await cache.load(key: "recent") == recent)
    }

    @Test("moving from files to SQLite: every entry arrives in its scope, the folder goes, a store restores from it")
    func movingFromFilesToSQLite() async throws {
        let caches = FileManager.default.temporaryDirectory.appendingPathComponent("guide-\(UUID())")
        defer { try? FileManager.default.removeItem(at: caches) }
        // The earlier release: a file cache with a store's scope, a long key and metadata.
        let files = FileLoadableCache(directory: caches.appendingPathComponent("loadables"))
        var withValidators = try entry(Profile(name: "Ada", followers: 1))
        withValidators.metadata = ["ETag": "\"7\""]
        try await files.scoped("profiles/").save(withValidators, key: "1")
        let long = String(repeating: "é", count: 100)
        let grace = try entry(Profile(name: "Grace", followers: 2))
        try await files.save(grace, key: long)

        let database = try await openCache(in: caches)
        #expect(!FileManager.default.fileExists(atPath: caches.appendingPathComponent("loadables").path))
        #expect(try await database.load(key: "profiles/1") == withValidators)
        #expect(try await database.load(key: long) == grace)
        #expect(database.maxBytes == 200 * 1_024 * 1_024)
        let profiles = LoadableStore<Int, ProfileLoadable>(cache: database.scoped("profiles/"), cacheKey: { "\($0)" }) {
            _ in
            ProfileLoadable { Profile(name: "fetched", followers: 0) }
        }
        let ada = profiles.lease(1)
        await profiles.restored(1)
        #expect(ada.contents == Profile(name: "Ada", followers: 1))

        // The next launch: nothing to move, the entries are still there.
        let again = try await openCache(in: caches)
        #expect(try await again.load(key: "profiles/1") == withValidators)
    }

    // "Testing".
    @Test @MainActor func restoresLastLaunchThenRefreshes() async throws {
        let savedAt = Date(timeIntervalSinceReferenceDate: 800_000_000)
        let old = try JSONEncoder().encode(Profile(name: "Ada", followers: 1))
        let cache = InMemoryLoadableCache(entries: ["profile": CachedEntry(data: old, savedAt: savedAt, version: 1)])
        let clock = ManualClock()
        let profile = ProfileLoadable(clock: clock) { Profile(name: "Ada", followers: 2) }
        let persistence = profile.persist(in: cache, key: "profile", now: { savedAt.addingTimeInterval(60) })
        await persistence.saved()
        #expect(profile.contents?.followers == 1)
        #expect(profile.loadableState == .idle)
        #expect(profile.age == .seconds(60))

        try await profile.synced()
        await persistence.saved()
        let saved = try #require(await cache.load(key: "profile"))
        #expect(try JSONDecoder().decode(Profile.self, from: saved.data).followers == 2)
    }
}
