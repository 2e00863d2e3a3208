import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// Little-endian bytes, as the outbox's stored layouts write them.
private struct LayoutBytes {
    var bytes: [UInt8] = []

    mutating func append<I: FixedWidthInteger>(_ value: I) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func append(field: some Collection<UInt8>) {
        append(UInt32(field.count))
        bytes.append(contentsOf: field)
    }
}

/// An item as layout 1 (the previous release's, version 1) keeps it.
private struct Layout1Item {
    var flags: UInt8 = 0
    var attempts: UInt32 = 0
    var enqueuedAt: Double
    var id: String
    var idempotencyKey: String
    var lastError = ""
    var word: String
}

/// The bytes of a layout 1 entry, built by hand from OutboxFormat's documentation: "LOX1", the
/// count, then per item its flags, attempts, enqueuedAt, and four fields (id, key, last error,
/// the change's JSON).
private func layout1(_ items: [Layout1Item]) -> Data {
    var writer = LayoutBytes()
    writer.bytes.append(contentsOf: Array("LOX1".utf8))
    writer.append(UInt32(items.count))
    for item in items {
        writer.append(item.flags)
        writer.append(item.attempts)
        writer.append(item.enqueuedAt.bitPattern)
        writer.append(field: Array(item.id.utf8))
        writer.append(field: Array(item.idempotencyKey.utf8))
        writer.append(field: Array(item.lastError.utf8))
        writer.append(field: Array(#"{"word":"\#(item.word)"}"#.utf8))
    }
    return Data(writer.bytes)
}

/// A way to spoil a stored entry.
enum OutboxEntryDamage: String, CaseIterable, Sendable, CustomStringConvertible {
    case cutShort, unknownFlags, trailingBytes, countTooLarge, layout1UnknownFlags

    var description: String { rawValue }

    /// What the reason of the `.corrupt` error says.
    var reason: String {
        switch self {
        case .cutShort, .countTooLarge: "cut short"
        case .unknownFlags: "unknown flags 128"
        case .trailingBytes: "1 bytes after the last operation"
        case .layout1UnknownFlags: "unknown flags 4"
        }
    }

    /// The key of the spoiled entry: the journal's first entry, or the snapshot's for layout 1.
    var key: String { self == .layout1UnknownFlags ? "outbox" : "outbox#0#1" }

    /// `entry` (a journal entry of one item: the mark, the count, the operation's kind, then the
    /// record), spoiled.
    func applied(to entry: CachedEntry) -> CachedEntry {
        var bytes = [UInt8](entry.data)
        var version = entry.version
        switch self {
        case .cutShort: bytes.removeLast()
        case .unknownFlags: bytes[9] = 128
        case .trailingBytes: bytes.append(0)
        case .countTooLarge: bytes.replaceSubrange(4..<8, with: [0xFF, 0xFF, 0xFF, 0xFF])
        case .layout1UnknownFlags:
            bytes = [UInt8](layout1([Layout1Item(flags: 4, enqueuedAt: 0, id: "i", idempotencyKey: "k", word: "a")]))
            version = 1
        }
        return CachedEntry(data: Data(bytes), savedAt: entry.savedAt, version: version)
    }
}

/// The stored layouts: the previous release's entries are read; bad bytes are reported.
@Suite("Outbox: stored layout")
@MainActor
struct OutboxFormatTests {
    @Test("an entry of layout 1, saved by the previous release, is restored, sent, and saved again")
    func layout1IsRestored() async throws {
        let cache = InMemoryLoadableCache()
        let bytes = layout1([
            Layout1Item(attempts: 2, enqueuedAt: 700_000_000.5, id: "item-a", idempotencyKey: "key-a", word: "a"),
            Layout1Item(
                flags: 1, attempts: 1, enqueuedAt: 700_000_001, id: "item-b", idempotencyKey: "key-b",
                lastError: "refused", word: "b"),
        ])
        try await (cache as any LoadableCache).save(
            CachedEntry(data: bytes, savedAt: .now, version: 1, isPinned: true), key: "outbox")
        let activity = ActivityMonitor(connectivity: .offline)
        let server = OutcomeServer()
        var errors: [any Error] = []
        var outbox: LoadableOutbox<Append>! = makeOutcomeOutbox(
            cache: cache, server: server, activity: activity, clock: ManualClock())
        outbox.onError = { errors.append($0) }
        await outbox.restored()
        #expect(errors.isEmpty)
        #expect(outbox.items.map(\.id) == ["item-a", "item-b"])
        #expect(outbox.items.map(\.change.word) == ["a", "b"])
        #expect(outbox.items.map(\.idempotencyKey) == ["key-a", "key-b"])
        #expect(outbox.items.map(\.attempts) == [2, 1])
        #expect(outbox.items.map(\.state) == [.pending, .failed])
        #expect(outbox.items.map(\.scope) == [nil, nil])
        #expect(outbox.items.map(\.enqueuedAt.timeIntervalSinceReferenceDate) == [700_000_000.5, 700_000_001])
        #expect(outbox.items.first?.lastError == nil)
        #expect(outbox.items.last?.lastError as? OutboxRestoredError == OutboxRestoredError(description: "refused"))
        activity.connectivity = .online
        await server.answer("a")
        #expect(server.calls.map(\.idempotencyKey) == ["key-a"])
        await outbox.saved()
        outbox = nil

        let keys = await cache.keys
        #expect(keys.contains("outbox#0#1"), "the change saved in the journal: \(keys)")
        activity.connectivity = .offline
        let relaunched = makeOutcomeOutbox(cache: cache, server: server, activity: activity, clock: ManualClock())
        await relaunched.restored()
        #expect(relaunched.items.map(\.id) == ["item-b"])
        let refused = OutboxRestoredError(description: "refused")
        #expect(relaunched.items.first?.lastError as? OutboxRestoredError == refused)
    }

    @Test(
        "bad bytes are reported as corrupt, never a trap, and the outbox starts empty",
        arguments: OutboxEntryDamage.allCases)
    func badBytesAreCorrupt(_ damage: OutboxEntryDamage) async throws {
        let cache = InMemoryLoadableCache()
        let offline = ActivityMonitor(connectivity: .offline)
        var writer: LoadableOutbox<Append>! = makeOutcomeOutbox(
            cache: cache, server: OutcomeServer(), activity: offline, clock: ManualClock())
        await writer.restored()
        writer.enqueue(Append(word: "a"), scope: "s")
        await writer.saved()
        writer = nil
        let entry = try #require(await cache.load(key: "outbox#0#1"))
        #expect(entry.version == 3)
        if damage.key != "outbox#0#1" { try await (cache as any LoadableCache).remove(key: "outbox#0#1") }
        try await (cache as any LoadableCache).save(damage.applied(to: entry), key: damage.key)

        var errors: [any Error] = []
        var outbox: LoadableOutbox<Append>! = makeOutcomeOutbox(
            cache: cache, server: OutcomeServer(), activity: offline, clock: ManualClock())
        outbox.onError = { errors.append($0) }
        await outbox.restored()
        #expect(outbox.items.isEmpty)
        #expect(errors.count == 1)
        guard case .corrupt(let key, let reason)? = errors.first as? LoadableCacheError else {
            Issue.record("expected .corrupt, got \(errors)")
            return
        }
        #expect(key == damage.key)
        #expect(reason.contains(damage.reason), "\(reason)")
        outbox.enqueue(Append(word: "b"))
        await outbox.saved()
        #expect(errors.count == 1)
        outbox = nil
        let relaunched = makeOutcomeOutbox(
            cache: cache, server: OutcomeServer(), activity: offline, clock: ManualClock())
        var laterErrors: [any Error] = []
        relaunched.onError = { laterErrors.append($0) }
        await relaunched.restored()
        #expect(relaunched.items.map(\.change.word) == ["b"], "the spoiled entry was replaced")
        #expect(laterErrors.isEmpty)
    }

    @Test("a spoiled entry found once the unread queue can be read is reported and skipped; the save still writes")
    func spoiledEntryAfterAnUnreadQueue() async throws {
        let cache = ScriptedPersistenceCache()
        let offline = ActivityMonitor(connectivity: .offline)
        var writer: LoadableOutbox<Append>! = makeOutcomeOutbox(
            cache: cache, server: OutcomeServer(), activity: offline, clock: ManualClock())
        await writer.restored()
        writer.enqueue(Append(word: "a"))
        await writer.saved()
        writer = nil
        try await cache.save(
            CachedEntry(data: Data("not a journal".utf8), savedAt: .now, version: 3), key: "outbox#0#2")

        await cache.fail(.load, with: POSIXError(.EMFILE))
        var errors: [any Error] = []
        var outbox: LoadableOutbox<Append>! = makeOutcomeOutbox(
            cache: cache, server: OutcomeServer(), activity: offline, clock: ManualClock())
        outbox.onError = { errors.append($0) }
        await outbox.restored()
        await cache.fail(.load, with: nil)
        #expect(outbox.items.isEmpty)
        outbox.enqueue(Append(word: "b"))
        await outbox.saved()
        #expect(outbox.items.map(\.change.word) == ["a", "b"], "the stored item is back, and b was saved")
        let corrupt = errors.compactMap { error -> String? in
            guard case .corrupt(let key, _)? = error as? LoadableCacheError else { return nil }
            return key
        }
        #expect(corrupt == ["outbox#0#2"], "\(errors)")
        outbox = nil
        let relaunched = makeOutcomeOutbox(
            cache: cache, server: OutcomeServer(), activity: offline, clock: ManualClock())
        await relaunched.restored()
        #expect(relaunched.items.map(\.change.word) == ["a", "b"])
    }
}
