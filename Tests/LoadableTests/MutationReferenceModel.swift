import Loadable
import LoadableTestSupport
import LoadableTesting
import Testing

// The reference model that `MutationModelTests` runs every sequence against: a fold of the
// pending changes over the base.
extension MutationModelTests {
    /// What the documentation says the loadable is.
    struct Model {
        struct Change {
            let id: Int
            let value: Int
            let reconcile: Bool
        }
        var base: [Int]?
        var pending: [Change] = []
        var state: LoadableState = .idle
        var invalidated = false
        var pendingSync = false
        var doSyncCount = 0
        var notifications = 0
        var outcomes: [Int: Outcome] = [:]
        var nextID = 0

        var shown: [Int]? { base.map { pending.reduce($0) { $0 + [$1.value] } } }
        var isStale: Bool { base == nil || invalidated }

        /// The end of a sync (success or failure) that was running: one more begins in the same
        /// notification when a commit asked for it.
        mutating func endSync() {
            guard pendingSync else { return }
            pendingSync = false
            invalidated = true
            state = .syncing
            doSyncCount += 1
        }

        mutating func apply(_ operation: Operation) {
            switch operation {
            case .begin(let value, let reconcile):
                pending.append(Change(id: nextID, value: value, reconcile: reconcile))
                nextID += 1
                if base != nil { notifications += 1 }
            case .succeed(let index, let answer):
                guard !pending.isEmpty else { return }
                let change = pending.remove(at: index % pending.count)
                outcomes[change.id] = .returned(answer)
                if let old = base {
                    base = old + [change.reconcile ? answer : change.value]
                    invalidated = false
                    notifications += 1
                }
                if state == .syncing {
                    invalidated = true
                    pendingSync = true
                }
            case .fail(let index), .cancel(let index):
                guard !pending.isEmpty else { return }
                let change = pending.remove(at: index % pending.count)
                if case .fail = operation { outcomes[change.id] = .failed } else { outcomes[change.id] = .cancelled }
                if base != nil { notifications += 1 }
            case .sync:
                guard state != .syncing else { return }
                state = .syncing
                doSyncCount += 1
                notifications += 1
            case .syncSucceeds(let newBase):
                let wasSyncing = state == .syncing
                // Equal contents notify nothing: the same state, the same base, nothing forgotten.
                let changesNothing = state == .didSyncSuccessfully && base == newBase && !invalidated
                base = newBase
                invalidated = false
                state = .didSyncSuccessfully
                if !changesNothing { notifications += 1 }
                if wasSyncing { endSync() }
            case .syncFails:
                let wasSyncing = state == .syncing
                state = .didFailToSync
                notifications += 1
                if wasSyncing { endSync() }
            case .setContents(let newBase):
                // Equal contents notify nothing, unless the write forgets an invalidation.
                let changesNothing = base == newBase && !invalidated
                base = newBase
                invalidated = false
                if !changesNothing { notifications += 1 }
            }
        }
    }
}
