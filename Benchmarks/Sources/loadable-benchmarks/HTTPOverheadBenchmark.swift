import Foundation
import Loadable
import LoadableHTTP
import LoadableSyncer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What ``HTTPLoadable`` adds over its transport: GETs answered at once, in the process, by a
/// transport that returns a canned 200 and the 2 KB JSON body of the `http` scenario.
///
/// No socket and no URLSession: what is timed is the loadable's own work (the request it builds,
/// the task of each sync, the hop off the main actor and back, the status rules, the validators)
/// and the decode, against the same transport called directly from the main actor and the same
/// decode. Each round, the sides take turns in chunks of a tenth of the requests (the order
/// alternates between chunks):
/// - direct: `settings.httpOverheadRequests` times `transport.send(_:maxBodySize:)`, status
///   checked, body decoded with one `JSONDecoder`;
/// - loadable 200: a new `HTTPLoadable` on the same request and transport (made before the clock
///   starts), as many times `sync()` + `doneSyncing()`;
/// - loadable 304: a loadable on a transport that answers a 304 once the request carries
///   `If-None-Match` (one untimed 200 gives the loadable its `ETag`), as many syncs, for context.
///
/// With `--profile`, jobs that would run on the runtime's global executor run on the main thread
/// instead, as the global executor (``withJobsOnMainQueue(_:)``), so that no worker thread starts
/// and valgrind can count the instructions; each side takes the hops it takes in a normal run,
/// each a job on the main queue.
@MainActor
func runHTTPOverhead(_ settings: Settings, into report: inout Report) async {
    if settings.runsOnMainQueueOnly {
        await withJobsOnMainQueue { await measureHTTPOverhead(settings, into: &report) }
    } else {
        await measureHTTPOverhead(settings, into: &report)
    }
}

