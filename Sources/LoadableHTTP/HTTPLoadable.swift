public import Foundation
public import Loadable
import LoadableSupport

#if canImport(FoundationNetworking)
    public import FoundationNetworking
#endif

/// A loadable whose sync is an HTTP request and a JSON decode.
///
/// ```swift
/// struct Weather: Decodable, Sendable { let temperature: Double }
///
/// let weather = HTTPLoadable<Weather>(request: URLRequest(url: URL(string: "https://api.example.com/weather")!))
/// weather.sync()
/// // later: weather.contents?.temperature, weather.error as? HTTPLoadableError
/// ```
///
/// Each sync sends ``request`` through ``transport`` and reads the answer:
/// - **2xx**: the body is decoded with ``decoder`` (off the main actor) and becomes the contents. A
///   body that does not decode fails with ``HTTPLoadableError/decoding(_:)``; the contents are kept.
/// - **Conditional requests**: the `ETag` and `Last-Modified` of the last 2xx are sent back as
///   `If-None-Match` and `If-Modified-Since` while the loadable has contents (unless the request
///   sets those headers itself). A **304** to a request that carries either header (the
///   loadable's or the request's own) is then a success with the contents unchanged, whenever the
///   loadable has contents: no decode, no new value written, one notification for the state
///   change, and the age restarts.
/// - **Other statuses** fail with ``HTTPLoadableError/status(code:headers:bodyPrefix:)``, which
///   carries the server's `Retry-After` (``HTTPLoadableError/retryAfter``) and says whether a retry
///   may help (``HTTPLoadableError/isRetryable``). A `LoadableSyncer` uses both.
/// - **Transport failures** fail with ``HTTPLoadableError/transport(_:)``, and a body over
///   ``maxBodySize`` with ``HTTPLoadableError/tooLarge(maxBodySize:)``; the transport stops reading
///   it at the limit.
/// - With an ``authorization``, each request waits for a token first and a `401` is answered with
///   one refresh and one retry (see ``HTTPAuthorization``).
///
/// ``Loadable/cancelSync()`` cancels the request (the state goes back to what it was), and an
/// answer that arrives after a cancel or after a newer sync started is dropped, validators
/// included. Requests never go through `URLCache`: the loadable does its own revalidation.
///
/// With a `LoadableInspector` attached, the `LoadableEvent.syncEnded` event of a sync the server
/// answered carries the status: the 2xx it got (`200`), or `304` for contents confirmed.
///
/// Its work is stated once, as a closure given to `AsyncLoadable`: each sync returns the answer
/// as a `LoadResult` (a 2xx's contents with their validators as metadata, or a 304's
/// confirmation), and the loadable keeps the validators with its contents. A subclass does not
/// override `load()` or `loadResult()`: a sync does not call them.
///
/// Subclass it to give an endpoint a type of its own:
///
/// ```swift
/// final class ProfileLoadable: HTTPLoadable<Profile> {
///     init(api: API) {
///         super.init(request: api.request("/me"), authorization: api.authorization)
///     }
/// }
/// ```
///
/// Isolated to the main actor; observers are called on the main actor.
open class HTTPLoadable<Contents: Decodable & Sendable>: AsyncLoadable<Contents> {
    /// The request every sync sends, before the loadable adds its conditional and `Authorization`
    /// headers.
    public var request: URLRequest { loader.request }
    /// What sends the requests.
    public var transport: any HTTPTransport { loader.transport }
    /// What decodes a 2xx body into the contents.
    public var decoder: JSONDecoder { loader.decoder }
    /// The most bytes of body accepted; a larger body fails the sync with
    /// ``HTTPLoadableError/tooLarge(maxBodySize:)``.
    public var maxBodySize: Int { loader.maxBodySize }
    /// How requests are authorized, if they are.
    public var authorization: HTTPAuthorization? { loader.authorization }

