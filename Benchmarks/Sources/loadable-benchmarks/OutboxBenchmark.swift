import Foundation
import LoadableCaching
import LoadableHTTP
import LoadableSyncer
import LoadableTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The offline outbox: `LoadableOutbox.enqueue(_:)` of a change whose JSON is 200 bytes, then
/// `await saved()`, on an outbox whose `ActivityMonitor` is offline (nothing is sent) on a
/// ``FileLoadableCache`` in a fresh directory under the temporary directory (`TMPDIR`), deleted
/// afterwards.
///
/// - Enqueue + save: on an outbox holding no item (the goal's case) and on one holding 1,000
///   pending items (each save appends one journal entry, whatever the queue's length). After
///   each timed enqueue, the item is discarded and that save awaited, outside the timed part, so
///   that the queue keeps its size and each timed save replaces the outbox's file, as a save of a
///   live outbox does. Against `cache.save(CachedEntry(data: <the same 200 bytes>, …), key:)`
///   called by hand from the main actor on another `FileLoadableCache`, replacing its file each
///   time. The three take turns in chunks of 100 changes; the figures are the mean per change of
///   the best run and of the median run, and the median change of every run.
/// - Main-actor stall: the longest time between two turns of a main-actor ticker (a task that
///   reads the clock and yields, in a loop) while N changes are enqueued into an empty outbox, one
///   after the other, each save awaited (the queue grows to N items), against one save by hand
///   (the median change above) and against the ticker alone (the machine's own noise). The longest
///   `enqueue(_:)` call itself is the main actor's own work per change.
@MainActor
func runOutbox(_ settings: Settings, into report: inout Report) async {
    let change = OutboxChange.sized(to: changeBytes)
    let bytes = mustSucceed("encoding the change") { try JSONEncoder().encode(change) }
    precondition(bytes.count == changeBytes, "the change's JSON is \(bytes.count) bytes, not \(changeBytes)")
    print("outbox: files in \(scratchDirectory.path) (TMPDIR moves them), deleted at the end")
    defer { try? FileManager.default.removeItem(at: scratchDirectory) }
    let byHand = await runEnqueues(change, bytes: bytes, settings, into: &report)
    await runStalls(change, oneSave: byHand, settings, into: &report)
    await runBursts(change, settings, into: &report)
    await runDrain(change, settings, into: &report)
}

/// The size of the change's JSON, as the goal says.
private let changeBytes = 200

/// Pending items in the second outbox of the enqueue part: the goal's 1,000.
private let pendingItems = 1_000

/// The bytes one item adds to the outbox's entry: the change's JSON, two UUID strings, and the
/// layout's 13 bytes of fields and 16 of lengths.
private let outboxRecordBytes = changeBytes + 2 * 36 + 13 + 16

/// Changes per turn of each side.
private let chunkSize = 100

/// An edit of a post, as an app would enqueue it; its JSON is made exactly ``changeBytes`` long.
private struct OutboxChange: Codable, Sendable {
    var postID: Int
    var title: String
    var body: String

    /// A change whose JSON (`JSONEncoder`, default options) is `size` bytes.
    static func sized(to size: Int) -> OutboxChange {
        var change = OutboxChange(postID: 7, title: "On the train", body: "")
        let empty = mustSucceed("encoding the change") { try JSONEncoder().encode(change) }.count
        let words = "a change made offline, kept until the server has it "
        change.body = String(String(repeating: words, count: size / words.count + 1).prefix(size - empty))
        return change
    }
}

/// The directory of every file of the scenario, under the system's temporary directory; deleted
/// at the end, so that no deletion runs between two timed parts.
private let scratchDirectory = FileManager.default.temporaryDirectory.appendingPathComponent(
    "loadable-benchmarks-outbox-\(UUID())")

/// A cache in a new directory of ``scratchDirectory`` (created on its first save).
private func makeCache(_ name: String) -> FileLoadableCache {
    FileLoadableCache(directory: scratchDirectory.appendingPathComponent("\(name)-\(UUID())"))
}

