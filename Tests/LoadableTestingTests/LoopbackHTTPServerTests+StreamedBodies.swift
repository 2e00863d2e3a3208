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

extension LoopbackHTTPServerTests {
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