    /// The `ETag` of the contents shown, as the server sent it (quotes included): the
    /// precondition of a write that must not overwrite someone else's
    /// (``HTTPPrecondition/ifMatch(_:)``).
    ///
    /// ```swift
    /// try await api.send(.put, "records/7", json: edited, precondition: .ifMatch(record.etag!))
    /// ```
    ///
    /// `nil` before a sync, and after a write of the app's own to the contents (`setContents`,
    /// `updateContents`, a committed `mutate` without `reconcile`, an outbox change joining):
    /// the server never had those contents. A 2xx replaces it (with `nil` when the answer has no
    /// `ETag`), a `304` keeps it (or takes the new one it sends), persisted contents bring theirs
    /// back when they are restored, and a write's answer brings its own
    /// (`setContents(_:)` of an `HTTPResponse`). A commit reconciled with the server's answer
    /// (`mutate(optimistic:commit:reconcile:)`) keeps it: that answer's validators are not known
    /// here, so after a write of this resource, prefer `setContents(_:)` of its `HTTPResponse`
    /// for the next `If-Match`. Observable: it changes with the contents or the state, in the
    /// same notification.
    public var etag: String? {
        core.trackAccess()
        return baseMetadata[Validators.entityTagName]
    }

    /// The `Last-Modified` of the contents shown, as the server sent it: the precondition of a
    /// write for servers without `ETag` (``HTTPPrecondition/ifUnmodifiedSince(_:)``).
    ///
    /// The same rules as ``etag``: `nil` before a sync and after a write of the app's own, replaced
    /// by a 2xx, kept by a `304`, restored with persisted contents, observable.
    public var lastModified: String? {
        core.trackAccess()
        return baseMetadata[Validators.lastModifiedName]
    }

    /// Shows the server's answer to a write of this resource, with its validators: the contents
    /// become `response.value`, and ``etag`` and ``lastModified`` the answer's, so that the next
    /// conditional write (``HTTPPrecondition/ifMatch(_:)``) is based on the version the server
    /// has now, and the next sync may be answered with a `304`.
    ///
    /// ```swift
    /// let saved = try await api.response(
    ///     to: .put, "notes/n1", json: edited, as: Note.self, precondition: .ifMatch(note.etag!))
    /// note.setContents(saved)
    /// ```
    ///
    /// Otherwise as ``PushLoadable/setContents(_:)``: the state, the error and a running sync are
    /// left alone, the age restarts, one notification; persisted contents are saved with these
    /// validators. Use it only for an answer that is the resource this loadable reads (a `PUT` or
    /// `PATCH` of its URL answered with the whole resource): validators of another resource
    /// would have the next sync answered with a wrong `304`.
    ///
    /// - Parameter response: The answer of ``HTTPService/response(to:_:json:as:idempotencyKey:precondition:headers:)``
    ///   or ``HTTPService/response(to:_:as:idempotencyKey:precondition:headers:)``.
    public final func setContents(_ response: HTTPResponse<Contents>) {
        var validators = Validators()
        validators.entityTag = response.etag
        validators.lastModified = response.lastModified
        setContents(response.value, metadata: validators.metadata)
    }

    /// Runs the syncs; it holds the loadable weakly, so that releasing the loadable cancels its
    /// request.
    let loader: HTTPRequestLoader<Contents>