/// Stops the benchmark with `error` when `body` throws: an input/output failure makes any figure
/// meaningless.
private func mustSucceed<Result>(_ what: String, _ body: () throws -> Result) -> Result {
    do {
        return try body()
    } catch {
        fatalError("outbox benchmark: \(what) failed: \(error)")
    }
}

/// An outbox on a fresh cache that never sends (its monitor is offline), restored, holding
/// `pending` items saved; it stops the benchmark on any error.
@MainActor
private func makeOutbox(
    _ change: OutboxChange, pending: Int, sends: Counter
) async -> LoadableOutbox<OutboxChange> {
    let outbox = LoadableOutbox<OutboxChange>(
        cache: makeCache("outbox"), key: "outbox", activity: ActivityMonitor(connectivity: .offline)
    ) { _, _ in sends.value += 1 }
    outbox.onError = { fatalError("outbox benchmark: \($0)") }
    await outbox.restored()
    for _ in 0..<pending { outbox.enqueue(change) }
    await outbox.saved()
    return outbox
}

// MARK: - Enqueue + save

/// The changes of one side in one run: the time of each, and of its synchronous main-actor part.
private struct Changes {
    var durations: [Duration] = []
    var onMain: [Duration] = []
    var allocations = 0

    /// The mean per change, in microseconds.
    var mean: Double { durations.reduce(Duration.zero, +).nanoseconds / 1e3 / Double(max(durations.count, 1)) }
    var allocationsPerChange: Double { Double(allocations) / Double(max(durations.count, 1)) }

    mutating func add(_ sample: Sample, onMain: Duration? = nil) {
        durations.append(sample.duration)
        if let onMain { self.onMain.append(onMain) }
        allocations += sample.allocations
    }
}

/// One run of each side.
private struct EnqueueRun {
    var empty = Changes()
    var pending = Changes()
    var byHand = Changes()
}

/// `count` changes enqueued and saved, one after the other; each discarded afterwards, untimed.
@MainActor
private func enqueueChanges(
    _ count: Int, _ change: OutboxChange, on outbox: LoadableOutbox<OutboxChange>, into changes: inout Changes
) async {
    for _ in 0..<count {
        let watch = Stopwatch.start()
        let id = outbox.enqueue(change)
        let onMain = watch.stop().duration
        await outbox.saved()
        changes.add(watch.stop(), onMain: onMain)
        outbox.discard(id)
        await outbox.saved()
    }
}

/// `count` saves of `bytes` by hand, one after the other.
@MainActor
private func saveByHand(_ count: Int, _ bytes: Data, in cache: FileLoadableCache, into changes: inout Changes) async {
    for _ in 0..<count {
        let watch = Stopwatch.start()
        do {
            try await cache.save(CachedEntry(data: bytes, savedAt: .now, version: 1), key: "by-hand")
        } catch {
            fatalError("outbox benchmark: saving by hand failed: \(error)")
        }
        changes.add(watch.stop())
    }
}

