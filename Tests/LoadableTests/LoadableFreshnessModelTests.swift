import Loadable
import LoadableTestSupport
import LoadableTesting
import Testing

/// The model test of `LoadableModelTests`, extended with time and freshness: random operation
/// sequences (syncs, results, observers, `invalidate()`, leases, writes of contents, settings of
/// `maxAge`, `syncTimeout` and `slowSyncAfter`, and moves of a `ManualClock`) run against a
/// `Loadable` and against a reference model written from the freshness rules (the documentation of
/// `age`, `maxAge`, `isStale`, `invalidate()`, `isInUse`, `syncTimeout`, `slowSyncAfter`,
/// `lastError`, `setContents(_:)`). After every step, every
/// notification each observer saw, and the state, contents, error, `lastError`,
/// `consecutiveFailures`, `age`, `isStale`, `needsSync`, `isSlowSync`, `isInUse`, `hasObservers`
/// and the `doSync()` / `doCancelSync()` counts must match.
///
/// Time: the model keeps its own `now`, moved only by `advance`. Timer-driven events (a timeout,
/// a slow sync, contents turning stale by age) happen only while the clock advances, each at its
/// deadline, in deadline order; one already due (a `maxAge` lowered below the age) happens at the
/// start of the next advance, at the current time. The model knows nothing of the loadable's one
/// timer (when it is armed, an early wake that re-arms): it predicts only what observers see.
/// (The harness reads when the timer is armed, only to move the clock one wake-up at a time; see
/// ``Real/advance(by:)``.)
///
/// Where the rules leave a choice, the model follows the documentation of `Loadable`:
/// `syncTimeout` and `slowSyncAfter` apply to syncs that begin after they are set (a sync keeps
/// the deadlines it began with), a sync entered through `setSyncing()` has no watchdog, and
/// `invalidate()` during a sync makes the contents stale at once ("invalidated since the last
/// confirmation") besides asking for one more sync.
@Suite("Loadable with time, invalidation and leases against a reference model")
@MainActor
struct LoadableFreshnessModelTests {
    typealias ModelError = LoadableModelTests.ModelError

    /// What an observer does when called: one of the Part 1 model's reactions, or an
    /// `invalidate()` from inside a notification.
    enum Reaction: Equatable, CustomStringConvertible {
        case plain(LoadableModelTests.Reaction)
        /// Invalidates when it sees `syncing` (at most `reactionLimit` times per observer).
        case invalidateOnSyncing
        /// Invalidates when it sees a success (at most `reactionLimit` times per observer).
        case invalidateOnSuccess

        var description: String {
            switch self {
            case .plain(let reaction): reaction.description
            case .invalidateOnSyncing: "invalidateOnSyncing"
            case .invalidateOnSuccess: "invalidateOnSuccess"
            }
        }
    }

    /// What the loadable's `doCancelSync()` does besides counting (a `cancelSync()` or a timeout
    /// calls it): nothing, or it ends the sync itself.
    enum CancelBehavior: Equatable, CustomStringConvertible {
        case keepSyncing, fail(Int), becomeIdle

        var description: String {
            switch self {
            case .keepSyncing: "keepSyncing"
            case .fail(let code): "fail(\(code))"
            case .becomeIdle: "becomeIdle"
            }
        }
    }

    /// One step of a sequence. Durations are whole seconds, so that ages and deadlines often meet
    /// exactly (an age equal to `maxAge` is stale).
    enum Operation: Equatable, CustomStringConvertible {
        case sync, syncIfNeeded, succeed(Int), succeedKeepingContents, fail(Int?), cancel, setIdle, setSyncing
        case notify, addObserver(Reaction), cancelObserver(Int), releaseObserver(Int)
        case invalidate, lease, releaseLease(Int), dropLease(Int)
        case advance(seconds: Int), setMaxAge(seconds: Int?), setSyncTimeout(seconds: Int?)
        case setSlowSyncAfter(seconds: Int?), setContents(Int), updateContents(adding: Int)
        case setCancelBehavior(CancelBehavior)