    /// Creates a loadable that sends `request` on each sync.
    ///
    /// - Parameters:
    ///   - request: The request to send; its URL must be `http` or `https` (anything else stops the
    ///     program with a message).
    ///   - transport: What sends it; `URLSession.shared` by default.
    ///   - decoder: Decodes a 2xx body into the contents.
    ///   - maxBodySize: The most bytes of body accepted, greater than 0; 10 MB by default.
    ///   - authorization: How to authorize the requests, if they need it.
    ///   - clock: The clock of the loadable's freshness and watchdog (see `Loadable`).
    public init(
        request: URLRequest,
        transport: any HTTPTransport = URLSession.shared,
        decoder: JSONDecoder = JSONDecoder(),
        maxBodySize: Int = 10 * 1_024 * 1_024,
        authorization: HTTPAuthorization? = nil,
        clock: any Clock<Duration> = ContinuousClock()
    ) {
        let scheme = request.url?.scheme?.lowercased()
        requireValid(
            scheme == "http" || scheme == "https",
            "HTTPLoadable: request.url must be an http or https URL, got \(request.url?.absoluteString ?? "nil")"
        )
        requireValid(maxBodySize > 0, "HTTPLoadable: maxBodySize must be > 0, got \(maxBodySize)")
        let loader = HTTPRequestLoader<Contents>(
            request: request,
            transport: transport,
            decoder: decoder,
            maxBodySize: maxBodySize,
            authorization: authorization
        )
        self.loader = loader
        // The work, stated once: each sync sends the request and returns the answer as a
        // `LoadResult` (a 2xx's contents and validators, or a 304's confirmation); the loadable
        // keeps the validators with its contents as their metadata.
        super.init(contents: nil, clock: clock, loadResult: { try await loader.load() })
        loader.loadable = self
    }
}

/// The work of an ``HTTPLoadable``'s syncs: the request with the validators of the contents
/// (the loadable's metadata), and the answer as a ``LoadResult``.
@MainActor
final class HTTPRequestLoader<Contents: Decodable & Sendable> {
    let request: URLRequest
    let transport: any HTTPTransport
    let decoder: JSONDecoder
    let maxBodySize: Int
    let authorization: HTTPAuthorization?
    /// The loadable, held weakly: the load task holds this loader, not the loadable.
    weak var loadable: HTTPLoadable<Contents>?

    /// ``request`` as every sync sends it, made once: `URLRequest` copies its whole storage at
    /// each change.
    private let plainRequest: URLRequest
    /// Whether ``request`` carries a validator of its own.
    private let requestIsConditional: Bool
    /// The last request made with validators, and the validators it was made with.
    private var conditionalRequest: (validators: Validators, request: URLRequest)?
    /// The transfer and decode of a sync, made once: for a request a 304 does not answer, and
    /// for one it does (it carries validators, the loadable's or its own, and the loadable has
    /// contents).
    private let exchange: Exchange<Contents>
    private let conditionalExchange: Exchange<Contents>

    init(
        request: URLRequest,
        transport: any HTTPTransport,
        decoder: JSONDecoder,
        maxBodySize: Int,
        authorization: HTTPAuthorization?
    ) {
        self.request = request
        self.transport = transport
        self.decoder = decoder
        self.maxBodySize = maxBodySize
        self.authorization = authorization
        var plainRequest = request
        plainRequest.cachePolicy = .reloadIgnoringLocalCacheData
        self.plainRequest = plainRequest
        requestIsConditional = Validators.isConditional(request)
        exchange = Exchange(transport: transport, decoder: decoder, maxBodySize: maxBodySize, isConditional: false)
        conditionalExchange = Exchange(
            transport: transport, decoder: decoder, maxBodySize: maxBodySize, isConditional: true)
    }

    /// One sync: sends the request (with a retry after a 401) and reads the answer; the transfer
    /// and the decode run off the main actor (``Exchange/run(_:)``).
    func load() async throws -> LoadResult<Contents> {
        let (request, validators, isConditional) = prepared()
        let exchange = isConditional ? conditionalExchange : exchange
        let outcome = try await exchange.run(request, authorization: authorization)
        if let inspector = LoadableInspection.inspector { inspect(outcome, inspector) }
        return try HTTPRequestLoader.result(of: outcome, sent: validators)
    }

    /// Tells the inspector the status that ends the running sync (a 2xx's, or `304`), so that its
    /// `syncEnded` event carries it. The result goes to the loadable in this same turn of the main
    /// actor; a sync cancelled (or replaced by a newer one) meanwhile tells nothing.
    private func inspect(_ outcome: Exchange<Contents>.Outcome, _ inspector: LoadableInspector) {
        guard !Task.isCancelled, let loadable, loadable.statusUntrackedWherePossible.state == .syncing else { return }
        switch outcome {
        case .decoded(_, _, let status): inspector.noteSyncStatus(loadable, status: status)
        case .notModified: inspector.noteSyncStatus(loadable, status: 304)
        case .unauthorized: break
        }
    }

