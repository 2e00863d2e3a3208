import Foundation
public import Loadable
import LoadableSupport
public import LoadableSyncer

/// How an ``HTTPLoadable`` (and an ``HTTPService``'s sends) authorize their requests: with
/// credentials that a `LoadableWaiter` keeps available, sent in the `Authorization` header as a
/// bearer token (``bearer(_:token:)``), as Basic credentials (``basic(_:)``), or in any other
/// scheme (``scheme(_:_:credential:)``).
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
/// The loadable the waiter waits for holds the credentials: a token endpoint's answer, a user's
/// password from the keychain, an API key. The rules are the same for every scheme, for every
/// request of every loadable and every send that share the authorization:
/// - Each request waits for the credentials through the waiter (which syncs them if needed,
///   retries them with backoff, and times out), then sends `Authorization: <scheme> <credential>`.
///   A wait that times out fails the sync with the waiter's error (`LoadableWaiterError.timedOut`).
///   Credentials that cannot be had (the token endpoint refused the app's credentials: an error
///   the waiter's syncer does not retry) fail the sync at once with
///   `LoadableWaiterError.targetFailed(_:)`, carrying the credentials loadable's error, until it
///   syncs again.
/// - A `401` renews the credentials if the credentials loadable still holds the ones that were
///   sent and no sync of it runs: it marks it stale (`SyncableLoadable.invalidate()`, unless it is
///   stale already) and, if the waiter would still hand it out, has it sync
///   (`SyncableLoadable.sync()`), whatever the waiter's condition and whatever the loadable's type
///   (an app's own `SyncableLoadable`, whose `invalidate()` may do nothing, too); otherwise the
///   waiter syncs it (with its backoff, after a refresh that failed). The request then waits for
///   that sync's end (and the waiter's condition), not for the condition alone, which the rejected
///   credentials may still meet. A `401` that finds a sync of the credentials running waits for
///   its end. So any number of concurrent `401`s for the same credentials, including ones that
///   arrive while the new ones load, cause one refresh, and a new request that comes while a
///   refused one waits for that sync waits for it too. (A credentials type of the app's own must
///   move to `LoadableState.syncing` within `sync()`, as the package's loadables do, for the
///   request to see the sync it waits for.)
/// - Then the request is sent once more with credentials other than the rejected ones. A second
///   `401` fails the sync with ``HTTPLoadableError/status(code:headers:bodyPrefix:)``; so does a
///   refresh that gives the rejected credentials back twice: the `401` stands, and nothing loops.
///
/// So a new password is a sync of the credentials loadable (or a `setContents` of it), never a new
/// service or a new loadable: the next request carries it, and a request refused with the old one
/// is sent again with it.
///
/// Credentials a header cannot carry whole (an empty token or one with a space at either end,
/// control characters, line breaks, characters outside ASCII in a token, a `:` in a Basic user
/// name) are never sent: the sync fails with ``HTTPLoadableError/transport(_:)``
/// (`URLError.userAuthenticationRequired`).
///
/// A `Sendable` value: share one between many loadables. Its work runs on the main actor.
public struct HTTPAuthorization: Sendable {
    /// Waits for credentials and returns the `Authorization` header value for them.
    let credential: @MainActor @Sendable () async throws -> Credential
    /// After a 401 for `rejected`: invalidates the credentials if the rule allows, then returns
    /// different ones, or `nil` when none came.
    let renewal: @MainActor @Sendable (_ rejected: Credential) async throws -> Credential?

    /// Credentials as they are sent: the whole `Authorization` header value. Two are the same
    /// credentials when their header values are equal.
    struct Credential: Sendable, Equatable {
        /// `<scheme> <credential>`, as in `Bearer abc`.
        let headerValue: String
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
        tokens(waiter, prefix: "Bearer ", token)
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

