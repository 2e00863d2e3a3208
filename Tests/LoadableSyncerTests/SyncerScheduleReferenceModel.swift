import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

// The reference model that the syncer sequences of `WaiterModelTests` run against: the syncer's
// schedule, written from `Docs/Syncing.md` alone.
extension WaiterModelTests {
    /// A target, its syncer (`shouldRetry` refuses code 404) and the activity monitor it follows,
    /// written from the issue 16 rules (`syncer-rules.md`) on top of `Docs/Syncing.md`:
    /// - Nothing is scheduled while idle or syncing; repeated notifications in one state change
    ///   nothing; a timer that falls due syncs (`sync()` or `syncIfNeeded()`), and is armed again
    ///   for the current state if that synced nothing.
    /// - The syncer *runs* while the monitor is active and not offline (`unknown` counts as
    ///   online). Timers fire only while it runs. Pausing cancels the timer but keeps its deadline
    ///   (`nextSyncIn` counts down to zero); a failure while paused schedules nothing and asks the
    ///   policy nothing; a success while paused records its deadline (and resets the policy).
    /// - Resuming resets the policy (backoff at `min`, new retry budget), then, unless syncing:
    ///   syncs at once a failure that may be retried, or a success whose refresh fell due or whose
    ///   target `needsSync`; otherwise arms the timer for the time left. A failure whose error had
    ///   a hint `h > 0` is never caught up before its time plus `min(h, maxRetryAfter)` (issue 26):
    ///   the retry is scheduled for that moment instead, also when the failure came while paused.
    /// - `appDidBecomeActive()` resets the policy and, while running, does the same catch-up
    ///   (without arming for the time left).
    /// - A hint `h` makes the retry delay `min(max(backoff, h), maxRetryAfter)`. With
    ///   `maxRetries`, the failure after that many retries schedules nothing (out of retries) until
    ///   a reset: resume, `appDidBecomeActive()`, a success, or a sync someone else starts then.
    /// - `isWaitingForNetwork`: offline, failed, and the failure was retryable at its transition.
    struct ScheduleModel {
        let syncPolicy: LoadableSyncer.SyncPolicy
        var target = TargetModel()
        var syncer: SyncerModel
        var isActive: Bool
        var connectivity: NetworkConnectivity
        var now = Duration.zero
        var requestedSleeps: [Duration] = []
        /// Set while the syncer's own sync (timer, catch-up) runs.
        var isSyncerSyncing = false

        init(_ configuration: SyncerConfiguration) {
            syncPolicy = configuration.syncPolicy
            syncer = SyncerModel(period: configuration.period, min: .seconds(1), max: configuration.max)
            syncer.maxRetries = configuration.maxRetries
            syncer.maxRetryAfter = configuration.maxRetryAfter
            isActive = configuration.isActive
            connectivity = configuration.connectivity
            syncer.isRunning = isRunning
            notify()
        }

        var isRunning: Bool { isActive && connectivity != .offline }

        var retryAllowed: Bool { target.state != .didFailToSync || target.errorCode != 404 }

        /// The hint of the target's error, when it failed.
        var hint: Duration? { target.state == .didFailToSync ? target.retryAfter : nil }

        var isWaitingForNetwork: Bool {
            connectivity == .offline && syncer.observed == .didFailToSync && syncer.isFailureRetryable
        }

        /// While paused the deadline stays but no timer sleeps.
        var pendingSleepCount: Int { isRunning && syncer.deadline != nil ? 1 : 0 }

        /// What Observation sees of the syncer: its deadline and `isWaitingForNetwork`.
        var observableValues: [String] { ["\(syncer.deadline.map { "\($0)" } ?? "nil")", "\(isWaitingForNetwork)"] }

        func advanceEnd(for operation: SyncerOperation) -> Duration? {
            switch operation {
            case .advance(let duration): now + duration
            case .advanceToNextSync: syncer.deadline.flatMap { $0 > now ? $0 : nil } ?? now + .seconds(1)
            default: nil
            }
        }

