internal import Foundation
public import Loadable
import LoadableSupport

/// Showing the items as layers on loadables, and the changes sent that no loadable showed yet.
extension LoadableOutbox {
    // MARK: - Showing

    /// Shows every item not sent yet (pending, sending, failed or conflicted) as an optimistic
    /// layer on `loadable`, now and for each item enqueued later, until it is sent (its change, or
    /// the server's version of it, then joins the base contents, as a committed `mutate` does:
    /// they count as written, and a persisted loadable saves them) or discarded or dropped (its
    /// layer goes).
    ///
    /// The layers sit above every refresh, in the order of the items, and wait for the loadable's
    /// first contents when it has none: a loadable restored from its cache after a relaunch shows
    /// the pending changes at once. Call it from a store's `make` for each new entry:
    ///
    /// ```swift
    /// let posts = LoadableStore<Int, HTTPLoadable<Post>>(cache: cache.scoped("posts/"), cacheKey: { "\($0)" }) { id in
    ///     let post = service.loadable(Post.self, "posts/\(id)")
    ///     outbox.show(on: post) { post, edit in
    ///         guard edit.postID == id else { return false }
    ///         post.title = edit.title
    ///         return true
    ///     }
    ///     return post
    /// }
    /// ```
    ///
    /// **An edit never goes backwards.** A change that reached the server while no loadable it
    /// concerns was shown (sent right after a relaunch, before the screen made its loadable) is
    /// kept, with the queue, for a day (the 64 newest): each loadable given later shows it above
    /// its contents, restored ones included, until that loadable's next successful sync brings the
    /// server's contents, which include it; the change is then forgotten. Likewise a change sent
    /// while its loadable waits for its restore stays above the restored contents until the next
    /// sync.
    ///
    /// The loadable is held weakly. Calling it again for the same loadable replaces the earlier
    /// `apply`.
    ///
    /// - Parameters:
    ///   - loadable: Where to show the changes.
    ///   - apply: Applies a change to the loadable's contents and returns `true`, or returns `false`
    ///     (changing nothing) for a change that does not concern them: such a change notifies
    ///     nothing, and when it is sent, the loadable is not written.
    public func show<Contents>(
        on loadable: PushLoadable<Contents>,
        _ apply: @escaping @MainActor (inout Contents, Change) -> Bool
    ) {
        let identity = ObjectIdentifier(loadable)
        if let earlier = displays[identity], earlier.shows(on: loadable) {
            for item in storedItems { earlier.drop(item.id) }
        }
        if displays.count >= displaySweepThreshold {
            displays = displays.filter { !$0.value.isGone }
            displaySweepThreshold = Swift.max(16, displays.count * 2)
        }
        let display = OutboxLoadableDisplay(loadable: loadable, apply: apply)
        displays[identity] = display
        forgetExpiredSentChanges()
        for (id, change) in sentChanges {
            display.addSent(change) { [weak self] in self?.sentChangeDidSettle(id) }
        }
        for item in storedItems { addLayer(item.id, item.change, on: display) }
    }

    /// Shows item `id` on `display`, unless it went meanwhile: a loadable's observer, told of a
    /// layer, may discard the item (before or while this layer is added).
    func addLayer(_ id: String, _ change: Change, on display: OutboxDisplay<Change>) {
        guard machine.state(of: id) != nil else { return }
        display.add(id, change)
        if machine.state(of: id) == nil { display.drop(id) }
    }

    func forEachDisplay(_ body: (OutboxDisplay<Change>) -> Void) {
        for display in displays.values { body(display) }
    }

    /// Item `id` reached the server as `change`: it joins the loadables' base contents; if no
    /// loadable showed it, it is kept to be shown on later ones.
    func join(_ id: String, as change: Change, replacing: Bool) {
        var shown = false
        forEachDisplay { display in
            if replacing { display.replace(id, change) }
            if display.join(id) { shown = true }
        }
        guard !shown else { return }
        let (recordID, _) = OutboxIdentifiers.pair()
        guard let data = encode(change) else { return }
        var record = OutboxRecord(
            id: recordID, idempotencyKey: "", enqueuedAt: 0, attempts: 0, isFailed: false, isSetAside: false,
            lastError: "", change: data)
        record.isSent = true
        record.sentAt = now().timeIntervalSinceReferenceDate
        sentChanges.append((recordID, change))
        stored.withLock { $0.addSent(record) }
        if sentChanges.count > Self.maxSentChanges {
            let dropped = sentChanges.removeFirst().id
            stored.withLock { $0.removeSent { $0.id == dropped } }
        }
    }

    /// A sent change left a loadable because its sync brought the server's contents: forgotten.
    func sentChangeDidSettle(_ id: String) {
        guard sentChanges.contains(where: { $0.id == id }) else { return }
        sentChanges.removeAll { $0.id == id }
        stored.withLock { $0.removeSent { $0.id == id } }
        perform([machine.requestSave()])
    }

    /// Forgets the sent changes older than ``sentChangeLifetime``.
    func forgetExpiredSentChanges() {
        guard !sentChanges.isEmpty else { return }
        let oldest = now().timeIntervalSinceReferenceDate - Self.sentChangeLifetime
        let expired = stored.withLock { stored in
            let expired = Set(stored.sent.filter { $0.sentAt < oldest }.map(\.id))
            stored.removeSent { expired.contains($0.id) }
            return expired
        }
        guard !expired.isEmpty else { return }
        sentChanges.removeAll { expired.contains($0.id) }
        perform([machine.requestSave()])
    }
}