    /// HTTP Basic authentication (RFC 7617) with the user name and password that `waiter`'s target
    /// holds: `Authorization: Basic <base64 of user:password in UTF-8>`.
    ///
    /// ```swift
    /// // A sync reads the credentials the user saved, from the keychain.
    /// let credentials = AsyncLoadable<HTTPBasicCredentials> { try await keychain.credentials() }
    /// let api = HTTPService(
    ///     baseURL: URL(string: "https://kinto.example.com/v1")!,
    ///     authorization: .basic(LoadableWaiter(credentials, timeout: .seconds(30))))
    ///
    /// // Later, the user types a new password: the next request sends it.
    /// credentials.setContents(HTTPBasicCredentials(user: "ana", password: newPassword))
    /// ```
    ///
    /// The `401` rules are those of every scheme (see ``HTTPAuthorization``): a `401` for the
    /// credentials held marks them stale and waits for a sync of the credentials loadable (one
    /// that reads the keychain again, or asks the user); the request goes once more only with
    /// different credentials. A user name with a `:` (RFC 7617 forbids it: the server would split
    /// the pair there) or control characters, or a password with control characters, is never
    /// sent.
    ///
    /// - Parameter waiter: Waits for the credentials loadable; its condition and timeout apply to
    ///   every request.
    /// - Returns: An authorization to pass to an ``HTTPService`` or an ``HTTPLoadable``.
    @MainActor
    public static func basic<Credentials: SyncableLoadable & ContentsLoadable>(
        _ waiter: LoadableWaiter<Credentials>
    ) -> HTTPAuthorization where Credentials.Contents == HTTPBasicCredentials {
        let source = CredentialSource(waiter: waiter, key: { $0 }, header: { $0.headerValue })
        return HTTPAuthorization(source)
    }

    /// Credentials in any other scheme, read with `credential` from `waiter`'s target:
    /// `Authorization: <scheme> <credential>`.
    ///
    /// ```swift
    /// // Django REST Framework's token authentication: `Authorization: Token 9944b09…`
    /// let auth = HTTPAuthorization.scheme("Token", LoadableWaiter(apiToken, timeout: .seconds(30))) { $0 }
    /// ```
    ///
    /// The `401` rules are those of every scheme (see ``HTTPAuthorization``). A credential that is
    /// empty, starts or ends with a space, or has characters other than visible ASCII and spaces is
    /// never sent.
    ///
    /// - Parameters:
    ///   - scheme: The scheme's name, as in `"Token"` or `"ApiKey"`: a non-empty HTTP token
    ///     (letters, digits, `!#$%&'*+-.^_|~` and the backtick); anything else stops the program with a
    ///     message.
    ///   - waiter: Waits for the credentials loadable; its condition and timeout apply to every
    ///     request.
    ///   - credential: What follows the scheme, read from the loadable's contents.
    /// - Returns: An authorization to pass to an ``HTTPService`` or an ``HTTPLoadable``.
    @MainActor
    public static func scheme<Token: SyncableLoadable & ContentsLoadable>(
        _ scheme: String,
        _ waiter: LoadableWaiter<Token>,
        credential: @escaping @MainActor (Token.Contents) -> String
    ) -> HTTPAuthorization {
        requireValid(
            HTTPService.InvalidHeaderError.isToken(scheme),
            "HTTPAuthorization.scheme: scheme must be a non-empty HTTP token (letters, digits and "
                + "!#$%&'*+-.^_`|~), got \"\(scheme.unicodeScalars.map { $0.escaped(asASCII: true) }.joined())\""
        )
        return tokens(waiter, prefix: scheme + " ", credential)
    }

    /// `<prefix><credential>` for credentials read as a string from `waiter`'s target.
    @MainActor
    private static func tokens<Token: SyncableLoadable & ContentsLoadable>(
        _ waiter: LoadableWaiter<Token>,
        prefix: String,
        _ credential: @escaping @MainActor (Token.Contents) -> String
    ) -> HTTPAuthorization {
        let source = CredentialSource(waiter: waiter, key: credential) { token in
            isSendable(token) ? prefix + token : nil
        }
        return HTTPAuthorization(source)
    }

    @MainActor
    private init<Token, Key>(_ source: CredentialSource<Token, Key>) {
        self.init(
            credential: { try await source.credential() },
            renewal: { try await source.renewal(after: $0) }
        )
    }

    private init(
        credential: @escaping @MainActor @Sendable () async throws -> Credential,
        renewal: @escaping @MainActor @Sendable (_ rejected: Credential) async throws -> Credential?
    ) {
        self.credential = credential
        self.renewal = renewal
    }

    /// Whether a header can carry `token` after a scheme and a space: not empty, visible ASCII and
    /// spaces only, no space at either end (a server would strip it, and read other credentials).
    static func isSendable(_ token: String) -> Bool {
        let scalars = token.unicodeScalars
        return !scalars.isEmpty && scalars.first != " " && scalars.last != " "
            && scalars.allSatisfy { (0x20...0x7E).contains($0.value) }
    }
}

/// A user name and a password, for HTTP Basic authentication (``HTTPAuthorization/basic(_:)``).
///
/// ```swift
/// let credentials = HTTPBasicCredentials(user: "ana", password: "correct horse battery staple")
/// ```
///
/// `Codable`, so that a credentials loadable can be persisted (in a store that keeps secrets
/// safe: the password is in clear). A `Sendable` value, usable anywhere.
public struct HTTPBasicCredentials: Sendable, Hashable, Codable {
    /// The user name. It may not contain a `:` (RFC 7617) or control characters; credentials whose
    /// user name does are never sent.
    public var user: String
    /// The password, any text without control characters; sent in UTF-8.
    public var password: String