@MainActor
private func runEnqueues(
    _ change: OutboxChange, bytes: Data, _ settings: Settings, into report: inout Report
) async -> Double {
    let count = settings.outboxChanges
    let runs = max(settings.runs, 1)
    let sends = Counter()
    var results: [EnqueueRun] = []
    for _ in 0..<runs {
        let empty = await makeOutbox(change, pending: 0, sends: sends)
        let pending = await makeOutbox(change, pending: pendingItems, sends: sends)
        let cache = makeCache("by-hand")
        // Unmeasured first turns: each folder's first use, and the file each save replaces.
        var warmUp = Changes()
        await enqueueChanges(10, change, on: empty, into: &warmUp)
        await enqueueChanges(10, change, on: pending, into: &warmUp)
        await saveByHand(10, bytes, in: cache, into: &warmUp)

        var run = EnqueueRun()
        var done = 0
        while done < count {
            let chunk = min(chunkSize, count - done)
            await enqueueChanges(chunk, change, on: empty, into: &run.empty)
            await saveByHand(chunk, bytes, in: cache, into: &run.byHand)
            await enqueueChanges(chunk, change, on: pending, into: &run.pending)
            done += chunk
        }
        precondition(empty.items.isEmpty && pending.items.count == pendingItems, "the outboxes' sizes moved")
        results.append(run)
    }
    precondition(sends.value == 0, "an offline outbox sent \(sends.value) changes")

    func fastest(_ runs: [Changes]) -> Changes { runs.min { $0.mean < $1.mean }! }
    func medianRun(_ runs: [Changes]) -> Double {
        let means = runs.map(\.mean).sorted()
        return means[means.count / 2]
    }
    func medianChange(_ runs: [Changes]) -> Double { median(runs.flatMap(\.durations)) }
    func median(_ durations: [Duration]) -> Double {
        let sorted = durations.sorted()
        return sorted[sorted.count / 2].nanoseconds / 1e3
    }

    let handName = "cache.save by hand, \(changeBytes) B"
    let handRuns = results.map(\.byHand)
    let hand = fastest(handRuns)
    let handMedianRun = medianRun(handRuns)
    let handMedianChange = medianChange(handRuns)
    report.add(
        Row(
            scenario: "outbox: \(handName), best", value: hand.mean, unit: "µs/op",
            allocationsPerOperation: hand.allocationsPerChange))

    var ratios: [String: (best: Double, median: Double, change: Double)] = [:]
    for (name, side) in [("empty", results.map(\.empty)), ("\(pendingItems) pending", results.map(\.pending))] {
        let outbox = fastest(side)
        let medianMean = medianRun(side)
        let change = medianChange(side)
        ratios[name] = (outbox.mean / hand.mean, medianMean / handMedianRun, change / handMedianChange)
        report.add(
            Row(
                scenario: "outbox: enqueue + saved(), \(name), best", value: outbox.mean, unit: "µs/op",
                allocationsPerOperation: outbox.allocationsPerChange, baseline: "\(handName), best",
                baselineValue: hand.mean, ratio: outbox.mean / hand.mean))
        report.add(
            Row(
                scenario: "outbox: enqueue + saved(), \(name), median", value: medianMean, unit: "µs/op",
                baseline: "\(handName), median", baselineValue: handMedianRun, ratio: medianMean / handMedianRun))
        report.add(
            Row(
                scenario: "outbox: enqueue + saved(), \(name), median op", value: change, unit: "µs/op",
                baseline: "\(handName), median op", baselineValue: handMedianChange,
                ratio: change / handMedianChange))
        report.add(
            Row(
                scenario: "  of which enqueue() on main, \(name), median op",
                value: median(side.flatMap(\.onMain)), unit: "µs/op"))
    }

    let goal = ratios["empty"]!
    let info = ratios["\(pendingItems) pending"]!
    report.add(
        Goal(
            name:
                "outbox: enqueue + saved() of a \(changeBytes) B change (empty outbox) vs cache.save of the same bytes by hand",
            target: "<= 1.5x",
            measured: String(
                format:
                    "%.2fx (best of %d: %.1f µs vs %.1f µs; median run %.2fx; median op %.2fx); with %d pending: best %.2fx, median run %.2fx",
                goal.best, runs, fastest(results.map(\.empty)).mean, hand.mean, goal.median, goal.change,
                pendingItems, info.best, info.median),
            holds: goal.best <= 1.5))
    let emptyBest = fastest(results.map(\.empty)).mean
    let pendingBest = fastest(results.map(\.pending)).mean
    let emptyMedian = medianRun(results.map(\.empty))
    let pendingMedian = medianRun(results.map(\.pending))
    report.add(
        Goal(
            name: "outbox: enqueue + saved() with \(pendingItems) items pending vs into an empty outbox",
            target: "<= 2x",
            measured: String(
                format: "%.2fx (best of %d: %.1f µs vs %.1f µs; median run %.2fx)", pendingBest / emptyBest, runs,
                pendingBest, emptyBest, pendingMedian / emptyMedian),
            holds: pendingBest / emptyBest <= 2))
    return handMedianChange
}

