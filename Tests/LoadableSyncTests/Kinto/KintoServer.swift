import Foundation
import Loadable
import LoadableHTTP
import LoadableSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A real Kinto on 127.0.0.1, one per test process, started by the first test that asks for it
/// (`kinto_server.py`, with the Python of a virtual environment that has Kinto), and a place of its
/// own on it for each test (``Fixture``: an account, a bucket, a collection).
///
/// ```swift
/// @Suite(.enabled(if: KintoServer.isInstalled, KintoServer.notInstalled))
/// struct KintoThingTests {
///     @Test func something() async throws {
///         let kinto = try await KintoServer.fixture()
///         try await kinto.put(Note(id: "a", title: "A"))
///         #expect(try await kinto.records(Note.self).map(\.record.id) == ["a"])
///     }
/// }
/// ```
///
/// The server stops when the test process ends (its stdin closes), or after 20 minutes. It keeps
/// everything in memory, pages lists by 5 records (`paginate_by`), and keeps the history of every
/// change (the history plugin).
final class KintoServer: Sendable {
    /// The Python of the virtual environment with Kinto: `$LOADABLE_KINTO_PYTHON`, or
    /// `.build/kinto-venv/bin/python` in the package.
    static var python: String {
        if let python = ProcessInfo.processInfo.environment["LOADABLE_KINTO_PYTHON"], !python.isEmpty {
            return python
        }
        return packageRoot.appendingPathComponent(".build/kinto-venv/bin/python").path
    }

