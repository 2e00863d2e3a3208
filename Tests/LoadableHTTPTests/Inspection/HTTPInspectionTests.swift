import Foundation
import LoadableHTTP
import LoadableSupport
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A note, as the server of the inspection tests keeps it.
struct InspectedNote: Codable, Sendable, Equatable {
    var text: String
}

/// What an `HTTPLoadable` tells an attached `LoadableInspector`: the status that ended each sync
/// (`200`, then `304` for contents confirmed), with the sync's duration on the inspector's clock.
/// One serialized suite: the attached inspector is the process's.
@MainActor
@Suite(.serialized, .timeLimit(.minutes(5))) final class HTTPInspectionTests {
    let clock = ManualClock()
    let session: URLSession

    init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 300
        session = URLSession(configuration: configuration)
    }

    deinit {
        session.invalidateAndCancel()
    }

    /// A server of one note with the `ETag` `"v1"`: a 304 to a request that carries it, a 200
    /// otherwise; each answer after 2 s on the test's clock.
    func makeServer() throws -> LoopbackHTTPServer {
        let clock = clock
        return try LoopbackHTTPServer { request in
            let answer: LoopbackHTTPServer.Response =
                request.header("If-None-Match") == #""v1""#
                ? .status(304, headers: [.init("ETag", #""v1""#)])
                : .status(
                    200, headers: [.init("ETag", #""v1""#), .init("Content-Type", "application/json")],
                    body: Data(#"{"text":"hello"}"#.utf8))
            return .after(.seconds(2), on: clock, answer)
        }
    }

    func makeNote(_ server: LoopbackHTTPServer, _ path: String = "/note") -> HTTPLoadable<InspectedNote> {
        HTTPLoadable<InspectedNote>(request: URLRequest(url: server.url(path)), transport: session, clock: clock)
    }

    /// Syncs `note` and answers its request 2 s later on the clock.
    func sync(_ note: HTTPLoadable<InspectedNote>, server: LoopbackHTTPServer, requests: Int) async throws {
        note.sync()
        await server.waitForRequests(requests)
        await settle { self.clock.pendingSleepCount == 1 }
        await clock.advance(by: .seconds(2))
        try await note.doneSyncing()
    }

    @Test("syncEnded carries 200, then 304 for contents confirmed, with the durations of the clock")
    func statusesOfSyncs() async throws {
        let label = "http-inspection.statuses"
        let server = try makeServer()
        try await withAttachedInspector(clock: clock) { inspector in
            let note = makeNote(server)
            note.inspectorLabel = label
            try await sync(note, server: server, requests: 1)
            #expect(note.contents == InspectedNote(text: "hello"))
            try await sync(note, server: server, requests: 2)
            #expect(server.requests.map { $0.header("If-None-Match") } == [nil, #""v1""#])
            let syncs = inspector.events(of: label).filter { $0.kind == .syncStarted || $0.kind == .syncEnded }
            #expect(
                syncs == [
                    .syncStarted(label: label, time: .zero),
                    .syncEnded(label: label, time: .seconds(2), duration: .seconds(2), result: .succeeded, status: 200),
                    .syncStarted(label: label, time: .seconds(2)),
                    .syncEnded(label: label, time: .seconds(4), duration: .seconds(2), result: .succeeded, status: 304),
                ])
            #expect(
                inspector.timeline().split(separator: "\n").filter { $0.contains(label) && $0.contains("syncEnded") }
                    == [
                        #"{"kind":"syncEnded","label":"\#(label)","time":2,"duration":2,"result":"succeeded","status":200}"#,
                        #"{"kind":"syncEnded","label":"\#(label)","time":4,"duration":2,"result":"succeeded","status":304}"#,
                    ])
        }
    }

    @Test("a sync that fails on a status carries no status")
    func failures() async throws {
        let label = "http-inspection.failures"
        let server = try LoopbackHTTPServer { _ in .status(503, headers: [.init("Retry-After", "30")]) }
        await withAttachedInspector(clock: clock) { inspector in
            let busy = makeNote(server, "/busy")
            busy.inspectorLabel = label
            try? await busy.synced()
            #expect(busy.loadableState == .didFailToSync)
            let ended = inspector.events(of: label).filter { $0.kind == .syncEnded }
            #expect(ended.count == 1)
            if case .syncEnded(_, _, _, .failed, let status) = ended.first {
                #expect(status == nil)
            } else {
                Issue.record("no failed syncEnded: \(ended)")
            }
        }
    }

    @Test("once the inspector is detached, the same syncs record nothing more")
    func nothingOnceDetached() async throws {
        let label = "http-inspection.detached"
        let server = try makeServer()
        let note = makeNote(server)
        note.inspectorLabel = label
        let inspector = try await withAttachedInspector(clock: clock) { inspector in
            try await sync(note, server: server, requests: 1)
            return inspector
        }
        #expect(inspector.events(of: label).map(\.kind) == [.syncStarted, .syncEnded])
        try await sync(note, server: server, requests: 2)
        #expect(note.loadableState == .didSyncSuccessfully)
        #expect(inspector.events(of: label).count == 2)
    }
}
