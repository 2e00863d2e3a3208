import Foundation
import LoadableSupport

extension LoadableInspector {
    /// Serves the inspector page on 127.0.0.1: the timeline and the snapshot, updated as events
    /// arrive, with filters and actions (sync, invalidate, simulate offline).
    ///
    /// Open ``LoadableInspectorServer/url`` in a browser on the same machine (the iOS simulator
    /// shares the Mac's loopback). The page is plain HTML, CSS and JavaScript from this module's
    /// resources; it reaches no other address. For a debug build only: anyone on the machine can
    /// open the page and act on the app's data, so it is never served on another interface, and
    /// a request whose `Host` is not `127.0.0.1:<port>` or `localhost:<port>` is refused (a web
    /// page elsewhere cannot reach it through DNS rebinding), and so is an action that is not JSON
    /// or comes from a page of another origin (a form on another site).
    ///
    /// ```swift
    /// let inspector = LoadableInspector()
    /// inspector.attach()
    /// let server = try inspector.serve()
    /// print(server.url)  // http://127.0.0.1:53127/
    /// ```
    ///
    /// The server answers `GET /` (the page), `GET /inspector.css`, `GET /inspector.js`,
    /// `GET /events` (server-sent events: every recorded event, then each new one, as a line of
    /// ``LoadableInspector/timeline()``), `GET /snapshot` (``snapshot()`` as JSON),
    /// `GET /labels` (``actionLabels`` as JSON), `GET /timeline` (JSON Lines) and `POST /actions`
    /// (a ``LoadableInspectorAction`` as JSON: 200 when done, 404 when no live object has its
    /// label, 400 when it does not decode).
    ///
    /// - Parameters:
    ///   - port: The port, `0` (the default) for one the system picks.
    ///   - address: `"127.0.0.1"` (the default) or `"localhost"`; any other address throws.
    /// - Returns: The running server; it stops when released.
    /// - Throws: ``LoadableInspectorServer/ServeError`` when `address` is not 127.0.0.1, `port`
    ///   is outside `0...65535`, or the socket cannot be opened (the port is taken).
    public func serve(port: Int = 0, address: String = "127.0.0.1") throws -> LoadableInspectorServer {
        guard address == "127.0.0.1" || address.lowercased() == "localhost" else {
            throw LoadableInspectorServer.ServeError(
                reason: .addressNotServed,
                description: "LoadableInspector.serve(port:address:): address \"\(address)\" is not served: "
                    + "the inspector page is served on 127.0.0.1 only (pass \"127.0.0.1\" or \"localhost\")")
        }
        guard (0...65535).contains(port) else {
            throw LoadableInspectorServer.ServeError(
                reason: .portOutOfRange,
                description: "LoadableInspector.serve(port:address:): port must be in 0...65535 (0: any free port), "
                    + "got \(port)")
        }
        let core: InspectorServerCore
        do {
            core = try InspectorServerCore(port: port, routes: InspectorRoutes(inspector: self))
        } catch {
            throw LoadableInspectorServer.ServeError(
                reason: .socketFailed,
                description: "LoadableInspector.serve(port:address:): could not listen on 127.0.0.1:\(port): "
                    + error.message)
        }
        core.startAcceptLoop()
        return LoadableInspectorServer(core: core)
    }
}
