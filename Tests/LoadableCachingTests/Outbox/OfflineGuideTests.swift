import Foundation
import Loadable
import LoadableCaching
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

// The samples of Docs/Offline.md that need no HTTP, and the README's outbox sample, verbatim
// (`GuideSamplesTests` checks it), compiled and run; and tests of what the guide says about the
// outbox. The `HTTPService` samples are in Tests/LoadableHTTPTests/HTTPOfflineGuideTests.swift.

// MARK: - Guide types

/// A change of a note's title: what the user did.
struct NoteEdit: Codable, Sendable, Equatable {
    var noteID: Int
    var title: String
}

/// A note, as the app shows it.
struct Note: Codable, Sendable, Equatable {
    var id: Int
    var title: String
}

/// The outbox's banner: what waits, what was refused, and the cache's failures.
@MainActor
final class OutboxBanner {
    let outbox: LoadableOutbox<NoteEdit>
    private(set) var problems: [String] = []

    init(outbox: LoadableOutbox<NoteEdit>) {
        self.outbox = outbox
        outbox.onError = { [weak self] error in self?.problems.append("\(error)") }  // the cache's failures
    }

    /// What the banner says; `nil` when all is well.
    var message: String? {
        let refused = outbox.items.filter { $0.state == .failed }.count
        if refused > 0 { return "Refused by the server: \(refused)" }
        if outbox.isPaused, outbox.pendingCount > 0 { return "Waiting for the network: \(outbox.pendingCount)" }
        return nil
    }

    /// Sends every refused change again.
    func retryRefused() {
        for item in outbox.items where item.state == .failed { outbox.retry(item.id) }
    }

    /// Drops every refused change, and its layers.
    func discardRefused() {
        for item in outbox.items where item.state == .failed { outbox.discard(item.id) }
    }
}

/// Logs out: the outbox forgets this user's changes.
@MainActor
func logOut(of outbox: LoadableOutbox<NoteEdit>) async {
    outbox.removeAll()  // this user's changes, earlier launches' too, are never sent
    await outbox.saved()  // and nothing of them is left in the cache
}

/// The server of the test: applies each edit once per idempotency key, as a real one must.
@MainActor
final class FakeNotesServer {
    private(set) var titles: [Int: String] = [:]
    private(set) var requests = 0
    private var answered: Set<String> = []

    /// Applies `edit` unless its key was seen.
    func patch(_ edit: NoteEdit, idempotencyKey: String) async throws {
        requests += 1
        guard answered.insert(idempotencyKey).inserted else { return }  // a repeat: the first answer again
        titles[edit.noteID] = edit.title
    }
}

// MARK: - Helpers of the tests

/// An edit that a retry may fix, with the server's `Retry-After`.
private struct Unavailable: RetryAfterProviding {
    var retryAfter: Duration?
}

/// An edit the server refuses for good (a 422).
private struct Unprocessable: RetryAfterProviding {
    var retryAfter: Duration? { nil }
    var isRetryable: Bool { false }
}

/// A later version of ``NoteEdit``, with a field that earlier launches did not write.
private struct NoteEditWithText: Codable, Sendable {
    var noteID: Int
    var title: String
    var text: String
}

/// A change whose encoding fails for the title `"bad"`.
private struct FragileEdit: Codable, Sendable, Equatable {
    var title: String

    func encode(to encoder: any Encoder) throws {
        guard title != "bad" else {
            throw EncodingError.invalidValue(title, .init(codingPath: [], debugDescription: "a bad title"))
        }
        var container = encoder.singleValueContainer()
        try container.encode(title)
    }

    init(title: String) {
        self.title = title
    }

    init(from decoder: any Decoder) throws {
        title = try decoder.singleValueContainer().decode(String.self)
    }
}