// MARK: - Draining scopes in parallel

/// Items drained per side.
private let drainItems = 400

/// The server's time per send in the drain part.
private let drainDelay = Duration.milliseconds(10)

/// 400 items sent to a `LoopbackHTTPServer` that answers each `PUT` after 10 ms: in 4 scopes of
/// 100 items (sent in parallel, `maxConcurrentSends` 4) against one scope of 400 (one at a time),
/// on memory caches, the outbox online. The time from the first enqueue to the empty queue.
@MainActor
private func runDrain(_ change: OutboxChange, _ settings: Settings, into report: inout Report) async {
    let server: LoopbackHTTPServer
    do {
        server = try LoopbackHTTPServer(lifetime: .seconds(3_600)) { request in
            .after(drainDelay, on: ContinuousClock(), .status(request.method == "PUT" ? 204 : 405))
        }
    } catch {
        fatalError("outbox benchmark: cannot start the loopback server: \(error)")
    }
    let session = URLSession(configuration: .ephemeral)
    defer {
        session.invalidateAndCancel()
        server.stop()
    }
    let service = HTTPService(baseURL: server.url("/"), transport: session)

    func drain(scopes: Int) async -> Duration {
        let outbox = LoadableOutbox<OutboxChange>(
            cache: InMemoryLoadableCache(), activity: ActivityMonitor()
        ) { change, key in
            try await service.send(.put, "posts/\(change.postID)", json: change, idempotencyKey: key)
        }
        outbox.onError = { fatalError("outbox benchmark: \($0)") }
        await outbox.restored()
        let watch = Stopwatch.start()
        for index in 0..<drainItems { outbox.enqueue(change, scope: "post-\(index % scopes)") }
        while !outbox.items.isEmpty {
            precondition(!outbox.items.contains { $0.state == .failed }, "a send failed: \(outbox.items)")
            try? await Task.sleep(for: .milliseconds(1))
        }
        return watch.stop().duration
    }

    let runs = max(min(settings.runs, 3), 1)
    var one: [Duration] = []
    var four: [Duration] = []
    _ = await drain(scopes: 4)  // warm-up: connections, first use
    for _ in 0..<runs {
        one.append(await drain(scopes: 1))
        four.append(await drain(scopes: 4))
    }
    let bestOne = one.min()!.nanoseconds / 1e6
    let bestFour = four.min()!.nanoseconds / 1e6
    report.add(
        Row(scenario: "outbox: drain \(drainItems) items, 1 scope, 10 ms per send, best", value: bestOne, unit: "ms"))
    report.add(
        Row(
            scenario: "outbox: drain \(drainItems) items, 4 scopes, 10 ms per send, best", value: bestFour, unit: "ms",
            baseline: "1 scope, best", baselineValue: bestOne, ratio: bestFour / bestOne))
    report.add(
        Goal(
            name: "outbox: 4 scopes of 100 items drain faster than one scope of 400 (server answers in 10 ms)",
            target: ">= 3x",
            measured: String(
                format: "%.2fx (best of %d: %.0f ms vs %.0f ms)", bestOne / bestFour, runs, bestFour, bestOne),
            holds: bestOne / bestFour >= 3))
}

// MARK: - Bursts on a long queue

/// Pending items of the long queue of the burst part: what the fourth code review measured.
private let longQueueItems = 8_000

/// Changes enqueued in one burst, without waiting for their saves.
private let burstSize = 100

/// `burstSize` changes enqueued one after the other without waiting for a save (a save asked for
/// meanwhile waits, or runs, holding the queue as it was), each call timed; then the saves are
/// awaited and the burst's items discarded, untimed, so the queue keeps its size.
@MainActor
private func enqueueBurst(
    _ change: OutboxChange, on outbox: LoadableOutbox<OutboxChange>, into durations: inout [Duration]
) async {
    var ids: [String] = []
    for _ in 0..<burstSize {
        let watch = Stopwatch.start()
        ids.append(outbox.enqueue(change))
        durations.append(watch.stop().duration)
    }
    await outbox.saved()
    for id in ids { outbox.discard(id) }
    await outbox.saved()
}

