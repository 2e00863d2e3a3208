import Foundation
import LoadableCaching
import LoadableHTTP
import LoadableSupport
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Crash safety of `LoadableOutbox` with real processes, a real file cache and a real server: no
/// change whose enqueue was saved is lost, and none is applied twice.
///
/// A `LoopbackHTTPServer` (``Ledger``) applies each `POST /changes` (`{"n":17}`) once per
/// `Idempotency-Key`. 20 times in a row (a tenth under ThreadSanitizer), a child process makes an
/// outbox on a `FileLoadableCache` in a folder all rounds share, enqueues five new numbers (in
/// bursts of one to three, before its outbox finished restoring the items of the rounds before),
/// appends each number to a report file once ``LoadableOutbox/saved()`` returned for it, and
/// lets the outbox send them through `HTTPService` to the server; the child kills itself with
/// SIGKILL at a moment chosen by the round's seed (``Moment``), as the file cache's crash tests
/// do: a background thread spins (`sched_yield()`) until the child's progress reaches the moment,
/// then calls `kill(getpid(), SIGKILL)`. A child that sent everything before its moment kills
/// itself once its queue is empty and saved. Then a last child, never killed, restores what is
/// left and sends it until its queue is empty; a new outbox on the same cache afterwards restores
/// nothing.
///
/// Each number goes in scope `n % 3` (scopes are sent in parallel), and each send is answered as
/// `.appliedAs` the server's version, which `rebase` writes into the later items of the scope (the
/// number they come after). The server must have applied each scope's numbers in increasing order
/// (so in the order they were enqueued, and none twice), every number reported saved, no number
/// that no child enqueued, and no change rebased on a number it never applied.
/// A number enqueued but not reported saved (the kill came during its save) may be missing.
/// Each child's `onError` reports on its standard output (``ChildReport``), and an `alarm` bounds
/// each child, so that a child that blocks fails instead of hanging the run.
@Suite("LoadableOutbox: processes killed while sending lose no saved change and apply none twice")
struct OutboxCrashTests {
    /// A change the outbox carries: the next number of the server's list, in scope `n % 3`, and
    /// the number of the change before it in its scope that the server applied (set by `rebase`).
    struct Change: Codable, Sendable, Equatable {
        let n: Int
        var after: Int?

        init(n: Int, after: Int? = nil) {
            self.n = n
            self.after = after
        }

        var scope: String { "s\(n % 3)" }
    }

    /// Killed rounds: 20, a tenth under ThreadSanitizer.
    static let rounds = StressScale.rounds(20)
    /// The numbers each killed round enqueues.
    static let perRound = 5
    /// The seed of round 0; round `r` uses `baseSeed + r`.
    static let baseSeed: UInt64 = 0x0B0C_5EED
    /// Seconds a child may run before `alarm` stops it.
    static let bound: UInt32 = 60
    /// The outbox's key in the shared cache.
    static let key = "outbox"

    /// The numbers round `round` enqueues: each round's numbers are above the rounds' before.
    static func numbers(ofRound round: Int) -> Range<Int> {
        round * 1_000 + 1..<round * 1_000 + 1 + perRound
    }

    // MARK: - The server

    /// The server's side: applies each change once per `Idempotency-Key`, in the order received.
    final class Ledger: Sendable {
        /// What the server received and applied.
        private struct State {
            var applied: [Int] = []
            var numberByKey: [String: Int] = [:]
            var repeats = 0
            var failures: [String] = []
        }

        private let state = Locked(State())

        /// The numbers applied, in order.
        var applied: [Int] { state.withLock { $0.applied } }
        /// How many sends came again with a key the server had applied already.
        var repeats: Int { state.withLock { $0.repeats } }
        /// Requests the server did not expect: not a change, no key, or a key sent with two changes.
        var failures: [String] { state.withLock { $0.failures } }