/// A send the test ends by hand: every call waits until the test answers it.
@MainActor
private final class HeldSends<Change> {
    /// The changes sent so far, in order, with their idempotency keys.
    private(set) var sent: [(change: Change, idempotencyKey: String)] = []
    private var waiting: [CheckedContinuation<Void, any Error>] = []

    /// What the outbox's `send` calls.
    func send(_ change: Change, _ idempotencyKey: String) async throws {
        sent.append((change, idempotencyKey))
        try await withCheckedThrowingContinuation { waiting.append($0) }
    }

    /// Whether a send waits for its answer.
    var isWaiting: Bool { !waiting.isEmpty }

    /// Ends the oldest waiting send, with `error` or as a success.
    func answer(_ error: (any Error)? = nil) {
        let continuation = waiting.removeFirst()
        if let error { continuation.resume(throwing: error) } else { continuation.resume() }
    }
}

/// An outbox of ``NoteEdit`` on `cache` that sends through `sends`, retrying after 1, 2, 4… s.
@MainActor
private func makeHeldOutbox(
    cache: any LoadableCache, sends: HeldSends<NoteEdit>, activity: ActivityMonitor = ActivityMonitor(),
    clock: ManualClock
) -> LoadableOutbox<NoteEdit> {
    LoadableOutbox(
        cache: cache, activity: activity,
        retryPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(64), multiplier: 2), clock: clock
    ) { edit, key in
        try await sends.send(edit, key)
    }
}

/// The titles an outbox sent, in order.
@MainActor
private final class SentTitles {
    var titles: [String] = []
}

/// Gives the outbox's tasks, its cache queue and the clock's sleepers turns until `condition`
/// holds; records an issue when it does not. Never sleeps.
@MainActor
private func settleUntil(
    until condition: @MainActor () -> Bool, sourceLocation: SourceLocation = #_sourceLocation
) async {
    let held = await LoadableTestSupport.settle(until: condition)
    #expect(held, "the condition did not hold", sourceLocation: sourceLocation)
}

/// Gives the outbox's tasks and cache queue turns so that work that should not happen would have
/// happened. Never sleeps.
@MainActor
private func quiesce() async {
    for _ in 0..<40 {
        await Task.yield()
        await Task.detached {}.value
    }
}

/// The outbox as Docs/Offline.md describes it, with an outbox that sends to a fake.
@Suite("Docs/Offline.md samples")
@MainActor
struct OfflineGuideTests {
    // "Testing".
    @Test @MainActor func editsMadeOfflineSurviveARelaunch() async {
        let cache = InMemoryLoadableCache()
        let activity = ActivityMonitor(connectivity: .offline)
        let server = FakeNotesServer()
        func launch() -> LoadableOutbox<NoteEdit> {
            LoadableOutbox(cache: cache, activity: activity, clock: ManualClock()) { edit, key in
                try await server.patch(edit, idempotencyKey: key)
            }
        }
        var outbox: LoadableOutbox<NoteEdit>? = launch()
        outbox?.enqueue(NoteEdit(noteID: 7, title: "Draft"))
        outbox?.enqueue(NoteEdit(noteID: 7, title: "On the train"))
        await outbox?.saved()
        #expect(outbox?.isPaused == true)
        outbox = nil  // the app is killed

        let relaunched = launch()
        await relaunched.restored()
        #expect(relaunched.items.map(\.change.title) == ["Draft", "On the train"])
        activity.connectivity = .online
        for _ in 0..<100 where relaunched.pendingCount > 0 {
            await Task.yield()  // the sends run on the main actor: give them turns, never sleep
        }
        await relaunched.saved()
        #expect(server.titles[7] == "On the train")
        #expect(server.requests == 2)
        #expect(relaunched.items.isEmpty)
    }

