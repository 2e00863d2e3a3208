import Foundation
import Loadable
import LoadableHTTP
import LoadableTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// HTTP loadables: sequential GETs of a 2 KB JSON body through ``HTTPLoadable``, against bare
/// `URLSession.data(for:)` + `JSONDecoder` for the same requests, and a 304 revalidation against a
/// full 200.
///
/// One ``LoopbackHTTPServer`` (127.0.0.1, keep-alive) and one ephemeral `URLSession`, shared by
/// both sides so that both reuse the same connection. The server answers `/full-no-etag` with a
/// 200 and the body, without validators, so each sync of a loadable decodes; and `/full` with a
/// 200, the body and `ETag: "v1"`, or a 304 to `If-None-Match: "v1"`; `/large-no-etag` and
/// `/large` alike with a 50 KB body.
///
/// The sides, each on the main actor:
/// - bare 200: `settings.httpRequests` times `session.data(for:)` of `/full-no-etag` (the request
///   the loadable sends: same URL, `reloadIgnoringLocalCacheData`), status checked, body decoded
///   with one `JSONDecoder`;
/// - loadable 200: a new `HTTPLoadable` on `/full-no-etag` (made before the clock starts), as many
///   times `sync()` + `doneSyncing()`;
/// - loadable 304: a new `HTTPLoadable` on `/full`, synced once (the 200 that gives it its `ETag`)
///   before the clock starts, then as many syncs, each a 304;
/// - bare 304: `session.data(for:)` of `/full` with `If-None-Match: "v1"`, status checked;
/// - the transport alone: `session.send(_:maxBodySize:)` of `/full-no-etag` + decode;
/// - 50 KB (a tenth as many requests): a loadable on `/large-no-etag` (500 products, 200 each
///   time), and one on `/large` revalidating (a 304 each time after one untimed 200); the goal's
///   304 against 200 is this pair, where the body's transfer and decode weigh as in an app.
///
/// In each round the 2 KB sides take turns in chunks of a tenth of the requests (the order
/// alternates between chunks), then the 50 KB rows run; the figures are the best and the median
/// round of each, and the goal's ratio the median of the rounds' ratios. Allocations are the whole process's: the server's thread and URLSession's threads count
/// on both sides alike. A failed request stops the benchmark (exit status 1).
@MainActor
func runHTTP(_ settings: Settings, into report: inout Report) async {
    await runLoopbackHTTP(settings, into: &report)
    if let address = ProcessInfo.processInfo.environment["LOADABLE_BENCHMARKS_HTTP_URL"], let url = URL(string: address)
    {
        await runExternalHTTP(url, settings, into: &report)
    }
}

