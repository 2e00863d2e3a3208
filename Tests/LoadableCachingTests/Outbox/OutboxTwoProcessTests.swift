import Foundation
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSQLite
import LoadableSupport
import LoadableSyncer
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

/// Two processes on one outbox (an app and its share extension on one App Group folder), on a file
/// cache folder and on a SQLite file: no item either enqueues is lost, each item is sent by one
/// process at a time, the process without the lock shows the other's items and takes over when
/// the sender dies.
///
/// A `LoopbackHTTPServer` in the test process applies each `PUT /items` once per
/// `Idempotency-Key` and records which child sent each request: every request of B must come after
/// every request of A (one sender at a time). Child A makes the outbox, enqueues four items, and sends
/// (holding the lock); once A holds it, child B makes its outbox on the same cache and key and
/// enqueues four items; A kills itself with SIGKILL in its third send, before its request leaves. B drives its
/// `ManualClock` in steps of the outbox's 5 s reads: it must show A's items, take the lock once A is
/// dead, and send every item left. The children meet through marker files in the shared folder,
/// each wait bounded; failures are written to a file the test reads.
@Suite("LoadableOutbox: two processes on one outbox", .serialized)
struct OutboxTwoProcessTests {
    /// An item: a word, and the process that enqueued it.
    struct Word: Codable, Sendable, Equatable {
        var word: String
    }

    /// The server: applies each word once per key, and records which process sent what, in the
    /// order the requests arrived. (It answers at once: a delayed answer would wait for the test
    /// process's own threads, which wait for the children.)
    final class Ledger: Sendable {
        private struct State {
            var applied: [String] = []
            var keys: Set<String> = []
            var requests: [String] = []
            var failures: [String] = []
        }

        private let state = Locked(State())

        var applied: [String] { state.withLock { $0.applied } }
        var failures: [String] { state.withLock { $0.failures } }
        /// `<process>:<word>` of each request, in order.
        var requests: [String] { state.withLock { $0.requests } }

        func receive(_ request: LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Response {
            guard request.method == "PUT", request.path == "/items", let key = request.header("Idempotency-Key"),
                let process = request.header("X-Process"),
                let word = try? JSONDecoder().decode(Word.self, from: request.body)
            else {
                state.withLock { $0.failures.append("unexpected request \(request.method) \(request.target)") }
                return .status(400)
            }
            state.withLock { state in
                state.requests.append("\(process):\(word.word)")
                if state.keys.insert(key).inserted { state.applied.append(word.word) }
            }
            return .status(204)
        }
    }

    static let kinds = ["file", "sqlite"]

    @Test(
        "the sender is killed mid-send: the other process showed its items, takes over, and sends every item once",
        arguments: kinds)
    func twoProcesses(kind: String) async throws {
        let ledger = Ledger()
        let server = try LoopbackHTTPServer(lifetime: .seconds(300)) { ledger.receive($0) }
        defer { server.stop() }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outbox-two-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let directory = folder.path
        let url = server.url("/items").absoluteString

        async let sender = #expect(processExitsWith: .signal(SIGKILL)) {
            [kind = kind as String, directory = directory as String, url = url as String] in
            await OutboxTwoProcessTests.runSender(kind: kind, directory: directory, url: url)
        }
        async let other = #expect(processExitsWith: .success) {
            [kind = kind as String, directory = directory as String, url = url as String] in
            await OutboxTwoProcessTests.runOther(kind: kind, directory: directory, url: url)
        }
        _ = await (sender, other)

