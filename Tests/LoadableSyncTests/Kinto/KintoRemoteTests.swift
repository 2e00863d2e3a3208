import Foundation
import Loadable
import LoadableHTTP
import LoadableSupport
import LoadableSync
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A record of the Kinto tests.
struct KintoNote: Identifiable, Codable, Sendable, Equatable {
    var id: String
    var title: String
    var done = false
}

/// `KintoRemote` against a real Kinto (memory backend, `paginate_by` 5, history plugin), through
/// `HTTPService` with Basic auth from a credentials loadable behind a `LoadableWaiter`.
@MainActor
@Suite(.enabled(if: KintoServer.isInstalled, KintoServer.notInstalled), .timeLimit(.minutes(5)))
struct KintoRemoteTests {
    let clock = ManualClock()

    /// The remote of `kinto`'s collection, with its account's password (or `password`).
    private func remote(_ kinto: KintoServer.Fixture, password: String? = nil) -> KintoRemote<KintoNote> {
        let credentials = HTTPBasicCredentials(user: kinto.user, password: password ?? kinto.password)
        let loadable = AsyncLoadable<HTTPBasicCredentials>(clock: clock) { credentials }
        let service = HTTPService(
            baseURL: kinto.server.baseURL,
            authorization: .basic(LoadableWaiter(loadable, timeout: .seconds(30), clock: clock)))
        return KintoRemote(service: service, bucket: kinto.bucket, collection: kinto.collection)
    }

    /// The record of an `.applied` result; records an issue for any other.
    private func applied(
        _ result: PushResult<KintoNote>, sourceLocation: SourceLocation = #_sourceLocation
    ) -> RemoteRecord<KintoNote>? {
        guard case .applied(let remote) = result else {
            Issue.record("expected .applied, got \(result)", sourceLocation: sourceLocation)
            return nil
        }
        return remote
    }