        var description: String {
            func seconds(_ value: Int?) -> String { value.map { "\($0)s" } ?? "nil" }
            return switch self {
            case .sync: "sync"
            case .syncIfNeeded: "syncIfNeeded"
            case .succeed(let value): "succeed(\(value))"
            case .succeedKeepingContents: "succeedKeepingContents"
            case .fail(let code): "fail(\(code.map(String.init) ?? "nil"))"
            case .cancel: "cancel"
            case .setIdle: "setIdle"
            case .setSyncing: "setSyncing"
            case .notify: "notify"
            case .addObserver(let reaction): "addObserver(\(reaction))"
            case .cancelObserver(let index): "cancelObserver(\(index))"
            case .releaseObserver(let index): "releaseObserver(\(index))"
            case .invalidate: "invalidate"
            case .lease: "lease"
            case .releaseLease(let index): "releaseLease(\(index))"
            case .dropLease(let index): "dropLease(\(index))"
            case .advance(let value): "advance(\(seconds(value)))"
            case .setMaxAge(let value): "maxAge=\(seconds(value))"
            case .setSyncTimeout(let value): "syncTimeout=\(seconds(value))"
            case .setSlowSyncAfter(let value): "slowSyncAfter=\(seconds(value))"
            case .setContents(let value): "setContents(\(value))"
            case .updateContents(let value): "updateContents(+\(value))"
            case .setCancelBehavior(let behavior): "doCancelSync=\(behavior)"
            }
        }
    }

    /// An error as the test tells them apart.
    enum Failure: Equatable, CustomStringConvertible {
        case code(Int), timedOut, other

        init?(_ error: (any Error)?) {
            guard let error else { return nil }
            if let error = error as? ModelError {
                self = .code(error.code)
            } else if let error = error as? LoadableError, error == .timedOut {
                self = .timedOut
            } else {
                self = .other
            }
        }

        var description: String {
            switch self {
            case .code(let code): "e\(code)"
            case .timedOut: "timedOut"
            case .other: "other"
            }
        }
    }

    /// One observation: who saw what.
    struct Seen: Equatable, CustomStringConvertible {
        var observer: Int
        var state: LoadableState
        var contents: Int?
        var error: Failure?
        var lastError: Failure?
        var failures: Int
        var isStale: Bool
        var isSlowSync: Bool
        var age: Duration?

        var description: String {
            var text = "#\(observer):\(state)/\(contents.map(String.init) ?? "-")"
            if let error { text += "/\(error)" }
            if let lastError { text += " last=\(lastError)" }
            if failures > 0 { text += " failures=\(failures)" }
            if isStale { text += " stale" }
            if isSlowSync { text += " slow" }
            if let age { text += " age=\(age)" }
            return text
        }
    }

    /// How often each timed or freshness event happened in the model over all sequences, to check
    /// that the sequences reach them.
    struct Coverage {
        var timeouts = 0
        var slowSyncs = 0
        var staleByAge = 0
        var syncsAfterInvalidation = 0
        var invalidationsInUse = 0
        var pendingSyncsDropped = 0
        var staleAtExactlyMaxAge = 0
    }

    // MARK: - The real thing

    /// A loadable on a manual clock whose `doSync()` only counts: the sequence finishes its syncs.
    @MainActor final class TimedLoadable: Loadable<Int> {
        private(set) var doSyncCount = 0
        private(set) var doCancelSyncCount = 0
        var cancelBehavior = CancelBehavior.keepSyncing

        init(contents: Int?, clock: ManualClock) {
            super.init(contents: contents, clock: clock)
        }

        override func doSync() { doSyncCount += 1 }

        override func doCancelSync() {
            doCancelSyncCount += 1
            switch cancelBehavior {
            case .keepSyncing: break
            case .fail(let code): setDidFailToSync(ModelError(code: code))
            case .becomeIdle: setIdle()
            }
        }
    }

    @MainActor final class Real {
        let clock = ManualClock()
        let loadable: TimedLoadable
        var tokens: [LoadableObservation?] = []
        var reactions: [Int] = []
        var addedChild: [Bool] = []
        var leases: [LoadableLease<TimedLoadable>?] = []
        var log: [Seen] = []

        init(contents: Int?) {
            loadable = TimedLoadable(contents: contents, clock: clock)
        }

        func seen(by observer: Int) -> Seen {
            Seen(
                observer: observer, state: loadable.loadableState, contents: loadable.contents,
                error: Failure(loadable.error), lastError: Failure(loadable.lastError),
                failures: loadable.consecutiveFailures, isStale: loadable.isStale, isSlowSync: loadable.isSlowSync,
                age: loadable.age)
        }

