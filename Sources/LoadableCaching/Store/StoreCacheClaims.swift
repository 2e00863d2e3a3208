/// Which live store owns which cache (or scope of one): a store's `removeAll()` clears its whole
/// cache, so two stores on one cache without scopes would wipe each other's entries at logout.
///
/// A claim is the identity of the entries (the ``CacheQueue`` identity: the objects of one folder
/// are one cache, and a scope is part of its cache) and a key prefix (empty for a whole cache).
/// Two claims on the same entries conflict when one prefix starts the other. Claims end with their
/// stores.
@MainActor
enum StoreCacheClaims {
    private struct Claim {
        let prefix: String
        weak var store: AnyObject?
    }

    private static var claims: [ObjectIdentifier: [Claim]] = [:]

    /// Records that `store` owns `cache`; stops the program with a message naming `scoped(_:)`
    /// when a live store owns the same entries or a part of them that overlaps.
    static func claim(_ cache: any LoadableCache, for store: AnyObject) {
        let identity = CacheQueue.identity(of: cache)
        let prefix = (cache as? ScopedLoadableCache)?.prefix ?? ""
        var live = (claims[identity] ?? []).filter { $0.store != nil }
        if let other = live.first(where: { $0.prefix.hasPrefix(prefix) || prefix.hasPrefix($0.prefix) }) {
            requireValid(
                false,
                "LoadableStore: \(describe(prefix)) of \(type(of: scopedBase(cache))) overlaps \(describe(other.prefix)), which another live store (\(other.store.map { "\(type(of: $0))" } ?? "a store")) already owns; a store's removeAll() clears its whole cache, so give each store its own scope: cache.scoped(\"posts/\"), cache.scoped(\"users/\")"
            )
        }
        live.append(Claim(prefix: prefix, store: store))
        claims[identity] = live
    }

    private static func describe(_ prefix: String) -> String {
        prefix.isEmpty ? "the whole cache" : "the scope \"\(prefix)\""
    }

    private static func scopedBase(_ cache: any LoadableCache) -> any LoadableCache {
        (cache as? ScopedLoadableCache)?.base ?? cache
    }
}