    @Test("create, update and delete with their preconditions: each applied, versions from the server")
    func createUpdateDelete() async throws {
        let kinto = try await KintoServer.fixture()
        let remote = remote(kinto)
        try await withRealTimeLimit("create, update, delete", seconds: 120) {
            let note = KintoNote(id: "n1", title: "Milk")
            let created = try #require(applied(try await remote.push(.create(note), idempotencyKey: "k1")))
            #expect(created.record == note)
            let onServer = try await kinto.records(KintoNote.self)
            #expect(onServer.map(\.record) == [note])
            #expect(onServer.map { String($0.lastModified) } == [created.version])

            var edited = note
            edited.done = true
            let updated = try #require(
                applied(try await remote.push(.update(edited, base: created.version), idempotencyKey: "k2")))
            #expect(updated.record == edited)
            #expect(updated.version != created.version)
            #expect(try await kinto.records(KintoNote.self).map(\.record) == [edited])

            let deleted = try await remote.push(.delete("n1", base: updated.version), idempotencyKey: "k3")
            #expect(deleted == .deleted)
            #expect(try await kinto.records(KintoNote.self).isEmpty)
            #expect(
                try await kinto.history().map(\.action) == ["create", "update", "delete"])
        }
    }

    @Test("an update on a version the server replaced is a conflict that carries the server's record")
    func conflictingUpdate() async throws {
        let kinto = try await KintoServer.fixture()
        let remote = remote(kinto)
        try await withRealTimeLimit("a conflicting update", seconds: 120) {
            let note = KintoNote(id: "n1", title: "Milk")
            let created = try #require(applied(try await remote.push(.create(note), idempotencyKey: "k1")))
            // Someone else changes it on the server.
            let theirs = KintoNote(id: "n1", title: "Oat milk")
            let theirVersion = try await kinto.put(theirs)

            var mine = note
            mine.done = true
            let result = try await remote.push(.update(mine, base: created.version), idempotencyKey: "k2")
            #expect(result == .conflict(remote: RemoteRecord(record: theirs, version: String(theirVersion))))
            #expect(try await kinto.records(KintoNote.self).map(\.record) == [theirs])

            // A delete on the old version is refused too, with the same record.
            let delete = try await remote.push(.delete("n1", base: created.version), idempotencyKey: "k3")
            #expect(delete == .conflict(remote: RemoteRecord(record: theirs, version: String(theirVersion))))
            #expect(try await kinto.records(KintoNote.self).map(\.record) == [theirs])
        }
    }

    @Test("an update of a record deleted on the server is a conflict with no record; a delete of it is done")
    func updateOfADeletedRecord() async throws {
        let kinto = try await KintoServer.fixture()
        let remote = remote(kinto)
        try await withRealTimeLimit("an update of a deleted record", seconds: 120) {
            let note = KintoNote(id: "n1", title: "Milk")
            let created = try #require(applied(try await remote.push(.create(note), idempotencyKey: "k1")))
            try await kinto.delete("n1")

            var mine = note
            mine.done = true
            let result = try await remote.push(.update(mine, base: created.version), idempotencyKey: "k2")
            #expect(result == .conflict(remote: nil))
            let delete = try await remote.push(.delete("n1", base: created.version), idempotencyKey: "k3")
            #expect(delete == .deleted)
            #expect(try await kinto.records(KintoNote.self).isEmpty)
        }
    }

    @Test("a create sent twice is applied both times and created once; another record with its id conflicts")
    func createSentTwice() async throws {
        let kinto = try await KintoServer.fixture()
        let remote = remote(kinto)
        try await withRealTimeLimit("a create sent twice", seconds: 120) {
            let note = KintoNote(id: "n1", title: "Milk")
            let first = try #require(applied(try await remote.push(.create(note), idempotencyKey: "k1")))
            // Its answer was lost: the outbox sends it again, with the same key.
            let second = try #require(applied(try await remote.push(.create(note), idempotencyKey: "k1")))
            #expect(second == first)
            #expect(try await kinto.history().map(\.action) == ["create"])

            let other = KintoNote(id: "n1", title: "Bread")
            let result = try await remote.push(.create(other), idempotencyKey: "k2")
            #expect(result == .conflict(remote: first))
            #expect(try await kinto.records(KintoNote.self).map(\.record) == [note])
        }
    }

    @Test("a pull since a cursor brings the records changed since and the tombstones of those deleted")
    func pullSinceACursor() async throws {
        let kinto = try await KintoServer.fixture()
        let remote = remote(kinto)
        try await withRealTimeLimit("pulls since a cursor", seconds: 120) {
            let empty = try await remote.pull(since: nil)
            #expect(empty.changed.isEmpty && empty.deleted.isEmpty && !empty.hasMore)
            #expect(empty.cursor == (try await kinto.timestamp()))

            for (id, title) in [("a", "A"), ("b", "B"), ("c", "C")] {
                try await kinto.put(KintoNote(id: id, title: title))
            }
            let full = try await remote.pull(since: nil)
            #expect(full.changed.map(\.record.id) == ["a", "b", "c"])
            #expect(full.deleted.isEmpty)
            #expect(!full.hasMore)
            #expect(full.cursor == (try await kinto.timestamp()))
            let versions = try await kinto.records(KintoNote.self).map { String($0.lastModified) }
            #expect(full.changed.map(\.version) == versions)

            let bVersion = try await kinto.put(KintoNote(id: "b", title: "B2"))
            try await kinto.delete("a")
            let dVersion = try await kinto.put(KintoNote(id: "d", title: "D"))
            let delta = try await remote.pull(since: full.cursor)
            #expect(
                delta.changed == [
                    RemoteRecord(record: KintoNote(id: "b", title: "B2"), version: String(bVersion)),
                    RemoteRecord(record: KintoNote(id: "d", title: "D"), version: String(dVersion)),
                ])
            #expect(delta.deleted == ["a"])
            #expect(!delta.hasMore)
            #expect(delta.cursor == String(dVersion))
            #expect(delta.cursor == (try await kinto.timestamp()))

            let nothing = try await remote.pull(since: delta.cursor)
            #expect(nothing.changed.isEmpty && nothing.deleted.isEmpty && !nothing.hasMore)
            #expect(nothing.cursor == delta.cursor)
        }
    }

    @Test("12 records with paginate_by 5: three pages, each record once, the last cursor the collection's timestamp")
    func pagination() async throws {
        let kinto = try await KintoServer.fixture()
        let remote = remote(kinto)
        try await withRealTimeLimit("a paged pull", seconds: 120) {
            let ids = (1...12).map { String(format: "n%02d", $0) }
            for id in ids { try await kinto.put(KintoNote(id: id, title: id)) }
            var pages: [SyncPage<KintoNote>] = []
            var cursor: String?
            repeat {
                let page = try await remote.pull(since: cursor)
                pages.append(page)
                cursor = page.cursor
            } while pages.last!.hasMore && pages.count < 10
            #expect(pages.map(\.changed.count) == [5, 5, 2])
            #expect(pages.map(\.hasMore) == [true, true, false])
            #expect(pages.flatMap(\.changed).map(\.record.id) == ids)
            // A page that more follow ends at its last record's version.
            #expect(pages.dropLast().map(\.cursor) == pages.dropLast().map { $0.changed.last?.version })
            #expect(pages.last?.cursor == (try await kinto.timestamp()))
        }
    }

    @Test("a wrong password fails at once with the server's 401, not retryable, and writes nothing")
    func wrongPassword() async throws {
        let kinto = try await KintoServer.fixture()
        let remote = remote(kinto, password: "not-the-password")
        let error = try await withRealTimeLimit("a pull with a wrong password", seconds: 120) {
            await #expect(throws: HTTPLoadableError.self) { try await remote.pull(since: nil) }
        }
        guard let error, case .status(401, _, _) = error else {
            Issue.record("expected HTTP 401, got \(String(describing: error))")
            return
        }
        #expect(!error.isRetryable)
        #expect(error.header("WWW-Authenticate") != nil)
        let push = try await withRealTimeLimit("a push with a wrong password", seconds: 120) {
            await #expect(throws: HTTPLoadableError.self) {
                try await remote.push(.create(KintoNote(id: "n1", title: "Milk")), idempotencyKey: "k1")
            }
        }
        #expect(push?.isConflict == false)
        #expect(try await kinto.records(KintoNote.self).isEmpty)
    }
}