        /// Whether the observer at `index` may react once more, counting it if so.
        func mayReact(_ index: Int) -> Bool {
            guard reactions[index] < LoadableModelTests.reactionLimit else { return false }
            reactions[index] += 1
            return true
        }

        func add(_ reaction: Reaction) {
            let index = tokens.count
            tokens.append(nil)
            reactions.append(0)
            addedChild.append(false)
            tokens[index] = loadable.observe { [unowned self] _ in
                log.append(seen(by: index))
                let state = loadable.loadableState
                switch reaction {
                case .plain(.none): break
                case .plain(.syncOnFailure):
                    if state == .didFailToSync, mayReact(index) { loadable.sync() }
                case .plain(.cancelSelf):
                    tokens[index]?.cancel()
                case .plain(.addObserver):
                    if !addedChild[index] {
                        addedChild[index] = true
                        add(.plain(.none))
                    }
                case .plain(.cancelNext):
                    if index + 1 < tokens.count { tokens[index + 1]?.cancel() }
                case .plain(.cancelOnSyncing):
                    if state == .syncing, mayReact(index) { loadable.cancelSync() }
                case .invalidateOnSyncing:
                    if state == .syncing, mayReact(index) { loadable.invalidate() }
                case .invalidateOnSuccess:
                    if state == .didSyncSuccessfully, mayReact(index) { loadable.invalidate() }
                }
            }
        }

        /// Applies every operation but `advance` (see ``advance(by:)``), without suspending.
        func apply(_ operation: Operation) {
            switch operation {
            case .sync: loadable.sync()
            case .syncIfNeeded: loadable.syncIfNeeded()
            case .succeed(let value): loadable.setDidSyncSuccessfully(value)
            case .succeedKeepingContents: if loadable.contents != nil { loadable.setDidSyncSuccessfully() }
            case .fail(let code): loadable.setDidFailToSync(code.map(ModelError.init(code:)))
            case .cancel: loadable.cancelSync()
            case .setIdle: loadable.setIdle()
            case .setSyncing: loadable.setSyncing()
            case .notify: loadable.notifyDidChange()
            case .addObserver(let reaction): add(reaction)
            case .cancelObserver(let index): if index < tokens.count { tokens[index]?.cancel() }
            case .releaseObserver(let index): if index < tokens.count { tokens[index] = nil }
            case .invalidate: loadable.invalidate()
            case .lease: leases.append(loadable.lease())
            case .releaseLease(let index): if index < leases.count { leases[index]?.release() }
            case .dropLease(let index): if index < leases.count { leases[index] = nil }
            case .advance: preconditionFailure("advance(by:) moves the clock")
            case .setMaxAge(let seconds): loadable.maxAge = seconds.map { .seconds($0) }
            case .setSyncTimeout(let seconds): loadable.syncTimeout = seconds.map { .seconds($0) }
            case .setSlowSyncAfter(let seconds): loadable.slowSyncAfter = seconds.map { .seconds($0) }
            case .setContents(let value): loadable.setContents(value)
            case .updateContents(let value): loadable.updateContents { $0 += value }
            case .setCancelBehavior(let behavior): loadable.cancelBehavior = behavior
            }
        }

        /// When the loadable's one timer is armed to wake, as an instant of the clock (the
        /// loadable reads the clock from its zero: both were made together); `nil` when not armed.
        ///
        /// Package-internal: the harness moves the clock from one wake-up to the next with it. The
        /// model does not use it.
        var armedDeadline: ManualClock.Instant? {
            loadable.core.extras?.timerDeadline.map { ManualClock.Instant(offset: .nanoseconds($0)) }
        }

        /// Moves the clock on by `duration`, one wake-up of the loadable's timer at a time, so
        /// that every timer task sleeps from the time it was armed at.
        ///
        /// The timer task is a new `Task`: it may not have run (and slept) yet when the clock
        /// moves, and it would then sleep from the later time. So before each move this waits
        /// until the armed timer sleeps on the clock (or, already due, has fired), then lets
        /// `ManualClock.advance(to:)` wake it and run what it does.
        func advance(by duration: Duration) async {
            let end = clock.now.advanced(by: duration)
            for _ in 0..<1_000 {
                await letTimerSleep()
                guard let deadline = armedDeadline, deadline <= end else { break }
                await clock.advance(to: deadline)
            }
            await clock.advance(to: end)
        }

