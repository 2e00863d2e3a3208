import Loadable
import LoadableTestSupport
import LoadableTesting
import Testing

// The reference model that `LoadableActionModelTests` runs every sequence against, written from
// the action's documented rules alone.
extension LoadableActionModelTests {
    @MainActor final class Model {
        enum Phase {
            case queued
            case running(cancelled: Bool)
            case ended
        }

        struct Run {
            var cooperative: Bool
            var isRunCaller: Bool
            var phase: Phase
        }

        let concurrency: Concurrency
        var isEnabled = true
        var state = LoadableState.idle
        var contents: Int?
        var errorCode: Int?
        var lastErrorCode: Int?
        var consecutiveFailures = 0
        var stateBeforeRuns = LoadableState.idle
        /// The runs the state waits for, in admission order.
        var books: [Int] = []
        /// Every caller, admitted or not, by identifier.
        var runs: [Int: Run] = [:]
        var callerCount = 0
        var held: [Int] = []
        var started: [Int] = []
        var results: [Int: Outcome] = [:]
        var log: [Seen] = []
        var isHeldByTest = true
        var isAlive = true

        init(concurrency: Concurrency) {
            self.concurrency = concurrency
        }

        var status: Status {
            Status(
                state: state, contents: contents, errorCode: errorCode, lastErrorCode: lastErrorCode,
                consecutiveFailures: consecutiveFailures, isEnabled: isEnabled, isRunning: !books.isEmpty,
                canRun: isEnabled && !(concurrency == .dropWhileRunning && !books.isEmpty))
        }

        func notify() {
            log.append(Seen(state: state, contents: contents))
        }

        func apply(_ operation: Operation) {
            switch operation {
            case .run(let cooperative): admit(cooperative: cooperative, isRunCaller: true)
            case .send(let cooperative): admit(cooperative: cooperative, isRunCaller: false)
            case .runFromCancelledTask, .sendFromCancelledTask:
                results[callerCount] = .cancelled
                callerCount += 1
            case .finish(let pick, let ending):
                guard !held.isEmpty else { return }
                let id = held[pick % held.count]
                switch ending {
                case .succeed(let value): workEnded(id, .value(value))
                case .fail(let code): workEnded(id, .failure(code))
                case .throwCancellation: workEnded(id, .cancelled)
                }
            case .cancelCaller(let pick):
                guard callerCount > 0 else { return }
                cancel(pick % callerCount)
            case .toggleEnabled:
                guard isAlive else { return }
                isEnabled.toggle()
                notify()
            case .reset:
                guard isAlive, books.isEmpty, state != .idle else { return }
                state = .idle
                errorCode = nil
                notify()
            case .release:
                isHeldByTest = false
                releaseIfUnused()
            }
        }

        func admit(cooperative: Bool, isRunCaller: Bool) {
            let id = callerCount
            callerCount += 1
            guard isAlive else { return }
            guard isEnabled else {
                results[id] = .disabled
                return
            }
            let wasRunning = !books.isEmpty
            if concurrency == .dropWhileRunning, wasRunning {
                results[id] = .busy
                return
            }
            runs[id] = Run(cooperative: cooperative, isRunCaller: isRunCaller, phase: .queued)
            let superseded = concurrency == .cancelPrevious ? books : []
            if !superseded.isEmpty { books.removeAll() }
            books.append(id)
            if concurrency != .enqueue || !wasRunning { start(id) }
            if !wasRunning {
                stateBeforeRuns = state
                state = .syncing
                errorCode = nil
                notify()
            }
            // A superseded cooperative work ends after the notification, in its own task.
            for previous in superseded { cancelRunning(previous) }
        }

        func start(_ id: Int) {
            runs[id]?.phase = .running(cancelled: false)
            held.append(id)
            started.append(id)
        }

        /// A caller cancels: a queued run leaves the queue; a running one is cancelled.
        func cancel(_ id: Int) {
            guard results[id] == nil, let run = runs[id] else { return }
            switch run.phase {
            case .queued:
                books.removeAll { $0 == id }
                runs[id]?.phase = .ended
                finishCaller(id, .cancelled)
            case .running:
                cancelRunning(id)
            case .ended:
                break
            }
        }

        func cancelRunning(_ id: Int) {
            guard let run = runs[id], case .running(cancelled: false) = run.phase else { return }
            runs[id]?.phase = .running(cancelled: true)
            if run.cooperative, held.contains(id) { workEnded(id, .cancelled) }
        }

        func workEnded(_ id: Int, _ outcome: Outcome) {
            held.removeAll { $0 == id }
            guard let run = runs[id], case .running(let cancelled) = run.phase else { return }
            runs[id]?.phase = .ended
            let wasCancelled = cancelled || outcome == .cancelled
            guard isAlive, let index = books.firstIndex(of: id) else {
                finishCaller(id, outcome)
                return
            }
            books.remove(at: index)
            if let next = books.first {
                if case .queued = runs[next]?.phase { start(next) }
                if case .value(let value) = outcome, !wasCancelled {
                    contents = value
                    notify()
                }
            } else {
                if wasCancelled {
                    state = stateBeforeRuns
                    errorCode = state == .didFailToSync ? lastErrorCode : nil
                } else if case .value(let value) = outcome {
                    state = .didSyncSuccessfully
                    contents = value
                    errorCode = nil
                    lastErrorCode = nil
                    consecutiveFailures = 0
                } else if case .failure(let code) = outcome {
                    state = .didFailToSync
                    errorCode = code
                    lastErrorCode = code
                    consecutiveFailures += 1
                }
                notify()
            }
            finishCaller(id, outcome)
        }

        /// The caller gets `outcome`; the last `run` caller to end releases an action the test let go.
        func finishCaller(_ id: Int, _ outcome: Outcome) {
            results[id] = outcome
            releaseIfUnused()
        }

        /// The action goes once neither the test nor a pending `run` caller holds it: queued runs
        /// end cancelled, running ones are cancelled.
        func releaseIfUnused() {
            guard isAlive, !isHeldByTest else { return }
            let runCallerPending = runs.contains { id, run in run.isRunCaller && results[id] == nil }
            guard !runCallerPending else { return }
            isAlive = false
            let pending = books
            books.removeAll()
            for id in pending {
                guard let run = runs[id] else { continue }
                switch run.phase {
                case .queued:
                    runs[id]?.phase = .ended
                    results[id] = .cancelled
                case .running:
                    cancelRunning(id)
                case .ended:
                    break
                }
            }
        }
    }
}