@MainActor
private func measureHTTPOverhead(_ settings: Settings, into report: inout Report) async {
    // Each round interleaves the sides in chunks of a tenth of the requests; under valgrind, where
    // the load does not matter, each side runs in one piece (see Performance.md for the recipe).
    let chunk =
        settings.runsOnMainQueueOnly ? settings.httpOverheadRequests : max(settings.httpOverheadRequests / 10, 1)
    let count = (settings.httpOverheadRequests / chunk) * chunk
    let runs = max(settings.runs, 1)
    let url = URL(string: "http://127.0.0.1/full-no-etag")!
    let request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: 10)
    let transport = CannedTransport(url: url)
    let maxBodySize = 10 * 1_024 * 1_024

    func direct(_ requests: Int) async -> Sample {
        let decoder = JSONDecoder()
        let stopwatch = Stopwatch.start()
        for _ in 0..<requests {
            do {
                let (response, data) = try await transport.send(request, maxBodySize: maxBodySize)
                guard response.statusCode == 200 else { failOverhead("direct: got \(response.statusCode)") }
                blackHole(try decoder.decode(HTTPPayload.self, from: data))
            } catch {
                failOverhead("direct: \(error)")
            }
        }
        return stopwatch.stop()
    }

    func syncs(_ loadable: HTTPLoadable<HTTPPayload>, _ requests: Int) async -> Sample {
        await timedSyncs(of: loadable, requests, fail: failOverhead)
    }

    func loadable200(_ requests: Int) async -> Sample {
        await syncs(HTTPLoadable<HTTPPayload>(request: request, transport: transport), requests)
    }

    func loadable304(_ requests: Int) async -> Sample {
        let loadable = HTTPLoadable<HTTPPayload>(request: request, transport: transport.revalidating)
        _ = await syncs(loadable, 1)
        return await syncs(loadable, requests)
    }

    let warmUp = chunk
    _ = await direct(warmUp)
    _ = await loadable200(warmUp)
    _ = await loadable304(warmUp)

    let rounds = await interleavedRounds(
        runs: runs, count: count, chunk: chunk, sides: [direct, loadable200, loadable304])
    let (directSamples, loadable200Samples, loadable304Samples) = (rounds[0], rounds[1], rounds[2])

    func microseconds(_ sample: Sample) -> Double { sample.nanoseconds(per: count) / 1e3 }

    print(
        "http-overhead: \(count.formatted) GETs of \(HTTPPayload.body.count.formatted) B JSON per side and round, "
            + "\(runs) rounds, scripted transport (no socket)")
    for (kind, pick) in [("best", fastest), ("median", median)] as [(String, ([Sample]) -> Sample)] {
        let directSample = pick(directSamples)
        let loadableSample = pick(loadable200Samples)
        report.add(
            Row(
                scenario: "http-overhead: transport called directly + decode, \(kind)",
                value: microseconds(directSample), unit: "µs/req",
                allocationsPerOperation: directSample.allocations(per: count)))
        report.add(
            Row(
                scenario: "http-overhead: HTTPLoadable 200 + decode, \(kind)", value: microseconds(loadableSample),
                unit: "µs/req", allocationsPerOperation: loadableSample.allocations(per: count),
                baseline: "transport directly + decode, \(kind)", baselineValue: microseconds(directSample),
                ratio: microseconds(loadableSample) / microseconds(directSample)))
        report.add(
            Row(
                scenario: "http-overhead: HTTPLoadable 304, \(kind)", value: microseconds(pick(loadable304Samples)),
                unit: "µs/req", allocationsPerOperation: pick(loadable304Samples).allocations(per: count),
                baseline: "HTTPLoadable 200 + decode, \(kind)", baselineValue: microseconds(loadableSample),
                ratio: microseconds(pick(loadable304Samples)) / microseconds(loadableSample)))
    }

    // The added time: per round (the two sides ran next to each other), then the median of those.
    // The wall clock counts the time the process waits for a thread to wake up (or, on a busy
    // machine, for a core); the process's CPU time counts only the time its threads ran.
    func cpuMicroseconds(_ sample: Sample) -> Double { sample.cpuNanoseconds(per: count) / 1e3 }
    func medianAndRange(_ values: [Double]) -> (median: Double, low: Double, high: Double) {
        let sorted = values.sorted()
        return (sorted[sorted.count / 2], sorted.first!, sorted.last!)
    }
    let added = medianAndRange(zip(loadable200Samples, directSamples).map { microseconds($0) - microseconds($1) })
    let addedCPU = medianAndRange(
        zip(loadable200Samples, directSamples).map { cpuMicroseconds($0) - cpuMicroseconds($1) })
    let allocations = medianAndRange(
        zip(loadable200Samples, directSamples).map { $0.allocations(per: count) - $1.allocations(per: count) })
    let directCPU = medianAndRange(directSamples.map(cpuMicroseconds))
    let loadableCPU = medianAndRange(loadable200Samples.map(cpuMicroseconds))
    report.add(
        Row(
            scenario: "http-overhead: transport called directly + decode, CPU time, median", value: directCPU.median,
            unit: "µs/req"))
    report.add(
        Row(
            scenario: "http-overhead: HTTPLoadable 200 + decode, CPU time, median", value: loadableCPU.median,
            unit: "µs/req", baseline: "transport directly + decode, CPU time", baselineValue: directCPU.median,
            ratio: loadableCPU.median / directCPU.median))
    report.add(
        Row(scenario: "http-overhead: what HTTPLoadable adds per GET, wall clock", value: added.median, unit: "µs/req"))
    report.add(
        Row(
            scenario: "http-overhead: what HTTPLoadable adds per GET, CPU time", value: addedCPU.median, unit: "µs/req",
            allocationsPerOperation: allocations.median))
    // The instructions the loadable adds per GET, counted by callgrind (see Performance.md) and
    // given as `ADDED/DIRECT` (instructions added per GET / the direct side's per GET) in
    // LOADABLE_BENCHMARKS_HTTP_INSTRUCTIONS, converted to time at the rate the direct side ran at
    // in this run (its instructions per CPU µs): the loadable's own work, which no load moves.
    let instructions = ProcessInfo.processInfo.environment["LOADABLE_BENCHMARKS_HTTP_INSTRUCTIONS"].flatMap {
        text -> (added: Double, direct: Double)? in
        let parts = text.split(separator: "/").compactMap { Double($0) }
        return parts.count == 2 && parts[1] > 0 ? (parts[0], parts[1]) : nil
    }
    let converted = instructions.map { $0.added * directCPU.median / $0.direct }
    if let instructions, let converted {
        report.add(
            Row(
                scenario: String(
                    format: "http-overhead: what HTTPLoadable adds per GET, %.0f instructions at %.0f per CPU µs",
                    instructions.added, instructions.direct / directCPU.median),
                value: converted, unit: "µs/req"))
    }
    // The goal reads the instruction count at the direct side's rate when it is given, and the CPU
    // time otherwise: a thread's wake-up latency, which an idle virtual machine makes long and a
    // busy one longer still, is time no thread of the process spends, so neither counts it; the
    // wall clock is printed beside them.
    let judged = converted ?? addedCPU.median
    report.add(
        Goal(
            name: "http-overhead: what HTTPLoadable adds per GET over its transport (scripted, in process), "
                + (converted == nil ? "CPU time" : "instructions at the direct side's rate"),
            target: "<= 20 µs and <= 15 allocations",
            measured: String(
                format:
                    "%@%.1f µs CPU (median of %d rounds; rounds %.1f–%.1f µs; the direct side %.1f µs CPU per GET), "
                    + "%.1f allocations (%.1f–%.1f); wall clock %.1f µs (rounds %.1f–%.1f µs)",
                converted.map { String(format: "%.1f µs of instructions; ", $0) } ?? "", addedCPU.median, runs,
                addedCPU.low, addedCPU.high, directCPU.median, allocations.median, allocations.low,
                allocations.high, added.median, added.low, added.high),
            holds: judged <= 20 && allocations.median <= 15))

    if !settings.runsOnMainQueueOnly {
        await measureAuthorizationAllocations(
            request: request, transport: transport, count: count, runs: runs, into: &report)
    }
    await measureSendOverhead(
        transport: transport, count: count, runs: runs, inOnePiece: settings.runsOnMainQueueOnly, into: &report)
}

