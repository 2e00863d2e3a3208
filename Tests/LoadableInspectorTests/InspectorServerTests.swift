import Foundation
import Loadable
import LoadableInspector
import LoadableTestSupport
import LoadableTesting
import Testing

/// The inspector's server on a real socket: the page, the data, the actions, the event stream,
/// and what it refuses.
@MainActor
@Suite("LoadableInspector.serve", .serialized)
struct InspectorServerTests {
    let clock = ManualClock()
    let inspector: LoadableInspector
    let server: LoadableInspectorServer

    init() throws {
        inspector = LoadableInspector(clock: clock)
        server = try inspector.serve()
    }

    @Test("the page and its assets are served with their content types")
    func page() async throws {
        let page = try await RawHTTPConnection.request("GET", "/", port: server.port)
        #expect(page.status == 200)
        #expect(page.headers["content-type"] == "text/html; charset=utf-8")
        #expect(page.text.contains(#"<table id="timeline""#))
        #expect(page.text.contains(#"<script src="/inspector.js">"#))
        let css = try await RawHTTPConnection.request("GET", "/inspector.css", port: server.port)
        #expect(css.status == 200)
        #expect(css.headers["content-type"] == "text/css; charset=utf-8")
        #expect(css.text.contains("#toast"))
        let script = try await RawHTTPConnection.request("GET", "/inspector.js", port: server.port)
        #expect(script.status == 200)
        #expect(script.headers["content-type"] == "text/javascript; charset=utf-8")
        #expect(script.text.contains("new EventSource(\"/events\")"))
        let missing = try await RawHTTPConnection.request("GET", "/nothing", port: server.port)
        #expect(missing.status == 404)
        let wrongMethod = try await RawHTTPConnection.request("DELETE", "/snapshot", port: server.port)
        #expect(wrongMethod.status == 405)
        #expect(server.url.absoluteString == "http://127.0.0.1:\(server.port)/")
    }

    @Test("/snapshot is the snapshot as JSON, /timeline the JSON Lines, /labels the action labels")
    func data() async throws {
        let loadable = AsyncLoadable<Int> { 1 }
        loadable.inspectorLabel = "counter"
        inspector.record(loadable) { .syncStarted(label: $0, time: $1) }
        await clock.advance(by: .milliseconds(1_500))
        inspector.record(loadable) { .invalidated(label: $0, time: $1, deferred: true) }

        let snapshot = try await RawHTTPConnection.request("GET", "/snapshot", port: server.port)
        #expect(snapshot.status == 200)
        #expect(snapshot.headers["content-type"] == "application/json")
        let decoded = try JSONDecoder().decode(LoadableInspectorSnapshot.self, from: snapshot.body)
        // A snapshot is of the whole process, whose other tests' stores change meanwhile: the
        // time is this inspector's, and the shape is the snapshot's.
        #expect(decoded.time == 1.5)
        #expect(decoded.time == inspector.snapshot().time)

        let timeline = try await RawHTTPConnection.request("GET", "/timeline", port: server.port)
        #expect(timeline.status == 200)
        #expect(timeline.headers["content-type"] == "application/jsonl; charset=utf-8")
        #expect(
            timeline.text == """
                {"kind":"syncStarted","label":"counter","time":0}
                {"kind":"invalidated","label":"counter","time":1.5,"deferred":true}

                """)
        #expect(timeline.text == inspector.timeline())

