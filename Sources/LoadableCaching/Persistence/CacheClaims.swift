import LoadableSupport

/// Which live store or outbox owns which entries of a cache: a store's `removeAll()` clears its
/// whole cache, so two stores on one cache without scopes would wipe each other's entries at
/// logout, and an outbox inside a store's cache would lose its queue; two outboxes on one entry
/// would overwrite each other's queue.
///
/// A claim is the identity of the entries (``LoadableCache/sharedEntries``: the file cache's
/// objects of one folder, or the SQLite cache's of one file, are one cache, and a scope is part of
/// its cache) and a key prefix (empty for a whole cache):
/// every key that starts with it for a store, the one key for an outbox. Two store claims conflict
/// when one prefix starts the other; an outbox's key conflicts with a store's prefix that starts
/// it, and with another outbox's equal key. Claims end with their owners.
@MainActor
enum CacheClaims {
    private struct Claim {
        /// The key prefix a store owns, or the key an outbox owns, in the cache's own keys.
        let prefix: String
        /// Whether the claim is one key (an outbox's), not every key with the prefix.
        let isOneKey: Bool
        weak var owner: AnyObject?

        func conflicts(with other: Claim) -> Bool {
            switch (isOneKey, other.isOneKey) {
            case (false, false): prefix.hasPrefix(other.prefix) || other.prefix.hasPrefix(prefix)
            case (true, false): prefix.hasPrefix(other.prefix)
            case (false, true): other.prefix.hasPrefix(prefix)
            case (true, true): prefix == other.prefix
            }
        }

        var description: String {
            isOneKey
                ? "the key \"\(prefix)\""
                : prefix.isEmpty ? "the whole cache" : "the scope \"\(prefix)\""
        }
    }

    private static var claims: [ObjectIdentifier: [Claim]] = [:]

    /// Records that `store` owns `cache`; stops the program with a message naming `scoped(_:)`
    /// when a live store or outbox owns entries of it.
    static func claim(_ cache: any LoadableCache, for store: AnyObject) {
        let entries = cache.sharedEntries
        claim(Claim(prefix: entries.keyPrefix, isOneKey: false, owner: store), in: entries, by: "LoadableStore")
    }

    /// Records that `outbox` owns the entry `key` of `cache`; stops the program with a message
    /// when a live store owns the entries it is in, or another live outbox owns it.
    static func claim(_ cache: any LoadableCache, key: String, for outbox: AnyObject) {
        let entries = cache.sharedEntries
        claim(Claim(prefix: entries.key(key), isOneKey: true, owner: outbox), in: entries, by: "LoadableOutbox")
    }

    private static func claim(_ claim: Claim, in entries: LoadableCacheEntries, by caller: String) {
        let identity = entries.id
        var live = (claims[identity] ?? []).filter { $0.owner != nil }
        if let other = live.first(where: { $0.conflicts(with: claim) }) {
            let otherOwner = other.owner.map { "\(type(of: $0))" } ?? "an owner"
            let advice =
                other.isOneKey && claim.isOneKey
                ? "give each outbox its own key"
                : "a store's removeAll() clears its whole cache, so give each store its own scope: cache.scoped(\"posts/\"), cache.scoped(\"users/\"), and each outbox a key outside them"
            requireValid(
                false,
                "\(caller): \(claim.description) of \(entries.cacheName) overlaps \(other.description), which a live \(otherOwner) already owns; \(advice)"
            )
        }
        live.append(claim)
        claims[identity] = live
    }

}
