import Testing

@testable import LoadableSyncer

/// A policy that answers from scripts: each retry or refresh delay asked for is the next one of
/// its script, and the last one repeats (`nil` for an empty script).
struct ScriptedPolicy: TimeoutPolicy {
    /// The retry delays still to answer; the last one repeats.
    var retries: [Duration?]
    /// The refresh delays still to answer; the last one repeats.
    var refreshes: [Duration?]

    /// A policy whose retry delay is always `retry` and refresh delay always `refresh`.
    init(retry: Duration?, refresh: Duration? = nil) {
        self.init(retries: [retry], refreshes: [refresh])
    }

    /// A policy that answers with `retries` after failures and `refreshes` after successes.
    init(retries: [Duration?], refreshes: [Duration?] = [nil]) {
        self.retries = retries
        self.refreshes = refreshes
    }

    /// The next delay of the retry or the refresh script.
    mutating func nextTimeout(afterFailure: Bool) -> Duration? {
        afterFailure ? Self.next(&retries) : Self.next(&refreshes)
    }

    /// Does nothing: the scripts go on.
    mutating func reset() {}

    /// The first delay of `script`, removed unless it is the last one.
    private static func next(_ script: inout [Duration?]) -> Duration? {
        guard let first = script.first else { return nil }
        if script.count > 1 { script.removeFirst() }
        return first
    }
}

@Suite struct SyncerStateMachineTests {
    typealias Action = SyncerStateMachine.Action

    /// One input of the machine.
    enum Input: Sendable, CustomStringConvertible {
        /// The loadable notified in this state; `retry` is what `shouldRetry` says.
        case state(LoadableState, retry: Bool = true)
        /// The timer fired.
        case timer
        /// The syncer carried out a sync action and the loadable is in this state.
        case handled(LoadableState)
        /// The app became active.
        case active(retry: Bool = true)
        /// The loadable failed with an error whose `Retry-After` hint is `hint`.
        case failed(hint: Duration?, retry: Bool = true)
        /// The activity monitor paused the syncer (inactive or offline).
        case pause
        /// The activity monitor lets the syncer sync again.
        case resume(retry: Bool = true)

        var description: String {
            switch self {
            case .state(let state, let retry): retry ? "\(state)" : "\(state) (no retry)"
            case .timer: "timer"
            case .handled(let state): "handled(\(state))"
            case .active(let retry): retry ? "active" : "active (no retry)"
            case .failed(let hint, let retry):
                "failed(hint: \(hint.map { "\($0)" } ?? "nil"))\(retry ? "" : " (no retry)")"
            case .pause: "pause"
            case .resume(let retry): retry ? "resume" : "resume (no retry)"
            }
        }
    }

    /// One scenario: inputs at given times and the actions each one must produce.
    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var period: Duration? = nil
        var syncPolicy: LoadableSyncer.SyncPolicy = .sync
        /// The policy, when not a `BackoffTimeoutPolicy` with `period`, min 1 s and max 8 s.
        var policy: ScriptedPolicy? = nil
        /// The machine's `maxRetryAfter`, when not the default (1 hour).
        var maxRetryAfter: Duration? = nil
        var steps: [(at: Duration, input: Input, expected: [Action])]

