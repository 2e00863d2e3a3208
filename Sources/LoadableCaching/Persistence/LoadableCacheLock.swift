import LoadableSupport

/// A lock taken with ``LoadableCache/tryLock(key:)``: held until ``release()``, until it is
/// deinitialized, or until the process ends.
///
/// Not isolated: any thread may release it, once; the releases after the first do nothing. A cache
/// of the package's makes it; a cache of an app's own makes one with ``init(release:)``, giving
/// what frees its lock:
///
/// ```swift
/// actor KeychainCache: LoadableCache {
///     func tryLock(key: String) async throws -> LoadableCacheLock? {
///         guard let token = try await server.acquire(key) else { return nil }
///         return LoadableCacheLock { Task { try? await server.free(token) } }
///     }
///     …
/// }
/// ```
///
/// A test holds one lock and checks that a second is refused until the first is released:
///
/// ```swift
/// let lock = try #require(try await cache.tryLock(key: "outbox"))
/// #expect(try await cache.tryLock(key: "outbox") == nil)
/// lock.release()
/// #expect(try await cache.tryLock(key: "outbox") != nil)
/// ```
public final class LoadableCacheLock: Sendable {
    /// What frees the lock, until it is taken (by the first release).
    private let releaseAction: Locked<(@Sendable () -> Void)?>

    /// Creates a held lock that `release` frees.
    ///
    /// - Parameter release: Frees the lock: called once, by the first ``release()`` or by the
    ///   deinitializer, on the caller's thread and never under a lock of this object's.
    public init(release: @escaping @Sendable () -> Void) {
        releaseAction = Locked(release)
    }

    deinit {
        release()
    }

    /// Frees the lock; a lock already released stays released (the call does nothing).
    public func release() {
        let action = releaseAction.withLock { action in
            defer { action = nil }
            return action
        }
        action?()
    }

    /// Whether the lock is held: `true` until the first ``release()``.
    public var isHeld: Bool {
        releaseAction.withLock { $0 != nil }
    }
}

/// The locks of the protocol's default ``LoadableCache/tryLock(key:)``, held within the process: by
/// the identity of the cache object and the key.
enum InProcessCacheLocks {
    /// A lock's name: the cache object's identity and the key.
    private struct Name: Hashable {
        let cache: ObjectIdentifier
        let key: String
    }

    private static let held = Locked<Set<Name>>([])

    /// Takes the lock `key` of `cache` if no lock object of the process holds it. The lock keeps
    /// `cache` alive while it is held, so that its identity is no other object's meanwhile.
    static func tryLock(key: String, of cache: any LoadableCache) -> LoadableCacheLock? {
        let name = Name(cache: ObjectIdentifier(cache), key: key)
        guard held.withLock({ $0.insert(name).inserted }) else { return nil }
        return LoadableCacheLock {
            withExtendedLifetime(cache) {
                _ = held.withLock { $0.remove(name) }
            }
        }
    }
}
