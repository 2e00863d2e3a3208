import Loadable
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// A loadable whose syncs the test finishes by hand; counts `doSync()`.
@MainActor
private final class ModelLoadable: Loadable<Int> {
    var syncs = 0

    override func doSync() {
        syncs += 1
    }
}

/// `Loadable.autosync(every:clock:activity:)` against a reference model of its documented rules:
/// ticks every interval from the first observer, a sync at a tick unless one runs, the first
/// observer syncing if needed unless paused, ticks paused while inactive or offline with a tick
/// that fell due meanwhile run on return (else a sync if needed), `stop()`, and a second
/// `autosync` replacing the first.
@Suite("Autosync against a reference model")
@MainActor
struct LoadableAutosyncModelTests {
    enum Operation: CustomStringConvertible {
        case observe, unobserve, advance(Int), succeed, fail, active(Bool), online(Bool), stop, reattach

        var description: String {
            switch self {
            case .observe: "observe"
            case .unobserve: "unobserve"
            case .advance(let seconds): "advance \(seconds) s"
            case .succeed: "succeed"
            case .fail: "fail"
            case .active(let isActive): isActive ? "active" : "inactive"
            case .online(let isOnline): isOnline ? "online" : "offline"
            case .stop: "stop"
            case .reattach: "autosync again"
            }
        }
    }

    /// What the documentation says the loadable and its autosync do, in whole seconds.
    struct Model {
        static let interval = 10
        var now = 0
        var observers = 0
        var isActive = true
        var isOnline = true
        var isStopped = false
        /// When the next tick falls due; `nil` while nobody observes (or stopped).
        var deadline: Int?
        var state = LoadableState.idle
        var syncs = 0

        var isPaused: Bool { !isActive || !isOnline }
        var isTimerArmed: Bool { deadline != nil && !isPaused }

        mutating func sync() {
            guard state != .syncing else { return }
            state = .syncing
            syncs += 1
        }

        /// No `maxAge` and no invalidation: only an idle or failed loadable needs a sync.
        mutating func syncIfNeeded() {
            if state == .idle || state == .didFailToSync { sync() }
        }

        mutating func tick() {
            deadline = now + Self.interval
            sync()
        }

        /// The first observer arrived, or an autosync was attached while observed.
        mutating func start() {
            guard !isStopped else { return }
            deadline = now + Self.interval
            if !isPaused { syncIfNeeded() }
        }

        mutating func setPaused(_ change: (inout Model) -> Void) {
            let wasPaused = isPaused
            change(&self)
            guard wasPaused, !isPaused, let deadline else { return }
            if deadline <= now { tick() } else { syncIfNeeded() }
        }

        mutating func apply(_ operation: Operation) {
            switch operation {
            case .observe:
                observers += 1
                if observers == 1 { start() }
            case .unobserve:
                guard observers > 0 else { return }
                observers -= 1
                if observers == 0 { deadline = nil }
            case .advance(let seconds):
                let target = now + seconds
                while !isPaused, let due = deadline, due <= target {
                    now = due
                    tick()
                }
                now = target
            case .succeed:
                if state == .syncing { state = .didSyncSuccessfully }
            case .fail:
                if state == .syncing { state = .didFailToSync }
            case .active(let value):
                setPaused { $0.isActive = value }
            case .online(let value):
                setPaused { $0.isOnline = value }
            case .stop:
                isStopped = true
                deadline = nil
            case .reattach:
                isStopped = false
                deadline = nil
                if observers > 0 { start() }
            }
        }
    }

    static func randomOperations(seed: UInt64) -> [Operation] {
        var random = SeededRandomNumberGenerator(seed: seed)
        return (0..<40).map { _ in
            switch Int.random(in: 0..<20, using: &random) {
            case 0..<3: .observe
            case 3..<5: .unobserve
            case 5..<10: .advance(Int.random(in: 1...25, using: &random))
            case 10..<12: .succeed
            case 12: .fail
            case 13..<15: .active(Bool.random(using: &random))
            case 15..<17: .online(Bool.random(using: &random))
            case 17: .stop
            default: .reattach
            }
        }
    }

    /// Runs `operations` on a loadable with an autosync and on the model; the first difference.
    static func mismatch(in operations: [Operation]) async -> String? {
        let clock = ManualClock()
        let activity = ActivityMonitor()
        let loadable = ModelLoadable(clock: clock)
        var autosync = loadable.autosync(every: .seconds(Model.interval), clock: clock, activity: activity)
        var model = Model()
        var observations: [LoadableObservation] = []
        defer { observations.forEach { $0.cancel() } }
        for (step, operation) in operations.enumerated() {
            switch operation {
            case .observe: observations.append(loadable.observe { _ in })
            case .unobserve: observations.popLast()?.cancel()
            case .advance(let seconds): await clock.advance(by: .seconds(seconds))
            case .succeed: if loadable.loadableState == .syncing { loadable.setDidSyncSuccessfully(step) }
            case .fail: if loadable.loadableState == .syncing { loadable.setDidFailToSync(LoadableError.unspecified) }
            case .active(let value): activity.isActive = value
            case .online(let value): activity.connectivity = value ? .online : .offline
            case .stop: autosync.stop()
            case .reattach:
                autosync = loadable.autosync(every: .seconds(Model.interval), clock: clock, activity: activity)
            }
            model.apply(operation)
            let place = "after step \(step + 1), \(operation)"
            // The timer's task sleeps (or stops sleeping) on its own turn: wait for it.
            let armed = model.isTimerArmed ? 1 : 0
            guard await settle(until: { clock.pendingSleepCount == armed }) else {
                return "\(place): \(clock.pendingSleepCount) timers asleep, the model says \(armed)"
            }
            if loadable.syncs != model.syncs {
                return "\(place): \(loadable.syncs) syncs, the model says \(model.syncs)"
            }
            if autosync.isAutosyncing != (model.deadline != nil) {
                return "\(place): isAutosyncing \(autosync.isAutosyncing), the model says \(model.deadline != nil)"
            }
            if loadable.loadableState != model.state {
                return "\(place): state \(loadable.loadableState), the model says \(model.state)"
            }
        }
        return nil
    }

    @Test("random observers, clock moves, sync outcomes, activity changes, stops and replacements match the model")
    func randomSequences() async {
        await checkRandomSequences(
            count: StressScale.rounds(200), baseSeed: 0xA070_5C,
            operations: Self.randomOperations(seed:),
            mismatch: Self.mismatch(in:))
    }
}