        /// Answers `request`: applies its change unless its key was applied already; 204 either way.
        func receive(_ request: LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Response {
            guard request.method == "POST", request.path == "/changes", let key = request.header("Idempotency-Key"),
                let change = try? JSONDecoder().decode(Change.self, from: request.body)
            else {
                let body = String(decoding: request.body, as: UTF8.self)
                state.withLock { $0.failures.append("unexpected request \(request.method) \(request.target) \(body)") }
                return .status(400)
            }
            state.withLock { state in
                if let after = change.after, !state.applied.contains(after) {
                    state.failures.append("\(change.n) was rebased on \(after), which the server never applied")
                }
                if let earlier = state.numberByKey[key] {
                    state.repeats += 1
                    if earlier != change.n {
                        state.failures.append("key \(key) came with \(earlier), then with \(change.n)")
                    }
                } else {
                    state.numberByKey[key] = change.n
                    state.applied.append(change.n)
                }
            }
            return .status(204)
        }
    }

    // MARK: - The child

    /// What a killed child did so far, shared with its killing thread.
    final class Progress: Sendable {
        /// The counts.
        private struct Counts {
            var enqueued = 0
            var saved = 0
            var answered = 0
        }

        private let counts = Locked(Counts())

        /// Changes enqueued.
        var enqueued: Int { counts.withLock { $0.enqueued } }
        /// Enqueues whose save finished (and that were reported).
        var saved: Int { counts.withLock { $0.saved } }
        /// Sends the server answered.
        var answered: Int { counts.withLock { $0.answered } }

        /// Counts `count` enqueues.
        func enqueue(_ count: Int) { counts.withLock { $0.enqueued += count } }
        /// Counts `count` saved enqueues.
        func save(_ count: Int) { counts.withLock { $0.saved += count } }
        /// Counts an answered send.
        func answer() { counts.withLock { $0.answered += 1 } }
    }

    /// When a child kills itself.
    enum Moment: CustomStringConvertible {
        /// Once `events` enqueues were saved or sends answered in all, then after `spins` yields
        /// of the thread: anywhere.
        case afterSpinning(events: Int, spins: Int)
        /// At once after the server answered `answers` sends: often before the removal is saved,
        /// so the next round sends the change again, with the same key.
        case afterAnswer(answers: Int)
        /// After `enqueues` enqueues, then `spins` yields: often while the enqueue is saved.
        case afterEnqueue(enqueues: Int, spins: Int)

        init(seed: UInt64) {
            var random = SeededRandomNumberGenerator(seed: seed)
            let perRound = OutboxCrashTests.perRound
            switch seed % 3 {
            case 0:
                self = .afterSpinning(
                    events: Int.random(in: 1...2 * perRound, using: &random),
                    spins: Int.random(in: 0..<3_000, using: &random))
            case 1: self = .afterAnswer(answers: Int.random(in: 1...perRound, using: &random))
            default:
                self = .afterEnqueue(
                    enqueues: Int.random(in: 1...perRound, using: &random),
                    spins: Int.random(in: 0..<300, using: &random))
            }
        }

        var description: String {
            switch self {
            case .afterSpinning(let events, let spins): "after \(events) saves or answers and \(spins) spins"
            case .afterAnswer(let answers): "at once after \(answers) answers"
            case .afterEnqueue(let enqueues, let spins): "after \(enqueues) enqueues and \(spins) spins"
            }
        }

        /// Waits for the moment, on the killing thread. A moment the child never reaches does not
        /// matter: the child kills itself once its queue is empty.
        func wait(progress: Progress) {
            func spin(_ count: Int) {
                for _ in 0..<count { sched_yield() }
            }
            switch self {
            case .afterSpinning(let events, let spins):
                while progress.saved + progress.answered < events { sched_yield() }
                spin(spins)
            case .afterAnswer(let answers):
                while progress.answered < answers { sched_yield() }
            case .afterEnqueue(let enqueues, let spins):
                while progress.enqueued < enqueues { sched_yield() }
                spin(spins)
            }
        }
    }

