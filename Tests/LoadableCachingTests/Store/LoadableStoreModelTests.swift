import LoadableCaching
import LoadableTestSupport
import LoadableTesting
import Testing

/// Model-based randomized tests of `LoadableStore`: random operation sequences (leases taken,
/// released and dropped, `syncIfNeeded()` through a lease, syncs finished, moves of a
/// `ManualClock`, `invalidate(where:)`, `invalidateAll()`, `remove(_:)`, `removeAll()`,
/// `setContents(_:for:)`) run against a store of counting loadables and against a reference model
/// written from the rules of `LoadableStore` (entries, retention on the clock, `maxRetained`
/// least recently released first, invalidation, removal, writes of contents, `syncingCount`).
///
/// Configurations: retention 0, 1 s or 10 s, `maxRetained` `nil`, 0, 1 or 3; keys `0..<5`. Moves
/// of the clock are often exactly the retention, 1 ms either side of it, or to 1 ms before, at or
/// after the next expiry. The clock moves from one expiry instant to the next (see
/// ``Real/advance(to:expectsTimer:)``).
///
/// After every step (and at every expiry instant inside a move of the clock) the test compares
/// `count`, `syncingCount`, `peek(_:)` of every key (which entry, by its serial number), the
/// number of `make` calls, every lease handle, and for every loadable ever made whether it is
/// still alive (a weak reference) and, if so, its state, contents, `isStale`, `isInUse` and its
/// `doSync()` / `doCancelSync()` counts.
///
/// The model keeps entries by serial number: an entry's loadable lives while the store has the
/// entry or a lease handle (released or not) holds it. Its loadable follows the rules of
/// `Loadable` without observers and without `maxAge`: stale without contents or after
/// `invalidate()` (until a success or a write), `invalidate()` during a sync asks for exactly one
/// more sync after it, in use it syncs at once; `cancelSync()` goes back to the state before the
/// sync and drops a pending one.
@Suite("LoadableStore against a reference model")
@MainActor
struct LoadableStoreModelTests {
    /// The keys of the sequences: few, so that leases of one key meet.
    nonisolated static let keys = 0..<5

    /// How a store of one sequence is made.
    struct Configuration: CustomStringConvertible {
        var retentionMilliseconds: Int64
        var maxRetained: Int?

        var description: String {
            "retention \(retentionMilliseconds) ms, maxRetained \(maxRetained.map(String.init) ?? "nil")"
        }
    }

    /// One step of a sequence. A `pick` chooses among what exists when the step runs (the held
    /// lease handles, or the syncing loadables), modulo their number, as the model sees them.
    enum Operation: Equatable, CustomStringConvertible {
        case lease(key: Int)
        /// Leases the key of a retained entry, or of one that expired and was not made again.
        case leaseRetainedOrExpired(pick: Int)
        /// Releases a held lease not yet released (or, with none, a released one once more).
        case release(pick: Int)
        /// Drops a held lease handle without `release()`: the lease's `deinit` ends it.
        case drop(pick: Int)
        case syncIfNeeded(pick: Int)
        case succeed(pick: Int, value: Int)
        case fail(pick: Int)
        case advance(milliseconds: Int64)
        /// Moves the clock to `offset` ms from the next expiry (of the least recently released
        /// retained entry), or by the retention plus `offset` when nothing is retained.
        case advanceToNextExpiry(offset: Int64)
        case invalidate(keys: [Int])
        case invalidateAll
        case remove(key: Int)
        case removeAll
        case setContents(Int, key: Int)

        var description: String {
            switch self {
            case .lease(let key): "lease(\(key))"
            case .leaseRetainedOrExpired(let pick): "leaseRetainedOrExpired(@\(pick))"
            case .release(let pick): "release(@\(pick))"
            case .drop(let pick): "drop(@\(pick))"
            case .syncIfNeeded(let pick): "syncIfNeeded(@\(pick))"
            case .succeed(let pick, let value): "succeed(@\(pick), \(value))"
            case .fail(let pick): "fail(@\(pick))"
            case .advance(let milliseconds): "advance(\(milliseconds)ms)"
            case .advanceToNextExpiry(let offset): "advance(nextExpiry\(offset < 0 ? "" : "+")\(offset)ms)"
            case .invalidate(let keys): "invalidate(\(keys))"
            case .invalidateAll: "invalidateAll"
            case .remove(let key): "remove(\(key))"
            case .removeAll: "removeAll"
            case .setContents(let value, let key): "setContents(\(value), for: \(key))"
            }
        }
    }

