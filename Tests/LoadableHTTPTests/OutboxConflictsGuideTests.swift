import Foundation
import Loadable
import LoadableCaching
import LoadableHTTP
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The samples of `Docs/Offline.md`, "What the server did: outcomes, conflicts, scopes", verbatim
// (`GuideSamplesTests` checks it), run against the notes server of the HTTP guide (versions as
// ETags, `If-Match` checked: a `LoopbackHTTPServer`).

/// An edit of a note, made on the version the app showed.
struct NoteTextEdit: Codable, Sendable, Equatable {
    var noteID: String
    var text: String
    /// The ETag of the version the edit was made on.
    var etag: String
}

@MainActor
struct OutboxConflictsGuide {
    typealias Note = NotesGuide.Note

    /// The outbox of note edits: each note is a scope, an edit is sent on its version, and the
    /// server's answer says what happened.
    func makeOutbox(
        api: HTTPService, cache: any LoadableCache, clock: any Clock<Duration>
    ) -> LoadableOutbox<NoteTextEdit> {
        LoadableOutbox<NoteTextEdit>(
            cache: cache,
            rebase: { later, applied in later.etag = applied.etag },  // the next edit builds on the new version
            coalesce: { earlier, later in later },  // two edits never sent: the later text is enough
            clock: clock
        ) { edit, idempotencyKey in
            do {
                let saved = try await api.response(
                    to: .put, "notes/\(edit.noteID)", json: Note(id: edit.noteID, text: edit.text), as: Note.self,
                    idempotencyKey: idempotencyKey, precondition: .ifMatch(edit.etag))
                return .appliedAs(NoteTextEdit(noteID: edit.noteID, text: saved.value.text, etag: saved.etag ?? ""))
            } catch let error as HTTPLoadableError where error.isPreconditionFailed {
                // Someone else saved the note since, or deleted it.
                do {
                    let theirs = try await api.response(to: .get, "notes/\(edit.noteID)", as: Note.self)
                    let remote = NoteTextEdit(noteID: edit.noteID, text: theirs.value.text, etag: theirs.etag ?? "")
                    return .conflict(remote: remote)  // both sides, for the user
                } catch HTTPLoadableError.status(code: 404, _, _) {
                    return .dropped  // deleted on the server: nothing left to edit
                }
            }
        }
    }

    /// An edit of a note is enqueued in the note's scope: edits of one note go in order, notes in
    /// parallel.
    func edit(_ noteID: String, text: String, shownETag: String, in outbox: LoadableOutbox<NoteTextEdit>) {
        outbox.enqueue(NoteTextEdit(noteID: noteID, text: text, etag: shownETag), scope: noteID)
    }

    /// The conflict screen's two buttons.
    func keepMine(_ item: OutboxItem<NoteTextEdit>, in outbox: LoadableOutbox<NoteTextEdit>) {
        guard item.state == .conflict, let theirs = item.remote else { return }
        outbox.resolve(item.id, with: NoteTextEdit(noteID: theirs.noteID, text: item.change.text, etag: theirs.etag))
    }

    func takeTheirs(_ item: OutboxItem<NoteTextEdit>, in outbox: LoadableOutbox<NoteTextEdit>) {
        outbox.discard(item.id)  // the server's version stays; a sync of the note shows it
    }
}

@MainActor
@Suite(.timeLimit(.minutes(5))) final class OutboxConflictsGuideTests {
    typealias Note = NotesGuide.Note

    let notes: NotesServer
    let session: URLSession
    let api: HTTPService
    let guide = OutboxConflictsGuide()

    init() throws {
        notes = try NotesServer()
        (session, api) = notes.makeService()
    }

    deinit {
        session.invalidateAndCancel()
        notes.server.stop()
    }

    /// Waits, without sleeping, until `condition` holds; records an issue when it does not.
    func settle(until condition: @MainActor () -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async {
        let held = await LoadableTestSupport.settle(until: condition)
        #expect(held, "the condition did not hold", sourceLocation: sourceLocation)
    }

    @Test(
        "two edits of one note queued offline: the second carries the version the first got, no conflict with oneself")
    func rebaseAvoidsSelfConflicts() async throws {
        notes.put(Note(id: "n1", text: "milk"))
        let activity = ActivityMonitor(connectivity: .offline)
        let outbox = LoadableOutbox<NoteTextEdit>(
            cache: InMemoryLoadableCache(),
            rebase: { later, applied in later.etag = applied.etag },
            activity: activity, clock: ManualClock()
        ) { edit, key in
            let saved = try await self.api.response(
                to: .put, "notes/\(edit.noteID)", json: Note(id: edit.noteID, text: edit.text), as: Note.self,
                idempotencyKey: key, precondition: .ifMatch(edit.etag))
            return .appliedAs(NoteTextEdit(noteID: edit.noteID, text: saved.value.text, etag: saved.etag ?? ""))
        }
        guide.edit("n1", text: "milk, eggs", shownETag: "\"1\"", in: outbox)
        guide.edit("n1", text: "milk, eggs, bread", shownETag: "\"1\"", in: outbox)
        activity.connectivity = .online
        await settle { outbox.items.isEmpty }
        #expect(notes.notes["n1"]?.text == "milk, eggs, bread")
    }

    @Test("the guide's outbox: applied as the server's version, a conflict kept with both sides, resolved, dropped")
    func outcomes() async throws {
        notes.put(Note(id: "n1", text: "milk"))  // version "1"
        notes.put(Note(id: "n2", text: "call Ann"))  // version "2"
        let outbox = guide.makeOutbox(api: api, cache: InMemoryLoadableCache(), clock: ManualClock())
        await outbox.restored()
        guide.edit("n1", text: "milk, eggs", shownETag: "\"1\"", in: outbox)
        guide.edit("n1", text: "milk, eggs, bread", shownETag: "\"1\"", in: outbox)
        #expect(outbox.items.count <= 2)
        await settle { outbox.items.isEmpty }
        #expect(notes.notes["n1"]?.text == "milk, eggs, bread")

        notes.put(Note(id: "n2", text: "call Ann at 5"))  // another device: version moves on
        guide.edit("n2", text: "call Ann tomorrow", shownETag: "\"2\"", in: outbox)
        await settle { outbox.items.first?.state == .conflict }
        let conflict = try #require(outbox.items.first)
        #expect(conflict.remote?.text == "call Ann at 5")
        #expect(outbox.pendingCount == 0)
        guide.keepMine(conflict, in: outbox)
        #expect(outbox.items.first?.idempotencyKey != conflict.idempotencyKey)
        await settle { outbox.items.isEmpty }
        #expect(notes.notes["n2"]?.text == "call Ann tomorrow")

        guide.edit("gone", text: "x", shownETag: "\"9\"", in: outbox)
        await settle { outbox.items.isEmpty }
        #expect(notes.notes["gone"] == nil)

        notes.put(Note(id: "n2", text: "theirs"))
        guide.edit("n2", text: "mine", shownETag: "\"1\"", in: outbox)
        await settle { outbox.items.first?.state == .conflict }
        guide.takeTheirs(try #require(outbox.items.first), in: outbox)
        #expect(outbox.items.isEmpty)
        #expect(notes.notes["n2"]?.text == "theirs")
    }
}
