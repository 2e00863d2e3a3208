import Foundation
import Loadable
import LoadableCaching

/// The optimistic changes of the tour: on the open post, the user stars it and sends a comment,
/// just before the server's push refreshes it. Both show at once, as layers over the post; the
/// refresh replaces the post underneath and both stay on top; the comment fails and only it is
/// taken back; the star is accepted and joins the post.
extension Tour {
    static let starMark = "★ starred by you"
    static let commentMark = "comment \"Nice!\" (sending…)"

    func scheduleMutations() {
        at(13.3) {
            // The comment is going to fail.
            self.server.glitches.insert("/posts/42/comments")
            guard let post = self.postScreens["detail 42"] else { return }
            self.timeline.log("user", "stars /posts/42", "the star shows at once; the request is on its way")
            self.spawn { await self.star(post) }
        }
        at(13.35) {
            guard let post = self.postScreens["detail 42"] else { return }
            self.timeline.log("user", "comments on /posts/42", "the comment shows at once, marked \"sending…\"")
            self.spawn { await self.comment(on: post) }
        }
    }

    /// Stars the post: a "set to" change (adding the mark only once), so that applying it again
    /// on a refreshed post cannot show two stars.
    private func star(_ post: LoadableLease<AsyncLoadable<[String]>>) async {
        await change(post, named: "star", showing: Self.starMark, path: "/posts/42/star", adding: Self.starMark)
    }

    /// Comments on the post; the server refuses this one, and only the comment goes.
    private func comment(on post: LoadableLease<AsyncLoadable<[String]>>) async {
        await change(
            post, named: "comment", showing: Self.commentMark, path: "/posts/42/comments",
            adding: "comment \"Nice!\"")
    }

    /// Shows `mark` on the post at once (a "set to" change: applied again on a refreshed post, it
    /// cannot show twice) and sends `item` to `path`; logs how it ended.
    private func change(
        _ post: LoadableLease<AsyncLoadable<[String]>>, named name: String, showing mark: String, path: String,
        adding item: String
    ) async {
        let api = api
        do {
            try await post.mutate { items in
                if !items.contains(mark) { items.append(mark) }
            } commit: {
                try await api.send(path, adding: item, to: "/posts/42", idempotencyKey: UUID().uuidString)
            }
            timeline.log("api \(path)", "accepted", "the \(name) stays: it is part of the post now")
            stats.mutationSummary.append("the \(name) was kept")
        } catch {
            let othersStay = post.contents?.contains(where: { $0 == Self.starMark || $0 == Self.commentMark }) == true
            timeline.log(
                "api \(path)", "failed",
                "only the \(name) is taken back\(othersStay ? "; the other change stays" : "") (\(error))")
            stats.mutationSummary.append("the \(name) was taken back")
        }
    }

    /// What a post screen shows: its items, and the marks of the changes on it.
    static func describe(post: AsyncLoadable<[String]>) -> String {
        let items = post.contents ?? []
        var marks: [String] = []
        if items.contains(starMark) { marks.append("★") }
        if items.contains(commentMark) { marks.append("comment (sending…)") }
        let described = describe(feed: post)
        return marks.isEmpty ? described : "\(described), with " + marks.joined(separator: " + ")
    }
}