/// `enqueue(_:)`'s main-actor time in bursts on an outbox holding ``longQueueItems`` pending items
/// against one holding none, on an `InMemoryLoadableCache` (no disk: the main actor's own work).
/// Goal: O(1) amortized, whatever the queue's length.
@MainActor
private func runBursts(_ change: OutboxChange, _ settings: Settings, into report: inout Report) async {
    let runs = max(settings.runs, 1)
    let bursts = max(settings.outboxChanges / burstSize, 1)
    func outbox(pending: Int) async -> LoadableOutbox<OutboxChange> {
        let outbox = LoadableOutbox<OutboxChange>(
            cache: InMemoryLoadableCache(), key: "outbox", activity: ActivityMonitor(connectivity: .offline)
        ) { _, _ in fatalError("outbox benchmark: an offline outbox sent a change") }
        outbox.onError = { fatalError("outbox benchmark: \($0)") }
        await outbox.restored()
        for _ in 0..<pending { outbox.enqueue(change) }
        await outbox.saved()
        return outbox
    }
    var short: [Double] = []
    var long: [Double] = []
    for _ in 0..<runs {
        let empty = await outbox(pending: 0)
        let full = await outbox(pending: longQueueItems)
        var warmUp: [Duration] = []
        await enqueueBurst(change, on: empty, into: &warmUp)
        await enqueueBurst(change, on: full, into: &warmUp)
        var emptyDurations: [Duration] = []
        var fullDurations: [Duration] = []
        for _ in 0..<bursts {
            await enqueueBurst(change, on: empty, into: &emptyDurations)
            await enqueueBurst(change, on: full, into: &fullDurations)
        }
        precondition(empty.items.isEmpty && full.items.count == longQueueItems, "the outboxes' sizes moved")
        func median(_ durations: [Duration]) -> Double { durations.sorted()[durations.count / 2].nanoseconds / 1e3 }
        short.append(median(emptyDurations))
        long.append(median(fullDurations))
    }
    let shortMedian = short.sorted()[short.count / 2]
    let longMedian = long.sorted()[long.count / 2]
    let ratio = longMedian / shortMedian
    report.add(
        Row(
            scenario: "outbox: enqueue() in bursts, \(longQueueItems.formatted) pending (median op, median run)",
            value: longMedian, unit: "µs/op", baseline: "empty outbox", baselineValue: shortMedian, ratio: ratio))
    report.add(
        Goal(
            name:
                "outbox: enqueue() is O(1) amortized on the main actor: a burst's median call with \(longQueueItems.formatted) pending items vs with none (memory cache, median of \(runs) runs)",
            target: "<= 1.5x",
            measured: String(format: "%.2fx (%.1f µs vs %.1f µs)", ratio, longMedian, shortMedian),
            holds: ratio <= 1.5))
}

// MARK: - Main-actor stall

/// What one ticker run measured.
private struct Stall {
    /// The gaps, in nanoseconds, sorted.
    var gaps: [Int64]
    /// Each `enqueue(_:)` call, in order.
    var enqueues: [Duration]
    /// How long the work took, in milliseconds.
    var work: Double

    init(gaps: [Int64], enqueues: [Duration] = [], work: Duration) {
        self.gaps = gaps.sorted()
        self.enqueues = enqueues
        self.work = work.nanoseconds / 1e6
    }