    /// Credentials of `user` with `password`.
    ///
    /// - Parameters:
    ///   - user: The user name, without a `:`.
    ///   - password: The password.
    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }

    /// `Basic <base64 of user:password>`, or `nil` when a header must not carry them.
    var headerValue: String? {
        let isControl = { (scalar: Unicode.Scalar) in scalar.value < 0x20 || scalar.value == 0x7F }
        guard !user.unicodeScalars.contains(where: { $0 == ":" || isControl($0) }),
            !password.unicodeScalars.contains(where: isControl)
        else { return nil }
        return "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }
}

/// The credentials side of an ``HTTPAuthorization``: waits, reads and renews.
///
/// The header value is made again only when the credentials change (`Key` is what it is made
/// from: a token string, Basic credentials), so that a request of an authorized loadable allocates
/// nothing for its credentials.
///
/// Its own reads of the credentials loadable (contents, state, staleness) do not tell Observation
/// where the loadable has a core: bookkeeping is not a view's read, and a registrar made by it
/// would make every later change of the credentials pay.
@MainActor
private final class CredentialSource<Token: SyncableLoadable & ContentsLoadable, Key: Equatable>: Sendable {
    typealias Credential = HTTPAuthorization.Credential

    let waiter: LoadableWaiter<Token>
    /// What the header value is made from, in the loadable's contents.
    let key: @MainActor (Token.Contents) -> Key
    /// The header value for a key; `nil` when a header must not carry it.
    let header: @MainActor (Key) -> String?
    /// The credentials loadable, when it has a core.
    private let coreOwner: (any LoadableCoreOwner)?
    /// The last key read and its header value.
    private var last: (key: Key, header: String?)?

    init(
        waiter: LoadableWaiter<Token>,
        key: @escaping @MainActor (Token.Contents) -> Key,
        header: @escaping @MainActor (Key) -> String?
    ) {
        self.waiter = waiter
        self.key = key
        self.header = header
        coreOwner = waiter.target.loadableCapabilities.owner
    }

    /// What the credentials loadable holds now: `nil` without contents, `.some(nil)` for
    /// credentials a header cannot carry.
    private var current: String?? {
        let target = waiter.target
        let contents = coreOwner.map { owner in owner.core.readUntracked { target.contents } } ?? target.contents
        guard let contents else { return nil }
        let key = key(contents)
        if let last, last.key == key { return .some(last.header) }
        let header = header(key)
        last = (key, header)
        return .some(header)
    }

    /// Whether the credentials loadable is syncing now.
    private var isSyncing: Bool {
        (coreOwner?.untrackedStatus.state ?? waiter.target.loadableState) == .syncing
    }

    func credential() async throws -> Credential {
        _ = try await waiter.wait()
        return try Self.checked(current)
    }

    func renewal(after rejected: Credential) async throws -> Credential? {
        let target = waiter.target
        // Two rounds: a refresh that hands the rejected credentials back gets one more chance.
        for _ in 0..<2 {
            if current == .some(.some(rejected.headerValue)) {
                // Still the rejected credentials: unless a sync of them runs already (someone
                // else's, or the refresh another 401 started), mark them stale; and if the waiter
                // would still hand them out (its condition holds: `.didSyncSuccessfully`, or a
                // type whose `invalidate()` does nothing), have them sync. Otherwise the waiter
                // syncs them, with its backoff after a refresh that failed...
                if !isSyncing {
                    if !target.isStaleUntracked { target.invalidate() }
                    if !isSyncing, waiter.isConditionMetUntracked { target.sync() }
                }
                // ...then wait for that sync's end, not for the condition alone, which the
                // rejected credentials may still meet while the new ones load.
                _ = try await waiter.waitAfterSync()
            } else {
                _ = try await waiter.wait()
            }
            let renewed = current
            if renewed != .some(.some(rejected.headerValue)), renewed != nil { return try Self.checked(renewed) }
        }
        return nil
    }

    /// The credentials held, unless there are none or a header cannot carry them.
    private static func checked(_ header: String??) throws -> Credential {
        guard case .some(.some(let header)) = header else {
            throw HTTPLoadableError.transport(URLError(.userAuthenticationRequired))
        }
        return Credential(headerValue: header)
    }
}