    /// The child's outbox: on a `FileLoadableCache` in `directory`, sending to the server at
    /// `serverURL`; `onError` reports to the parent, and each answered send counts in `progress`.
    @MainActor
    static func makeOutbox(directory: String, serverURL: String, progress: Progress?) -> LoadableOutbox<Change> {
        let cache = FileLoadableCache(directory: URL(fileURLWithPath: directory, isDirectory: true))
        let service = HTTPService(baseURL: URL(string: serverURL)!)
        let outbox = LoadableOutbox<Change>(
            cache: cache, rebase: { later, applied in later.after = applied.n }, key: key, activity: ActivityMonitor(),
            retryPolicy: BackoffTimeoutPolicy(min: .milliseconds(10), max: .milliseconds(100))
        ) { change, idempotencyKey in
            try await service.send(.post, "changes", json: change, idempotencyKey: idempotencyKey)
            progress?.answer()
            return .appliedAs(Change(n: change.n))  // the server's version: later items build on it
        }
        outbox.onError = { error in
            ChildReport.fail("onError: \(error)")
            // A killed child's buffered output would be lost.
            fflush(nil)
        }
        return outbox
    }

    /// The killed child of round `round`: enqueues its numbers, reports each once it is saved,
    /// and lets the outbox send, until its killing thread kills it.
    @MainActor
    static func sendUntilKilled(directory: String, serverURL: String, round: Int, seed: UInt64) async {
        alarm(bound)
        let progress = Progress()
        let moment = Moment(seed: seed)
        let killer = Thread {
            moment.wait(progress: progress)
            kill(getpid(), SIGKILL)
        }
        killer.start()
        let outbox = makeOutbox(directory: cacheDirectory(in: directory), serverURL: serverURL, progress: progress)
        // Bursts of one to three enqueues, the first before the outbox finished restoring.
        var random = SeededRandomNumberGenerator(seed: ~seed)
        var next = numbers(ofRound: round).lowerBound
        let end = numbers(ofRound: round).upperBound
        while next < end {
            let numbers = next..<min(end, next + Int.random(in: 1...3, using: &random))
            for number in numbers { outbox.enqueue(Change(n: number), scope: Change(n: number).scope) }
            progress.enqueue(numbers.count)
            next = numbers.upperBound
            await outbox.saved()
            reportSaved(numbers, in: directory)
            progress.save(numbers.count)
        }
        await waitUntilEmpty(outbox)
        await outbox.saved()
        kill(getpid(), SIGKILL)
    }

    /// The last child: restores what the killed ones left, sends it, and exits once the queue is
    /// empty and saved.
    @MainActor
    static func finishQueue(directory: String, serverURL: String) async {
        alarm(bound)
        let outbox = makeOutbox(directory: cacheDirectory(in: directory), serverURL: serverURL, progress: nil)
        await outbox.restored()
        await waitUntilEmpty(outbox)
        await outbox.saved()
        for item in outbox.items {
            ChildReport.fail("\(item.change.n) is left \(item.state): \(item.lastError.map { "\($0)" } ?? "")")
        }
    }

    /// Returns once `outbox` has nothing pending or sending (failed items stay).
    @MainActor
    static func waitUntilEmpty(_ outbox: LoadableOutbox<Change>) async {
        while outbox.pendingCount > 0 {
            await withCheckedContinuation { continuation in
                withObservationTracking {
                    _ = outbox.pendingCount
                } onChange: {
                    continuation.resume()
                }
            }
        }
    }

    // MARK: - The shared folder

    /// The cache's folder inside the folder all rounds share.
    static func cacheDirectory(in directory: String) -> String {
        directory + "/cache"
    }

    /// The report file: the numbers whose enqueue was saved, one a line.
    static func reportPath(in directory: String) -> String {
        directory + "/saved.txt"
    }

    /// Appends `numbers` to the report file in one write (a kill leaves at most a last line cut,
    /// which ``savedNumbers(in:)`` ignores).
    static func reportSaved(_ numbers: Range<Int>, in directory: String) {
        let descriptor = open(reportPath(in: directory), O_WRONLY | O_APPEND | O_CREAT, 0o644)
        guard descriptor >= 0 else {
            ChildReport.fail("cannot open the report file: errno \(errno)")
            fflush(nil)
            return
        }
        defer { close(descriptor) }
        let bytes = Array(numbers.map { "\($0)\n" }.joined().utf8)
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if written != bytes.count {
            ChildReport.fail("wrote \(written) of \(bytes.count) bytes of the report")
            fflush(nil)
        }
    }

