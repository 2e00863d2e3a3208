import Foundation
public import Loadable
public import LoadableSyncer

/// How an ``HTTPLoadable`` (and an ``HTTPService``'s sends) authorize their requests: with a bearer
/// token that a `LoadableWaiter` keeps available.
///
/// ```swift
/// let token = HTTPLoadable<AccessToken>(request: URLRequest(url: tokenURL))
/// let tokenWaiter = LoadableWaiter(token, timeout: .seconds(30))
/// let auth = HTTPAuthorization.bearer(tokenWaiter) { $0.value }
///
/// let profile = HTTPLoadable<Profile>(request: URLRequest(url: profileURL), authorization: auth)
/// profile.sync()  // waits for the token, then sends `Authorization: Bearer <token>`
/// ```
///
/// The rules, for every request of every loadable and every send that share the authorization:
/// - Each request waits for the token through the waiter (which syncs it if needed, retries it
///   with backoff, and times out), then sends `Authorization: Bearer <token>`. A wait that times
///   out fails the sync with the waiter's error (`LoadableWaiterError.timedOut`). A token that
///   cannot be had (the token endpoint refused the credentials: an error the waiter's syncer does
///   not retry) fails the sync at once with `LoadableWaiterError.targetFailed(_:)`, carrying the
///   token's error, until the token syncs again.
/// - A `401` renews the token if the token loadable still holds the token that was sent and no
///   sync of it runs: it marks it stale (`SyncableLoadable.invalidate()`, unless it is stale
///   already) and, if the waiter would still hand it out, has it sync (`SyncableLoadable.sync()`),
///   whatever the waiter's condition and whatever the token's type (an app's own
///   `SyncableLoadable`, whose `invalidate()` may do nothing, too); otherwise the waiter syncs it
///   (with its backoff, after a refresh that failed). The request then waits for that sync's end
///   (and the waiter's condition), not for the condition alone, which the rejected token may
///   still meet. A `401` that finds a sync of the token running waits for its end. So any number
///   of concurrent `401`s for the same token, including ones that arrive while the new token
///   loads, cause one refresh. (A token type of the app's own must move to
///   `LoadableState.syncing` within `sync()`, as the package's loadables do, for the request to
///   see the sync it waits for.)
/// - Then the request is sent once more with a token other than the rejected one. A second `401`
///   fails the sync with ``HTTPLoadableError/status(code:headers:bodyPrefix:)``; so does a refresh
///   that gives the rejected token back twice.
///
/// A token with characters a header cannot carry (control characters, line breaks) is never
/// sent: the sync fails with ``HTTPLoadableError/transport(_:)`` (`URLError.userAuthenticationRequired`).
///
/// A `Sendable` value: share one between many loadables. Its work runs on the main actor.
public struct HTTPAuthorization: Sendable {
    /// Waits for a credential and returns the `Authorization` header value for it.
    let credential: @MainActor @Sendable () async throws -> Credential
    /// After a 401 for `rejected`: invalidates it if the rule allows, then returns a different
    /// credential, or `nil` when none came.
    let renewal: @MainActor @Sendable (_ rejected: Credential) async throws -> Credential?

    /// A credential as it is sent: the token, and the header value built from it.
    struct Credential: Sendable, Equatable {
        /// The token, as the token loadable's contents gave it.
        let token: String
        /// `Bearer <token>`.
        var headerValue: String { "Bearer \(token)" }
    }

    /// Bearer tokens from `waiter`'s target, read with `token`.
    ///
    /// ```swift
    /// struct AccessToken: Decodable, Sendable { let value: String; let expiresIn: Int }
    /// let auth = HTTPAuthorization.bearer(LoadableWaiter(tokenLoadable, timeout: .seconds(30))) { $0.value }
    /// ```
    ///
    /// - Parameters:
    ///   - waiter: Waits for the token loadable; its condition and timeout apply to every request.
    ///   - token: The token in the loadable's contents.
    /// - Returns: An authorization to pass to ``HTTPLoadable/init(request:transport:decoder:maxBodySize:authorization:clock:)``.
    @MainActor
    public static func bearer<Token: SyncableLoadable & ContentsLoadable>(
        _ waiter: LoadableWaiter<Token>,
        token: @escaping @MainActor (Token.Contents) -> String
    ) -> HTTPAuthorization {
        let source = BearerSource(waiter: waiter, token: token)
        return HTTPAuthorization(
            credential: { try await source.credential() },
            renewal: { try await source.renewal(after: $0) }
        )
    }