/// The `http` scenario's 200 pair against a server of the caller's (`LOADABLE_BENCHMARKS_HTTP_URL`,
/// a URL answered with a 200 and a JSON body of ``HTTPPayload``'s shape, with or without an `ETag`):
/// `settings.httpRequests` syncs of an `HTTPLoadable` against as many `URLSession.data(for:)` +
/// status check + `JSONDecoder` of the same request on the same ephemeral session, the sides
/// taking turns in chunks of a tenth, for each round; the ratio is the median of the rounds'.
@MainActor
private func runExternalHTTP(_ url: URL, _ settings: Settings, into report: inout Report) async {
    let chunk = max(settings.httpRequests / 10, 1)
    let count = (settings.httpRequests / chunk) * chunk
    let runs = max(settings.runs, 1)
    let session = URLSession(configuration: .ephemeral)
    defer { session.invalidateAndCancel() }
    let request = httpRequest(url)
    func bare(_ requests: Int) async -> Sample {
        let decoder = JSONDecoder()
        let stopwatch = Stopwatch.start()
        for _ in 0..<requests {
            do {
                let (data, response) = try await session.data(for: request)
                guard (response as? HTTPURLResponse)?.statusCode == 200 else { failHTTP("external: \(response)") }
                blackHole(try decoder.decode(HTTPPayload.self, from: data))
            } catch {
                failHTTP("external bare request failed: \(error)")
            }
        }
        return stopwatch.stop()
    }
    let loadable = HTTPLoadable<HTTPPayload>(request: request, transport: session)
    func loadable200(_ requests: Int) async -> Sample {
        let stopwatch = Stopwatch.start()
        for _ in 0..<requests {
            loadable.sync()
            do { try await loadable.doneSyncing() } catch { failHTTP("external sync: \(error)") }
            guard loadable.loadableState == .didSyncSuccessfully else {
                failHTTP("external sync ended \(loadable.loadableState): \(String(describing: loadable.error))")
            }
        }
        return stopwatch.stop()
    }
    _ = await bare(chunk)
    _ = await loadable200(chunk)
    let rounds = await interleavedRounds(runs: runs, count: count, chunk: chunk, sides: [bare, loadable200])
    func microseconds(_ sample: Sample) -> Double { sample.nanoseconds(per: count) / 1e3 }
    let ratios = zip(rounds[1], rounds[0]).map { $0.duration / $1.duration }.sorted()
    let cpuRatios = zip(rounds[1], rounds[0]).map { $0.cpuTime / $1.cpuTime }.sorted()
    report.add(
        Row(
            scenario: "http external: HTTPLoadable 200 + decode, median", value: microseconds(median(rounds[1])),
            unit: "µs/req", allocationsPerOperation: median(rounds[1]).allocations(per: count),
            baseline: "bare URLSession + decode, median", baselineValue: microseconds(median(rounds[0])),
            ratio: ratios[ratios.count / 2]))
    print(
        String(
            format: "http external %@: %d GETs per side and round, %d rounds; ratios %@; CPU-time ratios %@",
            url.absoluteString, count, runs, ratios.map { String(format: "%.2f", $0) }.joined(separator: " "),
            cpuRatios.map { String(format: "%.2f", $0) }.joined(separator: " ")))
}