    /// The numbers the children reported saved, in the order reported.
    static func savedNumbers(in directory: String) -> [Int] {
        let text = (try? String(contentsOfFile: reportPath(in: directory), encoding: .utf8)) ?? ""
        return text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().compactMap { Int($0) }
    }

    // MARK: - The test

    @Test("children killed at random moments while enqueuing and sending: every saved change applied once, in order")
    @MainActor
    func killedWhileSending() async throws {
        let ledger = Ledger()
        let server = try LoopbackHTTPServer(lifetime: .seconds(300)) { ledger.receive($0) }
        defer { server.stop() }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outbox-crash-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let directory = folder.path
        let serverURL = server.url("/").absoluteString
        var moments: [String] = []
        var disorderSeen = false

        for round in 0..<Self.rounds {
            let seed = Self.baseSeed &+ UInt64(round)
            let context = "seed \(seed) (round \(round)), killed \(Moment(seed: seed))"
            moments.append("round \(round): \(context)")
            let result = await #expect(
                processExitsWith: .signal(SIGKILL), observing: [\.standardOutputContent], "\(context)"
            ) {
                [
                    directory = directory as String, serverURL = serverURL as String, round = round as Int,
                    seed = seed as UInt64
                ] in
                await OutboxCrashTests.sendUntilKilled(
                    directory: directory, serverURL: serverURL, round: round, seed: seed)
            }
            ChildReport.recordFailures(of: result, context: context)
            // The first round that applies a number out of order, or twice, is the one to look at.
            let applied = ledger.applied
            if !disorderSeen, let index = Self.firstDisorder(in: applied) {
                disorderSeen = true
                Issue.record(
                    "\(context): the server applied \(applied[index]) out of its scope's order; applied: \(applied)")
            }
        }

        let result = await #expect(
            processExitsWith: .success, observing: [\.standardOutputContent], "the last child blocked or crashed"
        ) {
            [directory = directory as String, serverURL = serverURL as String] in
            await OutboxCrashTests.finishQueue(directory: directory, serverURL: serverURL)
        }
        ChildReport.recordFailures(of: result, context: "the last child")

        let context = "base seed \(Self.baseSeed), \(Self.rounds) rounds:\n" + moments.joined(separator: "\n")
        let applied = ledger.applied
        let saved = Self.savedNumbers(in: directory)
        let enqueued = Set((0..<Self.rounds).flatMap { Self.numbers(ofRound: $0) })
        #expect(ledger.failures.isEmpty, "\(context)\n\(ledger.failures)")
        #expect(Self.firstDisorder(in: applied) == nil, "\(context)\napplied: \(applied)")
        let lost = saved.filter { !applied.contains($0) }
        #expect(lost.isEmpty, "\(context)\nreported saved, never applied: \(lost)\napplied: \(applied)")
        let unknown = applied.filter { !enqueued.contains($0) }
        #expect(unknown.isEmpty, "\(context)\napplied, never enqueued: \(unknown)")
        // Not vacuous: some enqueues were saved, and some changes applied.
        #expect(!saved.isEmpty && !applied.isEmpty, "\(context)")

        // The next launch finds the queue empty.
        let outbox = LoadableOutbox<Change>(
            cache: FileLoadableCache(directory: URL(fileURLWithPath: Self.cacheDirectory(in: directory))),
            key: Self.key, activity: ActivityMonitor()
        ) { change, _ in
            Issue.record("\(context)\nsent again after the last child: \(change.n)")
        }
        outbox.onError = { Issue.record("\(context)\n\($0)") }
        await outbox.restored()
        #expect(outbox.items.isEmpty, "\(context)\nleft in the cache: \(outbox.items.map(\.change.n))")
    }

    /// The index of the first number of `applied` that is not above the one before it in its
    /// scope (`n % 3`); `nil` when each scope's numbers increase throughout.
    static func firstDisorder(in applied: [Int]) -> Int? {
        var last: [Int: Int] = [:]
        for (index, number) in applied.enumerated() {
            if let before = last[number % 3], number <= before { return index }
            last[number % 3] = number
        }
        return nil
    }
}