        var testDescription: String { name }
    }

    static let s = Duration.seconds
    static let rootTwo = Duration.seconds(1) * 2.0.squareRoot()
    static let rows: [Row] = [
        Row(
            name: "an idle loadable is left alone (the first sync is not the syncer's job)",
            steps: [(.zero, .state(.idle), [])]
        ),
        Row(
            name: "a failure schedules a retry after min",
            steps: [(.zero, .state(.syncing), []), (.zero, .state(.didFailToSync), [.schedule(after: s(1))])]
        ),
        Row(
            name: "repeated failure notifications neither advance the backoff nor re-arm",
            steps: [
                (.zero, .state(.didFailToSync), [.schedule(after: s(1))]),
                (.zero, .state(.didFailToSync), []),
                (.zero, .state(.didFailToSync), []),
            ]
        ),
        Row(
            name: "retry, fail again: the backoff grows",
            steps: [
                (.zero, .state(.didFailToSync), [.schedule(after: s(1))]),
                (s(1), .timer, [.sync]),
                (s(1), .state(.syncing), []),
                (s(1), .handled(.syncing), []),
                (s(2), .state(.didFailToSync), [.schedule(after: rootTwo)]),
            ]
        ),
        Row(
            name: "a failure that must not be retried arms nothing",
            steps: [(.zero, .state(.didFailToSync, retry: false), [])]
        ),
        Row(
            name: "success cancels a pending retry timer when there is no period",
            steps: [
                (.zero, .state(.didFailToSync), [.schedule(after: s(1))]),
                (.zero, .state(.didSyncSuccessfully), [.cancelTimer]),
            ]
        ),
        Row(
            name: "success schedules a refresh after the period and resets the backoff",
            period: s(60),
            steps: [
                (.zero, .state(.didFailToSync), [.schedule(after: s(1))]),
                (.zero, .state(.didSyncSuccessfully), [.schedule(after: s(60))]),
                (s(10), .state(.didSyncSuccessfully), []),
                (s(20), .state(.didFailToSync), [.schedule(after: s(1))]),
            ]
        ),
        Row(
            name: "syncing or idle cancels the timer",
            period: s(60),
            steps: [
                (.zero, .state(.didSyncSuccessfully), [.schedule(after: s(60))]),
                (.zero, .state(.syncing), [.cancelTimer]),
                (.zero, .state(.didFailToSync), [.schedule(after: s(1))]),
                (.zero, .state(.idle), [.cancelTimer]),
            ]
        ),
        Row(
            name: "with syncIfNeeded a refresh that syncs nothing is armed again",
            period: s(60),
            syncPolicy: .syncIfNeeded,
            steps: [
                (.zero, .state(.didSyncSuccessfully), [.schedule(after: s(60))]),
                (s(60), .timer, [.syncIfNeeded]),
                (s(60), .handled(.didSyncSuccessfully), [.schedule(after: s(60))]),
            ]
        ),
        Row(
            name: "with syncIfNeeded a retry that syncs nothing tries again later instead of stalling",
            syncPolicy: .syncIfNeeded,
            steps: [
                (.zero, .state(.didFailToSync), [.schedule(after: s(1))]),
                (s(1), .timer, [.syncIfNeeded]),
                (s(1), .handled(.didFailToSync), [.schedule(after: rootTwo)]),
            ]
        ),
        Row(
            name: "a sync whose notification is still queued counts as the transition",
            steps: [
                (.zero, .state(.didFailToSync), [.schedule(after: s(1))]),
                (s(1), .timer, [.sync]),
                (s(1), .handled(.syncing), []),
                (s(1), .state(.syncing), []),
            ]
        ),
        Row(
            name: "app became active after a failure: sync at once, backoff starts over",
            steps: [
                (.zero, .state(.didFailToSync), [.schedule(after: s(1))]),
                (s(1), .timer, [.sync]),
                (s(1), .state(.syncing), []),
                (s(2), .state(.didFailToSync), [.schedule(after: rootTwo)]),
                (s(2), .active(), [.cancelTimer, .sync]),
                (s(2), .state(.syncing), []),
                (s(3), .state(.didFailToSync), [.schedule(after: s(1))]),
            ]
        ),
        Row(
            name: "app became active after a failure that must not be retried: nothing",
            steps: [(.zero, .state(.didFailToSync, retry: false), []), (.zero, .active(retry: false), [])]
        ),
        Row(
            name: "app became active with a refresh not yet due: nothing",
            period: s(60),
            steps: [(.zero, .state(.didSyncSuccessfully), [.schedule(after: s(60))]), (s(59), .active(), [])]
        ),
        Row(
            name: "app became active with an overdue refresh: sync at once",
            period: s(60),
            steps: [
                (.zero, .state(.didSyncSuccessfully), [.schedule(after: s(60))]),
                (s(61), .active(), [.cancelTimer, .sync]),
            ]
        ),
        Row(
            name: "app became active while idle or syncing: nothing",
            steps: [
                (.zero, .state(.idle), []), (.zero, .active(), []), (.zero, .state(.syncing), []),
                (.zero, .active(), []),
            ]
        ),
        Row(
            name: "a timer that is not armed does nothing when it fires",
            steps: [(.zero, .state(.idle), []), (s(5), .timer, [])]
        ),
    ]

    @Test("Syncer decisions", arguments: rows)
    func decisions(row: Row) {
        run(row)
    }

    /// The rule for zero delays from a custom policy: "at once, once".
    static let zeroDelayRows: [Row] = [
        Row(
            name: "a zero retry syncs at once, once: a zero delay right after the sync it started is not honoured",
            policy: ScriptedPolicy(retry: .zero),
            steps: [
                (.zero, .state(.syncing), []),
                (.zero, .state(.didFailToSync), [.schedule(after: .zero)]),
                (.zero, .timer, [.sync]),
                (.zero, .state(.syncing), []),
                (.zero, .state(.didFailToSync), []),
                (.zero, .handled(.didFailToSync), []),
                (s(100), .timer, []),
            ]
        ),
        Row(
            name: "after a zero retry was not honoured, a sync by someone else gets one zero retry again",
            policy: ScriptedPolicy(retry: .zero),
            steps: [
                (.zero, .state(.didFailToSync), [.schedule(after: .zero)]),
                (.zero, .timer, [.sync]),
                (.zero, .state(.syncing), []),
                (.zero, .state(.didFailToSync), []),
                (s(5), .state(.syncing), []),
                (s(5), .state(.didFailToSync), [.schedule(after: .zero)]),
                (s(5), .timer, [.sync]),
                (s(5), .state(.syncing), []),
                (s(5), .state(.didFailToSync), []),
            ]
        ),
        Row(
            name: "a zero refresh period refreshes at once, once",
            policy: ScriptedPolicy(retry: nil, refresh: .zero),
            steps: [
                (.zero, .state(.didSyncSuccessfully), [.schedule(after: .zero)]),
                (.zero, .timer, [.sync]),
                (.zero, .state(.syncing), []),
                (.zero, .state(.didSyncSuccessfully), []),
                (s(5), .state(.syncing), []),
                (s(5), .state(.didSyncSuccessfully), [.schedule(after: .zero)]),
            ]
        ),
        Row(
            name: "a zero retry, then a zero refresh right after its sync: the refresh is not honoured",
            policy: ScriptedPolicy(retry: .zero, refresh: .zero),
            steps: [
                (.zero, .state(.didFailToSync), [.schedule(after: .zero)]),
                (.zero, .timer, [.sync]),
                (.zero, .state(.syncing), []),
                (.zero, .state(.didSyncSuccessfully), []),
            ]
        ),
        Row(
            name: "after a zero retry was not honoured, a transition to success is honoured",
            policy: ScriptedPolicy(retry: .zero, refresh: .zero),
            steps: [
                (.zero, .state(.didFailToSync), [.schedule(after: .zero)]),
                (.zero, .timer, [.sync]),
                (.zero, .state(.syncing), []),
                (.zero, .state(.didFailToSync), []),
                (s(5), .state(.didSyncSuccessfully), [.schedule(after: .zero)]),
            ]
        ),
        Row(
            name: "a non-zero delay in between makes a zero delay good again",
            policy: ScriptedPolicy(retries: [.zero, s(5), .zero]),
            steps: [
                (.zero, .state(.didFailToSync), [.schedule(after: .zero)]),
                (.zero, .timer, [.sync]),
                (.zero, .state(.syncing), []),
                (.zero, .state(.didFailToSync), [.schedule(after: s(5))]),
                (s(5), .timer, [.sync]),
                (s(5), .state(.syncing), []),
                (s(5), .state(.didFailToSync), [.schedule(after: .zero)]),
                (s(5), .timer, [.sync]),
                (s(5), .state(.syncing), []),
                (s(5), .state(.didFailToSync), []),
            ]
        ),
        Row(
            name:
                "after a zero retry was not honoured, app activation syncs at once and its failure gets one zero retry",
            policy: ScriptedPolicy(retry: .zero),
            steps: [
                (.zero, .state(.didFailToSync), [.schedule(after: .zero)]),
                (.zero, .timer, [.sync]),
                (.zero, .state(.syncing), []),
                (.zero, .state(.didFailToSync), []),
                (s(5), .active(), [.sync]),
                (s(5), .state(.syncing), []),
                (s(5), .state(.didFailToSync), [.schedule(after: .zero)]),
                (s(5), .timer, [.sync]),
                (s(5), .state(.syncing), []),
                (s(5), .state(.didFailToSync), []),
            ]
        ),
        Row(
            name: "with syncIfNeeded a zero retry that syncs nothing is not armed again at once",
            syncPolicy: .syncIfNeeded,
            policy: ScriptedPolicy(retry: .zero),
            steps: [
                (.zero, .state(.didFailToSync), [.schedule(after: .zero)]),
                (.zero, .timer, [.syncIfNeeded]),
                (.zero, .handled(.didFailToSync), []),
            ]
        ),
        Row(
            name: "a zero retry whose sync the loadable reports late (still syncing when handled) is not honoured",
            policy: ScriptedPolicy(retry: .zero),
            steps: [
                (.zero, .state(.didFailToSync), [.schedule(after: .zero)]),
                (.zero, .timer, [.sync]),
                (.zero, .handled(.syncing), []),
                (s(3), .state(.didFailToSync), []),
            ]
        ),
    ]

    @Test("Syncer decisions for zero delays: at once, once", arguments: zeroDelayRows)
    func zeroDelayDecisions(row: Row) {
        run(row)
    }

    /// The rule of `Retry-After` as a deadline: a catch-up (resuming, app activation) resets the
    /// backoff but never retries a failure before its time plus its hint (capped by
    /// `maxRetryAfter`); it is scheduled for that moment instead.
    static let retryAfterRows: [Row] = [
        Row(
            name: "a trip to the background before the hint's deadline: the catch-up is scheduled for the deadline",
            steps: [
                (.zero, .state(.syncing), []),
                (.zero, .failed(hint: s(600)), [.schedule(after: s(600))]),
                (s(10), .pause, [.cancelTimer]),
                (s(20), .resume(), [.schedule(after: s(580))]),
                (s(600), .timer, [.sync]),
            ]
        ),
        Row(
            name: "app activation before the hint's deadline: the retry waits for the deadline",
            steps: [
                (.zero, .failed(hint: s(600)), [.schedule(after: s(600))]),
                (s(100), .active(), [.schedule(after: s(500))]),
            ]
        ),
        Row(
            name: "a failure while paused remembers its hint: resuming before the deadline schedules it",
            steps: [
                (.zero, .pause, []),
                (.zero, .state(.syncing), []),
                (s(5), .failed(hint: s(120)), []),
                (s(15), .resume(), [.schedule(after: s(110))]),
                (s(125), .timer, [.sync]),
            ]
        ),
        Row(
            name: "resuming at or after the hint's deadline syncs at once",
            steps: [
                (.zero, .failed(hint: s(60)), [.schedule(after: s(60))]),
                (s(1), .pause, [.cancelTimer]),
                (s(60), .resume(), [.cancelTimer, .sync]),
            ]
        ),
        Row(
            name: "the deadline is capped by maxRetryAfter",
            maxRetryAfter: s(60),
            steps: [
                (.zero, .failed(hint: s(600)), [.schedule(after: s(60))]),
                (s(10), .pause, [.cancelTimer]),
                (s(20), .resume(), [.schedule(after: s(40))]),
            ]
        ),
        Row(
            name:
                "a catch-up resets the backoff: after the deadline's retry fails without a hint, the retry comes after min",
            steps: [
                (.zero, .failed(hint: s(30)), [.schedule(after: s(30))]),
                (s(30), .timer, [.sync]),
                (s(30), .state(.syncing), []),
                (s(31), .failed(hint: s(30)), [.schedule(after: s(30))]),
                (s(32), .pause, [.cancelTimer]),
                (s(33), .resume(), [.schedule(after: s(28))]),
                (s(61), .timer, [.sync]),
                (s(61), .state(.syncing), []),
                (s(62), .failed(hint: nil), [.schedule(after: s(1))]),
            ]
        ),
        Row(
            name: "a failure without a hint still syncs at once on resume",
            steps: [
                (.zero, .failed(hint: nil), [.schedule(after: s(1))]),
                (.zero, .pause, [.cancelTimer]),
                (s(1) / 2, .resume(), [.cancelTimer, .sync]),
            ]
        ),
        Row(
            name: "a later failure without a hint forgets the earlier deadline",
            steps: [
                (.zero, .failed(hint: s(600)), [.schedule(after: s(600))]),
                (s(1), .state(.syncing), [.cancelTimer]),
                (s(2), .failed(hint: nil), [.schedule(after: rootTwo)]),
                (s(2), .pause, [.cancelTimer]),
                (s(3), .resume(), [.cancelTimer, .sync]),
            ]
        ),
        Row(
            name: "a zero or negative hint is no deadline",
            steps: [
                (.zero, .failed(hint: .zero), [.schedule(after: s(1))]),
                (.zero, .active(), [.cancelTimer, .sync]),
                (.zero, .state(.syncing), []),
                (.zero, .failed(hint: s(-5)), [.schedule(after: s(1))]),
                (.zero, .active(), [.cancelTimer, .sync]),
            ]
        ),
        Row(
            name: "a failure that may not be retried is not caught up, deadline or not",
            steps: [
                (.zero, .failed(hint: s(60), retry: false), []),
                (s(1), .pause, []),
                (s(2), .resume(retry: false), []),
                (s(100), .active(retry: false), []),
            ]
        ),
    ]

    @Test(
        "Syncer decisions for Retry-After: a catch-up never comes before the hint's deadline", arguments: retryAfterRows
    )
    func retryAfterDecisions(row: Row) {
        run(row)
    }

    @Test("nextSyncIn after a catch-up before the hint's deadline tells the time left to the deadline")
    func nextSyncInAfterCatchUpBeforeTheDeadline() {
        var machine = SyncerStateMachine(
            policy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(8)),
            syncPolicy: .sync,
            isPaused: true
        )
        _ = machine.stateChanged(to: .syncing, retryAllowed: true, now: .zero)
        _ = machine.stateChanged(to: .didFailToSync, retryAllowed: true, retryAfter: .seconds(600), now: .zero)
        #expect(machine.nextSyncIn(now: .seconds(10)) == nil)
        _ = machine.activityChanged(
            paused: false, offline: false, retryAllowed: true, needsSync: false, now: .seconds(10))
        #expect(machine.nextSyncIn(now: .seconds(10)) == .seconds(590))
    }

    @Test(
        "hasGivenUp: a failure that may not be retried, or one the policy has no retry left for, until the next transition or reset"
    )
    func givingUp() {
        var machine = SyncerStateMachine(policy: ScriptedPolicy(retries: [.seconds(1), nil]), syncPolicy: .sync)
        _ = machine.stateChanged(to: .didFailToSync, retryAllowed: false, now: .zero)
        #expect(machine.hasGivenUp)
        _ = machine.stateChanged(to: .syncing, retryAllowed: true, now: .zero)
        #expect(!machine.hasGivenUp)
        _ = machine.stateChanged(to: .didFailToSync, retryAllowed: true, now: .zero)
        #expect(!machine.hasGivenUp)  // a retry in 1 s
        _ = machine.timerFired(now: .seconds(1))
        _ = machine.stateChanged(to: .syncing, retryAllowed: true, now: .seconds(1))
        _ = machine.stateChanged(to: .didFailToSync, retryAllowed: true, now: .seconds(1))
        #expect(machine.hasGivenUp)  // the policy answered nil: out of retries
        _ = machine.appDidBecomeActive(retryAllowed: true, needsSync: false, now: .seconds(2))
        #expect(!machine.hasGivenUp)  // a new budget, and the catch-up syncs

        // Paused, a failure that may be retried is not given up: the catch-up retries it.
        var paused = SyncerStateMachine(
            policy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(8)),
            syncPolicy: .sync,
            isPaused: true
        )
        _ = paused.stateChanged(to: .didFailToSync, retryAllowed: true, now: .zero)
        #expect(!paused.hasGivenUp)
        _ = paused.stateChanged(to: .syncing, retryAllowed: true, now: .zero)
        _ = paused.stateChanged(to: .didFailToSync, retryAllowed: false, now: .zero)
        #expect(paused.hasGivenUp)
    }

    /// Feeds the row's inputs to a machine and checks the actions of each step.
    func run(_ row: Row) {
        let policy: any TimeoutPolicy =
            row.policy ?? BackoffTimeoutPolicy(period: row.period, min: .seconds(1), max: .seconds(8))
        var machine = SyncerStateMachine(policy: policy, syncPolicy: row.syncPolicy)
        if let maxRetryAfter = row.maxRetryAfter { machine.maxRetryAfter = maxRetryAfter }
        for (index, step) in row.steps.enumerated() {
            let actions: [Action]
            switch step.input {
            case .state(let state, let retry):
                actions = machine.stateChanged(to: state, retryAllowed: retry, now: step.at)
            case .timer:
                actions = machine.timerFired(now: step.at)
            case .handled(let state):
                actions = machine.syncRequestHandled(state: state, retryAllowed: true, now: step.at)
            case .active(let retry):
                actions = machine.appDidBecomeActive(retryAllowed: retry, needsSync: false, now: step.at)
            case .failed(let hint, let retry):
                actions = machine.stateChanged(to: .didFailToSync, retryAllowed: retry, retryAfter: hint, now: step.at)
            case .pause:
                actions = machine.activityChanged(
                    paused: true, offline: false, retryAllowed: true, needsSync: false, now: step.at)
            case .resume(let retry):
                actions = machine.activityChanged(
                    paused: false, offline: false, retryAllowed: retry, needsSync: false, now: step.at)
            }
            #expect(actions == step.expected, "step \(index) (\(step.input)) at \(step.at)")
        }
    }

    @Test("nextSyncIn counts down to the armed deadline and never goes below zero")
    func nextSyncIn() {
        var machine = SyncerStateMachine(
            policy: BackoffTimeoutPolicy(period: .seconds(60), min: .seconds(1), max: .seconds(8)),
            syncPolicy: .sync
        )
        #expect(machine.nextSyncIn(now: .zero) == nil)
        _ = machine.stateChanged(to: .didSyncSuccessfully, retryAllowed: true, now: .seconds(10))
        #expect(machine.nextSyncIn(now: .seconds(10)) == .seconds(60))
        #expect(machine.nextSyncIn(now: .seconds(40)) == .seconds(30))
        #expect(machine.nextSyncIn(now: .seconds(100)) == .zero)
        _ = machine.stateChanged(to: .syncing, retryAllowed: true, now: .seconds(100))
        #expect(machine.nextSyncIn(now: .seconds(100)) == nil)
    }

    @Test("A zero delay that is not honoured schedules nothing: nextSyncIn is nil, as for a nil delay")
    func refusedZeroDelayLeavesNothingScheduled() {
        var machine = SyncerStateMachine(policy: ScriptedPolicy(retry: .zero), syncPolicy: .sync)
        _ = machine.stateChanged(to: .didFailToSync, retryAllowed: true, now: .zero)
        #expect(machine.nextSyncIn(now: .zero) == .zero)
        let fired = machine.timerFired(now: .zero)
        #expect(fired == [.sync])
        _ = machine.stateChanged(to: .syncing, retryAllowed: true, now: .zero)
        let failed = machine.stateChanged(to: .didFailToSync, retryAllowed: true, now: .zero)
        #expect(failed == [])
        #expect(machine.nextSyncIn(now: .zero) == nil)
        #expect(machine.deadline == nil)
        #expect(machine.purpose == nil)
    }
}