    /// An operation other than `advance` with its picks resolved: lease slots and serial numbers.
    enum Action: Equatable, CustomStringConvertible {
        case nothing
        case lease(key: Int)
        case release(slot: Int)
        case drop(slot: Int)
        case syncIfNeeded(slot: Int)
        case succeed(serial: Int, value: Int)
        case fail(serial: Int)
        case invalidate(keys: [Int])
        case invalidateAll
        case remove(key: Int)
        case removeAll
        case setContents(Int, key: Int)

        var description: String {
            switch self {
            case .nothing: "nothing"
            case .lease(let key): "lease(\(key))"
            case .release(let slot): "release(lease \(slot))"
            case .drop(let slot): "drop(lease \(slot))"
            case .syncIfNeeded(let slot): "syncIfNeeded(lease \(slot))"
            case .succeed(let serial, let value): "succeed(#\(serial), \(value))"
            case .fail(let serial): "fail(#\(serial))"
            case .invalidate(let keys): "invalidate(\(keys))"
            case .invalidateAll: "invalidateAll"
            case .remove(let key): "remove(\(key))"
            case .removeAll: "removeAll"
            case .setContents(let value, let key): "setContents(\(value), for: \(key))"
            }
        }
    }

    struct SyncFailed: Error {}

    /// How often each rule was exercised in the model over all sequences, to check that the
    /// sequences reach them.
    struct Coverage {
        var reusedRetained = 0
        var reusedOneMillisecondBeforeExpiry = 0
        var expired = 0
        var expiredAtEndOfMove = 0
        var keptOneMillisecondBeforeExpiry = 0
        var remadeAtExpiryInstant = 0
        var remadeOneMillisecondAfterExpiry = 0
        var expiredWhileSyncing = 0
        var evicted = 0
        var droppedAtOnce = 0
        var joinedRunningSync = 0
        var staleWhileRetained = 0
        var syncedOnInvalidation = 0
        var pendingSyncsRestarted = 0
        var madeBySetContents = 0
        var removedWhileLeased = 0
        var removedWhileSyncing = 0
        var releasedTwice = 0
        var ignoredOnReleasedLease = 0

        mutating func add(_ other: Coverage) {
            reusedRetained += other.reusedRetained
            reusedOneMillisecondBeforeExpiry += other.reusedOneMillisecondBeforeExpiry
            expired += other.expired
            expiredAtEndOfMove += other.expiredAtEndOfMove
            keptOneMillisecondBeforeExpiry += other.keptOneMillisecondBeforeExpiry
            remadeAtExpiryInstant += other.remadeAtExpiryInstant
            remadeOneMillisecondAfterExpiry += other.remadeOneMillisecondAfterExpiry
            expiredWhileSyncing += other.expiredWhileSyncing
            evicted += other.evicted
            droppedAtOnce += other.droppedAtOnce
            joinedRunningSync += other.joinedRunningSync
            staleWhileRetained += other.staleWhileRetained
            syncedOnInvalidation += other.syncedOnInvalidation
            pendingSyncsRestarted += other.pendingSyncsRestarted
            madeBySetContents += other.madeBySetContents
            removedWhileLeased += other.removedWhileLeased
            removedWhileSyncing += other.removedWhileSyncing
            releasedTwice += other.releasedTwice
            ignoredOnReleasedLease += other.ignoredOnReleasedLease
        }