/// The `http` scenario against the ``LoopbackHTTPServer``.
@MainActor
private func runLoopbackHTTP(_ settings: Settings, into report: inout Report) async {
    // Each round interleaves the 2 KB sides in chunks of a tenth of the requests.
    let chunk = max(settings.httpRequests / 10, 1)
    let count = (settings.httpRequests / chunk) * chunk
    let runs = max(settings.runs, 1)
    let body = HTTPPayload.body
    let largeBody = HTTPPayload.largeBody
    // The 50 KB rows take a tenth of the requests: their decode is about 25 times as long.
    let largeCount = chunk
    let statuses = StatusCounter()
    let server: LoopbackHTTPServer
    do {
        server = try LoopbackHTTPServer(lifetime: .seconds(3_600)) { request in
            let json = LoopbackHTTPServer.Header("Content-Type", "application/json")
            let etag = LoopbackHTTPServer.Header("ETag", HTTPPayload.entityTag)
            switch request.path {
            case "/full-no-etag":
                return .status(200, headers: [json], body: body)
            case "/full" where request.header("If-None-Match") == HTTPPayload.entityTag:
                statuses.countNotModified()
                return .status(304, headers: [etag])
            case "/full":
                return .status(200, headers: [json, etag], body: body)
            case "/large-no-etag":
                return .status(200, headers: [json], body: largeBody)
            case "/large" where request.header("If-None-Match") == HTTPPayload.entityTag:
                statuses.countNotModified()
                return .status(304, headers: [etag])
            case "/large":
                return .status(200, headers: [json, etag], body: largeBody)
            default:
                return .status(404)
            }
        }
    } catch {
        failHTTP("cannot start the loopback server: \(error)")
    }
    let session = URLSession(configuration: .ephemeral)
    defer {
        session.invalidateAndCancel()
        server.stop()
    }

    let fullRequest = httpRequest(server.url("/full-no-etag"))
    let revalidatedURL = server.url("/full")
    let largeRequest = httpRequest(server.url("/large-no-etag"))
    let largeRevalidatedURL = server.url("/large")
    var conditionalRequest = httpRequest(revalidatedURL)
    conditionalRequest.setValue(HTTPPayload.entityTag, forHTTPHeaderField: "If-None-Match")

    /// `requests` times the bare request, status checked, the body decoded when it is a 200.
    func bare(_ request: URLRequest, status: Int, _ requests: Int) async -> Sample {
        let decoder = JSONDecoder()
        let stopwatch = Stopwatch.start()
        for _ in 0..<requests {
            do {
                let (data, response) = try await session.data(for: request)
                guard let code = (response as? HTTPURLResponse)?.statusCode, code == status else {
                    failHTTP("bare request to \(request.url?.path ?? "?"): expected \(status), got \(response)")
                }
                if status == 200 { blackHole(try decoder.decode(HTTPPayload.self, from: data)) }
            } catch {
                failHTTP("bare request to \(request.url?.path ?? "?") failed: \(error)")
            }
        }
        return stopwatch.stop()
    }

    /// `requests` times the loadable's transport alone (`URLSession.send(_:maxBodySize:)`, with its
    /// body-counting delegate on Linux), status checked, body decoded: the loadable's cost without
    /// the loadable.
    func transport(_ request: URLRequest, _ requests: Int) async -> Sample {
        let decoder = JSONDecoder()
        let stopwatch = Stopwatch.start()
        for _ in 0..<requests {
            do {
                let (response, data) = try await session.send(request, maxBodySize: 10 * 1_024 * 1_024)
                guard response.statusCode == 200 else { failHTTP("transport request: got \(response.statusCode)") }
                blackHole(try decoder.decode(HTTPPayload.self, from: data))
            } catch {
                failHTTP("transport request failed: \(error)")
            }
        }
        return stopwatch.stop()
    }

    /// `requests` syncs of `loadable`, each waited for and checked.
    func syncs(
        _ loadable: HTTPLoadable<HTTPPayload>, _ requests: Int, products: Int = HTTPPayload.productCount
    ) async -> Sample {
        await timedSyncs(of: loadable, requests, products: products, fail: failHTTP)
    }

    func loadable200(_ requests: Int) async -> Sample {
        await syncs(HTTPLoadable<HTTPPayload>(request: fullRequest, transport: session), requests)
    }

    func largeLoadable200(_ requests: Int) async -> Sample {
        await syncs(
            HTTPLoadable<HTTPPayload>(request: largeRequest, transport: session), requests,
            products: HTTPPayload.largeProductCount)
    }

    /// A loadable on `/full` that has its `ETag` (one untimed 200), then `requests` syncs, all 304s.
    func loadable304(_ requests: Int) async -> Sample {
        await revalidations(of: revalidatedURL, requests, products: HTTPPayload.productCount)
    }

    /// A loadable on `url` that has its `ETag` (one untimed 200), then `requests` syncs, all 304s.
    func revalidations(of url: URL, _ requests: Int, products: Int) async -> Sample {
        let loadable = HTTPLoadable<HTTPPayload>(request: httpRequest(url), transport: session)
        _ = await syncs(loadable, 1, products: products)
        let notModifiedBefore = statuses.notModified
        let sample = await syncs(loadable, requests, products: products)
        guard statuses.notModified - notModifiedBefore == requests else {
            failHTTP("expected \(requests) 304s, got \(statuses.notModified - notModifiedBefore)")
        }
        return sample
    }

    // Warm-up: the connection, URLSession's threads, the decoder, and the code of both sides.
    let warmUp = settings.httpWarmUpRequests
    _ = await bare(fullRequest, status: 200, warmUp)
    _ = await loadable200(warmUp)
    _ = await loadable304(warmUp)
    _ = await bare(conditionalRequest, status: 304, warmUp)
    _ = await transport(fullRequest, warmUp)
    _ = await largeLoadable200(max(warmUp / 10, 1))
    _ = await revalidations(of: largeRevalidatedURL, max(warmUp / 10, 1), products: HTTPPayload.largeProductCount)

    var large200: [Sample] = []
    var large304: [Sample] = []
    // The 2 KB sides take turns in chunks of a tenth of the requests, the order alternating
    // between chunks, so that a busy moment of the machine slows each alike; the 50 KB rows run
    // after each round.
    let rounds = await interleavedRounds(
        runs: runs, count: count, chunk: chunk,
        sides: [
            { await bare(fullRequest, status: 200, $0) }, loadable200, loadable304,
            { await bare(conditionalRequest, status: 304, $0) }, { await transport(fullRequest, $0) },
        ],
        afterRound: {
            large200.append(await largeLoadable200(largeCount))
            large304.append(
                await revalidations(of: largeRevalidatedURL, largeCount, products: HTTPPayload.largeProductCount))
        })
    let (bare200, loadable200Samples, loadable304Samples, bare304, transport200) =
        (rounds[0], rounds[1], rounds[2], rounds[3], rounds[4])

    func microseconds(_ sample: Sample) -> Double { sample.nanoseconds(per: count) / 1e3 }
    func largeMicroseconds(_ sample: Sample) -> Double { sample.nanoseconds(per: largeCount) / 1e3 }

    let what = "\(count.formatted) GETs of \(body.count.formatted) B JSON"
    func add(_ name: String, _ sample: Sample, against baseline: (String, Sample)? = nil) {
        let value = microseconds(sample)
        let baselineValue = baseline.map { microseconds($0.1) }
        report.add(
            Row(
                scenario: "http: \(name)", value: value, unit: "µs/req",
                allocationsPerOperation: sample.allocations(per: count), baseline: baseline?.0,
                baselineValue: baselineValue, ratio: baselineValue.map { value / $0 }))
    }
    print("http: \(what) per side and round, \(runs) rounds; allocs/op include the server's and URLSession's")
    for (kind, pick) in [("best", fastest), ("median", median)] as [(String, ([Sample]) -> Sample)] {
        let bare200Sample = pick(bare200)
        let loadable200Sample = pick(loadable200Samples)
        let bare304Sample = pick(bare304)
        add("bare 200: URLSession + JSONDecoder, \(kind)", bare200Sample)
        add(
            "HTTPLoadable 200 + decode, \(kind)", loadable200Sample,
            against: ("bare 200 (URLSession + decode), \(kind)", bare200Sample))
        add(
            "HTTPLoadable 304, \(kind)", pick(loadable304Samples),
            against: ("HTTPLoadable 200 + decode, \(kind)", loadable200Sample))
        add(
            "transport alone (URLSession.send) + decode, \(kind)", pick(transport200),
            against: ("bare 200, \(kind)", bare200Sample))
        add("bare 304: URLSession, \(kind)", bare304Sample, against: ("bare 200, \(kind)", bare200Sample))
        add(
            "HTTPLoadable 304 vs bare 304, \(kind)", pick(loadable304Samples),
            against: ("bare 304, \(kind)", bare304Sample))
        let large200Sample = pick(large200)
        let large304Sample = pick(large304)
        report.add(
            Row(
                scenario: "http: HTTPLoadable 200 + decode, \(largeBody.count.formatted) B, \(kind)",
                value: largeMicroseconds(large200Sample), unit: "µs/req",
                allocationsPerOperation: large200Sample.allocations(per: largeCount)))
        report.add(
            Row(
                scenario: "http: HTTPLoadable 304, \(largeBody.count.formatted) B, \(kind)",
                value: largeMicroseconds(large304Sample), unit: "µs/req",
                allocationsPerOperation: large304Sample.allocations(per: largeCount),
                baseline: "its 200 + decode, \(kind)", baselineValue: largeMicroseconds(large200Sample),
                ratio: largeMicroseconds(large304Sample) / largeMicroseconds(large200Sample)))
    }

    let loadableBest = microseconds(fastest(loadable200Samples))
    let loadableMedian = microseconds(median(loadable200Samples))
    let bareBest = microseconds(fastest(bare200))
    let bareMedian = microseconds(median(bare200))
    let revalidationBest = largeMicroseconds(fastest(large304))
    let revalidationMedian = largeMicroseconds(median(large304))
    let largeBest = largeMicroseconds(fastest(large200))
    let largeMedian = largeMicroseconds(median(large200))
    // Each round's two sides ran interleaved: their ratio moves less with the load than either.
    let roundRatios = zip(loadable200Samples, bare200).map { $0.duration / $1.duration }.sorted()
    let medianRatio = roundRatios[roundRatios.count / 2]
    report.add(
        Goal(
            name: "http: \(what) through HTTPLoadable vs URLSession.data(for:) + JSONDecoder",
            target: "<= 1.05x (median of the rounds' ratios)",
            measured: String(
                format:
                    "%.2fx median of %d rounds (%.2f–%.2fx); medians %.1f µs vs %.1f µs per request; best %.1f µs vs %.1f µs",
                medianRatio, runs, roundRatios.first!, roundRatios.last!, loadableMedian, bareMedian, loadableBest,
                bareBest),
            holds: medianRatio <= 1.05))
    report.add(
        Goal(
            name: "http: 304 revalidation vs a full 200 of \(largeBody.count.formatted) B through HTTPLoadable",
            target: "<= 0.7x (median)",
            measured: String(
                format: "%.2fx median (%.1f µs vs %.1f µs per request); best of %d %.2fx (%.1f µs vs %.1f µs)",
                revalidationMedian / largeMedian, revalidationMedian, largeMedian, runs,
                revalidationBest / largeBest, revalidationBest, largeBest),
            holds: revalidationMedian / largeMedian <= 0.7))
}

