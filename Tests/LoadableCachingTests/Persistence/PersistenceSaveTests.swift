import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

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
        await persistence.saved()
        #expect(await cache.operations == [.load])
        wall.advance(by: 10)
        confirmation.apply(to: loadable)
        wall.advance(by: 60)  // the write runs later: savedAt is still the time of the change
        await persistence.saved()

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
        await persistence.saved()
        #expect(await cache.operations == [.load])
        #expect(await cache.completedSaveCount == 0)
        // The persistence still saves the next change.
        loadable.setContents(2)
        await persistence.saved()
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
        await persistence.saved()
        #expect(await cache.operations == [.load, .save])
        wall.advance(by: 60)
        list.loadNextPage()
        try await list.doneLoadingNextPage()
        #expect(list.contents == [1, 2, 3])
        await persistence.saved()
        #expect(await cache.operations == [.load, .save])
        let entry = try #require(await cache.entry("k"))
        #expect(try JSONDecoder().decode([Int].self, from: entry.data) == [1, 2])
        #expect(entry.savedAt == wall.at(0))
    }

    @Test(
        "the restored contents are not saved; a later setDidSyncSuccessfully() touches their entry: a new date, the contents not written again"
    )
    func restoreIsUnsavedChange() async throws {
        let wall = PersistenceWallClock()
        let cache = ScriptedPersistenceCache(entries: ["k": try persistedEntry(7, savedAt: wall.at(-100))])
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let persistence = loadable.persist(in: cache, key: "k", now: wall.function)
        await persistence.saved()
        #expect(loadable.contents == 7)
        #expect(await cache.operations == [.load])
        loadable.sync()
        loadable.setDidSyncSuccessfully()
        await persistence.saved()
        #expect(await cache.operations == [.load, .touch])
        #expect(await cache.entry("k")?.savedAt == wall.now)
        #expect(persistedInt(await cache.entry("k")) == 7)
    }

    @Test(
        "a save date that is not finite is refused with saveFailed through onError, on any cache; nothing is saved",
        arguments: [Double.nan, .infinity, -.infinity])
    func nonFiniteSaveDate(seconds: Double) async throws {
        let cache = ScriptedPersistenceCache()
        let log = PersistenceErrorLog()
        let loadable = PersistedLoadable<Int>(clock: ManualClock())
        let persistence = loadable.persist(
            in: cache, key: "k", now: { Date(timeIntervalSinceReferenceDate: seconds) }, onError: log.handler)
        loadable.setContents(1)
        await persistence.saved()
        #expect(await cache.completedSaveCount == 0)
        #expect(await cache.operations == [.load])
        #expect(log.summaries == ["saveFailed k"])
        #expect(log.errors.first.map { "\($0)" }?.contains("not a finite date") == true)

        let outboxLog = PersistenceErrorLog()
        let outbox = LoadableOutbox<Int>(
            cache: cache, key: "outbox", activity: ActivityMonitor(connectivity: .offline), clock: ManualClock(),
            now: { Date(timeIntervalSinceReferenceDate: seconds) }
        ) { _, _ in }
        outbox.onError = outboxLog.handler
        outbox.enqueue(1)
        await outbox.saved()
        #expect(await cache.completedSaveCount == 0)
        #expect(outboxLog.summaries == ["saveFailed outbox"])
        #expect(outboxLog.errors.first.map { "\($0)" }?.contains("not a finite date") == true)
        #expect(outbox.items.count == 1, "the item is still there, to be sent")
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
        await persistence.saved()
        let entry = try #require(await cache.load(key: "event"))
        #expect(String(decoding: entry.data, as: UTF8.self).contains("\"1970-01-01T00:00:00Z\""))

        let reader = PersistedLoadable<Event>(clock: ManualClock())
        await reader.persist(in: cache, key: "event", decoder: decoder, now: wall.function).saved()
        #expect(reader.contents == event)

        // The default decoder reads dates as numbers: that entry is not for it.
        await cache.save(entry, key: "event")
        let log = PersistenceErrorLog()
        let other = PersistedLoadable<Event>(clock: ManualClock())
        await other.persist(in: cache, key: "event", now: wall.function, onError: log.handler).saved()
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
        await persistence.saved()
        let files = try FileManager.default.contentsOfDirectory(atPath: cache.entriesDirectory.path)
        #expect(files == [FileLoadableCache.fileName(forKey: "hello")])

        wall.advance(by: 30)
        let reader = PersistedLoadable<[String]>(clock: ManualClock())
        let recorder = Recorder(reader)
        await reader.persist(in: cache, key: "hello", now: wall.function).saved()
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
        await persistence.saved()

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
        await persistence.saved()

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
        await persistence.saved()
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
        await fastPersistence.saved()
        #expect(persistedInt(await fast.entry("k")) == 2)
        #expect(await slow.entry("k") == nil)
        await slow.releaseAll()
        await slowPersistence.saved()
        #expect(persistedInt(await slow.entry("k")) == 1)
        #expect(persistedInt(await fast.entry("k")) == 2)
    }
}
