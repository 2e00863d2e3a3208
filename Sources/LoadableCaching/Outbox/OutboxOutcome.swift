/// What the server did with a change a ``LoadableOutbox`` sent: what its `send` returns.
///
/// ```swift
/// let outbox = LoadableOutbox<NoteEdit>(cache: cache.scoped("outbox/")) { edit, idempotencyKey in
///     do {
///         let saved = try await service.response(
///             to: .put, "notes/\(edit.id)", json: edit, as: NoteEdit.self, idempotencyKey: idempotencyKey,
///             precondition: .ifMatch(edit.etag))
///         return .appliedAs(saved.value)  // the server's version, with its new ETag
///     } catch let error as HTTPLoadableError where error.isPreconditionFailed {
///         return .conflict(remote: try? await service.value(NoteEdit.self, "notes/\(edit.id)"))
///     } catch HTTPLoadableError.status(code: 404, _, _) {
///         return .dropped  // deleted on the server: nothing to edit
///     }
/// }
/// ```
///
/// A `send` that throws keeps the outbox's retry rules (see ``LoadableOutbox/shouldRetry``).
public enum OutboxOutcome<Change: Sendable>: Sendable {
    /// The server has the change as sent: it joins the base contents of the loadables it shows
    /// on, and the item leaves.
    case applied
    /// The server applied the change and answered with its own version of it (a new record
    /// version, an id it assigned): that version joins the base contents instead, the item leaves,
    /// and the later items of its scope are passed through the outbox's `rebase`.
    case appliedAs(Change)
    /// The server refused the change for good, or already had something newer: the item and its
    /// layers leave without joining anything.
    case dropped
    /// A decision is needed: the item becomes ``OutboxItem/State/conflict``, keeps its layer and
    /// its place, is saved with `remote` (the server's side, `nil` when it has none, e.g. deleted),
    /// and waits for ``LoadableOutbox/resolve(_:with:)`` or ``LoadableOutbox/discard(_:)``.
    case conflict(remote: Change?)
}