        mutating func apply(_ operation: SyncerOperation) {
            switch operation {
            case .succeed:
                target.isContentsAvailable = true
                target.errorCode = nil
                target.retryAfter = nil
                target.state = .didSyncSuccessfully
                notify()
            case .fail(let code, let hint):
                target.errorCode = code
                target.retryAfter = code == nil || code == 1 ? nil : hint
                target.state = .didFailToSync
                notify()
            case .setSyncing:
                target.state = .syncing
                notify()
            case .setIdle:
                target.state = .idle
                notify()
            case .sync: sync()
            case .notify: notify()
            case .setContentsAvailable(let available): target.isContentsAvailable = available
            case .advance, .advanceToNextSync:
                let end = advanceEnd(for: operation)!
                fireTimers(until: end)
                now = Swift.max(now, end)
            case .appDidBecomeActive:
                syncer.resetPolicy()
                guard isRunning else { return }
                _ = catchUp()
            case .setActive(let active):
                setMonitor(isActive: active, connectivity: connectivity)
            case .setConnectivity(let connectivity):
                setMonitor(isActive: isActive, connectivity: connectivity)
            }
        }

        /// Timers fire only while running, in deadline order.
        mutating func fireTimers(until end: Duration) {
            while isRunning, let deadline = syncer.deadline, deadline <= end {
                now = Swift.max(now, deadline)
                syncer.deadline = nil
                syncer.purpose = nil
                syncAndRearm()
            }
        }

        /// A change of the monitor: pausing stops the timer (the deadline stays); resuming resets
        /// the policy, then catches up or arms the timer for the time left; any other change only
        /// changes `isWaitingForNetwork`.
        mutating func setMonitor(isActive: Bool, connectivity: NetworkConnectivity) {
            let wasRunning = isRunning
            self.isActive = isActive
            self.connectivity = connectivity
            syncer.isRunning = isRunning
            guard !wasRunning, isRunning else { return }
            syncer.resetPolicy()
            guard target.state != .syncing, !catchUp(), let deadline = syncer.deadline else { return }
            requestedSleeps.append(Swift.max(deadline - now, .zero))
            // A deadline that passed while paused: the timer fires at once.
            fireTimers(until: now)
        }

        /// Syncs at once after a failure that may be retried (but schedules the retry for the
        /// failure's `Retry-After` deadline when that is still ahead), or a success whose refresh
        /// fell due or whose target needs a sync; returns whether it did either.
        mutating func catchUp() -> Bool {
            switch target.state {
            case .didFailToSync where retryAllowed:
                if let hintDeadline = syncer.retryAfterDeadline, hintDeadline > now {
                    if let delay = syncer.schedule(after: hintDeadline - now, for: .retry, now: now) {
                        requestedSleeps.append(delay)
                    }
                    return true
                }
            case .didSyncSuccessfully where target.needsSync || syncer.deadline.map { $0 <= now } == true: break
            default: return false
            }
            syncer.deadline = nil
            syncer.purpose = nil
            syncAndRearm()
            return true
        }

        mutating func notify() {
            if let delay = syncer.notified(
                in: target.state,
                retryAllowed: retryAllowed,
                hint: hint,
                startedBySyncer: isSyncerSyncing,
                now: now
            ) {
                requestedSleeps.append(delay)
            }
        }

        mutating func sync() {
            target.syncCount += 1
            guard target.state != .syncing else { return }
            target.errorCode = nil
            target.retryAfter = nil
            target.state = .syncing
            notify()
        }

        /// The syncer's sync; if it moved nothing, the timer is armed again for the current state.
        mutating func syncAndRearm() {
            let before = target.state
            isSyncerSyncing = true
            switch syncPolicy {
            case .sync:
                sync()
            case .syncIfNeeded:
                target.syncIfNeededCount += 1
                if target.needsSync { sync() }
            }
            isSyncerSyncing = false
            guard target.state == before, syncer.deadline == nil else { return }
            if let delay = syncer.arm(for: target.state, retryAllowed: retryAllowed, hint: hint, now: now) {
                requestedSleeps.append(delay)
            }
        }
    }
}