/// What `HTTPService.response(to:)` with a precondition adds over the same transport call made by
/// hand (the request with `If-Match`, `JSONEncoder`, status check, `JSONDecoder`, the `ETag` read),
/// answered at once in the process: the service's own time per write, which the `http-send`
/// scenario's ratio holds among the socket's. Under `--profile`, each side runs in one piece, after
/// the parts of the GETs (see Performance.md for the recipe).
@MainActor
private func measureSendOverhead(
    transport: CannedTransport, count: Int, runs: Int, inOnePiece: Bool, into report: inout Report
) async {
    let url = URL(string: "http://127.0.0.1/full-no-etag")!
    let service = HTTPService(baseURL: URL(string: "http://127.0.0.1/")!, transport: transport)
    let payload: HTTPPayload
    do {
        payload = try JSONDecoder().decode(HTTPPayload.self, from: HTTPPayload.body)
    } catch {
        failOverhead("cannot decode the payload: \(error)")
    }
    func byHand(_ requests: Int) async -> Sample {
        let (encoder, decoder) = (JSONEncoder(), JSONDecoder())
        let stopwatch = Stopwatch.start()
        for _ in 0..<requests {
            do {
                var request = URLRequest(url: url)
                request.httpMethod = "PUT"
                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
                request.setValue(#""v1""#, forHTTPHeaderField: "If-Match")
                request.httpBody = try encoder.encode(payload)
                let (response, data) = try await transport.send(request, maxBodySize: 10 << 20)
                guard (200...299).contains(response.statusCode) else { failOverhead("by hand: \(response.statusCode)") }
                blackHole(try decoder.decode(HTTPPayload.self, from: data))
                blackHole(response.value(forHTTPHeaderField: "ETag"))
            } catch {
                failOverhead("by hand: \(error)")
            }
        }
        return stopwatch.stop()
    }
    func throughService(_ requests: Int) async -> Sample {
        let stopwatch = Stopwatch.start()
        for _ in 0..<requests {
            do {
                let response = try await service.response(
                    to: .put, "full-no-etag", json: payload, as: HTTPPayload.self, precondition: .ifMatch(#""v1""#))
                blackHole(response.etag)
                blackHole(response.value)
            } catch {
                failOverhead("service: \(error)")
            }
        }
        return stopwatch.stop()
    }
    let sends = max(count / 4, 10)
    _ = await byHand(sends / 10)
    _ = await throughService(sends / 10)
    let rounds = await interleavedRounds(
        runs: runs, count: sends, chunk: inOnePiece ? sends : max(sends / 10, 1), sides: [byHand, throughService])
    func microseconds(_ sample: Sample) -> Double { sample.nanoseconds(per: sends) / 1e3 }
    let added = zip(rounds[1], rounds[0]).map { microseconds($0) - microseconds($1) }.sorted()
    let addedAllocations = zip(rounds[1], rounds[0])
        .map { $0.allocations(per: sends) - $1.allocations(per: sends) }.sorted()
    report.add(
        Row(
            scenario: "http-overhead: HTTPService.response(to:) with .ifMatch, median",
            value: microseconds(median(rounds[1])),
            unit: "µs/req", allocationsPerOperation: median(rounds[1]).allocations(per: sends),
            baseline: "the transport by hand, median", baselineValue: microseconds(median(rounds[0])),
            ratio: microseconds(median(rounds[1])) / microseconds(median(rounds[0]))))
    report.add(
        Row(
            scenario: "http-overhead: what response(to:) adds per write (median of the rounds)",
            value: added[added.count / 2], unit: "µs/req", allocationsPerOperation: addedAllocations[added.count / 2]))
}

/// The allocations an authorization adds to a sync: the same GETs of a loadable without
/// authorization, with a bearer token, with Basic credentials and with a custom scheme, each
/// credentials loadable synced before, so that every request takes the credentials at once.
@MainActor
private func measureAuthorizationAllocations(
    request: URLRequest, transport: CannedTransport, count: Int, runs: Int, into report: inout Report
) async {
    let token = AsyncLoadable<String> { "eyJhbGciOiJIUzI1NiJ9.c2Vzc2lvbi0xMjM0NTY3ODkw.c2lnbmF0dXJl" }
    let credentials = AsyncLoadable<HTTPBasicCredentials> {
        HTTPBasicCredentials(user: "ana", password: "correct horse battery staple")
    }
    do {
        try await token.synced()
        try await credentials.synced()
    } catch {
        failOverhead("the credentials did not load: \(error)")
    }
    let tokenWaiter = LoadableWaiter(token, timeout: .seconds(30))
    let sides: [(String, HTTPAuthorization?)] = [
        ("none", nil),
        ("bearer", .bearer(tokenWaiter)),
        ("basic", .basic(LoadableWaiter(credentials, timeout: .seconds(30)))),
        ("scheme", .scheme("Token", tokenWaiter) { $0 }),
    ]
    var allocations: [String: Double] = [:]
    for (name, authorization) in sides {
        let loadable = HTTPLoadable<HTTPPayload>(request: request, transport: transport, authorization: authorization)
        _ = await timedSyncs(of: loadable, count / 10, fail: failOverhead)
        var samples: [Double] = []
        for _ in 0..<runs {
            samples.append(await timedSyncs(of: loadable, count, fail: failOverhead).allocations(per: count))
        }
        allocations[name] = samples.sorted()[samples.count / 2]
        report.add(
            Row(
                scenario: "http-overhead: HTTPLoadable 200 + decode, authorization \(name), median allocations",
                value: allocations[name]!, unit: "allocs/req"))
    }
    let (none, bearer) = (allocations["none"]!, allocations["bearer"]!)
    let (basic, scheme) = (allocations["basic"]!, allocations["scheme"]!)
    report.add(
        Goal(
            name: "http-overhead: allocations Basic and a custom scheme add per request over the bearer path",
            target: "<= 0 (0.25 allowed for the allocations of other threads)",
            measured: String(
                format: "basic %+.2f, scheme %+.2f (per GET: none %.2f, bearer %.2f, basic %.2f, scheme %.2f)",
                basic - bearer, scheme - bearer, none, bearer, basic, scheme),
            holds: basic - bearer <= 0.25 && scheme - bearer <= 0.25))
}

/// A transport that answers every request at once with a canned 200 and ``HTTPPayload/body``; its
/// ``revalidating`` twin answers a 304 to a request that carries `If-None-Match`.
private struct CannedTransport: HTTPTransport {
    let ok: HTTPURLResponse
    let notModified: HTTPURLResponse?

    init(url: URL) {
        ok = HTTPURLResponse(
            url: url, statusCode: 200, httpVersion: "HTTP/1.1",
            headerFields: ["Content-Type": "application/json", "Content-Length": "\(HTTPPayload.body.count)"])!
        notModified = nil
    }

    private init(ok: HTTPURLResponse, notModified: HTTPURLResponse) {
        self.ok = ok
        self.notModified = notModified
    }

    /// The same answers with an `ETag`, and a 304 to a request that carries `If-None-Match`.
    var revalidating: CannedTransport {
        let url = ok.url!
        let etag = ["ETag": HTTPPayload.entityTag]
        return CannedTransport(
            ok: HTTPURLResponse(
                url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                headerFields: etag.merging(["Content-Type": "application/json"]) { $1 })!,
            notModified: HTTPURLResponse(url: url, statusCode: 304, httpVersion: "HTTP/1.1", headerFields: etag)!)
    }

    func send(_ request: URLRequest, maxBodySize: Int) async throws -> (HTTPURLResponse, Data) {
        if let notModified, request.value(forHTTPHeaderField: "If-None-Match") != nil { return (notModified, Data()) }
        return (ok, HTTPPayload.body)
    }
}

/// Stops the benchmark: a failed request makes every figure meaningless.
private func failOverhead(_ message: String) -> Never {
    print("http-overhead benchmark: \(message)")
    fflush(nil)
    exit(1)
}

/// The runtime's `swift_job_run`, looked up once; `nil` if it cannot be found. Its second and third
/// arguments are the executor to run the job on, a two-word `SerialExecutorRef` (identity and
/// implementation), both `0` for the global (generic) executor: passed in two registers on the
/// 64-bit platforms the benchmarks run on.
private let runJob: (@convention(c) (UnsafeMutableRawPointer?, UnsafeRawPointer?, UInt) -> Void)? = {
    guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "swift_job_run") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutableRawPointer?, UnsafeRawPointer?, UInt) -> Void).self)
}()