    /// Whether ``python`` exists: the Kinto suites run only then.
    static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: python) }

    /// Why the Kinto suites are skipped, and how to run them.
    static let notInstalled: Comment =
        "Kinto is not installed: `python3 -m venv .build/kinto-venv && .build/kinto-venv/bin/pip install kinto==26.5.0`, then `swift test` (`.ci/run` does this)"

    /// The package's root: three folders above this file.
    private static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// How long the server may take to start: far more than it takes (about a second).
    private static let startTimeout = 60.0

    /// The server of this test process, once started (or its start's failure).
    private static let shared = Locked<Task<KintoServer, any Error>?>(nil)

    /// Kinto's root: `http://127.0.0.1:<port>/v1`.
    let baseURL: URL
    /// What the server wrote on stderr (Kinto's warnings, waitress's errors).
    let log: Log
    /// The write end of the server's stdin: the server exits once it closes (with this process).
    private let stdin: FileHandle
    /// The server's process.
    private let process: Process

    private init(baseURL: URL, log: Log, stdin: FileHandle, process: Process) {
        self.baseURL = baseURL
        self.log = log
        self.stdin = stdin
        self.process = process
    }

    /// The server of this test process: started by the first call, shared by the next ones.
    ///
    /// - Throws: ``StartError`` when it does not start within a minute.
    static func running() async throws -> KintoServer {
        let start = shared.withLock { start in
            if let start { return start }
            let task = Task.detached { try await KintoServer.start() }
            start = task
            return task
        }
        return try await start.value
    }

    /// A place of its own on the server for one test: a new account, and a bucket and a
    /// collection it created.
    static func fixture(sourceLocation: SourceLocation = #_sourceLocation) async throws -> Fixture {
        let server = try await running()
        let name = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let fixture = Fixture(
            server: server, user: "user-\(name)", password: "password-\(name)", bucket: "bucket-\(name)",
            collection: "notes")
        try await fixture.createAccount()
        try await fixture.send(.put, "buckets/\(fixture.bucket)", json: #"{"data":{}}"#)
        try await fixture.send(.put, fixture.collectionPath, json: #"{"data":{}}"#)
        return fixture
    }

    /// The account that ``fixtureInSharedAccount()`` gives every fixture, made by the first.
    private static let sharedAccount = Locked<Task<Fixture, any Error>?>(nil)

    /// A place of its own on the server for one test, as ``fixture(sourceLocation:)`` gives, in
    /// an account shared by every test of the process that asks for one: a new bucket and
    /// collection, in which the test sees only its own records and history.
    ///
    /// Kinto hashes passwords with bcrypt: about a second of CPU on a loaded machine for each
    /// account's creation, and again for its first request (and after 30 s unused). A suite that
    /// makes dozens of fixtures at once spends that once.
    static func fixtureInSharedAccount() async throws -> Fixture {
        let server = try await running()
        let account = sharedAccount.withLock { account in
            if let account { return account }
            let task = Task.detached {
                let name = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
                let owner = Fixture(
                    server: server, user: "shared-\(name)", password: "password-\(name)", bucket: "", collection: "")
                try await owner.createAccount()
                return owner
            }
            account = task
            return task
        }
        let owner = try await account.value
        let name = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let fixture = Fixture(
            server: server, user: owner.user, password: owner.password, bucket: "bucket-\(name)", collection: "notes")
        try await fixture.send(.put, "buckets/\(fixture.bucket)", json: #"{"data":{}}"#)
        try await fixture.send(.put, fixture.collectionPath, json: #"{"data":{}}"#)
        return fixture
    }

    /// Why the server did not start.
    struct StartError: Error, CustomStringConvertible {
        let description: String
    }

    /// Starts `kinto_server.py` and waits, at most ``startTimeout`` seconds of real time, for the
    /// port it prints.
    private static func start() async throws -> KintoServer {
        let script = packageRoot.appendingPathComponent("Tests/LoadableSyncTests/Kinto/kinto_server.py").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script, "--paginate-by", "5", "--lifetime", "1200"]
        let input = Pipe()
        let output = Pipe()
        let errors = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        do {
            try process.run()
        } catch {
            throw StartError(description: "KintoServer: could not run \(python) \(script): \(error)")
        }
        let log = Log(errors.fileHandleForReading)

        // A thread of its own reads the first line (a blocking read); the wait for it is bounded.
        let port = Locked<Int?>(nil)
        let lineRead = DispatchSemaphore(value: 0)
        let reader = output.fileHandleForReading
        Thread.detachNewThread {
            var text = ""
            while !text.contains("\n") {
                let chunk = reader.availableData
                if chunk.isEmpty { break }  // The server exited before it listened.
                text += String(decoding: chunk, as: UTF8.self)
            }
            let line = text.split(separator: "\n").first { $0.hasPrefix("listening on ") }
            port.withLock { $0 = line.flatMap { Int($0.dropFirst("listening on ".count)) } }
            lineRead.signal()
        }
        let answered = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: lineRead.wait(timeout: .now() + startTimeout) == .success)
            }
        }
        guard answered, let port = port.withLock({ $0 }) else {
            process.terminate()
            throw StartError(
                description: "KintoServer: \(python) \(script) did not print its port within \(Int(startTimeout)) s"
                    + (answered ? " (it exited)" : "") + "; its output:\n\(log.text)")
        }
        return KintoServer(
            baseURL: URL(string: "http://127.0.0.1:\(port)/v1")!, log: log, stdin: input.fileHandleForWriting,
            process: process)
    }

    /// The end of the server's stderr, read as it comes (a pipe nobody reads would fill, and stop
    /// the server).
    final class Log: Sendable {
        private let tail = Locked("")

        /// The last 8,000 characters the server wrote.
        var text: String { tail.withLock { $0 } }

        init(_ handle: FileHandle) {
            Thread.detachNewThread { [tail] in
                while true {
                    let chunk = handle.availableData
                    if chunk.isEmpty { return }
                    tail.withLock { $0 = String(($0 + String(decoding: chunk, as: UTF8.self)).suffix(8_000)) }
                }
            }
        }
    }
}

extension KintoServer {
    /// One test's account, bucket and collection on the server, and what it reads there directly
    /// (not through `KintoRemote`): the records, the collection's timestamp, the history.
    struct Fixture: Sendable {
        let server: KintoServer
        let user: String
        let password: String
        let bucket: String
        let collection: String

        /// The credentials of the fixture's account.
        var credentials: HTTPBasicCredentials { HTTPBasicCredentials(user: user, password: password) }

        /// `buckets/<bucket>/collections/<collection>`.
        var collectionPath: String { "buckets/\(bucket)/collections/\(collection)" }

        /// A service of the server that sends the fixture's credentials with every request.
        private var service: HTTPService {
            let basic = "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
            return HTTPService(baseURL: server.baseURL, headers: ["Authorization": basic])
        }

