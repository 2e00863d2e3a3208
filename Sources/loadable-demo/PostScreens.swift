import Loadable
import LoadableCaching

/// The post screens of the tour: a keyed store shared by a list and a detail page.
extension Tour {
    /// A list shows posts 42 and 7 and a header shows user 3; a detail page opens on post 42 (the
    /// list's entry: no second request); the list scrolls post 7 away (kept, no request); the
    /// server says posts changed (`invalidate(where:)` by prefix: the open post refreshes once for
    /// both screens, the kept one is only marked stale); the list scrolls back to post 7 (stale:
    /// one request).
    func schedulePostScreens() {
        at(5.0) {
            self.timeline.log("list screen", "opened", "shows /posts/42, /posts/7 and /users/3")
            self.open("/posts/42", on: "list 42", watchAs: "post 42 (2 screens)")
            self.open("/posts/7", on: "list 7", watchAs: "post 7")
            self.open("/users/3", on: "header", watchAs: "user 3")
        }
        at(5.5) {
            self.open("/posts/42", on: "detail 42", watchAs: nil)
            let shared = self.postScreens["detail 42"]?.loadable === self.postScreens["list 42"]?.loadable
            self.timeline.log(
                "detail screen", "opened /posts/42",
                "the list's entry (same object: \(shared)), no second request; \(self.posts.count) entries")
        }
        at(6.5) {
            self.postScreens.removeValue(forKey: "list 7")?.release()
            self.timeline.log("list screen", "scrolled", "/posts/7 off screen: kept for 300 s, no request")
        }
        at(13.5) {
            self.timeline.log(
                "server push", "posts changed",
                "invalidate every \"/posts/\" key: open ones refresh, kept ones turn stale")
            self.posts.invalidate { $0.hasPrefix("/posts/") }
            let stale = self.posts.peek("/posts/7")?.isStale ?? false
            self.timeline.log("posts store", "invalidated", "/posts/7 kept and stale: \(stale), not fetched")
        }
        at(14.5) {
            self.open("/posts/7", on: "list 7", watchAs: nil)
            self.timeline.log("list screen", "scrolled back", "/posts/7 was stale: one request")
        }
    }

    /// Leases `path` for `screen` and syncs it if needed; logs the entry's changes under `name`.
    private func open(_ path: String, on screen: String, watchAs name: String?) {
        let lease = posts.lease(path)
        stats.postLeases += 1
        postScreens[screen] = lease
        if let name {
            timeline.watch(lease.loadable, as: name) { Self.describe(post: $0) }
            countSyncs(of: lease.loadable, as: "posts")
        }
        lease.syncIfNeeded()
    }
}