/// A job of the runtime, handed to the main queue.
private struct GlobalJob: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer?
}

/// The runtime's `swift_task_enqueueGlobal_hook`: a function that takes the jobs meant for the
/// global executor; `nil` (the default) lets the runtime enqueue them itself.
private typealias EnqueueGlobalHook = @convention(c) (UnsafeMutableRawPointer?, UnsafeRawPointer?) -> Void

/// Runs `body` with the jobs meant for the runtime's global executor run by the main thread, so
/// that the process never starts the runtime's worker threads (valgrind crashes when they start).
/// Through the runtime's `swift_task_enqueueGlobal_hook`: each such job goes to the main queue
/// and runs there on the global executor (`swift_job_run`), as a worker thread would run it, so
/// that the hops are those of a normal run: a call of a nonisolated function from such a job is
/// not a hop, and a call of the main actor's is one (one more job on the main queue). If the
/// runtime's symbols cannot be found, `body` runs as usual and a line says so.
@MainActor
private func withJobsOnMainQueue<Result>(_ body: () async -> Result) async -> Result {
    guard runJob != nil, let symbol = dlsym(dlopen(nil, RTLD_NOW), "swift_task_enqueueGlobal_hook") else {
        print("http-overhead: cannot keep the jobs on the main queue; the runtime's worker threads will start")
        return await body()
    }
    let hook = symbol.assumingMemoryBound(to: EnqueueGlobalHook?.self)
    let previous = hook.pointee
    // Both functions take pointers only, which the Swift and C conventions pass alike.
    hook.pointee = { job, _ in
        let job = GlobalJob(pointer: job)
        DispatchQueue.main.async { runJob?(job.pointer, nil, 0) }
    }
    defer { hook.pointee = previous }
    return await body()
}

/// Makes the main thread run the main queue itself, through Foundation's run loop, once `main()`
/// first suspends, instead of the runtime's `dispatch_main()`: that parks the main thread in a
/// `sigsuspend` whose signal mask is read-only, and valgrind 3.19, which writes to that mask,
/// crashes there. For `--profile`; through the runtime's `swift_task_asyncMainDrainQueue_hook`.
/// Call it before the first suspension. Returns whether it could.
@discardableResult
func drainMainQueueOnMainThread() -> Bool {
    guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "swift_task_asyncMainDrainQueue_hook") else { return false }
    // Takes the runtime's own drain and a compatibility override; both are left alone.
    typealias DrainHook = @convention(c) (UnsafeRawPointer?, UnsafeRawPointer?) -> Void
    symbol.assumingMemoryBound(to: DrainHook?.self).pointee = { _, _ in
        while true { _ = RunLoop.main.run(mode: .default, before: .distantFuture) }
    }
    return true
}
