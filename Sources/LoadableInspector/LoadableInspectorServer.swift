public import Foundation
import LoadableSupport

/// The inspector page's server, as `LoadableInspector.serve(port:address:)` starts it:
/// a small HTTP server on 127.0.0.1 that serves the page, the events as server-sent events, the
/// snapshot, the timeline, and the page's actions.
///
/// The server runs until ``stop()`` is called or it is released; keep it for as long as the page
/// should work.
///
/// ```swift
/// #if DEBUG
/// let inspector = LoadableInspector()
/// inspector.attach()
/// let server = try inspector.serve(port: 8484)
/// print("inspector page: \(server.url)")  // http://127.0.0.1:8484/
/// #endif
/// ```
///
/// `Sendable`: it runs on threads of its own (one accepts connections, each connection gets one),
/// and every request that reads the inspector or acts on it hops to the main actor for that and
/// only that, so the main actor never waits on the network.
public final class LoadableInspectorServer: Sendable {
    /// The port the server listens on, on 127.0.0.1.
    public let port: Int
    private let core: InspectorServerCore

    init(core: InspectorServerCore) {
        self.core = core
        port = core.port
    }

    deinit { core.stop() }

    /// The page's address: `http://127.0.0.1:<port>/`.
    public var url: URL { URL(string: "http://127.0.0.1:\(port)/")! }

    /// Stops the server: closes the listening socket and ends every connection, open event
    /// streams included. Returns once the listening socket is closed; calling it again does
    /// nothing.
    public func stop() {
        core.stop()
    }

    /// The event streams (`GET /events`) open now: one per page that is open.
    package var openEventStreamCount: Int { core.openEventStreamCount }

    /// Waits, blocking the calling thread, until ``openEventStreamCount`` is `count`, or
    /// `seconds` pass; for tests, which call it off the main actor.
    ///
    /// - Returns: Whether the count is `count`.
    package func waitForOpenEventStreams(_ count: Int, seconds: Double) -> Bool {
        core.waitForOpenEventStreams(count, seconds: seconds)
    }

    /// Why `LoadableInspector.serve(port:address:)` could not start a server.
    ///
    /// ```swift
    /// do {
    ///     _ = try inspector.serve(address: "0.0.0.0")
    /// } catch let error as LoadableInspectorServer.ServeError {
    ///     // LoadableInspector.serve(port:address:): address "0.0.0.0" is not served: the inspector
    ///     // page is served on 127.0.0.1 only (pass "127.0.0.1" or "localhost")
    ///     print(error)
    /// }
    /// ```
    public struct ServeError: Error, Sendable, Equatable, CustomStringConvertible {
        /// What kind of failure it is; more may come, so a `switch` over it needs a `default`.
        public struct Reason: Sendable, Hashable {
            private let code: Int

            /// The address asked for is not 127.0.0.1 (or `localhost`).
            public static let addressNotServed = Reason(code: 1)
            /// The port is outside `0...65535`.
            public static let portOutOfRange = Reason(code: 2)
            /// A system call failed (the port is taken, no descriptors left).
            public static let socketFailed = Reason(code: 3)
        }

        /// What kind of failure it is.
        public let reason: Reason
        /// What went wrong, naming the parameter or the system call.
        public let description: String
    }
}