        /// Every counter with its name, for the check that each was reached.
        var counters: [(String, Int)] {
            [
                ("retained entries leased again", reusedRetained),
                ("leased again 1 ms before expiry", reusedOneMillisecondBeforeExpiry),
                ("expiries", expired),
                ("expiries at the end of a move", expiredAtEndOfMove),
                ("kept 1 ms before expiry", keptOneMillisecondBeforeExpiry),
                ("new entries at the expiry instant", remadeAtExpiryInstant),
                ("new entries 1 ms after expiry", remadeOneMillisecondAfterExpiry),
                ("expiries while syncing", expiredWhileSyncing),
                ("maxRetained evictions", evicted),
                ("drops at the last release", droppedAtOnce),
                ("syncIfNeeded joining a running sync", joinedRunningSync),
                ("retained entries made stale", staleWhileRetained),
                ("leased entries synced by invalidation", syncedOnInvalidation),
                ("pending syncs restarted", pendingSyncsRestarted),
                ("entries made by setContents", madeBySetContents),
                ("removals while leased", removedWhileLeased),
                ("removals while syncing", removedWhileSyncing),
                ("second releases", releasedTwice),
                ("syncIfNeeded on a released lease", ignoredOnReleasedLease),
            ]
        }
    }

    // MARK: - The real thing

    /// A loadable whose `doSync()` and `doCancelSync()` only count: the sequence finishes its syncs.
    @MainActor final class CountingLoadable: Loadable<Int> {
        let serial: Int
        let key: Int
        private(set) var doSyncCount = 0
        private(set) var doCancelSyncCount = 0

        init(serial: Int, key: Int, clock: ManualClock) {
            self.serial = serial
            self.key = key
            super.init(clock: clock)
        }

        override func doSync() { doSyncCount += 1 }
        override func doCancelSync() { doCancelSyncCount += 1 }
    }

    /// The store's `make`: numbers the loadables it makes and keeps a weak reference to each.
    @MainActor final class Maker {
        struct WeakLoadable {
            weak var value: CountingLoadable?
        }

        let clock: ManualClock
        var made: [WeakLoadable] = []

        init(clock: ManualClock) { self.clock = clock }

        func make(_ key: Int) -> CountingLoadable {
            let loadable = CountingLoadable(serial: made.count, key: key, clock: clock)
            made.append(WeakLoadable(value: loadable))
            return loadable
        }
    }

    @MainActor final class Real {
        let clock: ManualClock
        let maker: Maker
        let store: LoadableStore<Int, CountingLoadable>
        var leases: [LoadableLease<CountingLoadable>?] = []

        init(_ configuration: Configuration) {
            let clock = ManualClock()
            let maker = Maker(clock: clock)
            self.clock = clock
            self.maker = maker
            store = LoadableStore(
                retention: .milliseconds(configuration.retentionMilliseconds),
                maxRetained: configuration.maxRetained,
                clock: clock
            ) { key in
                maker.make(key)
            }
        }

        func apply(_ action: Action) {
            switch action {
            case .nothing: break
            case .lease(let key): leases.append(store.lease(key))
            case .release(let slot): leases[slot]?.release()
            case .drop(let slot): leases[slot] = nil
            case .syncIfNeeded(let slot): leases[slot]?.syncIfNeeded()
            case .succeed(let serial, let value): maker.made[serial].value?.setDidSyncSuccessfully(value)
            case .fail(let serial): maker.made[serial].value?.setDidFailToSync(SyncFailed())
            case .invalidate(let keys): store.invalidate { keys.contains($0) }
            case .invalidateAll: store.invalidateAll()
            case .remove(let key): store.remove(key)
            case .removeAll: store.removeAll()
            case .setContents(let value, let key): store.setContents(value, for: key)
            }
        }

        /// Moves the clock to `instant` (milliseconds).
        ///
        /// The store's timer is a task that sleeps on the clock: armed but not yet asleep when the
        /// clock moves, it would sleep from the later time and fire late. So when the model has
        /// retained entries (`expectsTimer`), this first gives the main actor turns until a
        /// sleeper is pending, then `waitForSleepers()`; with none, a store that failed to arm
        /// its timer is reported instead of waited for forever. Moves go from one expiry instant
        /// to the next (see ``mismatch(in:configuration:coverage:trace:)``), so each expiry
        /// happens at its instant and the timer re-armed there sleeps from it.
        func advance(to instant: Int64, expectsTimer: Bool) async -> String? {
            if expectsTimer {
                var turns = 0
                while clock.pendingSleepCount == 0, turns < 1_000 {
                    await Task.yield()
                    turns += 1
                }
                guard clock.pendingSleepCount > 0 else {
                    return "no timer sleeps on the clock while the model has retained entries"
                }
                await clock.waitForSleepers()
            }
            await clock.advance(to: ManualClock.Instant(offset: .milliseconds(instant)))
            return nil
        }