        /// A record as the server has it, with its `last_modified`.
        struct Stored<Record: Decodable & Sendable>: Decodable, Sendable {
            var record: Record
            var lastModified: Int64

            private enum Key: String, CodingKey { case lastModified = "last_modified" }

            init(from decoder: any Decoder) throws {
                record = try Record(from: decoder)
                lastModified = try decoder.container(keyedBy: Key.self).decode(Int64.self, forKey: .lastModified)
            }
        }

        /// An entry of the history plugin: who did what to which object.
        struct HistoryEntry: Decodable, Sendable, Equatable {
            /// `create`, `update` or `delete`.
            var action: String
            /// `bucket`, `collection` or `record`.
            var resourceName: String
            /// The record's id, for a record's entry.
            var recordID: String?

            private enum CodingKeys: String, CodingKey {
                case action
                case resourceName = "resource_name"
                case recordID = "record_id"
            }
        }

        private struct Envelope<Value: Decodable & Sendable>: Decodable, Sendable { var data: Value }

        /// Creates the fixture's account: `PUT /accounts/<user>`, without credentials.
        fileprivate func createAccount() async throws {
            var request = HTTPService(baseURL: server.baseURL).request(.put, "accounts/\(user)")
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(#"{"data":{"password":"\#(password)"}}"#.utf8)
            _ = try await HTTPService(baseURL: server.baseURL).send(request)
        }

        /// Sends `method` to `path` with `json` as the body, with the fixture's credentials.
        ///
        /// - Returns: The response and its body.
        @discardableResult
        func send(_ method: HTTPMethod, _ path: String, json: String? = nil) async throws -> (HTTPURLResponse, Data) {
            var request = service.request(method, path)
            if let json {
                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
                request.httpBody = Data(json.utf8)
            }
            return try await service.send(request)
        }

        /// Creates or replaces `record` on the server, with no precondition.
        ///
        /// - Returns: Its new `last_modified`.
        @discardableResult
        func put<Record: Codable & Identifiable & Sendable>(_ record: Record) async throws -> Int64
        where Record.ID: CustomStringConvertible {
            let body = String(decoding: try JSONEncoder().encode(["data": record]), as: UTF8.self)
            let (_, data) = try await send(.put, "\(collectionPath)/records/\(record.id)", json: body)
            return try JSONDecoder().decode(Envelope<Stored<Record>>.self, from: data).data.lastModified
        }

        /// Deletes the record `id` on the server, with no precondition.
        func delete(_ id: String) async throws {
            try await send(.delete, "\(collectionPath)/records/\(id)")
        }

        /// Every record of the collection, oldest change first.
        func records<Record: Decodable & Sendable>(_ type: Record.Type) async throws -> [Stored<Record>] {
            try await list(
                Stored<Record>.self, "\(collectionPath)/records",
                query: [URLQueryItem(name: "_sort", value: "last_modified")])
        }

        /// The collection's timestamp: the `ETag` of its list of records, without the quotes.
        func timestamp() async throws -> String {
            let (response, _) = try await send(.get, "\(collectionPath)/records")
            return (response.value(forHTTPHeaderField: "ETag") ?? "").replacingOccurrences(of: "\"", with: "")
        }

        /// The history plugin's entries of the fixture's records, oldest first.
        func history() async throws -> [HistoryEntry] {
            try await list(
                HistoryEntry.self, "buckets/\(bucket)/history",
                query: [
                    URLQueryItem(name: "resource_name", value: "record"),
                    URLQueryItem(name: "_sort", value: "last_modified"),
                ])
        }

        /// Every entry of the list at `path`, its pages followed (`Next-Page`).
        private func list<Entry: Decodable & Sendable>(
            _ type: Entry.Type, _ path: String, query: [URLQueryItem]
        ) async throws -> [Entry] {
            var entries: [Entry] = []
            var request: URLRequest? = service.request(.get, path, query: query)
            while let page = request {
                let (response, data) = try await service.send(page)
                entries += try JSONDecoder().decode(Envelope<[Entry]>.self, from: data).data
                // The next page's URL, with the service's headers (`send` adds them).
                request = response.value(forHTTPHeaderField: "Next-Page").flatMap(URL.init(string:)).map {
                    URLRequest(url: $0)
                }
            }
            return entries
        }
    }
}