        let failures = (try? String(contentsOfFile: directory + "/failures.txt", encoding: .utf8)) ?? ""
        #expect(failures.isEmpty, "\(failures)")
        #expect(ledger.failures.isEmpty, "\(ledger.failures)")
        let applied = ledger.applied
        #expect(applied.sorted() == ["a1", "a2", "a3", "a4", "b1", "b2", "b3", "b4"], "applied: \(applied)")
        #expect(Set(applied).count == applied.count, "applied twice: \(applied)")
        #expect(applied.prefix(2) == ["a1", "a2"], "the sender sent its first two: \(applied)")
        // One sender at a time: every request of B came after every request of A.
        let requests = ledger.requests
        let lastOfA = requests.lastIndex { $0.hasPrefix("A:") } ?? -1
        let firstOfB = requests.firstIndex { $0.hasPrefix("B:") } ?? requests.count
        #expect(lastOfA < firstOfB, "requests: \(requests)")
        #expect(requests.contains { $0.hasPrefix("B:") }, "B never sent: \(requests)")
    }

    // MARK: - The children

    /// Child A: enqueues a1…a4, sends while it holds the lock, and dies in its third send once B
    /// has enqueued.
    @MainActor
    static func runSender(kind: String, directory: String, url: String) async {
        alarm(90)
        let sends = Locked(0)
        let outbox = makeOutbox(kind: kind, directory: directory, clock: ContinuousClock()) { word, key in
            let count = sends.withLock { count in
                count += 1
                return count
            }
            if count == 3 {
                // Mid-send: the item is sending, its attempt counted, when the process dies.
                guard await waitFor("b-enqueued", in: directory) else { return fail("B never enqueued", in: directory) }
                kill(getpid(), SIGKILL)
            }
            try await put(word, key: key, url: url, process: "A")
        }
        await outbox.restored()
        for word in ["a1", "a2", "a3", "a4"] { outbox.enqueue(Word(word: word)) }
        await outbox.saved()
        guard await waitUntil({ outbox.isSending }) else { return fail("A never sent", in: directory) }
        mark("a-sends", in: directory)
        // The send closure kills the process; this bounds the wait.
        _ = await waitUntil({ false })
        fail("A was not killed", in: directory)
        exit(1)
    }

    /// Child B: once A sends, enqueues b1…b4 on the same outbox; shows A's items; takes over when
    /// A dies; exits once every item was sent.
    @MainActor
    static func runOther(kind: String, directory: String, url: String) async {
        alarm(90)
        guard await waitFor("a-sends", in: directory) else {
            fail("A never sent", in: directory)
            exit(1)
        }
        let clock = ManualClock()
        var sentByB: [String] = []
        let outbox = makeOutbox(kind: kind, directory: directory, clock: clock) { word, key in
            try await put(word, key: key, url: url, process: "B")
            sentByB.append(word.word)
        }
        await outbox.restored()
        if outbox.isSending { fail("B sends while A holds the lock", in: directory) }
        var seen = Set(outbox.items.map(\.change.word))
        for word in ["b1", "b2", "b3", "b4"] { outbox.enqueue(Word(word: word)) }
        await outbox.saved()
        mark("b-enqueued", in: directory)
        // Bounded by real time: A's first request may take seconds on a busy machine.
        let deadline = ContinuousClock.now + .seconds(45)
        while !(outbox.items.isEmpty && !outbox.isSending), ContinuousClock.now < deadline {
            seen.formUnion(outbox.items.map(\.change.word))
            await clock.advance(by: .seconds(5))
            for _ in 0..<20 {
                await Task.yield()
                await Task.detached {}.value
            }
        }
        if !outbox.items.isEmpty { fail("B left \(outbox.items.map(\.change.word))", in: directory) }
        for word in ["a3", "a4"] where !seen.contains(word) { fail("B never showed \(word)", in: directory) }
        if !sentByB.contains("a4") { fail("B did not take over A's items: it sent \(sentByB)", in: directory) }
        exit(0)
    }

    // MARK: - Helpers

    @MainActor
    static func makeOutbox(
        kind: String, directory: String, clock: any Clock<Duration>,
        send: @escaping @MainActor (Word, String) async throws -> Void
    ) -> LoadableOutbox<Word> {
        let folder = URL(fileURLWithPath: directory + "/cache", isDirectory: true)
        let cache: any LoadableCache
        if kind == "sqlite" {
            do {
                cache = try SQLiteLoadableCache(path: folder.appendingPathComponent("cache.sqlite"))
            } catch {
                fail("cannot open the SQLite cache: \(error)", in: directory)
                exit(1)
            }
        } else {
            cache = FileLoadableCache(directory: folder)
        }
        let outbox = LoadableOutbox<Word>(
            cache: cache, activity: ActivityMonitor(),
            retryPolicy: BackoffTimeoutPolicy(min: .milliseconds(10), max: .milliseconds(100)), clock: clock,
            send: send)
        outbox.onError = { fail("onError: \($0)", in: directory) }
        return outbox
    }

    /// Sends `word` as `PUT /items` with its key.
    static func put(_ word: Word, key: String, url: String, process: String) async throws {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = "PUT"
        request.setValue(key, forHTTPHeaderField: "Idempotency-Key")
        request.setValue(process, forHTTPHeaderField: "X-Process")
        request.httpBody = try JSONEncoder().encode(word)
        let (_, response) = try await URLSession.shared.data(for: request)
        guard (response as? HTTPURLResponse)?.statusCode == 204 else { throw URLError(.badServerResponse) }
    }

    static func mark(_ name: String, in directory: String) {
        _ = FileManager.default.createFile(atPath: directory + "/" + name, contents: Data())
    }

    /// Whether the marker `name` appeared, within a bounded number of turns.
    @MainActor
    static func waitFor(_ name: String, in directory: String) async -> Bool {
        await waitUntil { FileManager.default.fileExists(atPath: directory + "/" + name) }
    }

    /// Whether `condition` held within a bounded number of turns (real time passes in them).
    @MainActor
    static func waitUntil(_ condition: @MainActor () -> Bool) async -> Bool {
        for _ in 0..<200_000 {
            if condition() { return true }
            await Task.yield()
            await Task.detached {}.value
        }
        return condition()
    }

    /// Appends `message` to the failures file.
    static func fail(_ message: String, in directory: String) {
        let descriptor = open(directory + "/failures.txt", O_WRONLY | O_APPEND | O_CREAT, 0o644)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        let bytes = Array((message + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    }
}