        let labels = try await RawHTTPConnection.request("GET", "/labels", port: server.port)
        // Store entries of other tests running now are action labels too.
        #expect(try JSONDecoder().decode([String].self, from: labels.body).contains("counter"))
    }

    @Test("POST /actions syncs the loadable that has the label, and answers {\"done\":true}")
    func actionReachesTheLoadable() async throws {
        var loads = 0
        let loadable = AsyncLoadable<Int> {
            loads += 1
            return 42
        }
        loadable.inspectorLabel = "answer"
        // The inspector reaches a loadable it has seen an event of.
        inspector.record(loadable) { .invalidated(label: $0, time: $1, deferred: false) }
        #expect(loadable.loadableState == .idle)

        let response = try await RawHTTPConnection.request(
            "POST", "/actions", port: server.port, body: #"{"action":"sync","label":"answer"}"#)
        #expect(response.status == 200)
        #expect(response.text == #"{"done":true}"#)
        await yield(until: { loadable.loadableState == .didSyncSuccessfully })
        #expect(loadable.contents == 42)
        #expect(loads == 1)

        let invalidate = try await RawHTTPConnection.request(
            "POST", "/actions", port: server.port, body: #"{"action":"invalidate","label":"answer"}"#)
        #expect(invalidate.status == 200)
        #expect(loadable.isStale)
    }

    @Test("POST /actions: 404 for a label no live object has, 400 with what is wrong for a bad body")
    func actionErrors() async throws {
        let unknown = try await RawHTTPConnection.request(
            "POST", "/actions", port: server.port, body: #"{"action":"sync","label":"nobody"}"#)
        #expect(unknown.status == 404)
        #expect(unknown.text.contains(#"labelled \"nobody\""#))

        let missingLabel = try await RawHTTPConnection.request(
            "POST", "/actions", port: server.port, body: #"{"action":"sync"}"#)
        #expect(missingLabel.status == 400)
        #expect(missingLabel.text.contains("`label` is missing"))

        let unknownAction = try await RawHTTPConnection.request(
            "POST", "/actions", port: server.port, body: #"{"action":"explode","label":"x"}"#)
        #expect(unknownAction.status == 400)
        #expect(unknownAction.text.contains(#"unknown action \"explode\""#))

        let notJSON = try await RawHTTPConnection.request("POST", "/actions", port: server.port, body: "sync it")
        #expect(notJSON.status == 400)
        #expect(notJSON.text.contains("not an action"))

        // Offline is simulated for the whole process (every activity monitor of every test): this
        // test only ends a simulation that is not running, which changes nothing, and checks that
        // the action is taken.
        let online = try await RawHTTPConnection.request(
            "POST", "/actions", port: server.port, body: #"{"action":"setOffline","offline":false}"#)
        #expect(online.status == 200)
        #expect(online.text == #"{"done":true}"#)
        let badOffline = try await RawHTTPConnection.request(
            "POST", "/actions", port: server.port, body: #"{"action":"setOffline","offline":"yes"}"#)
        #expect(badOffline.status == 400)
        #expect(badOffline.text.contains("expected Bool at `offline`"))
    }

    @Test("POST /actions refuses a body that is not JSON, and a page of another origin (a form elsewhere)")
    func actionsComeFromThePageOnly() async throws {
        let loadable = AsyncLoadable<Int> { 1 }
        loadable.inspectorLabel = "target"
        inspector.record(loadable) { .invalidated(label: $0, time: $1, deferred: false) }
        let action = #"{"action":"sync","label":"target"}"#
        let form = try await RawHTTPConnection.request(
            "POST", "/actions", port: server.port, body: action, headers: ["Content-Type: text/plain"])
        #expect(form.status == 415)
        #expect(form.text.contains("application/json"))
        let elsewhere = try await RawHTTPConnection.request(
            "POST", "/actions", port: server.port, body: action,
            headers: ["Content-Type: application/json", "Origin: https://evil.example"])
        #expect(elsewhere.status == 403)
        #expect(elsewhere.text.contains("not from https://evil.example"))
        #expect(loadable.loadableState == .idle)
        let page = try await RawHTTPConnection.request(
            "POST", "/actions", port: server.port, body: action,
            headers: ["Content-Type: application/json; charset=utf-8", "Origin: http://localhost:\(server.port)"])
        #expect(page.status == 200)
    }

    @Test("/events sends every recorded event, then each new one as it is recorded")
    func serverSentEventsReplayThenLive() async throws {
        inspector.record(.syncStarted(label: "a", time: .zero))
        inspector.record(
            .syncEnded(label: "a", time: .seconds(1), duration: .seconds(1), result: .succeeded, status: 304))
        let port = server.port
        let connection = try await blocking {
            let connection = try RawHTTPConnection(port: port)
            try connection.send("GET /events HTTP/1.1\r\nHost: localhost:\(port)\r\nAccept: text/event-stream\r\n\r\n")
            return connection
        }
        let replayed = try await blocking { connection.read { serverSentEvents(in: $0).count >= 2 } }
        let head = try RawHTTPConnection.parse(replayed.data)
        #expect(head.status == 200)
        #expect(head.headers["content-type"] == "text/event-stream; charset=utf-8")
        #expect(
            serverSentEvents(in: replayed.data) == [
                #"{"kind":"syncStarted","label":"a","time":0}"#,
                #"{"kind":"syncEnded","label":"a","time":1,"duration":1,"result":"succeeded","status":304}"#,
            ])

        inspector.record(.paused(label: "b", time: .seconds(2), reason: .offline))
        let live = try await blocking { connection.read { serverSentEvents(in: $0).count >= 3 } }
        #expect(serverSentEvents(in: live.data).last == #"{"kind":"paused","label":"b","time":2,"reason":"offline"}"#)
        #expect(!live.closed)
    }

    @Test("a client that leaves ends its event stream on the server")
    func clientThatLeavesEndsItsStream() async throws {
        let server = server
        let port = server.port
        var connection: RawHTTPConnection? = try await blocking {
            let connection = try RawHTTPConnection(port: port)
            try connection.send("GET /events HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
            return connection
        }
        let opened = try await blocking { server.waitForOpenEventStreams(1, seconds: 20) }
        #expect(opened)
        #expect(server.openEventStreamCount == 1)
        _ = connection
        connection = nil  // closes the socket
        // Within less than the heartbeat (15 s), whose failed write would end it anyway.
        let ended = try await blocking { server.waitForOpenEventStreams(0, seconds: 10) }
        #expect(ended, "the server did not notice that the client left")
    }

    @Test("stop() ends an open event stream, and the server then refuses connections")
    func stopEndsTheEventStream() async throws {
        inspector.record(.resumed(label: "a", time: .zero))
        let port = server.port
        let connection = try await blocking {
            let connection = try RawHTTPConnection(port: port)
            try connection.send("GET /events HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
            return connection
        }
        let replayed = try await blocking { connection.read { serverSentEvents(in: $0).count >= 1 } }
        #expect(!replayed.closed)
        server.stop()
        let ended = try await blocking { connection.read() }
        #expect(ended.closed, "the stream is still open after stop()")
        server.stop()  // a second stop does nothing
        #expect(throws: RawHTTPConnection.Failure.self) { try RawHTTPConnection(port: port) }
    }

    @Test("a Host other than 127.0.0.1:<port> or localhost:<port> is refused (DNS rebinding)")
    func otherHostsAreRefused() async throws {
        let port = server.port
        for host in ["evil.example:\(port)", "127.0.0.1", "localhost:1", "127.0.0.1.nip.io:\(port)"] {
            let response = try await RawHTTPConnection.request("GET", "/snapshot", port: port, host: host)
            #expect(response.status == 403, "Host: \(host)")
            #expect(response.text.contains("127.0.0.1:\(port) or localhost:\(port)"))
        }
        let localhost = try await RawHTTPConnection.request("GET", "/snapshot", port: port, host: "localhost:\(port)")
        #expect(localhost.status == 200)
        let noHost = try await blocking {
            let connection = try RawHTTPConnection(port: port)
            try connection.send("GET / HTTP/1.0\r\n\r\n")
            return try RawHTTPConnection.parse(connection.read().data)
        }
        #expect(noHost.status == 403)
    }

    @Test("serve refuses an address other than 127.0.0.1, and a port out of range, saying which")
    func refusesOtherAddresses() throws {
        let error = #expect(throws: LoadableInspectorServer.ServeError.self) {
            try inspector.serve(address: "0.0.0.0")
        }
        #expect(error?.reason == .addressNotServed)
        #expect(error?.description.contains("address \"0.0.0.0\"") == true)
        #expect(error?.description.contains("served on 127.0.0.1 only") == true)
        let portError = #expect(throws: LoadableInspectorServer.ServeError.self) {
            try inspector.serve(port: 70_000)
        }
        #expect(portError?.reason == .portOutOfRange)
        #expect(portError?.description.contains("port must be in 0...65535") == true)
        let taken = #expect(throws: LoadableInspectorServer.ServeError.self) {
            try inspector.serve(port: server.port)
        }
        #expect(taken?.reason == .socketFailed)
        let localhost = try inspector.serve(address: "localhost")
        #expect(localhost.port != server.port)
    }
}
