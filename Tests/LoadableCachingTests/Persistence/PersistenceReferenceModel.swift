import Foundation
import Loadable
import LoadableCaching
import LoadableTestSupport
import LoadableTesting
import Testing

// The reference model that `PersistenceModelTests` runs every sequence against, written from
// the rules of `persist` alone.
extension PersistenceModelTests {
    @MainActor final class Model {
        enum Job: CustomStringConvertible {
            /// A save of `value`, changed at `savedAt` (seconds from the start), asked for by the
            /// loadable of `generation`.
            case save(value: Int, savedAt: Int, generation: Int)
            /// The restore of the loadable of `generation`.
            case restore(generation: Int)

            var description: String {
                switch self {
                case .save(let value, let savedAt, _): "save(\(value) @\(savedAt))"
                case .restore: "load"
                }
            }
        }

        let maxRestoreAge: Int?
        /// Seconds from the start.
        var now = 0
        /// The cache's jobs: the first is running (held in the cache), the others wait.
        var jobs: [Job]
        /// The entry on disk: its value and `savedAt`.
        var disk: (value: Int, savedAt: Int)?
        var savesWritten = 0
        var coverage = Coverage()

        // The loadable of the current generation.
        var generation = 0
        var contents: Int?
        var state = LoadableState.idle
        var stateBeforeSync = LoadableState.idle
        /// Seconds; `nil` when never confirmed nor restored (the clock of the loadable stands still).
        var age: Int?
        var isConfirmed = false
        var isStopped = false
        var notifications = 0

        init(_ configuration: Configuration) {
            maxRestoreAge = configuration.maxRestoreAge
            disk = configuration.initialValue.map { ($0, -2) }
            jobs = [.restore(generation: 0)]
        }

        var isRestoring: Bool {
            jobs.contains {
                if case .restore(let generation) = $0 { generation == self.generation } else { false }
            }
        }

        func apply(_ operation: Operation) {
            now += 1
            switch operation {
            case .startSync: startSync()
            case .succeed(let value):
                startSync()
                state = .didSyncSuccessfully
                contents = value
                notifications += 1
                confirm()
            case .fail:
                startSync()
                state = .didFailToSync
                notifications += 1
            case .cancel:
                guard state == .syncing else { return }
                state = stateBeforeSync
                notifications += 1
            case .setContents(let value):
                // Equal contents notify nothing (there is no invalidation to forget here), but are
                // confirmed, and saved, all the same.
                if contents != value { notifications += 1 }
                contents = value
                confirm()
            case .completeNextJob: completeNextJob()
            case .relaunch:
                generation += 1
                contents = nil
                state = .idle
                age = nil
                isConfirmed = false
                isStopped = false
                notifications = 0
                jobs.append(.restore(generation: generation))
            case .stop: isStopped = true
            }
        }

        private func startSync() {
            guard state != .syncing else { return }
            stateBeforeSync = state
            state = .syncing
            notifications += 1
        }

        private func confirm() {
            isConfirmed = true
            age = 0
            guard let contents else { return }
            guard !isStopped else {
                coverage.changesAfterStop += 1
                return
            }
            let save = Job.save(value: contents, savedAt: now, generation: generation)
            // A save still waiting at the tail (not the running head) is replaced.
            if jobs.count >= 2, case .save = jobs[jobs.count - 1] {
                jobs[jobs.count - 1] = save
                coverage.savesCoalesced += 1
            } else {
                jobs.append(save)
            }
        }

        func completeNextJob() {
            guard !jobs.isEmpty else { return }
            switch jobs.removeFirst() {
            case .save(let value, let savedAt, let saver):
                disk = (value, savedAt)
                savesWritten += 1
                coverage.savesWritten += 1
                if saver != generation { coverage.savesAfterRelease += 1 }
            case .restore(let restoring):
                guard restoring == generation else {
                    coverage.restoresOfReleasedLoadables += 1
                    return
                }
                guard let disk else {
                    coverage.restoresOfEmptyDisk += 1
                    return
                }
                let entryAge = max(0, now - disk.savedAt)
                if let maxRestoreAge, entryAge > maxRestoreAge {
                    coverage.restoresTooOld += 1
                    return
                }
                if isStopped {
                    coverage.restoresDroppedAfterStop += 1
                    return
                }
                if isConfirmed {
                    coverage.restoresDroppedAfterConfirmation += 1
                    return
                }
                contents = disk.value
                age = entryAge
                notifications += 1
                coverage.restoresApplied += 1
            }
        }

        func describeLoadable() -> String {
            PersistenceModelTests.describe(
                contents: contents, state: state, age: age.map { .seconds($0) }, notifications: notifications,
                isRestoring: isRestoring)
        }

        var describeDisk: String {
            PersistenceModelTests.describeDisk(value: disk?.value, savedAt: disk?.savedAt, saves: savesWritten)
        }
    }
}