/// `KintoRemote` against a fake Kinto on a `LoopbackHTTPServer`: what a memory-backend Kinto does
/// not do (a `409` with `Retry-After`, `Backoff`, broken answers) and what goes on the wire.
@MainActor
@Suite(.timeLimit(.minutes(2)))
struct KintoRemoteFakeServerTests {
    /// The time `KintoRemote` reads for its `Backoff` deadline, moved by the test.
    final class Now: Sendable {
        private let date = Locked(Date(timeIntervalSince1970: 1_800_000_000))
        var value: Date { date.withLock { $0 } }
        func advance(by seconds: TimeInterval) { date.withLock { $0 += seconds } }
    }

    let now = Now()

    /// A remote of bucket `b`, collection `c`, on `server`.
    private func remote(_ server: LoopbackHTTPServer, bucket: String = "b") -> KintoRemote<KintoNote> {
        let service = HTTPService(baseURL: server.url("/v1"))
        return KintoRemote(service: service, bucket: bucket, collection: "c") { [now] in now.value }
    }

    private static let recordsPath = "/v1/buckets/b/collections/c/records"

    @Test("what goes on the wire: the list's query, the preconditions, the key, the body in data")
    func requestsOnTheWire() async throws {
        let server = try LoopbackHTTPServer { request in
            switch request.method {
            case "GET": .json(#"{"data":[]}"#, headers: [.init("ETag", #""10""#)])
            case "DELETE": .json(#"{"data":{"id":"n1","last_modified":13,"deleted":true}}"#)
            default: .json(#"{"data":{"id":"n1","title":"Milk","done":false,"last_modified":12}}"#, status: 201)
            }
        }
        let remote = remote(server)
        try await withRealTimeLimit("requests to a fake Kinto", seconds: 120) {
            _ = try await remote.pull(since: nil)
            _ = try await remote.pull(since: "7")
            let note = KintoNote(id: "n1", title: "Milk")
            #expect(
                try await remote.push(.create(note), idempotencyKey: "k1")
                    == .applied(RemoteRecord(record: note, version: "12")))
            _ = try await remote.push(.update(note, base: "12"), idempotencyKey: "k2")
            #expect(try await remote.push(.delete("n1", base: "12"), idempotencyKey: "k3") == .deleted)
        }
        let requests = server.requests
        #expect(requests.map(\.method) == ["GET", "GET", "PUT", "PUT", "DELETE"])
        #expect(
            requests.map(\.target) == [
                Self.recordsPath + "?_sort=last_modified", Self.recordsPath + "?_sort=last_modified&_since=7",
                Self.recordsPath + "/n1", Self.recordsPath + "/n1", Self.recordsPath + "/n1",
            ])
        #expect(requests.map { $0.header("If-None-Match") } == [nil, nil, "*", nil, nil])
        #expect(requests.map { $0.header("If-Match") } == [nil, nil, nil, #""12""#, #""12""#])
        #expect(requests.map { $0.header("Idempotency-Key") } == [nil, nil, "k1", "k2", "k3"])
        // The record, whole, under `data`, and nothing else.
        for request in requests[2...3] {
            let body = try JSONDecoder().decode([String: KintoNote].self, from: request.body)
            #expect(body == ["data": KintoNote(id: "n1", title: "Milk")])
        }
        #expect(requests[2].header("Content-Type") == "application/json")
    }

    @Test("a 409 with Retry-After (Kinto on PostgreSQL, concurrent writes) is thrown as retryable, not a conflict")
    func conflictWithRetryAfter() async throws {
        let server = try LoopbackHTTPServer { _ in
            .json(
                #"{"code":409,"errno":122,"error":"Conflict","message":"Integrity constraint violated, please retry."}"#,
                status: 409, headers: [.init("Retry-After", "3")])
        }
        let remote = remote(server)
        let note = KintoNote(id: "n1", title: "Milk")
        for change in [RecordChange.create(note), .update(note, base: "12"), .delete("n1", base: "12")] {
            let error = try await withRealTimeLimit("a push answered 409", seconds: 120) {
                await #expect(throws: HTTPLoadableError.self) { try await remote.push(change, idempotencyKey: "k") }
            }
            #expect(error?.isRetryable == true)
            #expect(error?.isConflict == false)
            #expect(error?.retryAfter == .seconds(3))
        }
        // Thrown as it came: no read of the record after it.
        #expect(server.requests.map(\.method) == ["PUT", "PUT", "DELETE"])
    }

    @Test("Backoff holds the next pull and push with a retryable error that says how long, and sends nothing")
    func backoff() async throws {
        let server = try LoopbackHTTPServer { request in
            if request.method == "PUT" {
                return .json(
                    #"{"code":503,"errno":201,"error":"Service Unavailable"}"#, status: 503,
                    headers: [.init("Backoff", "60"), .init("Retry-After", "5")])
            }
            return .json(#"{"data":[]}"#, headers: [.init("ETag", #""10""#), .init("Backoff", "30")])
        }
        let remote = remote(server)
        try await withRealTimeLimit("pulls and pushes under Backoff", seconds: 120) {
            // The pull that brings the header completes.
            #expect(try await remote.pull(since: nil).cursor == "10")
            now.advance(by: 10)
            let held = await #expect(throws: KintoRemoteError.self) { try await remote.pull(since: "10") }
            #expect(held?.code == .backoff)
            #expect(held?.isRetryable == true)
            #expect(held?.retryAfter == .seconds(20))
            let heldPush = await #expect(throws: KintoRemoteError.self) {
                try await remote.push(.create(KintoNote(id: "n1", title: "Milk")), idempotencyKey: "k")
            }
            #expect(heldPush?.retryAfter == .seconds(20))
            #expect(server.requestCount == 1)

            // Over: the next pull goes (and is asked to wait again).
            now.advance(by: 20)
            _ = try await remote.pull(since: "10")
            #expect(server.requestCount == 2)

            // A refusal's Backoff counts too; a copy of the remote shares the deadline.
            now.advance(by: 30)
            let copy = remote
            await #expect(throws: HTTPLoadableError.self) {
                try await copy.push(.create(KintoNote(id: "n1", title: "Milk")), idempotencyKey: "k")
            }
            let afterRefusal = await #expect(throws: KintoRemoteError.self) { try await remote.pull(since: "10") }
            #expect(afterRefusal?.retryAfter == .seconds(60))
            #expect(server.requestCount == 3)
        }
    }

