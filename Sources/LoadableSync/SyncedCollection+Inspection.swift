internal import Loadable
internal import LoadableCaching

/// What a `LoadableInspector` reads of a synced collection: its snapshot entry, and the
/// collection itself as the target of the inspector page's actions.
extension SyncedCollection: LoadableInspectorSource {
    /// Adds the collection's `LoadableInspectorSnapshot.Collection`: its label, state, age,
    /// the records it shows, pending local changes, conflicts waiting, and live views and records.
    package func addInspection(to snapshot: inout LoadableInspectorSnapshot) {
        // A snapshot is no view's read: nothing here tells Observation.
        let records = core.readUntracked { contents?.count ?? 0 }
        let items = outbox.items
        var pending = 0
        var conflicts = 0
        for item in items {
            switch item.state {
            case .pending, .sending: pending += 1
            case .conflict, .failed: conflicts += 1
            }
        }
        snapshot.collections.append(
            LoadableInspectorSnapshot.Collection(
                label: inspectorLabel, state: LoadableInspectorSnapshot.stateName(core.state),
                age: core.age.map(LoadableEvent.seconds), records: records, pending: pending,
                conflicts: conflicts, leases: live?.liveCount ?? 0))
    }

    /// The collection's own label: an action reaches the collection (a `sync` is a pull).
    package var inspectorTargetLabels: [String] { [inspectorLabel] }

    /// The collection, when `label` is its label.
    package func inspectorTarget(labeled label: String) -> (any SyncableLoadable)? {
        label == inspectorLabel ? self : nil
    }

    /// Gives the collection its default `inspectorLabel`, the type and the key
    /// (`SyncedCollection<KintoRemote<Task>>[tasks]`), and adds it to what a snapshot reads.
    func registerForInspection() {
        core.subscribe(CollectionInspectorKey(key))
        LoadableInspection.register(self)
    }
}

/// A subscriber of a collection's core that tells nothing and is told nothing: it carries the
/// collection's key into its default `inspectorLabel`.
@MainActor
final class CollectionInspectorKey: LoadableCoreSubscriber, LoadableInspectorKeyed {
    /// The collection's key.
    let inspectorKey: String

    init(_ key: String) {
        inspectorKey = key
    }

    /// None: the key is all it is for.
    var coreEvents: LoadableCoreEvent.Kinds { [] }

    func loadableCoreDidEmit(_ event: LoadableCoreEvent) {}
}