    /// The longest gap, in microseconds.
    var longest: Double { Double(gaps.last ?? 0) / 1e3 }
    /// The 99.9th percentile gap, in microseconds.
    var p999: Double { gaps.isEmpty ? 0 : Double(gaps[min(gaps.count - 1, gaps.count * 999 / 1000)]) / 1e3 }
    /// The gaps longer than `microseconds`.
    func gaps(over microseconds: Double) -> Int { gaps.count { Double($0) > microseconds * 1e3 } }
    /// The longest `enqueue(_:)` call, in microseconds.
    var longestEnqueue: Double { (enqueues.max() ?? .zero).nanoseconds / 1e3 }
    /// The median `enqueue(_:)` call among `calls`, in microseconds.
    func medianEnqueue(_ calls: ArraySlice<Duration>) -> Double {
        calls.isEmpty ? 0 : calls.sorted()[calls.count / 2].nanoseconds / 1e3
    }
}

/// `count` changes enqueued into an empty outbox, each save awaited, while the ticker runs.
@MainActor
private func enqueueWithTicker(_ count: Int, _ change: OutboxChange, sends: Counter) async -> Stall {
    let outbox = await makeOutbox(change, pending: 0, sends: sends)
    let clock = ContinuousClock()
    var enqueues: [Duration] = []
    enqueues.reserveCapacity(count)
    let ticker = MainActorTicker()
    await ticker.waitForTicks(100)
    let watch = Stopwatch.start()
    for _ in 0..<count {
        let start = clock.now
        outbox.enqueue(change)
        enqueues.append(clock.now - start)
        await outbox.saved()
    }
    let work = watch.stop().duration
    let gaps = await ticker.stop()
    precondition(outbox.items.count == count, "the outbox holds \(outbox.items.count) items, not \(count)")
    return Stall(gaps: gaps, enqueues: enqueues, work: work)
}

/// The same writes made on the main actor, as an outbox that wrote there would: for each of
/// `count` changes, the queue's bytes so far (`bytesPerItem` per item) written atomically, while
/// the ticker runs. The baseline of "the main actor is never blocked by disk".
@MainActor
private func writeOnMainWithTicker(_ count: Int, bytesPerItem: Int) async -> Stall {
    let file = scratchDirectory.appendingPathComponent("on-main-\(UUID().uuidString)")
    mustSucceed("creating \(scratchDirectory.path)") {
        try FileManager.default.createDirectory(at: scratchDirectory, withIntermediateDirectories: true)
    }
    let ticker = MainActorTicker()
    await ticker.waitForTicks(100)
    let watch = Stopwatch.start()
    for index in 0..<count {
        let bytes = Data(repeating: UInt8(truncatingIfNeeded: index), count: (index + 1) * bytesPerItem)
        mustSucceed("writing \(file.path)") { try bytes.write(to: file, options: .atomic) }
        await Task.yield()
    }
    let work = watch.stop().duration
    let gaps = await ticker.stop()
    return Stall(gaps: gaps, work: work)
}

/// The ticker alone for `duration`: the gaps the machine makes by itself.
@MainActor
private func idleTicker(for duration: Duration) async -> Stall {
    Stall(gaps: await idleTickerGaps(for: duration), work: duration)
}