    @Test("README: the edit shows on the note at once, is sent, and joins its contents")
    func readmeSample() async throws {
        let outboxFolder = FileManager.default.temporaryDirectory.appendingPathComponent("outbox-\(UUID())")
        defer { try? FileManager.default.removeItem(at: outboxFolder) }
        let server = FakeNotesServer()
        let note = PushLoadable(contents: Note(id: 7, title: "Groceries"))
        var notifications = 0
        try await observing(note, { _ in notifications += 1 }) {
            let outbox = LoadableOutbox<NoteEdit>(cache: FileLoadableCache(directory: outboxFolder)) { edit, key in
                try await server.patch(edit, idempotencyKey: key)
            }
            outbox.show(on: note) { note, edit in
                note.title = edit.title
                return true
            }
            outbox.enqueue(NoteEdit(noteID: 7, title: "On the train"))  // shown at once, saved, then sent
            #expect(note.contents?.title == "On the train")
            #expect(notifications == 1)
            await settleUntil { outbox.items.isEmpty }
            await outbox.saved()
            #expect(server.titles[7] == "On the train")
            #expect(note.contents?.title == "On the train")
            let relaunched = try await FileLoadableCache(directory: outboxFolder).load(key: "outbox#0#1")
            #expect(relaunched != nil, "the outbox's journal is in its folder")
        }
    }

    @Test("show(on:): shown at once above a refresh; another note's edit notifies nothing and writes nothing")
    func showOnLoadables() async throws {
        let clock = ManualClock()
        let sends = HeldSends<NoteEdit>()
        let outbox = makeHeldOutbox(cache: InMemoryLoadableCache(), sends: sends, clock: clock)
        await outbox.restored()
        let seven = Loadable<Note>(contents: Note(id: 7, title: "Groceries"), clock: clock)
        let eight = Loadable<Note>(contents: Note(id: 8, title: "Ideas"), clock: clock)
        for note in [seven, eight] {
            let id = note.contents?.id
            outbox.show(on: note) { note, edit in
                guard edit.noteID == id else { return false }
                note.title = edit.title
                return true
            }
        }
        var eightNotifications = 0
        await observing(eight, { _ in eightNotifications += 1 }) {
            outbox.enqueue(NoteEdit(noteID: 7, title: "On the train"))
            #expect(seven.contents?.title == "On the train")
            // A refresh replaces the base; the pending edit stays on top.
            seven.setDidSyncSuccessfully(Note(id: 7, title: "Groceries (server)"))
            #expect(seven.contents?.title == "On the train")
            await settleUntil { sends.isWaiting }
            sends.answer()
            await settleUntil { outbox.items.isEmpty }
            // Sent: the edit joined the base, as a committed `mutate` without `reconcile`.
            #expect(seven.contents?.title == "On the train")
            seven.setDidSyncSuccessfully(Note(id: 7, title: "Groceries (server)"))
            #expect(seven.contents?.title == "Groceries (server)", "no layer is left")
            #expect(eightNotifications == 0)
            #expect(eight.contents == Note(id: 8, title: "Ideas"))
        }
    }

    @Test("a loadable without contents shows the pending edits on its first contents (a restore)")
    func showWaitsForContents() async {
        let cache = InMemoryLoadableCache()
        let sends = HeldSends<NoteEdit>()
        let activity = ActivityMonitor(connectivity: .offline)
        let outbox = makeHeldOutbox(cache: cache, sends: sends, activity: activity, clock: ManualClock())
        outbox.enqueue(NoteEdit(noteID: 7, title: "On the train"))
        let note = PushLoadable<Note>()
        outbox.show(on: note) { note, edit in
            note.title = edit.title
            return true
        }
        #expect(note.contents == nil)
        note.setContents(Note(id: 7, title: "Groceries"))
        #expect(note.contents?.title == "On the train")
        // Discarded: its layer goes.
        outbox.discard(outbox.items[0].id)
        #expect(note.contents?.title == "Groceries")
    }