        func describe(_ loadable: CountingLoadable) -> String {
            LoadableStoreModelTests.describeLoadable(
                key: loadable.key, state: loadable.loadableState, contents: loadable.contents,
                isStale: loadable.isStale, isInUse: loadable.isInUse, doSyncCount: loadable.doSyncCount,
                doCancelSyncCount: loadable.doCancelSyncCount)
        }
    }

    // MARK: - Comparing

    /// Compares the store with the model; returns a description of the first difference, or `nil`.
    static func difference(_ model: Model, _ real: Real) -> String? {
        let store = real.store
        let checks: [(String, String, String)] = [
            ("clock", "\(real.clock.now.offset)", "\(Duration.milliseconds(model.now))"),
            ("make calls", "\(real.maker.made.count)", "\(model.entries.count)"),
            ("count", "\(store.count)", "\(model.store.count)"),
            ("syncingCount", "\(store.syncingCount)", "\(model.syncingCount)"),
        ]
        for (name, actual, expected) in checks where actual != expected {
            return "\(name) \(actual), model says \(expected)"
        }
        for key in keys {
            let actual = store.peek(key).map { "#\($0.serial)" } ?? "nil"
            let expected = model.store[key].map { "#\($0)" } ?? "nil"
            if actual != expected { return "peek(\(key)) \(actual), model says \(expected)" }
        }
        for serial in model.entries.indices {
            let loadable = real.maker.made[serial].value
            let isAlive = model.isAlive(serial)
            if (loadable != nil) != isAlive {
                let actual = loadable == nil ? "gone" : "alive"
                return "loadable #\(serial) is \(actual), model says \(isAlive ? "alive" : "gone")"
            }
            guard let loadable else { continue }
            let actual = real.describe(loadable)
            let expected = model.describe(serial)
            if actual != expected { return "loadable #\(serial) \(actual), model says \(expected)" }
        }
        for slot in model.leases.indices {
            let actual = real.leases[slot].map { "#\($0.loadable.serial)\($0.isReleased ? " released" : "")" }
            let expected = model.leases[slot].map { "#\($0.serial)\($0.isReleased ? " released" : "")" }
            if actual != expected { return "lease \(slot) \(actual ?? "dropped"), model says \(expected ?? "dropped")" }
        }
        return nil
    }

    /// Runs `operations` on a store made with `configuration` and on the model; returns a
    /// description of the first mismatch, or `nil`. `coverage` receives the model's counts;
    /// `trace` each step with its picks resolved.
    static func mismatch(
        in operations: [Operation],
        configuration: Configuration,
        coverage: inout Coverage,
        trace: ((String) -> Void)? = nil
    ) async -> String? {
        let model = Model(configuration)
        let real = Real(configuration)
        defer { coverage = model.coverage }
        if let difference = difference(model, real) { return "at start: \(difference)" }
        for (step, operation) in operations.enumerated() {
            guard let milliseconds = model.milliseconds(of: operation) else {
                let action = model.resolve(operation)
                trace?("\(step) \(action)")
                model.apply(action)
                real.apply(action)
                if let difference = difference(model, real) { return "step \(step) \(action): \(difference)" }
                continue
            }
            let end = model.now + milliseconds
            trace?("\(step) advance to \(end) ms")
            var instants = model.expiryInstants(through: end)
            if instants.last != end { instants.append(end) }
            for instant in instants {
                let expectsTimer = !model.retained.isEmpty
                model.advance(to: instant)
                if let problem = await real.advance(to: instant, expectsTimer: expectsTimer) {
                    return "step \(step) \(operation), at \(instant) ms: \(problem)"
                }
                if let difference = difference(model, real) {
                    return "step \(step) \(operation), at \(instant) ms: \(difference)"
                }
            }
            model.noteEndOfMove()
        }
        // With the handles and the store gone, every loadable goes.
        real.leases.removeAll()
        let maker = real.maker
        weak let weakStore = real.store
        _ = consume real
        if weakStore != nil { return "the store outlived its owner" }
        if let alive = maker.made.firstIndex(where: { $0.value != nil }) {
            return "loadable #\(alive) outlived the store and its leases"
        }
        return nil
    }

