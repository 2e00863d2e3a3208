import Dispatch
import Foundation
import LoadableSupport

/// What the server answers to each request: the page's files, the inspector's data and actions.
///
/// Runs on the connection's thread; whatever reads the inspector or acts on it hops to the main
/// actor for that alone (``onMainActor(_:)``).
struct InspectorRoutes: Sendable {
    /// A response: complete, or a stream of server-sent events.
    enum Answer: Sendable {
        case complete(status: Int, contentType: String, body: Data)
        /// `replay` first, then what `feed` receives, until the client leaves or the server stops;
        /// `task` feeds it and is cancelled then.
        case events(replay: [String], feed: EventFeed, task: Task<Void, Never>)
    }

    /// How long a request waits for its turn on the main actor before it is answered 503.
    static let mainActorTimeout = DispatchTimeInterval.seconds(30)

    let inspector: LoadableInspector
    /// The page's files, by request path.
    private let files: [String: (contentType: String, body: Data)]
    /// Why the files could not be read, if they could not.
    private let filesError: String?

    @MainActor
    init(inspector: LoadableInspector) {
        self.inspector = inspector
        var files: [String: (contentType: String, body: Data)] = [:]
        var filesError: String?
        let page = Bundle.module.url(forResource: "Page", withExtension: nil)
        for (path, name, contentType) in [
            ("/", "index.html", "text/html; charset=utf-8"),
            ("/inspector.css", "inspector.css", "text/css; charset=utf-8"),
            ("/inspector.js", "inspector.js", "text/javascript; charset=utf-8"),
        ] {
            if let url = page?.appendingPathComponent(name), let body = try? Data(contentsOf: url) {
                files[path] = (contentType, body)
            } else {
                filesError = "the page's file \(name) is missing from the LoadableInspector module's resources"
            }
        }
        self.files = files
        self.filesError = filesError
    }

    /// The answer to `head` with `body`, for a server on `port`.
    func answer(to head: HTTPRequestHead, body: Data, port: Int) -> Answer {
        let host = head.header("host")?.lowercased()
        guard host == "127.0.0.1:\(port)" || host == "localhost:\(port)" else {
            // Another name that resolves to 127.0.0.1 is how a web page elsewhere would reach
            // the app (DNS rebinding): only the loopback names are served.
            return Self.error(403, "the Host must be 127.0.0.1:\(port) or localhost:\(port)")
        }
        let path = head.target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.target
        switch (head.method, path) {
        case ("GET", "/"), ("GET", "/index.html"), ("GET", "/inspector.css"), ("GET", "/inspector.js"):
            guard let file = files[path == "/index.html" ? "/" : path] else {
                return Self.error(500, filesError ?? "the page's file is missing")
            }
            return .complete(status: 200, contentType: file.contentType, body: file.body)
        case ("GET", "/snapshot"):
            let inspector = inspector
            return Self.json { try $0.encode(inspector.snapshot()) } ?? Self.busy
        case ("GET", "/labels"):
            let inspector = inspector
            return Self.json { try $0.encode(inspector.actionLabels) } ?? Self.busy
        case ("GET", "/timeline"):
            guard let timeline = Self.onMainActor({ inspector.timeline() }) else { return Self.busy }
            return .complete(status: 200, contentType: "application/jsonl; charset=utf-8", body: Data(timeline.utf8))
        case ("GET", "/events"):
            return events() ?? Self.busy
        case ("POST", "/actions"):
            // A page of another site can send a form to this address (its Host is right, and a
            // form needs no preflight): an action must come from this page, as JSON.
            if let origin = head.header("origin"),
                origin != "http://127.0.0.1:\(port)" && origin != "http://localhost:\(port)"
            {
                return Self.error(403, "actions are taken from the inspector page only, not from \(origin)")
            }
            let contentType = head.header("content-type")?.split(separator: ";").first
            guard contentType?.trimmingCharacters(in: .whitespaces).lowercased() == "application/json" else {
                return Self.error(415, "an action is sent as Content-Type: application/json")
            }
            return perform(body)
        case (_, "/"), (_, "/index.html"), (_, "/inspector.css"), (_, "/inspector.js"), (_, "/snapshot"),
            (_, "/labels"), (_, "/timeline"), (_, "/events"), (_, "/actions"):
            return Self.error(405, "\(head.method) is not allowed on \(path)")
        default:
            return Self.error(404, "no such page: \(path)")
        }
    }

