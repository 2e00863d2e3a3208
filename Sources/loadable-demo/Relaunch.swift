import Foundation
import Loadable
import LoadableCaching
import LoadableTesting

/// The last step of the tour: the app is launched again. The posts store kept its entries in files
/// as they loaded; a new store on the same folder shows the open post from disk at once, while it
/// fetches it again; then the user logs out, which clears the files.
extension Tour {
    func relaunch() async {
        // Every save asked for during the tour is on disk before the "next launch" reads it.
        await posts.saved()
        let files = savedFiles()
        timeline.log("posts store", "saved", "\(files) entries on disk, one file per key")
        timeline.log("app", "relaunched", "a new posts store on the same folder; the post screen opens")
        stats.postEntriesAtRelaunch = posts.count
        posts = nil  // the last launch's store is gone with its process

        let api = api
        let clock = clock
        let store = LoadableStore<String, AsyncLoadable<[String]>>(
            retention: .seconds(300), clock: clock,
            cache: FileLoadableCache(directory: postsCacheDirectory), cacheKey: { $0 }, now: simulatedDate
        ) { path in
            AsyncLoadable(clock: clock) { try await api.request(path) }
        }
        let post = store.lease("/posts/42")
        timeline.watch(post.loadable, as: "post 42 (relaunch)") { Self.describe(relaunched: $0) }
        // The restore reads the file off the main actor; the screen waits for it before its first
        // frame, so that it shows the post from disk instead of a spinner.
        await store.restored("/posts/42")
        let restoredAge = post.loadable.age
        post.syncIfNeeded()
        await clock.advance(by: .zero)
        let end = clock.now.advanced(by: .seconds(2))
        while clock.now < end, post.loadableState == .syncing {
            await clock.advance(by: .milliseconds(100))
        }

        timeline.log("user", "logged out", "the store and its cache are cleared")
        store.removeAll()
        await store.saved()
        let left = savedFiles()
        timeline.log("posts store", "cleared", "\(left) files left on disk")
        post.release()
        try? FileManager.default.removeItem(at: postsCacheDirectory)
        stats.relaunchSummary =
            "\(files) posts saved; /posts/42 shown from disk on relaunch "
            + "(\(restoredAge.map { "\(Timeline.seconds($0)) s old" } ?? "not restored")), "
            + "\(left) files left after logout"
    }

    /// The number of entry files in the posts cache's folder.
    private func savedFiles() -> Int {
        let folder = FileLoadableCache(directory: postsCacheDirectory).entriesDirectory
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.count
    }

    static func describe(relaunched post: AsyncLoadable<[String]>) -> String {
        let count = post.contents?.count ?? 0
        switch post.loadableState {
        case .idle:
            let age = post.age.map { ", saved \(Timeline.seconds($0)) s ago" } ?? ""
            return post.contents == nil ? "nothing yet" : "\(count) items from disk\(age)"
        case .syncing: return post.contents == nil ? "spinner" : "\(count) items from disk + spinner"
        case .didSyncSuccessfully: return "\(count) items, fresh"
        case .didFailToSync: return "\(count) items kept + error: \(post.error.map { "\($0)" } ?? "unknown")"
        }
    }
}