/// The JSON of every 200: a list of 20 small products, about 2 KB (500 in the 50 KB rows).
struct HTTPPayload: Codable, Sendable {
    struct Product: Codable, Sendable {
        var id: Int
        var name: String
        var price: Double
        var tags: [String]
        var stock: Int
        var isAvailable: Bool
    }

    var products: [Product]

    static let productCount = 20
    /// The products of ``largeBody``.
    static let largeProductCount = 500

    static let entityTag = #""v1""#

    /// The body, encoded once.
    static let body = encoded(productCount)
    /// A body of about 50 KB, encoded once.
    static let largeBody = encoded(largeProductCount)

    /// The JSON of `count` products.
    private static func encoded(_ count: Int) -> Data {
        let products = (0..<count).map { index in
            Product(
                id: 1_000 + index, name: "Product \(index)", price: 9.5 + Double(index) * 1.25,
                tags: ["tag-\(index % 7)", "tag-\(index % 5)"], stock: index * 13 % 100,
                isAvailable: !index.isMultiple(of: 4))
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        do {
            return try encoder.encode(HTTPPayload(products: products))
        } catch {
            failHTTP("cannot encode the payload: \(error)")
        }
    }
}

/// Counts the 304s the server sent, from its connection thread.
private final class StatusCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var notModifiedCount = 0

