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
}
