import Foundation
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

private typealias Header = LoopbackHTTPServer.Header

/// `LoopbackHTTPServer` against real clients: URLSession, and a raw POSIX client for what
/// URLSession cannot show (exact bytes, malformed requests, hang-ups, refused connections).
/// Nothing sleeps: every wait is on real I/O or on the server's own waits.
@Suite("LoopbackHTTPServer", .timeLimit(.minutes(5)))
struct LoopbackHTTPServerTests {
    // The type's documentation example, verbatim.
    @Test func loadsTheSecondPage() async throws {
        let server = try LoopbackHTTPServer { request in
            request.path == "/feed" ? .json(#"{"items":[]}"#) : .status(404)
        }
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(from: server.url("/feed?page=2"))
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: data, as: UTF8.self) == #"{"items":[]}"#)
        #expect(server.requests.map(\.target) == ["/feed?page=2"])
    }

    @Test("a JSON round trip: the client sees status, headers and body; the server records the request")
    func jsonRoundTrip() async throws {
        let server = try LoopbackHTTPServer { request in
            .json(#"{"id":7}"#, status: 201, headers: [Header("X-Request-Path", request.path)])
        }
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        var request = URLRequest(url: server.url("/posts?draft=1"))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("tests", forHTTPHeaderField: "X-Client")
        request.httpBody = Data(#"{"title":"Hi"}"#.utf8)

        let (data, response) = try await session.data(for: request)

        let http = try #require(response as? HTTPURLResponse)
        #expect(http.statusCode == 201)
        #expect(http.value(forHTTPHeaderField: "Content-Type") == "application/json")
        #expect(http.value(forHTTPHeaderField: "X-Request-Path") == "/posts")
        #expect(http.value(forHTTPHeaderField: "Content-Length") == "8")
        #expect(String(decoding: data, as: UTF8.self) == #"{"id":7}"#)

        let received = try #require(server.requests.first)
        #expect(server.requestCount == 1)
        #expect(received.method == "POST")
        #expect(received.target == "/posts?draft=1")
        #expect(received.path == "/posts")
        #expect(received.httpVersion == "HTTP/1.1")
        #expect(received.header("x-client") == "tests")
        #expect(received.header("X-CLIENT") == "tests")
        #expect(received.header("content-type") == "application/json")
        #expect(received.header("X-Missing") == nil)
        #expect(received.headers.contains(Header("X-Client", "tests")))
        #expect(received.body == Data(#"{"title":"Hi"}"#.utf8))
    }

    @Test("sequential requests reuse the connection (keep-alive)")
    func keepAlive() async throws {
        let server = try LoopbackHTTPServer { request in .json(#""\#(request.path)""#) }
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        for index in 0..<10 {
            let (data, response) = try await session.data(from: server.url("/item/\(index)"))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(String(decoding: data, as: UTF8.self) == #""/item/\#(index)""#)
        }
        #expect(server.requestCount == 10)
        #expect(server.connectionCount < 10)
    }

    @Test("a raw client: pipelined requests are answered in order on one connection; Connection: close ends it")
    func pipelinedRequests() async throws {
        let server = try LoopbackHTTPServer { request in .status(200, body: Data(request.path.utf8)) }
        let text = await exchange(
            port: server.port,
            "GET /first HTTP/1.1\r\nHost: a\r\n\r\nGET /second HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        #expect(
            text.string
                == "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n/first"
                + "HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\n/second")
        #expect(text.closed)
        #expect(server.connectionCount == 1)
        #expect(server.requests.map(\.path) == ["/first", "/second"])
    }

    @Test("HTTP/1.0 closes after the response unless it asks for keep-alive")
    func http10() async throws {
        let server = try LoopbackHTTPServer { _ in .status(204) }
        let closing = await exchange(port: server.port, "GET / HTTP/1.0\r\n\r\n")
        #expect(closing.string == "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
        #expect(closing.closed)

        let connection = try #require(RawConnection(port: server.port))
        let keptAlive = "HTTP/1.1 204 No Content\r\nConnection: keep-alive\r\n\r\n"
        // Both requests from one thread: a hop through Swift concurrency between them can take
        // seconds on a loaded machine, and the test is about the server, not about its idle timeout.
        let (kept, second) = await onThread {
            connection.write("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            let kept = connection.read(count: keptAlive.utf8.count)
            connection.write("GET / HTTP/1.0\r\n\r\n")
            return (kept, connection.readToEnd())
        }
        #expect(String(decoding: kept, as: UTF8.self) == keptAlive)
        #expect(second.string == "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
        #expect(second.closed)
        #expect(server.connectionCount == 2)
    }

    @Test("a HEAD request gets Content-Length without the body")
    func head() async throws {
        let server = try LoopbackHTTPServer { _ in .status(200, body: Data("hello".utf8)) }
        let text = await exchange(port: server.port, "HEAD / HTTP/1.1\r\nConnection: close\r\n\r\n")
        #expect(text.string == "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n")
    }

    @Test("Expect: 100-continue gets 100 Continue before the body is sent")
    func expectContinue() async throws {
        let server = try LoopbackHTTPServer { request in .status(200, body: request.body) }
        let connection = try #require(RawConnection(port: server.port))
        // One thread for the whole exchange, as in `http10()`.
        let (interim, final) = await onThread {
            connection.write(
                "PUT /x HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n")
            let interim = connection.read(count: 25)
            connection.write("body")
            return (interim, connection.readToEnd())
        }
        #expect(String(decoding: interim, as: UTF8.self) == "HTTP/1.1 100 Continue\r\n\r\n")
        #expect(final.string == "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody")
        #expect(server.requests.map(\.body) == [Data("body".utf8)])
    }

    @Test("a Content-Length given by the handler is sent as given, once, even when wrong")
    func explicitContentLength() async throws {
        let server = try LoopbackHTTPServer { request in
            let length = request.path == "/wrong" ? "3" : "5"
            return .status(200, headers: [Header("content-length", length)], body: Data("hello".utf8))
        }
        let right = await exchange(port: server.port, "GET /right HTTP/1.1\r\nConnection: close\r\n\r\n")
        #expect(right.string == "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nConnection: close\r\n\r\nhello")
        let wrong = await exchange(port: server.port, "GET /wrong HTTP/1.1\r\nConnection: close\r\n\r\n")
        #expect(wrong.string == "HTTP/1.1 200 OK\r\ncontent-length: 3\r\nConnection: close\r\n\r\nhello")

        // URLSession sees one Content-Length, not two.
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(from: server.url("/right"))
        #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Content-Length") == "5")
        #expect(data == Data("hello".utf8))
    }

    @Test("a status code without a standard reason phrase gets \"Status\"")
    func unknownReasonPhrase() async throws {
        let server = try LoopbackHTTPServer { _ in .status(799) }
        let text = await exchange(port: server.port, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
        #expect(text.string == "HTTP/1.1 799 Status\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    }

    @Test(".raw bytes arrive verbatim, then the connection closes")
    func rawBytes() async throws {
        let bytes = Data([0xFF, 0x00, 0xFE]) + Data("HTTP/1.1 200 OK\r\nContent-Len".utf8)
        let server = try LoopbackHTTPServer { _ in .raw(bytes) }
        let reply = await exchange(port: server.port, "GET / HTTP/1.1\r\n\r\n")
        #expect(reply.bytes == [UInt8](bytes))
        #expect(reply.closed)
        #expect(server.heldConnectionCount == 0)
    }

    @Test(".raw(thenHold: true) sends the bytes, then holds the connection until the client closes it")
    func rawBytesThenHold() async throws {
        let bytes = Data("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort".utf8)
        let server = try LoopbackHTTPServer { _ in .raw(bytes, thenHold: true) }
        let connection = try #require(RawConnection(port: server.port))
        let received = await onThread {
            connection.write("GET / HTTP/1.1\r\n\r\n")
            return connection.read(count: bytes.count)
        }
        #expect(received == [UInt8](bytes))
        await server.waitForRequests(1)
        #expect(server.heldConnectionCount == 1)
        connection.hangUp()
        await server.waitUntilNoConnectionIsHeld()
        #expect(server.heldConnectionCount == 0)
    }

    @Test(".hold keeps the request pending until the client cancels it")
    func holdUntilCancelled() async throws {
        let server = try LoopbackHTTPServer { _ in .hold }
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let load = Task { try await session.data(from: server.url("/slow")) }
        await server.waitForRequests(1)
        #expect(server.heldConnectionCount == 1)
        load.cancel()
        await server.waitUntilNoConnectionIsHeld()
        #expect(server.heldConnectionCount == 0)
        // URLSession reports the cancellation as a URLError, not a CancellationError.
        let error = await #expect(throws: URLError.self) { try await load.value }
        #expect(error?.code == .cancelled)
    }

    @Test("stop() ends a held request with an error at the client, and pending waits return")
    func stopEndsHeldRequest() async throws {
        let server = try LoopbackHTTPServer { _ in .hold }
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let load = Task { try await session.data(from: server.url("/slow")) }
        await server.waitForRequests(1)
        let waiter = Task { await server.waitForRequests(2) }
        let arrivalWaiter = Task { await server.waitForArrivals(2) }
        server.stop()
        server.stop()  // idempotent
        await waiter.value
        await arrivalWaiter.value
        await server.waitForRequests(100)  // returns at once once stopped
        await server.waitForArrivals(100)
        await server.waitUntilNoConnectionIsHeld()
        // The client sees the connection end without a response: on Linux URLSession reports
        // "Empty reply from server" (badServerResponse), on Darwin a lost connection.
        let error = await #expect(throws: URLError.self) { try await load.value }
        #expect(error?.code != .cancelled)
        #expect(await RawConnection.isUnanswered(port: server.port))
        #expect(server.requestCount == 1)
    }

    @Test("the server stops by itself when its lifetime ends")
    func lifetime() async throws {
        let server = try LoopbackHTTPServer(lifetime: .milliseconds(100)) { _ in .status(200) }
        await server.waitForRequests(1)  // returns when the server stops
        #expect(server.requestCount == 0)
        #expect(await RawConnection.isUnanswered(port: server.port))
    }

    @Test("a client that hangs up in the middle of a large response does not disturb the server")
    func clientHangsUpMidResponse() async throws {
        let large = Data(repeating: 0x61, count: 8 * 1024 * 1024)
        let server = try LoopbackHTTPServer { request in
            request.path == "/large" ? .status(200, body: large) : .status(200, body: Data("small".utf8))
        }
        for _ in 0..<3 {
            let connection = try #require(RawConnection(port: server.port))
            let start = await onThread {
                connection.write("GET /large HTTP/1.1\r\n\r\n")
                return connection.read(count: 1024)
            }
            #expect(start.count == 1024)
            connection.resetOnClose()
        }
        await server.waitForRequests(3)
        let after = await exchange(port: server.port, "GET /small HTTP/1.1\r\nConnection: close\r\n\r\n")
        #expect(after.string.hasSuffix("\r\n\r\nsmall"))
        #expect(server.requestCount == 4)
    }

    /// Requests the server answers itself, without the handler, closing the connection.
    enum Refused: String, CaseIterable, Sendable {
        case malformedRequestLine, missingVersion, badVersion, unsupportedVersion, malformedHeader
        case oversizedHead, badContentLength, oversizedBody, chunkedBody

        var request: String {
            switch self {
            case .malformedRequestLine: "NONSENSE\r\n\r\n"
            case .missingVersion: "GET /\r\n\r\n"
            case .badVersion: "GET / HTTP/one\r\n\r\n"
            case .unsupportedVersion: "GET / HTTP/2.0\r\n\r\n"
            case .malformedHeader: "GET / HTTP/1.1\r\nno colon here\r\n\r\n"
            case .oversizedHead: "GET / HTTP/1.1\r\nX-Big: \(String(repeating: "a", count: 70_000))\r\n\r\n"
            case .badContentLength: "POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n"
            case .oversizedBody: "POST / HTTP/1.1\r\nContent-Length: 16777217\r\n\r\n"
            case .chunkedBody: "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
            }
        }

        var statusLine: String {
            switch self {
            case .malformedRequestLine, .missingVersion, .badVersion, .malformedHeader, .badContentLength:
                "HTTP/1.1 400 Bad Request"
            case .unsupportedVersion: "HTTP/1.1 505 HTTP Version Not Supported"
            case .oversizedHead: "HTTP/1.1 431 Request Header Fields Too Large"
            case .oversizedBody: "HTTP/1.1 413 Content Too Large"
            case .chunkedBody: "HTTP/1.1 501 Not Implemented"
            }
        }
    }

    @Test("a request the server cannot take gets an error status and a closed connection", arguments: Refused.allCases)
    func refused(_ refused: Refused) async throws {
        let server = try LoopbackHTTPServer { _ in .status(200) }
        let reply = await exchange(port: server.port, refused.request)
        #expect(reply.string.hasPrefix(refused.statusLine + "\r\n"))
        #expect(reply.string.contains("\r\nConnection: close\r\n"))
        #expect(reply.closed)
        #expect(server.requestCount == 0)
        #expect(server.arrivals == 0)
        // The server still answers the next client.
        let next = await exchange(port: server.port, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
        #expect(next.string.hasPrefix("HTTP/1.1 200 OK\r\n"))
    }

    @Test("a JSON response's Content-Type can be replaced")
    func jsonContentType() async throws {
        let server = try LoopbackHTTPServer { _ in
            .json("{}", headers: [Header("Content-Type", "application/problem+json")])
        }
        let reply = await exchange(port: server.port, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
        #expect(
            reply.string
                == "HTTP/1.1 200 OK\r\nContent-Type: application/problem+json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
        )
    }

    @Test("url(_:) with a path that does not start with / stops the program with a message")
    func urlNeedsLeadingSlash() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let server = try LoopbackHTTPServer { _ in .status(200) }
            _ = server.url("feed")
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains(#"LoopbackHTTPServer.url(_:): the path must start with "/", got "feed""#))
        }
    }

    @Test("a status code outside 100...999 stops the program with a message")
    func statusCodeRange() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = LoopbackHTTPServer.Response.status(1000)
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("LoopbackHTTPServer.Response.status(_:): the code must be in 100...999, got 1000"))
        }
    }

    @Test("a released server is freed, answers no new connection and closes the open ones")
    func release() async throws {
        var server: LoopbackHTTPServer? = try LoopbackHTTPServer { _ in .hold }
        let port = try #require(server?.port)
        let held = try #require(RawConnection(port: port))
        let idle = try #require(RawConnection(port: port))
        await onThread { held.write("GET / HTTP/1.1\r\n\r\n") }
        await server?.waitForRequests(1)
        #expect(server?.heldConnectionCount == 1)
        weak let weakServer = server
        server = nil
        #expect(weakServer == nil)
        #expect(await RawConnection.isUnanswered(port: port))
        // Both connection threads end and close their sockets: the client reads the end.
        let heldEnd = await onThread { held.readToEnd() }
        let idleEnd = await onThread { idle.readToEnd() }
        #expect(heldEnd.closed && heldEnd.bytes.isEmpty)
        #expect(idleEnd.closed && idleEnd.bytes.isEmpty)
    }

    @Test("50 concurrent requests are all answered")
    func concurrentRequests() async throws {
        let server = try LoopbackHTTPServer { request in .json(#""\#(request.path)""#) }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = 50
        let session = URLSession(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        let bodies = try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for index in 0..<50 {
                group.addTask {
                    let (data, _) = try await session.data(from: server.url("/item/\(index)"))
                    return (index, String(decoding: data, as: UTF8.self))
                }
            }
            return try await group.reduce(into: [Int: String]()) { $0[$1.0] = $1.1 }
        }
        #expect(bodies.count == 50)
        for (index, body) in bodies { #expect(body == #""/item/\#(index)""#) }
        #expect(server.requestCount == 50)
        #expect(Set(server.requests.map(\.path)).count == 50)
    }

    @Test("50 concurrent raw connections each get their answer")
    func concurrentConnections() async throws {
        let server = try LoopbackHTTPServer { request in .status(200, body: Data(request.path.utf8)) }
        let replies = await withTaskGroup(of: (Int, Reply).self) { group in
            for index in 0..<50 {
                group.addTask {
                    (index, await exchange(port: server.port, "GET /\(index) HTTP/1.1\r\nConnection: close\r\n\r\n"))
                }
            }
            return await group.reduce(into: [Int: Reply]()) { $0[$1.0] = $1.1 }
        }
        #expect(replies.count == 50)
        for (index, reply) in replies { #expect(reply.string.hasSuffix("\r\n\r\n/\(index)")) }
        #expect(server.connectionCount == 50)
    }

    // MARK: Answers later: a delay on the test's clock, a gate the test opens

    @Test(".after answers once the delay passed on the test's clock, and holds the connection until then")
    func delayedAnswer() async throws {
        let clock = ManualClock()
        let server = try LoopbackHTTPServer { _ in .after(.seconds(2), on: clock, .json(#"{"late":true}"#)) }
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let load = Task { try await session.data(from: server.url("/slow")) }
        await server.waitForRequests(1)
        await clock.waitForSleepers()
        #expect(server.heldConnectionCount == 1)
        await clock.advance(by: .seconds(1))
        #expect(server.heldConnectionCount == 1)
        #expect(clock.pendingSleepCount == 1)
        await clock.advance(by: .seconds(1))
        let (data, response) = try await load.value
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: data, as: UTF8.self) == #"{"late":true}"#)
        await server.waitUntilNoConnectionIsHeld()
        #expect(clock.requestedSleeps == [.seconds(2)])
    }

    // The example of `Response.after(_:on:_:)`: no wait for the sleeper before moving the clock.
    @Test("the delay counts from when the handler returned, even if the clock moves before its sleep starts")
    func delayCountsFromTheHandler() async throws {
        let clock = ManualClock()
        let server = try LoopbackHTTPServer { _ in .after(.seconds(2), on: clock, .json("[]")) }
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let load = Task { try await session.data(from: server.url("/slow")) }
        await server.waitForRequests(1)
        await clock.advance(by: .seconds(2))  // now the answer goes out
        let (data, _) = try await load.value
        #expect(data == Data("[]".utf8))
    }

    @Test("a zero delay answers at once")
    func zeroDelay() async throws {
        let clock = ManualClock()
        let server = try LoopbackHTTPServer { _ in .after(.zero, on: clock, .status(204)) }
        let reply = await exchange(port: server.port, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
        #expect(reply.string == "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
    }

    @Test("a client that cancels a delayed request ends the hold and the sleep; the server goes on")
    func delayedAnswerCancelled() async throws {
        let clock = ManualClock()
        let server = try LoopbackHTTPServer { request in
            request.path == "/slow" ? .after(.seconds(5), on: clock, .status(200)) : .status(204)
        }
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let load = Task { try await session.data(from: server.url("/slow")) }
        await server.waitForRequests(1)
        await clock.waitForSleepers()
        load.cancel()
        await server.waitUntilNoConnectionIsHeld()
        #expect(clock.pendingSleepCount == 0)
        let error = await #expect(throws: URLError.self) { try await load.value }
        #expect(error?.code == .cancelled)
        await clock.advance(by: .seconds(5))  // the cancelled answer is never sent
        let (_, response) = try await session.data(from: server.url("/next"))
        #expect((response as? HTTPURLResponse)?.statusCode == 204)
    }

    @Test("a gate holds every answer on it until it opens; later requests pass at once")
    func gate() async throws {
        let gate = LoopbackHTTPServer.Gate()
        let server = try LoopbackHTTPServer { request in .gated(gate, .json(#""\#(request.path)""#)) }
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let first = Task { try await session.data(from: server.url("/a")) }
        let second = Task { try await session.data(from: server.url("/b")) }
        await server.waitForRequests(2)
        #expect(server.heldConnectionCount == 2)
        #expect(!gate.isOpen)
        gate.open()
        #expect(gate.isOpen)
        #expect(String(decoding: try await first.value.0, as: UTF8.self) == #""/a""#)
        #expect(String(decoding: try await second.value.0, as: UTF8.self) == #""/b""#)
        await server.waitUntilNoConnectionIsHeld()
        let (later, _) = try await session.data(from: server.url("/c"))
        #expect(String(decoding: later, as: UTF8.self) == #""/c""#)
        gate.open()  // again: nothing changes
        #expect(server.heldConnectionCount == 0)
    }

    @Test("a client that cancels a request held on a gate ends the hold; opening the gate later sends nothing")
    func gatedAnswerCancelled() async throws {
        let gate = LoopbackHTTPServer.Gate()
        let server = try LoopbackHTTPServer { request in
            request.path == "/slow" ? .gated(gate, .status(200)) : .status(204)
        }
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let load = Task { try await session.data(from: server.url("/slow")) }
        await server.waitForRequests(1)
        load.cancel()
        await server.waitUntilNoConnectionIsHeld()
        let error = await #expect(throws: URLError.self) { try await load.value }
        #expect(error?.code == .cancelled)
        gate.open()
        let (_, response) = try await session.data(from: server.url("/next"))
        #expect((response as? HTTPURLResponse)?.statusCode == 204)
    }

    @Test("a request pipelined behind a held one waits, then is answered in order on the same connection")
    func pipelinedBehindAGate() async throws {
        let gate = LoopbackHTTPServer.Gate()
        let server = try LoopbackHTTPServer { request in
            request.path == "/first"
                ? .gated(gate, .status(200, body: Data("1".utf8))) : .status(200, body: Data("2".utf8))
        }
        let connection = try #require(RawConnection(port: server.port))
        await onThread {
            connection.write("GET /first HTTP/1.1\r\n\r\nGET /second HTTP/1.1\r\nConnection: close\r\n\r\n")
        }
        await server.waitForRequests(1)
        #expect(server.arrivals == 1)
        gate.open()
        let reply = await onThread { connection.readToEnd() }
        #expect(
            reply.string
                == "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1"
                + "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\n2")
        #expect(server.requests.map(\.path) == ["/first", "/second"])
    }

    @Test("waits nest: a delay inside a gate starts when the gate opens")
    func delayInsideAGate() async throws {
        let clock = ManualClock()
        let gate = LoopbackHTTPServer.Gate()
        let server = try LoopbackHTTPServer { _ in .gated(gate, .after(.seconds(1), on: clock, .status(204))) }
        let connection = try #require(RawConnection(port: server.port))
        await onThread { connection.write("GET / HTTP/1.1\r\nConnection: close\r\n\r\n") }
        await server.waitForRequests(1)
        #expect(clock.pendingSleepCount == 0)
        gate.open()
        await clock.waitForSleepers()
        #expect(server.heldConnectionCount == 1)
        await clock.advance(by: .seconds(1))
        let reply = await onThread { connection.readToEnd() }
        #expect(reply.string == "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
        await server.waitUntilNoConnectionIsHeld()
    }

    @Test("stop() ends the answers waiting on a delay or a gate: nothing is sent, the sleep and the threads end")
    func stopEndsWaitingAnswers() async throws {
        let clock = ManualClock()
        let gate = LoopbackHTTPServer.Gate()
        let server = try LoopbackHTTPServer { request in
            request.path == "/delayed" ? .after(.seconds(1), on: clock, .status(200)) : .gated(gate, .status(200))
        }
        let delayed = try #require(RawConnection(port: server.port))
        let gated = try #require(RawConnection(port: server.port))
        await onThread {
            delayed.write("GET /delayed HTTP/1.1\r\n\r\n")
            gated.write("GET /gated HTTP/1.1\r\n\r\n")
        }
        await server.waitForRequests(2)
        await clock.waitForSleepers()
        #expect(server.heldConnectionCount == 2)
        server.stop()
        let delayedEnd = await onThread { delayed.readToEnd() }
        let gatedEnd = await onThread { gated.readToEnd() }
        #expect(delayedEnd.closed && delayedEnd.bytes.isEmpty)
        #expect(gatedEnd.closed && gatedEnd.bytes.isEmpty)
        await server.waitUntilNoConnectionIsOpen()
        #expect(server.openConnectionCount == 0)
        #expect(clock.pendingSleepCount == 0)
    }

    @Test("a released server releases the requests held on a gate")
    func releaseEndsGatedAnswers() async throws {
        let gate = LoopbackHTTPServer.Gate()
        var server: LoopbackHTTPServer? = try LoopbackHTTPServer { _ in .gated(gate, .status(200)) }
        let port = try #require(server?.port)
        let held = try #require(RawConnection(port: port))
        await onThread { held.write("GET / HTTP/1.1\r\n\r\n") }
        await server?.waitForRequests(1)
        #expect(server?.heldConnectionCount == 1)
        weak let weakServer = server
        server = nil
        #expect(weakServer == nil)
        let heldEnd = await onThread { held.readToEnd() }
        #expect(heldEnd.closed && heldEnd.bytes.isEmpty)
        gate.open()  // after the server is gone: nothing happens
    }

    @Test("arrivals counts a request before its handler runs; requests records it once the handler returned")
    func arrivals() async throws {
        let release = DispatchSemaphore(value: 0)
        let server = try LoopbackHTTPServer { _ in
            _ = release.wait(timeout: .now() + 60)  // a slow handler
            return .status(204)
        }
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let load = Task { try await session.data(from: server.url("/slow")) }
        await server.waitForArrivals(1)
        #expect(server.arrivals == 1)
        #expect(server.requestCount == 0)  // the handler still runs
        release.signal()
        _ = try await load.value
        #expect(server.requestCount == 1)
        #expect(server.arrivals == 1)
        await server.waitForArrivals(0)  // already met: returns at once
    }

    @Test("Response.after with a negative delay stops the program with a message")
    func negativeDelay() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = LoopbackHTTPServer.Response.after(.seconds(-1), on: ContinuousClock(), .status(200))
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(
                text.contains(
                    "LoopbackHTTPServer.Response.after(_:on:_:): the delay must be >= .zero, got -1.0 seconds"))
        }
    }

    // MARK: Streamed bodies

    @Test("a streamed body with Content-Length: URLSession reads byteCount zero bytes")
    func streamWithContentLength() async throws {
        let server = try LoopbackHTTPServer { _ in
            .stream(byteCount: 1 << 20, headers: [Header("Content-Type", "application/octet-stream")])
        }
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(from: server.url("/large"))
        let http = try #require(response as? HTTPURLResponse)
        #expect(http.statusCode == 200)
        #expect(http.value(forHTTPHeaderField: "Content-Length") == "1048576")
        #expect(http.value(forHTTPHeaderField: "Content-Type") == "application/octet-stream")
        #expect(data == Data(count: 1 << 20))
    }

    @Test("a chunked streamed body: chunked framing on the wire, and URLSession reads the zero bytes")
    func chunkedStream() async throws {
        let byteCount = 600_000
        let server = try LoopbackHTTPServer { _ in .stream(byteCount: byteCount, status: 201, contentLength: false) }
        let reply = await exchange(port: server.port, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
        let (head, body) = try #require(split(reply.bytes))
        #expect(head == "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        let chunks = try #require(dechunk(body))
        #expect(chunks.map(\.count) == [262_144, 262_144, 75_712])
        #expect(chunks.joined().allSatisfy { $0 == 0 })

        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(from: server.url("/large"))
        #expect((response as? HTTPURLResponse)?.statusCode == 201)
        #expect(data == Data(count: byteCount))
    }

    @Test(
        "a gzip stream decodes to byteCount zero bytes: its DEFLATE data, CRC-32 and size check out",
        arguments: [0, 1, 2, 3, 4, 10, 11, 258, 259, 260, 261, 262, 516, 517, 518, 100_000, 1_000_000]
    )
    func gzipStream(byteCount: Int) async throws {
        let server = try LoopbackHTTPServer { _ in .stream(byteCount: byteCount, gzip: true) }
        let reply = await exchange(port: server.port, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
        let (head, body) = try #require(split(reply.bytes))
        #expect(
            head
                == "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        )
        let member = try #require(GzipMember(body))
        #expect(member.data.count == byteCount)
        #expect(member.data.allSatisfy { $0 == 0 })
        #expect(member.crc == crc32(member.data))
        #expect(member.size == UInt32(byteCount))
        #expect(body.count <= 25 + byteCount / 150)
    }

    @Test("the trailer of a gzip stream of 5 GB of zeros: zlib's CRC-32 of them, and the size modulo 2^32")
    func gzipTrailerOfAHugeStream() async throws {
        let byteCount = 5_000_000_000
        let server = try LoopbackHTTPServer { _ in .stream(byteCount: byteCount, gzip: true) }
        let reply = await exchange(port: server.port, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
        let (head, body) = try #require(split(reply.bytes))
        // 19,379,844 matches of 13 bits, a last match of 247 bytes: 31 MB on the wire.
        #expect(body.count == 31_492_269)
        #expect(head.contains("\r\nContent-Length: 31492269\r\n"))
        // zlib.crc32 of 5,000,000,000 zero bytes is 1546743632.
        let trailer = Array(body.suffix(8))
        #expect(trailer == littleEndianBytes(1_546_743_632) + littleEndianBytes(UInt32(byteCount % (1 << 32))))
    }

    @Test(
        "URLSession decodes a gzip stream, with Content-Length or chunked",
        arguments: [(1 << 20, true), (1 << 20, false), (1, true), (0, false)]
    )
    func gzipThroughURLSession(byteCount: Int, contentLength: Bool) async throws {
        let server = try LoopbackHTTPServer { _ in
            .stream(byteCount: byteCount, contentLength: contentLength, gzip: true)
        }
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(from: server.url("/zeros"))
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(data == Data(count: byteCount))
    }

    @Test("a streamed response to HEAD, or with a status without a body, sends no body")
    func streamWithoutBody() async throws {
        let server = try LoopbackHTTPServer { request in
            request.path == "/204" ? .stream(byteCount: 10, status: 204) : .stream(byteCount: 1 << 30)
        }
        let head = await exchange(port: server.port, "HEAD / HTTP/1.1\r\nConnection: close\r\n\r\n")
        #expect(head.string == "HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\nConnection: close\r\n\r\n")
        let noContent = await exchange(port: server.port, "GET /204 HTTP/1.1\r\nConnection: close\r\n\r\n")
        #expect(noContent.string == "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
    }

    @Test("after a whole streamed body the connection serves the next request")
    func streamKeepsTheConnection() async throws {
        let server = try LoopbackHTTPServer { request in
            request.path == "/a" ? .stream(byteCount: 300_000) : .stream(byteCount: 5, contentLength: false)
        }
        let reply = await exchange(
            port: server.port, "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\nConnection: close\r\n\r\n")
        let first = "HTTP/1.1 200 OK\r\nContent-Length: 300000\r\n\r\n"
        let second =
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\n\0\0\0\0\0\r\n0\r\n\r\n"
        #expect(reply.bytes == Array(first.utf8) + [UInt8](repeating: 0, count: 300_000) + Array(second.utf8))
        #expect(server.connectionCount == 1)
    }

    @Test(
        "a client that closes in the middle of a body of a petabyte ends the writing at once",
        arguments: [(false, true), (true, false)]
    )
    func streamEndsWhenTheClientCloses(gzip: Bool, contentLength: Bool) async throws {
        let server = try LoopbackHTTPServer { _ in
            .stream(byteCount: 1 << 50, contentLength: contentLength, gzip: gzip)
        }
        var connection = RawConnection(port: server.port)
        try #require(connection != nil)
        let start = await onThread { [connection] in
            connection?.write("GET / HTTP/1.1\r\n\r\n")
            return connection?.read(count: 1 << 20) ?? []
        }
        #expect(start.count == 1 << 20)
        #expect(server.openConnectionCount == 1)
        connection?.resetOnClose()
        connection = nil  // closed with bytes unread: a reset, so the server's next send fails
        await server.waitUntilNoConnectionIsOpen()
        #expect(server.openConnectionCount == 0)
        #expect(server.connectionCount == 1)
    }

    @Test("stop() ends a streamed body that a client reads as fast as it can")
    func stopEndsAStream() async throws {
        let server = try LoopbackHTTPServer { _ in .stream(byteCount: 1 << 50) }
        let connection = try #require(RawConnection(port: server.port))
        let start = await onThread {
            connection.write("GET / HTTP/1.1\r\n\r\n")
            return connection.read(count: 1 << 20)
        }
        #expect(start.count == 1 << 20)
        let drained = Task { await onThread { connection.drain() } }
        server.stop()
        let end = await drained.value
        #expect(end.closed)
        await server.waitUntilNoConnectionIsOpen()
        #expect(server.openConnectionCount == 0)
    }

    @Test("Response.stream with a negative byte count stops the program with a message")
    func negativeByteCount() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = LoopbackHTTPServer.Response.stream(byteCount: -1)
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("the byte count must be >= 0, got -1"))
        }
    }
}

// MARK: - A raw POSIX client

/// What a raw client read, and whether the server closed the connection after it.
private struct Reply: Sendable {
    var bytes: [UInt8]
    /// The server closed the connection (end of stream or reset), rather than the read timing out.
    var closed: Bool
    var string: String { String(decoding: bytes, as: UTF8.self) }
}

/// Runs the blocking `body` on a new thread, off Swift concurrency's threads, and returns its result.
private func onThread<Result: Sendable>(_ body: @escaping @Sendable () -> Result) async -> Result {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: body()) }
    }
}

/// Connects to the server, sends `request`, reads until the server closes, and closes.
private func exchange(port: Int, _ request: String) async -> Reply {
    await onThread {
        guard let connection = RawConnection(port: port) else { return Reply(bytes: [], closed: false) }
        connection.write(request)
        return connection.readToEnd()
    }
}

/// One blocking TCP connection to 127.0.0.1; every read and write gives up after 30 seconds.
private final class RawConnection: Sendable {
    let descriptor: Int32

    #if canImport(Glibc)
        private static let streamSocket = Int32(SOCK_STREAM.rawValue)
        private static let sendFlags = Int32(MSG_NOSIGNAL)
    #elseif canImport(Musl)
        private static let streamSocket = SOCK_STREAM
        private static let sendFlags = MSG_NOSIGNAL
    #else
        private static let streamSocket = SOCK_STREAM
        private static let sendFlags: Int32 = 0
    #endif

    /// Connects, or returns `nil` if the connection fails.
    init?(port: Int) {
        guard let descriptor = Self.makeConnection(port: port).descriptor else { return nil }
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    private init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Whether an HTTP request to `port` goes unanswered: the connection is refused, or it ends
    /// without a byte.
    ///
    /// Once a server has closed its listening socket the port is free, yet in this test process,
    /// which runs other servers and spawns exit-test children in parallel, a connection can
    /// still land there: in a child that has not yet closed its inherited copy of the socket
    /// (the connection is then reset), or in another test's server as it stops. A listening
    /// socket that was never closed answers, or holds the request until the read gives up, and
    /// both count as answered.
    static func isUnanswered(port: Int) async -> Bool {
        await onThread {
            let result = makeConnection(port: port)
            guard let descriptor = result.descriptor else { return result.error == ECONNREFUSED }
            let connection = RawConnection(descriptor: descriptor)
            connection.write("GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
            let reply = connection.readToEnd()
            return reply.closed && reply.bytes.isEmpty
        }
    }

    private static func makeConnection(port: Int) -> (descriptor: Int32?, error: Int32) {
        let descriptor = socket(AF_INET, streamSocket, 0)
        guard descriptor >= 0 else { return (nil, errno) }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        #if canImport(Darwin)
            var one: Int32 = 1
            setsockopt(descriptor, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr = in_addr(s_addr: UInt32(0x7F00_0001).bigEndian)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let error = errno
            close(descriptor)
            return (nil, error)
        }
        return (descriptor, 0)
    }

    /// Sends all of `text`; stops early if the server closed the connection.
    func write(_ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        for _ in 0..<10_000 where offset < bytes.count {
            let count = bytes.withUnsafeBytes {
                send(descriptor, $0.baseAddress! + offset, $0.count - offset, Self.sendFlags)
            }
            guard count > 0 else { return }
            offset += count
        }
    }

    /// Reads `count` bytes, or fewer if the connection ends first.
    func read(count: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: count)
        for _ in 0..<count where bytes.count < count {
            let received = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, count - bytes.count, 0) }
            guard received > 0 else { break }
            bytes += chunk[..<received]
        }
        return bytes
    }

    /// Reads until the server closes the connection (or 30 seconds pass without a byte).
    func readToEnd() -> Reply {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        for _ in 0..<100_000 {
            let received = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if received > 0 {
                bytes += chunk[..<received]
            } else {
                return Reply(bytes: bytes, closed: received == 0 || errno == ECONNRESET)
            }
        }
        return Reply(bytes: bytes, closed: false)
    }

    /// Makes the close in `deinit` a reset (the server sees `ECONNRESET`), not an orderly close.
    func resetOnClose() {
        var option = linger(l_onoff: 1, l_linger: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
    }

    /// Ends the connection in both directions: the server reads the end of the stream.
    func hangUp() {
        shutdown(descriptor, Int32(SHUT_RDWR))
    }
}

extension RawConnection {
    /// Reads and drops bytes until the server closes the connection (or 30 seconds pass without a
    /// byte); returns how many it read.
    func drain() -> (count: Int, closed: Bool) {
        var count = 0
        var chunk = [UInt8](repeating: 0, count: 256 * 1024)
        // Bounded by the server's stop; a petabyte would take days.
        for _ in 0..<100_000_000 {
            let received = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            guard received > 0 else { return (count, received == 0 || errno == ECONNRESET) }
            count += received
        }
        return (count, false)
    }
}

// MARK: - Reading bodies back

/// A response's head as text, up to and including its empty line, and the bytes after it.
private func split(_ bytes: [UInt8]) -> (head: String, body: [UInt8])? {
    let terminator: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A]
    guard bytes.count >= 4,
        let end = (0...(bytes.count - 4)).first(where: { bytes[$0..<($0 + 4)].elementsEqual(terminator) })
    else { return nil }
    return (String(decoding: bytes[..<(end + 4)], as: UTF8.self), Array(bytes[(end + 4)...]))
}

/// The chunks of a chunked body (RFC 9112, 7.1), without extensions or trailers; `nil` if the
/// framing is broken or does not end with the last chunk.
private func dechunk(_ body: [UInt8]) -> [[UInt8]]? {
    var chunks: [[UInt8]] = []
    var index = 0
    for _ in 0...body.count {
        guard
            let lineEnd = (index..<max(index, body.count - 1)).first(where: { body[$0] == 0x0D && body[$0 + 1] == 0x0A }
            ),
            let size = Int(String(decoding: body[index..<lineEnd], as: UTF8.self), radix: 16)
        else { return nil }
        let dataStart = lineEnd + 2
        guard dataStart + size + 2 <= body.count, body[dataStart + size] == 0x0D, body[dataStart + size + 1] == 0x0A
        else { return nil }
        if size == 0 { return dataStart + 2 == body.count ? chunks : nil }
        chunks.append(Array(body[dataStart..<(dataStart + size)]))
        index = dataStart + size + 2
    }
    return nil
}

private func littleEndianBytes(_ value: UInt32) -> [UInt8] {
    (0..<4).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) }
}

/// The CRC-32 of gzip, bit by bit: slow and plain, to check the server's fast one.
private func crc32(_ bytes: [UInt8]) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
    }
    return crc ^ 0xFFFF_FFFF
}

/// One gzip member (RFC 1952) whose DEFLATE blocks use the fixed Huffman codes, decoded: a
/// decoder written apart from the server's encoder, for the codes the server uses.
private struct GzipMember {
    var data: [UInt8] = []
    var crc: UInt32 = 0
    var size: UInt32 = 0

    /// Decodes `bytes`; `nil` if they are not such a member, or if bytes follow it.
    init?(_ bytes: [UInt8]) {
        guard bytes.count >= 18, bytes[0] == 0x1F, bytes[1] == 0x8B, bytes[2] == 8, bytes[3] == 0 else { return nil }
        var reader = BitReader(bytes: bytes, position: 10 * 8)
        var isLast = false
        for _ in 0..<1_000 where !isLast {
            guard let final = reader.bits(1), let type = reader.bits(2), type == 1 else { return nil }
            isLast = final == 1
            guard decodeFixedBlock(&reader) else { return nil }
        }
        guard isLast else { return nil }
        let trailerStart = (reader.position + 7) / 8
        guard trailerStart + 8 == bytes.count else { return nil }
        func word(at offset: Int) -> UInt32 {
            (0..<4).reduce(0) { $0 | UInt32(bytes[offset + $1]) << ($1 * 8) }
        }
        crc = word(at: trailerStart)
        size = word(at: trailerStart + 4)
    }

    private static let lengthBases = [
        3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227,
        258,
    ]
    private static let lengthExtraBits = [
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
    ]
    private static let distanceBases = [
        1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097,
        6145, 8193, 12289, 16385, 24577,
    ]

    /// Decodes one block with the fixed codes (RFC 1951, 3.2.6) into ``data``.
    private mutating func decodeFixedBlock(_ reader: inout BitReader) -> Bool {
        for _ in 0..<100_000_000 {
            guard let symbol = reader.fixedLiteralOrLength() else { return false }
            if symbol < 256 {
                data.append(UInt8(symbol))
                continue
            }
            if symbol == 256 { return true }
            let lengthIndex = symbol - 257
            guard lengthIndex < 29, let lengthExtra = reader.bits(Self.lengthExtraBits[lengthIndex]),
                let distanceCode = reader.huffmanCode(length: 5), distanceCode < 30,
                let distanceExtra = reader.bits(max(0, distanceCode / 2 - 1))
            else { return false }
            let length = Self.lengthBases[lengthIndex] + lengthExtra
            let distance = Self.distanceBases[distanceCode] + distanceExtra
            guard distance <= data.count else { return false }
            for _ in 0..<length { data.append(data[data.count - distance]) }
        }
        return false
    }
}

/// Reads bits from the lowest of each byte up, as DEFLATE packs them.
private struct BitReader {
    let bytes: [UInt8]
    var position: Int

    /// The next `count` bits as a number, the first bit lowest.
    mutating func bits(_ count: Int) -> Int? {
        guard position + count <= bytes.count * 8 else { return nil }
        var value = 0
        for index in 0..<count {
            let bit = Int(bytes[(position + index) / 8] >> ((position + index) % 8)) & 1
            value |= bit << index
        }
        position += count
        return value
    }

    /// The next Huffman code of `length` bits, its first bit highest.
    mutating func huffmanCode(length: Int) -> Int? {
        var code = 0
        for _ in 0..<length {
            guard let bit = bits(1) else { return nil }
            code = code << 1 | bit
        }
        return code
    }

    /// The next literal/length symbol in the fixed code: 7, 8 or 9 bits.
    mutating func fixedLiteralOrLength() -> Int? {
        guard var code = huffmanCode(length: 7) else { return nil }
        if code <= 0b001_0111 { return 256 + code }  // 256...279
        guard let eighth = bits(1) else { return nil }
        code = code << 1 | eighth
        if (0x30...0xBF).contains(code) { return code - 0x30 }  // 0...143
        if (0xC0...0xC7).contains(code) { return 280 + code - 0xC0 }  // 280...287
        guard let ninth = bits(1) else { return nil }
        code = code << 1 | ninth
        return (0x190...0x1FF).contains(code) ? 144 + code - 0x190 : nil  // 144...255
    }
}
