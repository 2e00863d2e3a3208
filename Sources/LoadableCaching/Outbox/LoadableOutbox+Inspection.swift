package import Loadable
import LoadableSupport

extension LoadableOutbox {
    /// The name of this outbox in a `LoadableInspector`'s events and snapshot:
    /// `LoadableOutbox[<key>]` by default, the key with the prefix of the cache's scope
    /// (`LoadableOutbox[outbox/outbox]` for `cache.scoped("outbox/")` and the default key), which
    /// is what tells one outbox from another. Set it to name the outbox yourself.
    ///
    /// While an inspector is attached, an outbox records:
    /// - `outboxEnqueued` for each ``enqueue(_:scope:)``, with the id it returns (a coalesced
    ///   enqueue names the item that absorbed the change);
    /// - `outboxSent` when a send of an item begins;
    /// - `outboxOutcome` when it ends, with what the outbox made of it: `delivered` for
    ///   ``OutboxOutcome/applied`` and ``OutboxOutcome/appliedAs(_:)`` (the item left), `conflict`
    ///   for ``OutboxOutcome/conflict(remote:)``, `discarded` for ``OutboxOutcome/dropped`` and for
    ///   a send cut short by ``discard(_:)`` or ``removeAll()``, and for an error the send threw,
    ///   `retrying` when ``shouldRetry`` says it may be retried (the item stays pending and its
    ///   scope waits for the retry) or `failed` when not (the item is ``OutboxItem/State/failed``).
    ///
    /// An inspector's snapshot shows every item, in the outbox's order, with its status:
    /// `pending`, `sending`, `waiting` (pending after a retryable failure, until its scope's
    /// retry falls due), `failed` or `conflict`.
    public var inspectorLabel: String {
        get { storedInspectorLabel ?? "LoadableOutbox[\(cache.sharedEntries.key(key))]" }
        set { storedInspectorLabel = newValue }
    }

    /// Records that item `id` joined the outbox (or absorbed an enqueued change).
    @inline(never)
    func recordEnqueued(_ id: String, in inspector: LoadableInspector) {
        inspector.record(.outboxEnqueued(label: inspectorLabel, time: inspector.now, item: id))
    }

    /// Records how the send of item `id` ended.
    @inline(never)
    func recordOutcome(_ id: String, _ outcome: InspectedOutcome, in inspector: LoadableInspector) {
        inspector.record(
            .outboxOutcome(label: inspectorLabel, time: inspector.now, item: id, outcome: outcome.rawValue))
    }
}

/// What an outbox made of a send, as its `outboxOutcome` events name it (see
/// ``LoadableOutbox/inspectorLabel`` for the mapping).
enum InspectedOutcome: String {
    /// The server has the change: applied, or applied as its own version.
    case delivered
    /// The server answered with a conflict; the item waits for the app.
    case conflict
    /// The send threw an error that is not retried; the item is failed.
    case failed
    /// The send threw an error that is retried; the item waits for its scope's retry.
    case retrying
    /// The server dropped the change, or the app discarded the item while it was sending.
    case discarded
}

extension LoadableOutbox: LoadableInspectorSource {
    /// Adds one snapshot item per item, in the outbox's order.
    package func addInspection(to snapshot: inout LoadableInspectorSnapshot) {
        let label = inspectorLabel
        let now = clock.elapsed
        for item in storedItems {
            let status: String
            switch item.state {
            case .pending:
                // A pending item that failed before waits while its scope's retry is not due yet.
                let isHeld = item.attempts > 0 && (machine.holdDeadline(ofScopeOf: item.id).map { $0 > now } ?? false)
                status = isHeld ? "waiting" : "pending"
            case .sending: status = "sending"
            case .failed: status = "failed"
            case .conflict: status = "conflict"
            }
            snapshot.outboxItems.append(
                LoadableInspectorSnapshot.OutboxItem(
                    outbox: label, id: item.id, scope: item.scope, status: status, attempts: item.attempts,
                    error: item.lastError.map { "\($0)" }))
        }
    }

    /// An outbox has nothing an action reaches.
    package var inspectorTargetLabels: [String] { [] }

    /// An outbox has nothing an action reaches.
    package func inspectorTarget(labeled label: String) -> (any SyncableLoadable)? { nil }
}