    var notModified: Int { lock.withLock { notModifiedCount } }

    func countNotModified() { lock.withLock { notModifiedCount += 1 } }
}

/// A GET of `url` as ``HTTPLoadable`` sends it: `reloadIgnoringLocalCacheData`; a 10-second
/// timeout, so that nothing waits for long.
private func httpRequest(_ url: URL) -> URLRequest {
    URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: 10)
}

/// Stops the benchmark: a failed request makes every figure meaningless.
/// `requests` syncs of `loadable`, each waited for and checked (state, then the contents' size):
/// `fail` stops the benchmark with a message when one is not as expected.
@MainActor
func timedSyncs(
    of loadable: HTTPLoadable<HTTPPayload>, _ requests: Int, products: Int = HTTPPayload.productCount,
    fail: (String) -> Never
) async -> Sample {
    let stopwatch = Stopwatch.start()
    for _ in 0..<requests {
        loadable.sync()
        do {
            try await loadable.doneSyncing()
        } catch {
            fail("waiting for a sync failed: \(error)")
        }
        guard loadable.loadableState == .didSyncSuccessfully else {
            fail(
                "a sync of \(loadable.request.url?.path ?? "?") ended \(loadable.loadableState): "
                    + String(describing: loadable.error))
        }
    }
    let sample = stopwatch.stop()
    guard loadable.contents?.products.count == products else {
        fail("the loadable's contents are not the payload")
    }
    return sample
}

private func failHTTP(_ message: String) -> Never {
    print("http benchmark: \(message)")
    fflush(nil)
    exit(1)
}