    /// The request of a sync starting now, the validators it carries, and whether a 304 answers it.
    ///
    /// A 304 is an answer only to a request made while the loadable has contents (with
    /// validators, the loadable's or the request's own), and contents never go away once there:
    /// the loadable always has contents for it to confirm. To any other request, a 304 is the
    /// status error any other status would be.
    private func prepared() -> (request: URLRequest, validators: Validators, isConditional: Bool) {
        // Untracked: a sync is not a read by a view, and must not give the loadable a registrar.
        guard let loadable, loadable.statusUntrackedWherePossible.isContentsAvailable else {
            return (plainRequest, Validators(), false)
        }
        let validators = Validators(metadata: loadable.baseMetadata)
        return (requestWithValidators(validators), validators, requestIsConditional || !validators.isEmpty)
    }

    /// The sync's result for `outcome`: a 2xx's contents come with their validators, which replace
    /// the loadable's; a 304 confirms the contents with the validators it sent that differ from
    /// those the request carried (the loadable takes them unless the app wrote the contents while
    /// the request ran, and drops the whole answer when the sync is not the current one any more).
    private nonisolated static func result(
        of outcome: Exchange<Contents>.Outcome, sent validators: Validators
    ) throws -> LoadResult<Contents> {
        switch outcome {
        case .decoded(let contents, let newValidators, _):
            // The answer's contents replace the base: the validators describe them.
            return .loaded(contents, metadata: newValidators.metadata)
        case .notModified(let newValidators):
            // Only what changed: a 304 usually repeats the validators it answered.
            return .confirmed(metadata: newValidators.changes(from: validators).metadata)
        case .unauthorized(let rejection):
            throw rejection
        }
    }

    /// The request with `validators` applied, made again only when they changed.
    private func requestWithValidators(_ validators: Validators) -> URLRequest {
        guard !validators.isEmpty else { return plainRequest }
        if let conditionalRequest, conditionalRequest.validators == validators { return conditionalRequest.request }
        var request = plainRequest
        validators.apply(to: &request)
        conditionalRequest = (validators, request)
        return request
    }
}

/// The `ETag` and `Last-Modified` of a response.
struct Validators: Sendable, Equatable {
    var entityTag: String?
    var lastModified: String?

    /// The validators of `response`.
    init(of response: HTTPURLResponse) {
        entityTag = response.value(forHTTPHeaderField: "ETag")
        lastModified = response.value(forHTTPHeaderField: "Last-Modified")
    }

    init() {}

    /// Whether there is neither an `ETag` nor a `Last-Modified`.
    var isEmpty: Bool { entityTag == nil && lastModified == nil }

    /// Adds `If-None-Match` and `If-Modified-Since` to `request`, each only if the request does not
    /// set it already.
    func apply(to request: inout URLRequest) {
        if let entityTag, request.value(forHTTPHeaderField: "If-None-Match") == nil {
            request.setValue(entityTag, forHTTPHeaderField: "If-None-Match")
        }
        if let lastModified, request.value(forHTTPHeaderField: "If-Modified-Since") == nil {
            request.setValue(lastModified, forHTTPHeaderField: "If-Modified-Since")
        }
    }

    /// The validators of `self` that `other` lacks or has with another value.
    func changes(from other: Validators) -> Validators {
        var changes = Validators()
        if entityTag != other.entityTag { changes.entityTag = entityTag }
        if lastModified != other.lastModified { changes.lastModified = lastModified }
        return changes
    }

    /// Whether `request` carries a validator, so that a 304 answers it.
    static func isConditional(_ request: URLRequest) -> Bool {
        request.value(forHTTPHeaderField: "If-None-Match") != nil
            || request.value(forHTTPHeaderField: "If-Modified-Since") != nil
    }

}