@MainActor
private func runStalls(_ change: OutboxChange, oneSave: Double, _ settings: Settings, into report: inout Report) async {
    let count = settings.outboxStallChanges
    let runs = max(settings.runs, 1)
    let sends = Counter()
    var outbox: [Stall] = []
    var idle: [Stall] = []
    var onMain: [Stall] = []
    for _ in 0..<runs {
        let stall = await enqueueWithTicker(count, change, sends: sends)
        outbox.append(stall)
        idle.append(await idleTicker(for: .milliseconds(max(stall.work, 1))))
        onMain.append(await writeOnMainWithTicker(count, bytesPerItem: outboxRecordBytes))
    }
    precondition(sends.value == 0, "an offline outbox sent \(sends.value) changes")

    // The median run of each, by its longest gap; and the worst of all runs.
    func middle(_ stalls: [Stall]) -> Stall { stalls.sorted { $0.longest < $1.longest }[stalls.count / 2] }
    func worst(_ stalls: [Stall]) -> Double { stalls.map(\.longest).max() ?? 0 }
    func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
    let what = "\(count.formatted) changes"
    let saveName = "one cache.save by hand (median)"
    let stall = middle(outbox)
    let idleStall = middle(idle)
    let onMainStall = middle(onMain)
    let longestEnqueue = median(outbox.map(\.longestEnqueue))
    let tail = min(50, count)
    let firstEnqueues = median(outbox.map { $0.medianEnqueue($0.enqueues.prefix(tail)) })
    let lastEnqueues = median(outbox.map { $0.medianEnqueue($0.enqueues.suffix(tail)) })
    let overOneSave = median(outbox.map { Double($0.gaps(over: oneSave)) })
    let idleOverOneSave = median(idle.map { Double($0.gaps(over: oneSave)) })
    report.add(
        Row(
            scenario: "outbox stall: ticker alone (noise)", value: idleStall.longest, unit: "µs",
            baseline: "worst of \(runs) runs", baselineValue: worst(idle)))
    report.add(
        Row(
            scenario: "outbox stall: \(what), longest", value: stall.longest, unit: "µs", baseline: saveName,
            baselineValue: oneSave, ratio: stall.longest / oneSave))
    report.add(
        Row(
            scenario: "outbox stall: \(what), worst run", value: worst(outbox), unit: "µs", baseline: saveName,
            baselineValue: oneSave, ratio: worst(outbox) / oneSave))
    report.add(
        Row(
            scenario: "outbox stall: \(what), 99.9th pct", value: stall.p999, unit: "µs",
            baseline: "ticker alone, 99.9th pct", baselineValue: idleStall.p999, ratio: stall.p999 / idleStall.p999))
    report.add(
        Row(
            scenario: "outbox stall: \(what), gaps > one save", value: overOneSave, unit: "gaps",
            baseline: "ticker alone", baselineValue: idleOverOneSave))
    report.add(
        Row(
            scenario: "outbox stall: \(what), longest enqueue()", value: longestEnqueue, unit: "µs",
            baseline: saveName, baselineValue: oneSave, ratio: longestEnqueue / oneSave))
    report.add(
        Row(
            scenario: "outbox stall: enqueue(), last \(tail) (median)", value: lastEnqueues, unit: "µs",
            baseline: "first \(tail) (median)", baselineValue: firstEnqueues, ratio: lastEnqueues / firstEnqueues))
    report.add(Row(scenario: "outbox stall: \(what) enqueued + saved, duration", value: stall.work, unit: "ms"))
    report.add(
        Row(
            scenario: "outbox stall: the same writes on the main actor, longest", value: onMainStall.longest,
            unit: "µs", baseline: "the outbox's longest", baselineValue: stall.longest,
            ratio: stall.longest / onMainStall.longest))
    report.add(
        Row(
            scenario: "outbox stall: the same writes on the main actor, 99.9th pct", value: onMainStall.p999,
            unit: "µs", baseline: "the outbox's 99.9th pct", baselineValue: stall.p999,
            ratio: stall.p999 / onMainStall.p999))
    let allEnqueues = median(outbox.map { $0.medianEnqueue($0.enqueues[...]) })
    report.add(
        Row(
            scenario: "outbox stall: enqueue(), all \(count) (median)", value: allEnqueues, unit: "µs",
            baseline: saveName, baselineValue: oneSave, ratio: allEnqueues / oneSave))
    report.add(
        Goal(
            name:
                "outbox: the main actor is never blocked by disk: enqueue()'s main-actor part while \(what) are enqueued and saved (median call, median of \(runs) runs) vs one save by hand",
            target: "<= 0.5x",
            measured: String(
                format:
                    "%.2fx (%.1f µs vs %.0f µs); longest main-actor gap %.0f µs, against %.0f µs with the same writes made on the main actor (99.9th pct %.0f vs %.0f µs)",
                allEnqueues / oneSave, allEnqueues, oneSave, stall.longest, onMainStall.longest, stall.p999,
                onMainStall.p999),
            holds: allEnqueues / oneSave <= 0.5))
}
