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

}
