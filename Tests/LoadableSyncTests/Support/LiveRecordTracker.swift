import LoadableSync
import Observation

/// Watches a live view or record (any `PushLoadable`) as an app would, by its observers and by
/// Observation, and writes down every notification that told nothing new.
///
/// Each observer call is compared with what the loadable showed at the call before (its contents,
/// state and error): one where nothing changed is a problem, and so is one that changed only the
/// state while there are contents (a view or record that gets contents takes
/// `.didSyncSuccessfully` in the same notification). Observation tracks a read of `contents` alone,
/// armed again after every report: a report with the contents unchanged, and a change of the
/// contents with no report, are problems (a change of the state alone is not a contents reader's).
/// ``checkQuiet()`` finds a change that no observer was told of.
///
/// Isolated to the main actor; the loadable's changes are made there.
@MainActor
final class LiveRecordTracker<Value: Equatable & Sendable> {
    /// What an observer sees.
    struct Snapshot: Equatable {
        var contents: Value?
        var state: LoadableState
        var error: String?
    }

    let loadable: PushLoadable<Value>
    /// Writes contents in a few characters for the messages.
    private let describe: (Value?) -> String
    /// What the last observer call saw (or the start).
    private(set) var last: Snapshot
    /// Observer calls, and those that changed the contents, or only the state (or error).
    private(set) var notifications = 0
    private(set) var contentChanges = 0
    private(set) var stateChanges = 0
    /// What went wrong, in order.
    private(set) var problems: [String] = []

    private var observation: LoadableObservation?
    /// What the loadable showed when Observation was armed last, and whether it reported since.
    private var observed: Snapshot
    private var isReported = false
    private(set) var observationReports = 0
    private var isStopped = false

    init(_ loadable: PushLoadable<Value>, describe: @escaping (Value?) -> String) {
        self.loadable = loadable
        self.describe = describe
        last = Self.snapshot(of: loadable)
        observed = last
        observation = loadable.observe { [weak self] _ in self?.observerWasCalled() }
        arm()
    }

    static func snapshot(of loadable: PushLoadable<Value>) -> Snapshot {
        Snapshot(
            contents: loadable.contents, state: loadable.loadableState,
            error: loadable.error.map { String(describing: $0) })
    }

    func describe(_ snapshot: Snapshot) -> String {
        "\(describe(snapshot.contents)) (\(snapshot.state)\(snapshot.error.map { ", \($0)" } ?? ""))"
    }

    /// Ends the watch: no observer, and Observation's last report is ignored.
    func stop() {
        isStopped = true
        observation?.cancel()
        observation = nil
    }

    /// Finds what changed with no observer call or no Observation report since the last ones.
    func checkQuiet() {
        let now = Self.snapshot(of: loadable)
        if now != last {
            problems.append("changed from \(describe(last)) to \(describe(now)) with no observer told")
            last = now
        }
        checkObservation()
    }

    private func observerWasCalled() {
        guard !isStopped else { return }
        notifications += 1
        let now = Self.snapshot(of: loadable)
        defer { last = now }
        if now.contents != last.contents {
            contentChanges += 1
        } else if now.state != last.state || now.error != last.error {
            stateChanges += 1
            if now.contents != nil {
                problems.append(
                    "notification #\(notifications) changed only the state, with contents: \(describe(last)) to "
                        + describe(now))
            }
        } else {
            problems.append("notification #\(notifications) with nothing changed: \(describe(now))")
        }
        checkObservation()
    }

    /// Compares what Observation reported with what changed since it was armed; arms it again.
    private func checkObservation() {
        let now = Self.snapshot(of: loadable)
        // A read of `contents` alone is told of changes of the contents, not of the state.
        if isReported {
            observationReports += 1
            if now.contents == observed.contents {
                problems.append(
                    "Observation report #\(observationReports) with the contents unchanged: \(describe(now))")
            }
            arm()
        } else if now.contents != observed.contents {
            problems.append(
                "Observation not told of the change from \(describe(observed)) to \(describe(now))")
            arm()
        }
    }

    private func arm() {
        observed = Self.snapshot(of: loadable)
        isReported = false
        withObservationTracking {
            _ = loadable.contents
        } onChange: { [weak self] in
            // Observation calls `onChange` from the change's `willSet`, on the thread that makes
            // it: the loadable's changes are all made on the main actor.
            MainActor.assumeIsolated {
                guard let self, !self.isStopped else { return }
                self.isReported = true
            }
        }
    }
}