    static func mismatch(in operations: [Operation], configuration: Configuration) async -> String? {
        var coverage = Coverage()
        return await mismatch(in: operations, configuration: configuration, coverage: &coverage)
    }

    // MARK: - Running

    static func randomConfiguration(_ random: inout SeededRandomNumberGenerator) -> Configuration {
        let retentions: [Int64] = [0, 1_000, 10_000]
        let maxima: [Int?] = [nil, 0, 1, 3]
        return Configuration(
            retentionMilliseconds: retentions[Int(random.next() % UInt64(retentions.count))],
            maxRetained: maxima[Int(random.next() % UInt64(maxima.count))])
    }

    static func randomOperation(
        _ random: inout SeededRandomNumberGenerator, configuration: Configuration
    ) -> Operation {
        func number(below limit: Int) -> Int { Int(random.next() % UInt64(max(limit, 1))) }
        func key() -> Int { number(below: keys.count) }
        func pick() -> Int { number(below: 64) }
        /// A move of the clock: often exactly the retention, 1 ms either side of it, a part of
        /// it (so that sums meet it), zero or 1 ms; else anything up to twice the retention.
        func milliseconds() -> Int64 {
            let retention = configuration.retentionMilliseconds
            let choices: [Int64] = [
                0, 1, retention, retention, max(retention - 1, 0), retention + 1, retention / 2, retention / 4,
            ]
            if number(below: 4) == 0 { return Int64(number(below: Int(max(retention, 1_000) * 2) + 1)) }
            return choices[number(below: choices.count)]
        }
        switch random.next() % 48 {
        case 0..<9: return .lease(key: key())
        case 9..<13: return .release(pick: pick())
        case 13..<16: return .drop(pick: pick())
        case 16..<21: return .syncIfNeeded(pick: pick())
        case 21..<25: return .succeed(pick: pick(), value: number(below: 100))
        case 25..<27: return .fail(pick: pick())
        case 27..<33: return .advance(milliseconds: milliseconds())
        case 33..<37: return .advanceToNextExpiry(offset: Int64(number(below: 3)) - 1)
        case 37, 38: return .invalidate(keys: keys.filter { _ in random.next() % 2 == 0 })
        case 39: return .invalidateAll
        case 40, 41: return .remove(key: key())
        case 42: return .removeAll
        case 43, 44, 45: return .setContents(number(below: 100), key: key())
        default: return .leaseRetainedOrExpired(pick: pick())
        }
    }

    @Test("400 random sequences of leases, releases, syncs, clock moves, invalidations and removals match the model")
    func randomSequences() async {
        var total = Coverage()
        let matched = await checkRandomSequences(count: 400, baseSeed: 0x5702_E5A0) { seed in
            var random = SeededRandomNumberGenerator(seed: seed)
            let configuration = Self.randomConfiguration(&random)
            let length = 10 + Int(random.next() % 51)
            return (
                configuration, (0..<length).map { _ in Self.randomOperation(&random, configuration: configuration) }
            )
        } tracing: { configuration, operations, trace in
            var coverage = Coverage()
            let failure = await Self.mismatch(
                in: operations, configuration: configuration, coverage: &coverage, trace: trace)
            if trace == nil { total.add(coverage) }
            return failure
        }
        guard matched else { return }
        // The sequences reach every rule, many times.
        for (name, count) in total.counters {
            #expect(count >= 10, "\(name): \(count)")
        }
    }

    /// How a loadable reads, the same for the model and the store.
    static func describeLoadable(
        key: Int, state: LoadableState, contents: Int?, isStale: Bool, isInUse: Bool, doSyncCount: Int,
        doCancelSyncCount: Int
    ) -> String {
        var text = "key \(key) \(state)/\(contents.map(String.init) ?? "-")"
        if isStale { text += " stale" }
        if isInUse { text += " inUse" }
        text += " doSync×\(doSyncCount)"
        if doCancelSyncCount > 0 { text += " doCancelSync×\(doCancelSyncCount)" }
        return text
    }
}
