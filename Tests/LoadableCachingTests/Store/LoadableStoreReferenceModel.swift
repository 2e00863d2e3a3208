import LoadableCaching
import LoadableTestSupport
import LoadableTesting
import Testing

// The reference model that `LoadableStoreModelTests` runs every sequence against, written from
// the rules of `LoadableStore` alone.
extension LoadableStoreModelTests {
    @MainActor final class Model {
        /// An entry and its loadable, by serial number (the order of `make` calls).
        struct Entry {
            var key: Int
            // The loadable.
            var state = LoadableState.idle
            var stateBeforeSync = LoadableState.idle
            var contents: Int?
            var isInvalidated = false
            /// `invalidate()` during the running sync: one more sync follows it.
            var isSyncPending = false
            var doSyncCount = 0
            var doCancelSyncCount = 0
            // The entry.
            var isInStore = true
            var leaseCount = 0
            /// When a retained entry expires, in milliseconds on the clock; `nil` when not retained.
            var expiresAt: Int64?

            init(key: Int) { self.key = key }

            var isStale: Bool { contents == nil || isInvalidated }

            var needsSync: Bool {
                switch state {
                case .idle, .didFailToSync: true
                case .syncing, .didSyncSuccessfully: isStale
                }
            }

            var isInUse: Bool { leaseCount > 0 }
        }

        struct Lease {
            var serial: Int
            var isReleased = false
        }

        let retention: Int64
        let maxRetained: Int?
        /// Milliseconds since the store was made.
        var now: Int64 = 0
        /// Every entry ever made, by serial number: the number of `make` calls is its count.
        var entries: [Entry] = []
        /// The store's entries: key → serial.
        var store: [Int: Int] = [:]
        /// Retained serials, least recently released first.
        var retained: [Int] = []
        /// The lease handles the sequence holds; `nil` once dropped.
        var leases: [Lease?] = []
        /// When each key's last entry expired.
        var lastExpiry: [Int: Int64] = [:]
        var coverage = Coverage()

        init(_ configuration: Configuration) {
            retention = configuration.retentionMilliseconds
            maxRetained = configuration.maxRetained
        }

        /// Whether the loadable of `serial` is still referenced: by the store or by a handle.
        func isAlive(_ serial: Int) -> Bool {
            entries[serial].isInStore || leases.contains { $0?.serial == serial }
        }

        var syncingCount: Int { store.values.filter { entries[$0].state == .syncing }.count }

        // MARK: Resolving picks

        func resolve(_ operation: Operation) -> Action {
            func heldSlot(_ pick: Int) -> Int? {
                let held = leases.indices.filter { leases[$0] != nil }
                return held.isEmpty ? nil : held[pick % held.count]
            }
            func unreleasedSlot(_ pick: Int) -> Int? {
                let unreleased = leases.indices.filter { leases[$0]?.isReleased == false }
                return unreleased.isEmpty ? heldSlot(pick) : unreleased[pick % unreleased.count]
            }
            func retainedOrExpiredKey(_ pick: Int) -> Int? {
                let candidates =
                    retained.map { entries[$0].key } + lastExpiry.keys.sorted().filter { store[$0] == nil }
                return candidates.isEmpty ? nil : candidates[pick % candidates.count]
            }
            func syncingSerial(_ pick: Int) -> Int? {
                let syncing = entries.indices.filter { entries[$0].state == .syncing && isAlive($0) }
                return syncing.isEmpty ? nil : syncing[pick % syncing.count]
            }
            switch operation {
            case .lease(let key): return .lease(key: key)
            case .leaseRetainedOrExpired(let pick):
                return retainedOrExpiredKey(pick).map { .lease(key: $0) } ?? .nothing
            case .release(let pick): return unreleasedSlot(pick).map { .release(slot: $0) } ?? .nothing
            case .drop(let pick): return heldSlot(pick).map { .drop(slot: $0) } ?? .nothing
            case .syncIfNeeded(let pick): return heldSlot(pick).map { .syncIfNeeded(slot: $0) } ?? .nothing
            case .succeed(let pick, let value):
                return syncingSerial(pick).map { .succeed(serial: $0, value: value) } ?? .nothing
            case .fail(let pick): return syncingSerial(pick).map { .fail(serial: $0) } ?? .nothing
            case .advance, .advanceToNextExpiry: preconditionFailure("a move of the clock has no action")
            case .invalidate(let keys): return .invalidate(keys: keys)
            case .invalidateAll: return .invalidateAll
            case .remove(let key): return .remove(key: key)
            case .removeAll: return .removeAll
            case .setContents(let value, let key): return .setContents(value, key: key)
            }
        }

