import Loadable
import LoadableTestSupport
import LoadableTesting
import Testing

// The reference model that `LoadableFreshnessModelTests` runs every sequence against, written
// from the freshness rules alone.
extension LoadableFreshnessModelTests {
    @MainActor final class Model {
        struct Observer {
            var id: Int
            var reaction: Reaction
            var isActive = true
            var reactions = 0
            var addedChild = false
        }

        struct Lease {
            var isAlive = true
            var isReleased = false
        }

        // Time and settings.
        var now = Duration.zero
        var maxAge: Duration?
        var syncTimeout: Duration?
        var slowSyncAfter: Duration?
        var cancelBehavior = CancelBehavior.keepSyncing

        // The loadable.
        var state = LoadableState.idle
        var contents: Int?
        var lastError: Failure?
        var consecutiveFailures = 0
        /// Where a cancelled sync goes back to.
        var stateBeforeSync = LoadableState.idle
        /// When the contents were last confirmed (a success or a write); `nil`: never.
        var confirmedAt: Duration?
        var isInvalidated = false
        /// `invalidate()` during the running sync: one more sync follows it.
        var isSyncPending = false
        var isSlowSync = false
        /// Observers were told that the contents turned stale by age (once per confirmation).
        var isStaleAnnounced = false
        /// The running sync's watchdog deadlines, from the settings when it began.
        var syncTimeoutAt: Duration?
        var slowSyncAt: Duration?
        /// Between moving to syncing and calling `doSync()`: see `LoadableModelTests.Model`.
        var awaitingDoSync = false

        // Observers, leases and what they saw.
        var observers: [Observer] = []
        var leases: [Lease] = []
        var log: [Seen] = []
        var doSyncCount = 0
        var doCancelSyncCount = 0
        var notifying = false
        var queued = false
        var nextID = 0
        var coverage = Coverage()

        init(contents: Int?) {
            self.contents = contents
        }

        var error: Failure? { state == .didFailToSync ? lastError : nil }
        var age: Duration? { confirmedAt.map { now - $0 } }

        var isStale: Bool {
            if contents == nil || isInvalidated { return true }
            guard let maxAge else { return false }
            guard let age else { return true }
            return age >= maxAge
        }

        var needsSync: Bool {
            switch state {
            case .idle, .didFailToSync: true
            case .syncing, .didSyncSuccessfully: isStale
            }
        }

        /// A lease object alive (released or not) observes the loadable to follow it.
        // A lease follows its loadable only while the lease itself is observed (never, here).
        var hasObservers: Bool { observers.contains(where: \.isActive) }
        var isInUse: Bool { leases.contains { $0.isAlive && !$0.isReleased } }

        // MARK: Notifications

        func notify() {
            if notifying {
                queued = true
                return
            }
            notifying = true
            repeat {
                queued = false
                let end = observers.count
                var index = 0
                while index < end {
                    if observers[index].isActive { call(index) }
                    index += 1
                }
            } while queued
            notifying = false
        }

        func seen(by observer: Int) -> Seen {
            Seen(
                observer: observer, state: state, contents: contents, error: error, lastError: lastError,
                failures: consecutiveFailures, isStale: isStale, isSlowSync: isSlowSync, age: age)
        }

        /// Whether the observer at `index` may react once more, counting it if so.
        func mayReact(_ index: Int) -> Bool {
            guard observers[index].reactions < LoadableModelTests.reactionLimit else { return false }
            observers[index].reactions += 1
            return true
        }

        func call(_ index: Int) {
            log.append(seen(by: observers[index].id))
            switch observers[index].reaction {
            case .plain(.none): break
            case .plain(.syncOnFailure):
                if state == .didFailToSync, mayReact(index) { sync() }
            case .plain(.cancelSelf):
                observers[index].isActive = false
            case .plain(.addObserver):
                if !observers[index].addedChild {
                    observers[index].addedChild = true
                    add(.plain(.none))
                }
            case .plain(.cancelNext):
                if index + 1 < observers.count { observers[index + 1].isActive = false }
            case .plain(.cancelOnSyncing):
                if state == .syncing, mayReact(index) { cancel() }
            case .invalidateOnSyncing:
                if state == .syncing, mayReact(index) { invalidate() }
            case .invalidateOnSuccess:
                if state == .didSyncSuccessfully, mayReact(index) { invalidate() }
            }
        }