    /// Bearer tokens from `waiter`'s target, whose contents are the token.
    ///
    /// ```swift
    /// let token = AsyncLoadable<String> { try await api.newToken() }
    /// let auth = HTTPAuthorization.bearer(LoadableWaiter(token, timeout: .seconds(30)))
    /// ```
    ///
    /// - Parameter waiter: Waits for the token loadable; its condition and timeout apply to every
    ///   request.
    /// - Returns: An authorization to pass to ``HTTPLoadable/init(request:transport:decoder:maxBodySize:authorization:clock:)``.
    @MainActor
    public static func bearer<Token: SyncableLoadable & ContentsLoadable>(
        _ waiter: LoadableWaiter<Token>
    ) -> HTTPAuthorization where Token.Contents == String {
        bearer(waiter) { $0 }
    }
}

/// The token side of ``HTTPAuthorization/bearer(_:token:)``: waits, reads and renews.
///
/// Its own reads of the token (contents, state, staleness) do not tell Observation where the token
/// has a core: bookkeeping is not a view's read, and a registrar made by it would make every later
/// change of the token pay.
@MainActor
private final class BearerSource<Token: SyncableLoadable & ContentsLoadable>: Sendable {
    typealias Credential = HTTPAuthorization.Credential

    let waiter: LoadableWaiter<Token>
    let token: @MainActor (Token.Contents) -> String
    /// The token loadable, when it has a core.
    private let coreOwner: (any LoadableCoreOwner)?

    init(waiter: LoadableWaiter<Token>, token: @escaping @MainActor (Token.Contents) -> String) {
        self.waiter = waiter
        self.token = token
        coreOwner = waiter.target as? any LoadableCoreOwner
    }

    /// The token the loadable holds now, if any.
    private var current: Credential? {
        let target = waiter.target
        let contents = coreOwner.map { owner in owner.core.readUntracked { target.contents } } ?? target.contents
        return contents.map { Credential(token: token($0)) }
    }

    /// Whether the token loadable is syncing now.
    private var isSyncing: Bool {
        (coreOwner?.untrackedStatus.state ?? waiter.target.loadableState) == .syncing
    }

    func credential() async throws -> Credential {
        _ = try await waiter.wait()
        return try Self.checked(current)
    }

    func renewal(after rejected: Credential) async throws -> Credential? {
        let target = waiter.target
        // Two rounds: a refresh that hands the rejected token back gets one more chance.
        for _ in 0..<2 {
            if current == rejected {
                // Still the rejected token: unless a sync of it runs already (someone else's, or
                // the refresh another 401 started), mark it stale; and if the waiter would still
                // hand it out (its condition holds: `.didSyncSuccessfully`, or a token type whose
                // `invalidate()` does nothing), have it sync. Otherwise the waiter syncs it, with
                // its backoff after a refresh that failed...
                if !isSyncing {
                    if !target.isStaleUntracked { target.invalidate() }
                    if !isSyncing, waiter.isConditionMetUntracked { target.sync() }
                }
                // ...then wait for that sync's end, not for the condition alone, which the
                // rejected token may still meet while the new one loads.
                _ = try await waiter.waitAfterSync()
            } else {
                _ = try await waiter.wait()
            }
            if let renewed = current, renewed != rejected { return try Self.checked(renewed) }
        }
        return nil
    }

    /// `credential`, unless it is missing or holds characters a header cannot carry.
    private static func checked(_ credential: Credential?) throws -> Credential {
        guard let credential,
            credential.token.unicodeScalars.allSatisfy({ (0x20...0x7E).contains($0.value) })
        else { throw HTTPLoadableError.transport(URLError(.userAuthenticationRequired)) }
        return credential
    }
}
