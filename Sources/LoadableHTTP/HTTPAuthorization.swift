import Foundation
public import Loadable
public import LoadableSyncer

/// How an ``HTTPLoadable`` authorizes its requests: with a bearer token that a
/// `LoadableWaiter` keeps available.
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
/// The rules, for every request of every loadable that shares the authorization:
/// - Each request waits for the token through the waiter (which syncs it if needed, retries it
///   with backoff, and times out), then sends `Authorization: Bearer <token>`. A wait that times
///   out fails the sync with the waiter's error (`LoadableWaiterError.timedOut`). A token that
///   cannot be had (the token endpoint refused the credentials: an error the waiter's syncer does
///   not retry) fails the sync at once with `LoadableWaiterError.targetFailed(_:)`, carrying the
///   token's error, until the token syncs again.
/// - A `401` marks the token stale (`SyncableLoadable.invalidate()`) only if the token
///   loadable still holds the token that was sent and it is neither stale nor syncing already. So
///   any number of concurrent `401`s for the same token, including ones that arrive while the new
///   token loads, cause one refresh.
/// - Then the request is sent once more with a token other than the rejected one (waiting for
///   it if needed). A second `401` fails the sync with
///   ``HTTPLoadableError/status(code:headers:bodyPrefix:)``; so does a refresh that gives the
///   rejected token back twice.
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

/// The token side of ``HTTPAuthorization/bearer(_:token:)``: waits, reads and invalidates.
@MainActor
private final class BearerSource<Token: SyncableLoadable & ContentsLoadable>: Sendable {
    typealias Credential = HTTPAuthorization.Credential

    let waiter: LoadableWaiter<Token>
    let token: @MainActor (Token.Contents) -> String

    init(waiter: LoadableWaiter<Token>, token: @escaping @MainActor (Token.Contents) -> String) {
        self.waiter = waiter
        self.token = token
    }

    /// The token the loadable holds now, if any. (Read in a load task, where no Observation
    /// tracking is under way.)
    private var current: Credential? {
        guard let contents = waiter.target.contents else { return nil }
        return Credential(token: token(contents))
    }

    func credential() async throws -> Credential {
        _ = try await waiter.wait()
        return try Self.checked(current)
    }

    func renewal(after rejected: Credential) async throws -> Credential? {
        let target = waiter.target
        // Two rounds: a refresh that hands the rejected token back gets one more chance.
        for _ in 0..<2 {
            if current == rejected, !target.isStaleUntracked, target.loadableState != .syncing {
                target.invalidate()
            }
            _ = try await waiter.wait()
            // A sync someone else started (not an invalidation) leaves the condition met with
            // the rejected token still in place: wait for that sync to end.
            if current == rejected, target.loadableState == .syncing {
                try await target.wait { $0.loadableState != .syncing }
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