        func add(_ reaction: Reaction) {
            observers.append(Observer(id: nextID, reaction: reaction))
            nextID += 1
        }

        // MARK: Syncing

        /// The contents are confirmed now: the age restarts, an invalidation is forgotten.
        func confirm() {
            confirmedAt = now
            isInvalidated = false
            isStaleAnnounced = false
        }

        /// `setDidSyncSuccessfully`, `setDidFailToSync`, `setIdle`, `setSyncing`: the new state
        /// and result, one notification. A sync ended while one more is pending begins that one
        /// in the same notification.
        func set(_ newState: LoadableState, failure: Failure? = nil, contents newContents: Int? = nil) {
            // Equal contents notify nothing: the same state (not a failure, which replaces its
            // error), no new contents, and no invalidation or stale announcement forgotten. A
            // success still confirms.
            if newState == state, newState != .didFailToSync, newContents == nil || newContents == contents,
                newState != .didSyncSuccessfully || (!isInvalidated && !isStaleAnnounced)
            {
                if newState == .didSyncSuccessfully { confirm() }
                return
            }
            let endsSync = state == .syncing && newState != .syncing
            if newState == .syncing, state != .syncing {
                // `setSyncing()`: a sync the loadable did not begin, without a watchdog.
                stateBeforeSync = state
                syncTimeoutAt = nil
                slowSyncAt = nil
            }
            if newState != .syncing { awaitingDoSync = false }
            state = newState
            if let newContents { contents = newContents }
            switch newState {
            case .didFailToSync:
                lastError = failure
                consecutiveFailures += 1
            case .didSyncSuccessfully:
                lastError = nil
                consecutiveFailures = 0
                confirm()
            case .idle, .syncing: break
            }
            if endsSync {
                isSlowSync = false
                if isSyncPending {
                    isSyncPending = false
                    isInvalidated = true
                    coverage.syncsAfterInvalidation += 1
                    beginSync()
                    return
                }
            }
            notify()
        }

        func sync() {
            guard state != .syncing else { return }
            beginSync()
        }

        /// Moves to syncing (the error cleared, `lastError` kept), notifies, then calls `doSync()`
        /// unless an observer cancelled meanwhile.
        func beginSync() {
            stateBeforeSync = state
            state = .syncing
            syncTimeoutAt = syncTimeout.map { now + $0 }
            slowSyncAt = slowSyncAfter.map { now + $0 }
            awaitingDoSync = true
            notify()
            guard state == .syncing, awaitingDoSync else { return }
            awaitingDoSync = false
            doSyncCount += 1
        }

        func cancel() {
            guard state == .syncing else { return }
            if isSyncPending { coverage.pendingSyncsDropped += 1 }
            isSyncPending = false
            if !awaitingDoSync {
                doCancelSync()
                guard state == .syncing else { return }
            }
            // The sync cancelled here may be one that an observer began during `doCancelSync()`:
            // a sync pending after it is dropped too.
            state = stateBeforeSync
            awaitingDoSync = false
            isSlowSync = false
            isSyncPending = false
            notify()
        }

        func doCancelSync() {
            doCancelSyncCount += 1
            switch cancelBehavior {
            case .keepSyncing: break
            case .fail(let code): set(.didFailToSync, failure: .code(code))
            case .becomeIdle: set(.idle)
            }
        }

        func invalidate() {
            if state == .syncing {
                isSyncPending = true
                isInvalidated = true
                return
            }
            isInvalidated = true
            if isInUse {
                coverage.invalidationsInUse += 1
                sync()
            } else {
                notify()
            }
        }