        // MARK: The loadable

        func sync(_ serial: Int) {
            guard entries[serial].state != .syncing else { return }
            entries[serial].stateBeforeSync = entries[serial].state
            entries[serial].state = .syncing
            entries[serial].doSyncCount += 1
        }

        func cancelSync(_ serial: Int) {
            guard entries[serial].state == .syncing else { return }
            entries[serial].isSyncPending = false
            entries[serial].doCancelSyncCount += 1
            entries[serial].state = entries[serial].stateBeforeSync
        }

        func finishSync(_ serial: Int, with contents: Int?) {
            guard entries[serial].state == .syncing else { return }
            if let contents {
                entries[serial].state = .didSyncSuccessfully
                entries[serial].contents = contents
                entries[serial].isInvalidated = false
            } else {
                entries[serial].state = .didFailToSync
            }
            if entries[serial].isSyncPending {
                // The sync that was asked for during this one begins at once.
                entries[serial].isSyncPending = false
                entries[serial].isInvalidated = true
                coverage.pendingSyncsRestarted += 1
                sync(serial)
            }
        }

        func invalidate(_ serial: Int) {
            if entries[serial].state == .syncing {
                entries[serial].isInvalidated = true
                entries[serial].isSyncPending = true
                return
            }
            entries[serial].isInvalidated = true
            if entries[serial].isInUse {
                coverage.syncedOnInvalidation += 1
                sync(serial)
            } else {
                coverage.staleWhileRetained += 1
            }
        }

        func write(_ serial: Int, _ contents: Int) {
            entries[serial].contents = contents
            entries[serial].isInvalidated = false
        }

        // MARK: The store

        func make(_ key: Int) -> Int {
            if let expiry = lastExpiry[key] {
                if expiry == now { coverage.remadeAtExpiryInstant += 1 }
                if expiry == now - 1 { coverage.remadeOneMillisecondAfterExpiry += 1 }
            }
            entries.append(Entry(key: key))
            store[key] = entries.count - 1
            return entries.count - 1
        }

        func beginLease(_ serial: Int) {
            entries[serial].leaseCount += 1
            guard entries[serial].leaseCount == 1, let expiresAt = entries[serial].expiresAt else { return }
            coverage.reusedRetained += 1
            if expiresAt == now + 1 { coverage.reusedOneMillisecondBeforeExpiry += 1 }
            retained.removeAll { $0 == serial }
            entries[serial].expiresAt = nil
        }

        func endLease(_ serial: Int) {
            entries[serial].leaseCount -= 1
            guard entries[serial].leaseCount == 0, entries[serial].isInStore else { return }
            becameUnused(serial)
        }

        /// An entry in the store without leases: retained, or dropped when nothing is kept; the
        /// least recently released retained entry goes beyond `maxRetained`.
        func becameUnused(_ serial: Int) {
            guard retention > 0, maxRetained != 0 else {
                coverage.droppedAtOnce += 1
                drop(serial)
                return
            }
            entries[serial].expiresAt = now + retention
            retained.append(serial)
            if let maxRetained, retained.count > maxRetained {
                coverage.evicted += 1
                drop(retained[0])
            }
        }