    /// Decodes and performs an action.
    private func perform(_ body: Data) -> Answer {
        let action: LoadableInspectorAction
        do {
            action = try JSONDecoder().decode(LoadableInspectorAction.self, from: body)
        } catch {
            return Self.error(
                400,
                "the body is not an action: \(Self.describe(error)); send {\"action\":\"sync\",\"label\":…}, "
                    + "{\"action\":\"invalidate\",\"label\":…} or {\"action\":\"setOffline\",\"offline\":true}")
        }
        guard let done = Self.onMainActor({ inspector.perform(action) }) else { return Self.busy }
        guard done else {
            let label: String
            switch action {
            case .sync(let name), .invalidate(let name): label = name
            case .setOffline: label = ""
            }
            return Self.error(404, "no live store entry, collection or loadable is labelled \"\(label)\"")
        }
        return .complete(status: 200, contentType: "application/json", body: Data(#"{"done":true}"#.utf8))
    }

    /// The recorded events and a feed of the next ones, taken in one turn of the main actor so
    /// that none falls between them.
    private func events() -> Answer? {
        let feed: EventFeed
        do {
            feed = try EventFeed()
        } catch {
            return Self.error(503, "no event stream: \(error.message)")
        }
        let inspector = inspector
        let started = Self.onMainActor { () -> (replay: [String], task: Task<Void, Never>) in
            let replay = inspector.recordedEvents.map(LoadableInspector.jsonLine)
            let stream = inspector.events
            let task = Task { @MainActor in
                for await event in stream { feed.push(LoadableInspector.jsonLine(event)) }
            }
            return (replay, task)
        }
        guard let started else { return nil }
        return .events(replay: started.replay, feed: feed, task: started.task)
    }

    /// A JSON answer from a value made on the main actor and encoded here; `nil` when the main
    /// actor was busy.
    private static func json(_ encode: @escaping @MainActor @Sendable (JSONEncoder) throws -> Data) -> Answer? {
        let encoded: Result<Data, any Error>? = onMainActor {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            return Result { try encode(encoder) }
        }
        guard let encoded else { return nil }
        switch encoded {
        case .success(let body): return .complete(status: 200, contentType: "application/json", body: body)
        case .failure(let failure): return error(500, "could not encode: \(failure)")
        }
    }

    /// `body`'s result, run on the main actor; `nil` when the main actor did not run it within
    /// ``mainActorTimeout`` (it is busy: the page gets a 503 rather than a hung request).
    ///
    /// Blocks the connection's thread, never the main actor.
    static func onMainActor<Result: Sendable>(_ body: @escaping @MainActor @Sendable () -> Result) -> Result? {
        let result = Locked<Result?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task { @MainActor in
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
        guard done.wait(timeout: .now() + mainActorTimeout) == .success else { return nil }
        return result.withLock { $0 }
    }

    private static let busy = error(503, "the main actor did not answer in time")

    /// An error answer: `{"error": message}`.
    static func error(_ status: Int, _ message: String) -> Answer {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        let body = (try? encoder.encode(["error": message])) ?? Data()
        return .complete(status: status, contentType: "application/json", body: body)
    }

    /// What is wrong with a body that did not decode, in a few words.
    private static func describe(_ error: any Error) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? "" : " at `\(path)`"
        }
        switch error {
        case DecodingError.keyNotFound(let key, _):
            return "`\(key.stringValue)` is missing"
        case DecodingError.typeMismatch(let type, let context):
            return "expected \(type)\(path(context))"
        case DecodingError.valueNotFound(let type, let context):
            return "expected \(type)\(path(context)), got null"
        case DecodingError.dataCorrupted(let context):
            if context.codingPath.isEmpty && context.underlyingError != nil { return "it is not valid JSON" }
            var description = context.debugDescription
            if description.hasSuffix(".") { description.removeLast() }
            return description + path(context)
        default:
            return "\(error)"
        }
    }
}