    @Test(
        "a broken answer is an error, not a trap",
        arguments: [
            ("not JSON", "<html>Bad gateway</html>"),
            ("no data", #"{"records":[]}"#),
            ("a record without last_modified", #"{"data":[{"id":"n1","title":"Milk","done":false}]}"#),
            ("a record of another shape", #"{"data":[{"id":"n1","last_modified":12}]}"#),
            ("a tombstone without id", #"{"data":[{"deleted":true,"last_modified":12}]}"#),
            ("a text last_modified", #"{"data":[{"id":"n1","title":"M","done":false,"last_modified":"12"}]}"#),
        ])
    func brokenPull(_ broken: (String, String)) async throws {
        let server = try LoopbackHTTPServer { _ in .json(broken.1) }
        let remote = remote(server)
        let error = try await withRealTimeLimit("a pull with \(broken.0)", seconds: 120) {
            await #expect(throws: HTTPLoadableError.self) { try await remote.pull(since: nil) }
        }
        guard case .decoding? = error else {
            Issue.record("expected HTTPLoadableError.decoding, got \(String(describing: error))")
            return
        }
        #expect(error?.isRetryable == false)
    }

    @Test("a push whose answer has no last_modified, or is not JSON, is an error")
    func brokenPush() async throws {
        let server = try LoopbackHTTPServer { request in
            request.method == "PUT" ? .json(#"{"data":{"id":"n1","title":"Milk","done":false}}"#) : .json("nope")
        }
        let remote = remote(server)
        let note = KintoNote(id: "n1", title: "Milk")
        try await withRealTimeLimit("pushes with broken answers", seconds: 120) {
            let put = await #expect(throws: HTTPLoadableError.self) {
                try await remote.push(.update(note, base: "1"), idempotencyKey: "k")
            }
            let delete = await #expect(throws: HTTPLoadableError.self) {
                try await remote.push(.delete("n1", base: "1"), idempotencyKey: "k")
            }
            for error in [put, delete] {
                guard case .decoding? = error else {
                    Issue.record("expected HTTPLoadableError.decoding, got \(String(describing: error))")
                    continue
                }
            }
        }
    }

    @Test(
        "an id that is not a Kinto id is refused, and nothing is sent",
        arguments: ["a/b", "../n1", "", "_n1", "-n1", "n 1", "n1?x=1", "é", "n1%2F"])
    func invalidID(_ id: String) async throws {
        let server = try LoopbackHTTPServer { _ in .status(500) }
        let remote = remote(server)
        for change in [RecordChange.create(KintoNote(id: id, title: "")), .delete(id, base: "1")] {
            let error = await #expect(throws: KintoRemoteError.self) {
                try await remote.push(change, idempotencyKey: "k")
            }
            #expect(error?.code == .invalidID)
            #expect(error?.invalidID == id)
            #expect(error?.isRetryable == false)
        }
        #expect(server.requestCount == 0)
    }

    @Test("a bucket name that is not a Kinto id is refused, for pulls and pushes, and nothing is sent")
    func invalidBucket() async throws {
        let server = try LoopbackHTTPServer { _ in .status(500) }
        let remote = remote(server, bucket: "../accounts")
        let pull = await #expect(throws: KintoRemoteError.self) { try await remote.pull(since: nil) }
        #expect(pull?.code == .invalidID)
        #expect(pull.map { "\($0)" }?.contains("bucket") == true)
        let push = await #expect(throws: KintoRemoteError.self) {
            try await remote.push(.create(KintoNote(id: "n1", title: "")), idempotencyKey: "k")
        }
        #expect(push?.invalidID == "../accounts")
        #expect(server.requestCount == 0)
    }

    @Test("a 412 whose record is gone: a create or an update conflicts with no record, a delete is done")
    func preconditionFailedThenGone() async throws {
        let server = try LoopbackHTTPServer { request in
            request.method == "GET"
                ? .json(#"{"code":404,"errno":110,"error":"Not Found"}"#, status: 404)
                : .json(#"{"code":412,"errno":114,"error":"Precondition Failed"}"#, status: 412)
        }
        let remote = remote(server)
        let note = KintoNote(id: "n1", title: "Milk")
        try await withRealTimeLimit("412s of records gone", seconds: 120) {
            let create = try await remote.push(.create(note), idempotencyKey: "k")
            let update = try await remote.push(.update(note, base: "1"), idempotencyKey: "k")
            let delete = try await remote.push(.delete("n1", base: "1"), idempotencyKey: "k")
            #expect(create == .conflict(remote: nil))
            #expect(update == .conflict(remote: nil))
            #expect(delete == .deleted)
        }
        #expect(server.requests.map(\.method) == ["PUT", "GET", "PUT", "GET", "DELETE", "GET"])
        #expect(server.requests.filter { $0.method == "GET" }.map { $0.header("If-Match") } == [nil, nil, nil])
    }

    @Test(
        "the last page's cursor: the ETag without quotes (a weak one too), else the last record's, else the given one",
        arguments: [
            (#""20""#, "5", "20"), (#"W/"20""#, "5", "20"), (nil, "5", "12"), ("garbage", "5", "12"),
        ] as [(String?, String?, String)])
    func lastCursor(etag: String?, since: String?, expected: String) async throws {
        let headers: [LoopbackHTTPServer.Header] = etag.map { [.init("ETag", $0)] } ?? []
        let server = try LoopbackHTTPServer { _ in
            .json(#"{"data":[{"id":"n1","title":"M","done":false,"last_modified":12}]}"#, headers: headers)
        }
        let page = try await withRealTimeLimit("a pull", seconds: 120) { try await remote(server).pull(since: since) }
        #expect(page.cursor == expected)
        #expect(!page.hasMore)
    }

    @Test("an empty last page without an ETag keeps the cursor it was given, or starts from 0")
    func emptyPageWithoutETag() async throws {
        let server = try LoopbackHTTPServer { _ in .json(#"{"data":[]}"#) }
        let remote = remote(server)
        try await withRealTimeLimit("pulls without an ETag", seconds: 120) {
            let given = try await remote.pull(since: "7")
            let first = try await remote.pull(since: nil)
            #expect(given.cursor == "7")
            #expect(first.cursor == "0")
        }
    }
}