        func drop(_ serial: Int) {
            retained.removeAll { $0 == serial }
            entries[serial].expiresAt = nil
            store[entries[serial].key] = nil
            entries[serial].isInStore = false
            cancelSync(serial)
        }

        // MARK: Time

        /// How far `operation` moves the clock; `nil` for an operation that does not.
        func milliseconds(of operation: Operation) -> Int64? {
            switch operation {
            case .advance(let milliseconds): return milliseconds
            case .advanceToNextExpiry(let offset):
                let next = retained.first.flatMap { entries[$0].expiresAt } ?? now + retention
                return max(next + offset - now, 0)
            default: return nil
            }
        }

        /// The distinct expiry instants of the retained entries up to `end`, in order.
        func expiryInstants(through end: Int64) -> [Int64] {
            Set(retained.compactMap { entries[$0].expiresAt }.filter { $0 <= end }).sorted()
        }

        /// Moves the clock to `instant` (not before `now`), dropping the entries that expire by then.
        func advance(to instant: Int64) {
            now = instant
            while let head = retained.first, let expiresAt = entries[head].expiresAt, expiresAt <= now {
                coverage.expired += 1
                if entries[head].state == .syncing { coverage.expiredWhileSyncing += 1 }
                lastExpiry[entries[head].key] = expiresAt
                drop(head)
            }
        }

        /// Counts what a move of the clock that ended now reached.
        func noteEndOfMove() {
            if lastExpiry.values.contains(now) { coverage.expiredAtEndOfMove += 1 }
            if retained.contains(where: { entries[$0].expiresAt == now + 1 }) {
                coverage.keptOneMillisecondBeforeExpiry += 1
            }
        }

        // MARK: Actions

        func apply(_ action: Action) {
            switch action {
            case .nothing: break
            case .lease(let key):
                let serial = store[key] ?? make(key)
                leases.append(Lease(serial: serial))
                beginLease(serial)
            case .release(let slot):
                guard let lease = leases[slot] else { return }
                if lease.isReleased {
                    coverage.releasedTwice += 1
                    return
                }
                leases[slot]?.isReleased = true
                endLease(lease.serial)
            case .drop(let slot):
                guard let lease = leases[slot] else { return }
                leases[slot] = nil
                if !lease.isReleased { endLease(lease.serial) }
            case .syncIfNeeded(let slot):
                guard let lease = leases[slot] else { return }
                if lease.isReleased {
                    coverage.ignoredOnReleasedLease += 1
                    return
                }
                if entries[lease.serial].state == .syncing { coverage.joinedRunningSync += 1 }
                if entries[lease.serial].needsSync { sync(lease.serial) }
            case .succeed(let serial, let value): finishSync(serial, with: value)
            case .fail(let serial): finishSync(serial, with: nil)
            case .invalidate(let keys):
                for key in keys { if let serial = store[key] { invalidate(serial) } }
            case .invalidateAll:
                for serial in store.values { invalidate(serial) }
            case .remove(let key):
                guard let serial = store[key] else { return }
                if entries[serial].isInUse { coverage.removedWhileLeased += 1 }
                if entries[serial].state == .syncing { coverage.removedWhileSyncing += 1 }
                drop(serial)
            case .removeAll:
                for serial in store.values { drop(serial) }
            case .setContents(let value, let key):
                if let serial = store[key] {
                    write(serial, value)
                    return
                }
                guard retention > 0, maxRetained != 0 else { return }
                coverage.madeBySetContents += 1
                let serial = make(key)
                write(serial, value)
                becameUnused(serial)
            }
        }

        /// How the loadable of `serial` reads, to compare with the real one.
        func describe(_ serial: Int) -> String {
            let entry = entries[serial]
            return LoadableStoreModelTests.describeLoadable(
                key: entry.key, state: entry.state, contents: entry.contents, isStale: entry.isStale,
                isInUse: entry.isInUse, doSyncCount: entry.doSyncCount, doCancelSyncCount: entry.doCancelSyncCount)
        }
    }
}