    @Test("a retryable failure keeps the item first and waits for the longer of the backoff and Retry-After")
    func retryableFailures() async throws {
        let clock = ManualClock()
        let sends = HeldSends<NoteEdit>()
        let outbox = makeHeldOutbox(cache: InMemoryLoadableCache(), sends: sends, clock: clock)
        await outbox.restored()
        outbox.enqueue(NoteEdit(noteID: 1, title: "a"))
        outbox.enqueue(NoteEdit(noteID: 2, title: "b"))
        await settleUntil { sends.isWaiting }
        sends.answer(Unavailable(retryAfter: .seconds(30)))
        await settleUntil { !outbox.isSending }
        #expect(outbox.items.map(\.state) == [.pending, .pending])
        #expect(outbox.items[0].lastError is Unavailable)
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(29))
        await quiesce()
        #expect(sends.sent.count == 1, "not before the server's Retry-After; the next item waits its turn")
        await clock.advance(by: .seconds(1))
        await settleUntil { sends.isWaiting }
        #expect(sends.sent.map(\.change.title) == ["a", "a"])
        #expect(sends.sent[0].idempotencyKey == sends.sent[1].idempotencyKey)
        #expect(outbox.items[0].attempts == 2)
        sends.answer()
        await settleUntil { sends.isWaiting }
        #expect(sends.sent.map(\.change.title) == ["a", "a", "b"])
        sends.answer()
        await settleUntil { outbox.items.isEmpty }
    }

    @Test("paused while offline; back online: sent at once, and a retry waiting for the network goes at once")
    func pausedWhileOffline() async throws {
        let clock = ManualClock()
        let sends = HeldSends<NoteEdit>()
        let activity = ActivityMonitor()
        let outbox = makeHeldOutbox(cache: InMemoryLoadableCache(), sends: sends, activity: activity, clock: clock)
        await outbox.restored()
        outbox.enqueue(NoteEdit(noteID: 1, title: "a"))
        await settleUntil { sends.isWaiting }
        activity.connectivity = .offline
        #expect(outbox.isPaused)
        #expect(outbox.isSending, "a send running when it pauses goes on")
        sends.answer(URLError(.notConnectedToInternet))
        await settleUntil { !outbox.isSending }
        await clock.advance(by: .seconds(60))
        await quiesce()
        #expect(sends.sent.count == 1, "nothing is retried while paused")
        let banner = OutboxBanner(outbox: outbox)
        #expect(banner.message == "Waiting for the network: 1")
        activity.connectivity = .online
        await settleUntil { sends.isWaiting }
        #expect(sends.sent.count == 2)
        sends.answer()
        await settleUntil { outbox.items.isEmpty }
        #expect(banner.message == nil)
        activity.isActive = false
        outbox.enqueue(NoteEdit(noteID: 2, title: "b"))
        await outbox.saved()
        await quiesce()
        #expect(sends.sent.count == 2, "nothing is sent while inactive")
        activity.isActive = true
        await settleUntil { sends.isWaiting }
        sends.answer()
        await settleUntil { outbox.items.isEmpty }
    }

    @Test("a refused item is failed and the next goes on; the banner retries or discards it")
    func refusedItems() async throws {
        let sends = HeldSends<NoteEdit>()
        let outbox = makeHeldOutbox(cache: InMemoryLoadableCache(), sends: sends, clock: ManualClock())
        let banner = OutboxBanner(outbox: outbox)
        await outbox.restored()
        outbox.enqueue(NoteEdit(noteID: 1, title: "a"))
        outbox.enqueue(NoteEdit(noteID: 2, title: "b"))
        await settleUntil { sends.isWaiting }
        sends.answer(Unprocessable())
        await settleUntil { sends.sent.count == 2 }
        #expect(outbox.items.map(\.state) == [.failed, .sending])
        #expect(outbox.pendingCount == 1)
        sends.answer()
        await settleUntil { outbox.items.count == 1 }
        #expect(banner.message == "Refused by the server: 1")
        banner.retryRefused()
        await settleUntil { sends.sent.count == 3 }
        #expect(sends.sent.map(\.change.title) == ["a", "b", "a"])
        sends.answer(Unprocessable())
        await settleUntil { outbox.items.first?.state == .failed }
        banner.discardRefused()
        #expect(outbox.items.isEmpty)
        #expect(banner.message == nil)
        #expect(banner.problems.isEmpty)
    }

    @Test("a relaunch between the server's answer and the saved removal sends the same key again")
    func idempotencyAcrossARelaunch() async {
        let cache = InMemoryLoadableCache()
        let server = FakeNotesServer()
        let sends = HeldSends<NoteEdit>()
        var outbox: LoadableOutbox<NoteEdit>? = makeHeldOutbox(cache: cache, sends: sends, clock: ManualClock())
        outbox?.enqueue(NoteEdit(noteID: 7, title: "On the train"))
        await settleUntil { sends.isWaiting }
        // The server applied it; the app dies before it hears the answer.
        let first = sends.sent[0]
        try? await server.patch(first.change, idempotencyKey: first.idempotencyKey)
        outbox = nil
        let activity = ActivityMonitor(connectivity: .offline)
        let relaunched = LoadableOutbox<NoteEdit>(cache: cache, activity: activity, clock: ManualClock()) {
            edit, key in try await server.patch(edit, idempotencyKey: key)
        }
        await relaunched.restored()
        #expect(relaunched.items.map(\.idempotencyKey) == [first.idempotencyKey])
        #expect(relaunched.items.first?.state == .pending, "an item that was sending is pending again")
        #expect(relaunched.items.first?.attempts == 0, "an attempt is saved with the next change of the queue")
        activity.connectivity = .online
        await settleUntil { relaunched.items.isEmpty }
        #expect(server.requests == 2)
        #expect(server.titles[7] == "On the train")
        sends.answer()  // the first launch's send, long gone
    }

    @Test("logout: removeAll drops every item, their layers and the cache's entry")
    func logOutRemovesEverything() async {
        let cache = InMemoryLoadableCache()
        let sends = HeldSends<NoteEdit>()
        let activity = ActivityMonitor(connectivity: .offline)
        let outbox = makeHeldOutbox(cache: cache, sends: sends, activity: activity, clock: ManualClock())
        let note = PushLoadable(contents: Note(id: 7, title: "Groceries"))
        outbox.show(on: note) { note, edit in
            note.title = edit.title
            return true
        }
        outbox.enqueue(NoteEdit(noteID: 7, title: "On the train"))
        await outbox.saved()
        #expect(await cache.keys == ["outbox#0#1"])
        await logOut(of: outbox)
        #expect(outbox.items.isEmpty)
        #expect(note.contents?.title == "Groceries")
        #expect(await cache.keys.isEmpty)
        activity.connectivity = .online
        await quiesce()
        #expect(sends.sent.isEmpty)
    }

    @Test("a change that no longer decodes is set aside: reported once, kept, never sent; it comes back as failed")
    func setAsideItems() async throws {
        let cache = InMemoryLoadableCache()
        let offline = ActivityMonitor(connectivity: .offline)
        var outbox: LoadableOutbox<NoteEdit>? = LoadableOutbox(cache: cache, activity: offline, clock: ManualClock()) {
            _, _ in
        }
        outbox?.enqueue(NoteEdit(noteID: 7, title: "On the train"))
        await outbox?.saved()
        outbox = nil

        var newer: LoadableOutbox<NoteEditWithText>? = LoadableOutbox(cache: cache, clock: ManualClock()) { _, _ in
            Issue.record("a change set aside is never sent")
        }
        var errors: [any Error] = []
        newer?.onError = { errors.append($0) }
        await newer?.restored()
        await newer?.saved()
        #expect(newer?.items.isEmpty == true)
        #expect(errors.count == 1)
        guard case .decodingFailed(key: "outbox", _)? = errors.first as? LoadableCacheError else {
            Issue.record("expected decodingFailed, got \(errors)")
            return
        }
        #expect("\(errors[0])".contains("set aside"))
        newer = nil
        // Reported once: the next launch of the same version says nothing.
        var again: LoadableOutbox<NoteEditWithText>? = LoadableOutbox(cache: cache, clock: ManualClock()) { _, _ in }
        var laterErrors: [any Error] = []
        again?.onError = { laterErrors.append($0) }
        await again?.restored()
        #expect(laterErrors.isEmpty)
        let keys = await cache.keys
        #expect(!keys.isEmpty && keys.allSatisfy { $0.hasPrefix("outbox#") }, "kept in the cache")
        await again?.saved()
        again = nil

        let older = LoadableOutbox<NoteEdit>(cache: cache, activity: offline, clock: ManualClock()) { _, _ in }
        await older.restored()
        #expect(older.items.map(\.change) == [NoteEdit(noteID: 7, title: "On the train")])
        #expect(older.items.first?.state == .failed)
        #expect(older.items.first?.lastError is OutboxRestoredError)
    }

    @Test("a change that cannot be encoded is reported and sent, and does not survive a relaunch")
    func encodingFailures() async {
        let cache = InMemoryLoadableCache()
        let sent = SentTitles()
        let offline = ActivityMonitor(connectivity: .offline)
        var outbox: LoadableOutbox<FragileEdit>? = LoadableOutbox(cache: cache, activity: offline, clock: ManualClock())
        {
            edit, _ in sent.titles.append(edit.title)
        }
        var errors: [any Error] = []
        outbox?.onError = { errors.append($0) }
        outbox?.enqueue(FragileEdit(title: "bad"))
        outbox?.enqueue(FragileEdit(title: "good"))
        guard case .encodingFailed(key: "outbox", _)? = errors.first as? LoadableCacheError else {
            Issue.record("expected encodingFailed, got \(errors)")
            return
        }
        offline.connectivity = .online
        await settleUntil { outbox?.items.isEmpty == true }
        #expect(sent.titles == ["bad", "good"])
        offline.connectivity = .offline
        outbox?.enqueue(FragileEdit(title: "bad"))
        outbox?.enqueue(FragileEdit(title: "good"))
        await outbox?.saved()
        outbox = nil
        let relaunched = LoadableOutbox<FragileEdit>(cache: cache, activity: offline, clock: ManualClock()) { _, _ in }
        await relaunched.restored()
        #expect(relaunched.items.map(\.change) == [FragileEdit(title: "good")])
    }

    @Test("a save that fails is reported, and its items are sent all the same")
    func saveFailures() async {
        let cache = ScriptedPersistenceCache()
        await cache.fail(.save, with: CocoaError(.fileWriteOutOfSpace))
        let sends = HeldSends<NoteEdit>()
        let outbox = makeHeldOutbox(cache: cache, sends: sends, clock: ManualClock())
        let banner = OutboxBanner(outbox: outbox)
        outbox.enqueue(NoteEdit(noteID: 7, title: "On the train"))
        await settleUntil { sends.isWaiting }
        #expect(banner.problems.count == 1)
        #expect(banner.problems.first?.contains("outbox") == true)
        sends.answer()
        await settleUntil { outbox.items.isEmpty }
    }

    @Test("a read of the queue that fails is reported, and the queue it could not read survives the next save")
    func readFailures() async {
        let cache = ScriptedPersistenceCache()
        let offline = ActivityMonitor(connectivity: .offline)
        func launch() -> LoadableOutbox<NoteEdit> {
            LoadableOutbox(cache: cache, activity: offline, clock: ManualClock()) { _, _ in }
        }
        var outbox: LoadableOutbox<NoteEdit>? = launch()
        outbox?.enqueue(NoteEdit(noteID: 7, title: "Before"))
        await outbox?.saved()
        outbox = nil
        // A read that fails for another reason than the bytes (too many open files).
        await cache.fail(.load, with: POSIXError(.EMFILE))
        outbox = launch()
        var errors: [any Error] = []
        outbox?.onError = { errors.append($0) }
        await outbox?.restored()
        await cache.fail(.load, with: nil)
        guard case .loadFailed(key: "outbox", _)? = errors.first as? LoadableCacheError else {
            Issue.record("expected loadFailed, got \(errors)")
            return
        }
        #expect(outbox?.items.isEmpty == true, "the outbox starts without the items it could not read")
        outbox?.enqueue(NoteEdit(noteID: 7, title: "After"))
        await outbox?.saved()
        // The save read the entry again: the stored item is back, first.
        #expect(outbox?.items.map(\.change.title) == ["Before", "After"])
        outbox = nil
        let relaunched = launch()
        await relaunched.restored()
        #expect(relaunched.items.map(\.change.title) == ["Before", "After"], "nothing was lost")
    }

    @Test("while the stored queue still cannot be read, a save writes nothing and is reported")
    func readFailsAgain() async {
        let cache = ScriptedPersistenceCache()
        let offline = ActivityMonitor(connectivity: .offline)
        func launch() -> LoadableOutbox<NoteEdit> {
            LoadableOutbox(cache: cache, activity: offline, clock: ManualClock()) { _, _ in }
        }
        var outbox: LoadableOutbox<NoteEdit>? = launch()
        outbox?.enqueue(NoteEdit(noteID: 7, title: "Before"))
        await outbox?.saved()
        outbox = nil
        await cache.fail(.load, with: POSIXError(.EMFILE))
        outbox = launch()
        var errors: [String] = []
        outbox?.onError = { errors.append("\($0)") }
        await outbox?.restored()
        outbox?.enqueue(NoteEdit(noteID: 7, title: "After"))
        await outbox?.saved()
        #expect(errors.count == 2, "the restore's read and the save's: \(errors)")
        await cache.fail(.load, with: nil)
        outbox = nil
        let relaunched = launch()
        await relaunched.restored()
        #expect(relaunched.items.map(\.change.title) == ["Before"], "the stored queue was not replaced")
    }

    @Test("an outbox on a key another live outbox owns stops the program, naming the fix")
    func twoOutboxesOnOneKey() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cache = InMemoryLoadableCache()
                let first = LoadableOutbox<NoteEdit>(cache: cache) { _, _ in }
                let second = LoadableOutbox<NoteEdit>(cache: cache) { _, _ in }
                withExtendedLifetime((first, second)) {}
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("give each outbox its own key"))
        }
    }

    @Test("an outbox inside a store's cache stops the program: the store's removeAll would clear it")
    func outboxInsideAStoresCache() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cache = InMemoryLoadableCache()
                let notes = LoadableStore<Int, Loadable<Note>>(cache: cache, cacheKey: { "\($0)" }) { _ in
                    Loadable<Note>()
                }
                let outbox = LoadableOutbox<NoteEdit>(cache: cache) { _, _ in }
                withExtendedLifetime((notes, outbox)) {}
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("each outbox a key outside them"))
        }
        // Scopes of their own: no conflict.
        let cache = InMemoryLoadableCache()
        let notes = LoadableStore<Int, Loadable<Note>>(cache: cache.scoped("notes/"), cacheKey: { "\($0)" }) { _ in
            Loadable<Note>()
        }
        let outbox = LoadableOutbox<NoteEdit>(cache: cache.scoped("outbox/")) { _, _ in }
        notes.removeAll()
        outbox.enqueue(NoteEdit(noteID: 1, title: "kept"))
        await outbox.saved()
        let keys = await cache.keys
        #expect(!keys.isEmpty && keys.allSatisfy { $0.hasPrefix("outbox/outbox#") }, "\(keys)")
        withExtendedLifetime(notes) {}
    }
}
