package import Loadable

/// A store is one of what a `LoadableInspector`'s snapshot reads: it registers itself at init
/// (one weak registration per store, nothing per entry), and its entries are walked only when a
/// snapshot or an action of the inspector asks.
extension LoadableStore: LoadableInspectorSource {
    /// Adds one snapshot entry per entry of the store, leased or retained.
    package func addInspection(to snapshot: inout LoadableInspectorSnapshot) {
        for entry in orderedEntries(where: { _ in true }) {
            let value = entry.value
            let state = value.statusUntrackedWherePossible.state
            var error: String?
            if state == .didFailToSync, let failure = value.failureRecordIfKnown?.lastError ?? value.error {
                error = "\(failure)"
            }
            snapshot.entries.append(
                LoadableInspectorSnapshot.Entry(
                    label: value.inspectorLabel, key: "\(entry.key)", state: LoadableInspectorSnapshot.stateName(state),
                    age: entry.core?.age.map(LoadableEvent.seconds), isStale: value.isStaleUntracked,
                    leases: entry.leaseCount, hasPendingChanges: entry.core?.hasPendingChanges ?? false,
                    error: error))
        }
    }

    /// The labels of the entries' loadables, in the order the entries were made.
    package var inspectorTargetLabels: [String] {
        orderedEntries(where: { _ in true }).map(\.value.inspectorLabel)
    }

    /// The loadable of the entry labelled `label`, if the store has one.
    package func inspectorTarget(labeled label: String) -> (any SyncableLoadable)? {
        orderedEntries(where: { _ in true }).first { $0.value.inspectorLabel == label }?.value
    }
}