        /// Gives the main actor turns until the armed timer, if any, sleeps on the clock (it is the
        /// clock's only sleeper) or has fired.
        func letTimerSleep() async {
            for _ in 0..<100_000 {
                guard armedDeadline != nil, clock.pendingSleepCount == 0 else { return }
                await Task.yield()
            }
            Issue.record("the loadable's timer task neither slept nor fired")
        }
    }

    // MARK: - Running

    static func randomOperation(
        _ random: inout SeededRandomNumberGenerator, observerCount: Int, leaseCount: Int
    ) -> Operation {
        let reactions: [Reaction] = [
            .plain(.none), .plain(.none), .plain(.syncOnFailure), .plain(.cancelSelf), .plain(.addObserver),
            .plain(.cancelNext), .plain(.cancelOnSyncing), .invalidateOnSyncing, .invalidateOnSuccess,
        ]
        func number(below limit: Int) -> Int { Int(random.next() % UInt64(max(limit, 1))) }
        func coin() -> Bool { random.next() % 2 == 0 }
        /// A setting in whole seconds: `nil` one time in five.
        func setting(from lowest: Int) -> Int? { number(below: 5) == 0 ? nil : lowest + number(below: 6 - lowest) }
        switch random.next() % 30 {
        case 0, 1, 2: return .sync
        case 3: return .syncIfNeeded
        case 4, 5: return .succeed(number(below: 100))
        case 6: return .succeedKeepingContents
        case 7: return .fail(number(below: 3) == 0 ? nil : number(below: 100))
        case 8: return .cancel
        case 9: return .setIdle
        case 10: return .setSyncing
        case 11: return .notify
        case 12: return .addObserver(reactions[number(below: reactions.count)])
        case 13:
            let index = number(below: observerCount)
            return coin() ? .cancelObserver(index) : .releaseObserver(index)
        case 14, 15, 16: return .invalidate
        case 17: return .lease
        case 18:
            let index = number(below: leaseCount)
            return coin() ? .releaseLease(index) : .dropLease(index)
        case 19, 20, 21, 22: return .advance(seconds: number(below: 5) == 0 ? number(below: 12) : number(below: 4))
        case 23: return .setMaxAge(seconds: setting(from: 0))
        case 24: return .setSyncTimeout(seconds: setting(from: 1))
        case 25: return .setSlowSyncAfter(seconds: setting(from: 1))
        case 26: return .setContents(number(below: 100))
        case 27: return .updateContents(adding: 1 + number(below: 9))
        case 28:
            let behaviors: [CancelBehavior] = [.keepSyncing, .fail(number(below: 100)), .becomeIdle]
            return .setCancelBehavior(behaviors[number(below: behaviors.count)])
        default: return .syncIfNeeded
        }
    }

    /// Compares the loadable with the model after a step; returns a description of the first
    /// difference, or `nil`.
    static func difference(_ model: Model, _ real: Real) -> String? {
        let loadable = real.loadable
        if model.log != real.log {
            // From the first notification that differs.
            let first = zip(model.log, real.log).prefix { $0 == $1 }.count
            return "observers saw \(real.log[first...]),\n  model says \(model.log[first...])"
        }
        if model.state != loadable.loadableState || model.contents != loadable.contents
            || model.error != Failure(loadable.error)
        {
            return "state \(loadable.snapshot), model \(model.state)/\(model.contents ?? -1)/\(model.error as Any)"
        }
        let checks: [(String, String, String)] = [
            ("lastError", "\(Failure(loadable.lastError) as Any)", "\(model.lastError as Any)"),
            ("consecutiveFailures", "\(loadable.consecutiveFailures)", "\(model.consecutiveFailures)"),
            ("age", "\(loadable.age as Any)", "\(model.age as Any)"),
            ("isStale", "\(loadable.isStale)", "\(model.isStale)"),
            ("needsSync", "\(loadable.needsSync)", "\(model.needsSync)"),
            ("isSlowSync", "\(loadable.isSlowSync)", "\(model.isSlowSync)"),
            ("isInUse", "\(loadable.isInUse)", "\(model.isInUse)"),
            ("hasObservers", "\(loadable.hasObservers)", "\(model.hasObservers)"),
            ("doSync calls", "\(loadable.doSyncCount)", "\(model.doSyncCount)"),
            ("doCancelSync calls", "\(loadable.doCancelSyncCount)", "\(model.doCancelSyncCount)"),
            ("clock", "\(real.clock.now.offset)", "\(model.now)"),
        ]
        for (name, actual, expected) in checks where actual != expected {
            return "\(name) \(actual), model says \(expected)"
        }
        return nil
    }