        /// `setContents` (`comparing`: equal contents, with nothing forgotten, notify nothing) and
        /// `updateContents` (always a change).
        func write(_ value: Int, comparing: Bool) {
            let changesNothing = comparing && value == contents && !isInvalidated && !isStaleAnnounced
            contents = value
            confirm()
            if !changesNothing { notify() }
        }

        // MARK: Time

        /// When the contents turn stale by age with someone to tell; `nil` when that is not due.
        var staleByAgeDeadline: Duration? {
            guard let maxAge, hasObservers, let confirmedAt, !isInvalidated, !isStaleAnnounced else { return nil }
            return confirmedAt + maxAge
        }

        /// The earliest timed event: the running sync's timeout or slow mark, or the contents
        /// turning stale by age.
        var nextDeadline: Duration? {
            var deadlines: [Duration] = []
            if state == .syncing {
                if let syncTimeoutAt { deadlines.append(syncTimeoutAt) }
                if let slowSyncAt, !isSlowSync { deadlines.append(slowSyncAt) }
            }
            if let staleByAgeDeadline { deadlines.append(staleByAgeDeadline) }
            return deadlines.min()
        }

        /// Moves time on, handling every event due by the end, each at its time.
        func advance(by duration: Duration) {
            let end = now + duration
            var handled = 0
            while let next = nextDeadline, next <= end, handled < 1_000 {
                now = max(now, next)
                handleDueEvents()
                handled += 1
            }
            now = end
        }

        /// What is due now: a timeout (which ends the sync), else a slow mark; then the contents
        /// turning stale by age.
        func handleDueEvents() {
            if state == .syncing {
                if let syncTimeoutAt, now >= syncTimeoutAt {
                    coverage.timeouts += 1
                    if !awaitingDoSync {
                        doCancelSync()
                        guard state == .syncing else { return }
                    }
                    set(.didFailToSync, failure: .timedOut)
                    return
                }
                if let slowSyncAt, !isSlowSync, now >= slowSyncAt {
                    coverage.slowSyncs += 1
                    isSlowSync = true
                    notify()
                }
            }
            if let staleByAgeDeadline, now >= staleByAgeDeadline {
                coverage.staleByAge += 1
                isStaleAnnounced = true
                notify()
            }
        }

        // MARK: Operations

        func apply(_ operation: Operation) {
            switch operation {
            case .sync: sync()
            case .syncIfNeeded: if needsSync { sync() }
            case .succeed(let value): set(.didSyncSuccessfully, contents: value)
            case .succeedKeepingContents: if contents != nil { set(.didSyncSuccessfully) }
            case .fail(let code): set(.didFailToSync, failure: code.map(Failure.code))
            case .cancel: cancel()
            case .setIdle: set(.idle)
            case .setSyncing: set(.syncing)
            case .notify: notify()
            case .addObserver(let reaction): add(reaction)
            case .cancelObserver(let index), .releaseObserver(let index):
                if index < observers.count { observers[index].isActive = false }
            case .invalidate: invalidate()
            case .lease: leases.append(Lease())
            case .releaseLease(let index): if index < leases.count { leases[index].isReleased = true }
            case .dropLease(let index): if index < leases.count { leases[index].isAlive = false }
            case .advance(let seconds): advance(by: .seconds(seconds))
            case .setMaxAge(let seconds): maxAge = seconds.map { .seconds($0) }
            case .setSyncTimeout(let seconds): syncTimeout = seconds.map { .seconds($0) }
            case .setSlowSyncAfter(let seconds): slowSyncAfter = seconds.map { .seconds($0) }
            case .setContents(let value): write(value, comparing: true)
            case .updateContents(let value): if let contents { write(contents + value, comparing: false) }
            case .setCancelBehavior(let behavior): cancelBehavior = behavior
            }
            if let maxAge, let age, age == maxAge { coverage.staleAtExactlyMaxAge += 1 }
        }
    }
}
