/// One record of a ``SyncedCollection`` as a loadable: what a detail screen shows. Made by
/// ``SyncedCollection/record(_:)``.
///
/// ```swift
/// let task = tasks.record(id)
/// Text(task.contents?.title ?? "Deleted")
/// ```
///
/// Its contents are the collection's copy of the record, pending local changes included, set
/// before the collection's observers are told: a detail screen and a list never disagree, and
/// nothing is fetched twice. It is a `PushLoadable<Record>`: only the collection changes it.
///
/// - **Contents.** The record, or `nil` while the collection has no record with this id (not
///   pulled yet, or deleted).
/// - **State.** `.didSyncSuccessfully` while the record is there; `.idle` while the collection
///   has contents without it; while the collection has no contents, the collection's state
///   (idle, syncing, failed with its error).
/// - **Notifications.** Only when the record or that state changed: changes of other records,
///   and a record that came back equal, notify nothing.
/// - **Lifetime.** It keeps its collection alive; the collection holds it weakly, and gives the
///   same one to every caller while it lives.
///
/// Isolated to the main actor.
@MainActor
public final class RecordLoadable<Record: Identifiable & Sendable & Equatable>: PushLoadable<Record>
where Record.ID: Sendable {
    /// The record's id.
    public let id: Record.ID
    /// The collection, kept alive by its record loadables.
    private let collection: AnyObject

    init(id: Record.ID, record: Record?, collection: AnyObject, state: any PureLoadable) {
        self.id = id
        self.collection = collection
        super.init()
        show(record, collectionHasContents: core.readUntracked { state.isContentsAvailable })
        followState(of: state)
    }

    /// Shows `record` (`nil`: the collection has none with this id), with its state, in one
    /// notification, and none when neither changed.
    func show(_ record: Record?, collectionHasContents: Bool) {
        if let record, core.state != .didSyncSuccessfully {
            update(state: .didSyncSuccessfully, error: nil, contents: record)
            return
        }
        modifyContents { contents in
            guard contents != record else { return false }
            contents = record
            if record == nil, collectionHasContents, core.state != .idle { core.store(state: .idle, error: nil) }
            return true
        }
    }
}