    /// Runs `operations` on a loadable created with `initialContents`; returns a description of
    /// the first mismatch, or `nil`. `coverage` receives the model's event counts.
    static func mismatch(
        in operations: [Operation], initialContents: Int?, coverage: inout Coverage
    ) async -> String? {
        let model = Model(contents: initialContents)
        let real = Real(contents: initialContents)
        defer { coverage = model.coverage }
        if let difference = difference(model, real) { return "at start: \(difference)" }
        for (step, operation) in operations.enumerated() {
            model.apply(operation)
            if case .advance(let seconds) = operation {
                await real.advance(by: .seconds(seconds))
            } else {
                real.apply(operation)
            }
            if let difference = difference(model, real) { return "step \(step) \(operation): \(difference)" }
        }
        // Releasing the leases and the loadable ends every observation.
        real.leases.removeAll()
        weak let weakLoadable = real.loadable
        let tokens = real.tokens
        _ = consume real
        if weakLoadable != nil { return "the loadable outlived its owner" }
        if tokens.contains(where: { $0?.isActive == true }) { return "a token stayed active after release" }
        return nil
    }

    static func mismatch(in operations: [Operation], initialContents: Int?) async -> String? {
        var coverage = Coverage()
        return await mismatch(in: operations, initialContents: initialContents, coverage: &coverage)
    }

    @Test("1,500 random sequences with time, invalidation, leases and writes match the model")
    func randomSequences() async {
        var total = Coverage()
        let matched = await checkRandomSequences(count: 1_500, baseSeed: 0xF2E5_0A6E) { seed in
            var random = SeededRandomNumberGenerator(seed: seed)
            let initialContents = random.next() % 4 == 0 ? Int(random.next() % 100) : nil
            let length = Int(random.next() % 50) + 1
            var operations: [Operation] = []
            var observerCount = 0
            var leaseCount = 0
            for _ in 0..<length {
                let operation = Self.randomOperation(&random, observerCount: observerCount, leaseCount: leaseCount)
                if case .addObserver = operation { observerCount += 1 }
                if case .lease = operation { leaseCount += 1 }
                operations.append(operation)
            }
            return (initialContents, operations)
        } mismatch: { initialContents, operations in
            var coverage = Coverage()
            let failure = await Self.mismatch(in: operations, initialContents: initialContents, coverage: &coverage)
            total.timeouts += coverage.timeouts
            total.slowSyncs += coverage.slowSyncs
            total.staleByAge += coverage.staleByAge
            total.syncsAfterInvalidation += coverage.syncsAfterInvalidation
            total.invalidationsInUse += coverage.invalidationsInUse
            total.pendingSyncsDropped += coverage.pendingSyncsDropped
            total.staleAtExactlyMaxAge += coverage.staleAtExactlyMaxAge
            return failure
        } describeSetup: { initialContents in
            "initial contents \(initialContents.map(String.init) ?? "nil")"
        }
        guard matched else { return }
        // The sequences reach every timed and freshness event, many times.
        #expect(total.timeouts >= 50, "timeouts: \(total.timeouts)")
        #expect(total.slowSyncs >= 50, "slow syncs: \(total.slowSyncs)")
        #expect(total.staleByAge >= 50, "stale-by-age notifications: \(total.staleByAge)")
        #expect(total.syncsAfterInvalidation >= 50, "syncs after an invalidation: \(total.syncsAfterInvalidation)")
        #expect(total.invalidationsInUse >= 50, "invalidations in use: \(total.invalidationsInUse)")
        #expect(total.pendingSyncsDropped >= 50, "pending syncs dropped: \(total.pendingSyncsDropped)")
        #expect(total.staleAtExactlyMaxAge >= 50, "age exactly maxAge: \(total.staleAtExactlyMaxAge)")
    }
}
