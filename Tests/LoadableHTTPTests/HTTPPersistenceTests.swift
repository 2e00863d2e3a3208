import Foundation
import LoadableCaching
import LoadableHTTP
import LoadableSupport
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Contents of a feed that can be persisted.
struct StoredFeed: Codable, Sendable, Equatable {
    var items: [Int]
}

/// Counts the body bytes a test server sent, across the server's threads.
final class SentBodyBytes: Sendable {
    private let count = Locked(0)
    var total: Int { count.withLock { $0 } }

    /// `response`, counted.
    func counting(_ body: Data, _ response: LoopbackHTTPServer.Response) -> LoopbackHTTPServer.Response {
        count.withLock { $0 += body.count }
        return response
    }
}

/// An `HTTPLoadable`'s validators persist with its contents: after a relaunch, the first sync of
/// unchanged data is a 304 that sends no body, and the restored contents stay.
@MainActor
@Suite(.timeLimit(.minutes(5))) final class HTTPPersistenceTests {
    let session: URLSession
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("http-persistence-\(UUID())")

    init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 300
        session = URLSession(configuration: configuration)
    }

    deinit {
        session.invalidateAndCancel()
        try? FileManager.default.removeItem(at: directory)
    }

    /// A server of a 50-item feed with `ETag: "v1"` (and a `Last-Modified`), answering its
    /// validators with a 304 and counting the body bytes it sends.
    func server(bytes: SentBodyBytes) throws -> LoopbackHTTPServer {
        let body = Data(#"{"items":[\#((1...50).map(String.init).joined(separator: ","))]}"#.utf8)
        let lastModified = "Tue, 24 Nov 2026 10:00:00 GMT"
        return try LoopbackHTTPServer { request in
            let validators: [LoopbackHTTPServer.Header] = [
                .init("ETag", #""v1""#), .init("Last-Modified", lastModified),
            ]
            if request.header("If-None-Match") == #""v1""# || request.header("If-Modified-Since") == lastModified {
                return bytes.counting(Data(), .status(304, headers: validators))
            }
            return bytes.counting(
                body, .status(200, headers: validators + [.init("Content-Type", "application/json")], body: body))
        }
    }

    func feed(_ server: LoopbackHTTPServer) -> HTTPLoadable<StoredFeed> {
        HTTPLoadable<StoredFeed>(request: URLRequest(url: server.url("/feed")), transport: session)
    }

    func cache(_ kind: String) -> any LoadableCache {
        kind == "file" ? FileLoadableCache(directory: directory) : InMemoryLoadableCache()
    }

    @Test(
        "a relaunch restores contents and validators; the first sync is a 304 with no body",
        arguments: ["memory", "file"])
    func relaunchIsA304(_ kind: String) async throws {
        let bytes = SentBodyBytes()
        let server = try server(bytes: bytes)
        let cache = cache(kind)

        // First launch: a 200 with the body, saved with its validators.
        var first: HTTPLoadable<StoredFeed>? = feed(server)
        let persistence = try #require(first).persist(in: cache, key: "feed")
        first?.sync()
        try await first?.doneSyncing()
        await persistence.saved()
        let firstLaunchBytes = bytes.total
        #expect(firstLaunchBytes > 100)
        #expect(
            try await cache.load(key: "feed")?.metadata
                == ["ETag": #""v1""#, "Last-Modified": "Tue, 24 Nov 2026 10:00:00 GMT"])
        first = nil

        // Second launch: the restored contents show at once, and the sync is answered by a 304.
        let second = feed(server)
        await second.persist(in: cache, key: "feed").restored()
        #expect(second.contents?.items.count == 50)
        #expect(second.etag == #""v1""#, "restored with the contents")
        #expect(second.lastModified == "Tue, 24 Nov 2026 10:00:00 GMT")
        second.sync()
        try await second.doneSyncing()
        #expect(second.loadableState == .didSyncSuccessfully)
        #expect(second.contents?.items.count == 50)
        #expect(bytes.total == firstLaunchBytes)
        #expect(server.requests.map { $0.header("If-None-Match") } == [nil, #""v1""#])
        #expect(server.requests.last?.header("If-Modified-Since") == "Tue, 24 Nov 2026 10:00:00 GMT")
    }

    @Test("without persisted validators (an entry of an older version), the relaunch downloads the body again")
    func entryWithoutValidatorsDownloadsAgain() async throws {
        let bytes = SentBodyBytes()
        let server = try server(bytes: bytes)
        let cache = InMemoryLoadableCache(entries: [
            "feed": CachedEntry(data: try JSONEncoder().encode(StoredFeed(items: [1])), savedAt: .now, version: 1)
        ])
        let loadable = feed(server)
        await loadable.persist(in: cache, key: "feed").restored()
        #expect(loadable.contents == StoredFeed(items: [1]))
        loadable.sync()
        try await loadable.doneSyncing()
        #expect(loadable.contents?.items.count == 50)
        #expect(server.requests.map { $0.header("If-None-Match") } == [nil])
        #expect(bytes.total > 100)
    }
}
