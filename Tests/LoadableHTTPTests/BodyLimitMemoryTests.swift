import Foundation
import LoadableHTTP
import LoadableTestSupport
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

/// `maxBodySize` bounds memory, not only what the loadable keeps: a 1 MB limit meeting a 512 MB
/// body (with `Content-Length`, chunked, or 512 MB of zeros gzipped into half a megabyte) grows the
/// process's peak resident memory by less than 64 MB, and a `Content-Length` over the limit is
/// refused as soon as the response head arrives.
@Suite("The URLSession transport's body limit bounds memory", .timeLimit(.minutes(5)))
struct BodyLimitMemoryTests {
    /// How the large body is sent.
    enum Framing: String, CaseIterable, Codable, Sendable {
        case contentLength, chunked, gzip
    }

    #if os(Linux)
        @Test(
            "a 512 MB body over a 1 MB limit grows the peak resident memory by less than 64 MB",
            arguments: Framing.allCases)
        func largeBodyKeepsMemoryBounded(framing: Framing) async {
            let result = await #expect(
                processExitsWith: .success, observing: [\.standardOutputContent], "\(framing)"
            ) { [framing = framing as Framing] in
                alarm(120)
                // A failure is reported on the standard output; a crash fails the exit.
                if let failure = try await MemoryProbe.measure(framing) { ChildReport.fail(failure) }
            }
            ChildReport.recordFailures(of: result, context: "\(framing)")
        }
    #endif

    @Test("a Content-Length over the limit fails the sync before any of the body arrives")
    @MainActor func contentLengthOverTheLimitIsRefusedAtTheHead() async throws {
        // The head promises 512 MB, and no byte of the body ever comes.
        let server = try LoopbackHTTPServer { _ in
            .raw(Data("HTTP/1.1 200 OK\r\nContent-Length: 536870912\r\n\r\n".utf8), thenHold: true)
        }
        let big = HTTPLoadable<Numbered>(request: URLRequest(url: server.url("/big")), maxBodySize: 1 << 20)
        big.sync()
        try? await big.doneSyncing()
        guard case .tooLarge(maxBodySize: 1 << 20)? = big.error as? HTTPLoadableError else {
            Issue.record("expected .tooLarge, got \(String(describing: big.error))")
            return
        }
        // The transport gave the connection up.
        await server.waitUntilNoConnectionIsHeld()
    }
}

#if os(Linux)
    /// The measurement of ``BodyLimitMemoryTests``, in the child process.
    @MainActor
    enum MemoryProbe {
        nonisolated static let bodySize = 512 << 20
        nonisolated static let limit = 1 << 20
        /// Less than 64 MB; under ThreadSanitizer, whose shadow memory grows with every page the
        /// process touches and counts in its resident size, four times that.
        nonisolated static let allowedGrowth = (StressScale.isThreadSanitizerActive ? 4 : 1) * 64 << 20

        /// Returns why the measurement failed, or `nil` when the memory stayed bounded.
        static func measure(_ framing: BodyLimitMemoryTests.Framing) async throws -> String? {
            let server = try LoopbackHTTPServer { request in
                guard request.path == "/big" else { return .json(#"{"id":1}"#) }
                return .stream(
                    byteCount: bodySize, contentLength: framing == .contentLength, gzip: framing == .gzip)
            }
            // A first request sets the session up, so that its memory counts in the baseline.
            let small = HTTPLoadable<Numbered>(request: URLRequest(url: server.url("/small")), maxBodySize: limit)
            try await small.synced()
            guard let before = peakResidentBytes() else { return "cannot read /proc/self/status" }

            // The connection closes after the answer, so that the server sees when the client is
            // done with it: it hung up (a cancel), or read the whole answer (a gzipped body can be
            // on the wire before the cancel lands).
            var request = URLRequest(url: server.url("/big"))
            request.setValue("close", forHTTPHeaderField: "Connection")
            let big = HTTPLoadable<Numbered>(request: request, maxBodySize: limit)
            big.sync()
            try? await big.doneSyncing()
            guard case .tooLarge? = big.error as? HTTPLoadableError else {
                return "expected .tooLarge, got \(String(describing: big.error))"
            }
            await server.waitUntilNoConnectionIsOpen()
            guard let after = peakResidentBytes() else { return "cannot read /proc/self/status" }
            let growth = after - before
            print("\(framing): peak resident memory \(before >> 20) MB before, \(after >> 20) MB after")
            return growth < allowedGrowth
                ? nil
                : "the peak resident memory grew by \(growth >> 20) MB (allowed: less than \(allowedGrowth >> 20))"
        }

        /// The process's peak resident memory (`VmHWM`), in bytes.
        static func peakResidentBytes() -> Int? {
            guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
                let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
                let kilobytes = Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "")
            else { return nil }
            return kilobytes * 1_024
        }
    }
#endif
