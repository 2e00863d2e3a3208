public import Observation

/// Work the user starts (save, like, send a message), made a loadable: its state shows the latest
/// run, its contents are the last output.
///
/// Create it with the work, then ``run(_:)`` it with an input (or ``send(_:)`` it from a button).
/// Each admitted run moves the action to ``LoadableState/syncing``; when the latest run ends, the
/// action moves to ``LoadableState/didSyncSuccessfully`` with its output as ``contents``, to
/// ``LoadableState/didFailToSync`` with its error, or, if it was cancelled, back to the state it
/// had before the runs began. Contents are never cleared. What a run does while another one runs
/// is the action's ``Concurrency``.
///
/// ```swift
/// @MainActor
/// final class ProfileModel {
///     let save: LoadableAction<Profile, Profile>
///
///     init(api: ProfileAPI) {
///         save = LoadableAction { profile in try await api.save(profile) }
///     }
/// }
///
/// // The view: a button that cannot be tapped twice, a spinner, the failure.
/// Button("Save") { model.save.send(draft) }
///     .disabled(!model.save.canRun)
/// if model.save.isRunning { ProgressView() }
/// if let error = model.save.error { Text("Couldn't save: \(error)") }
///
/// // The test that drives it:
/// @Test func savingShowsTheSavedProfile() async throws {
///     let model = ProfileModel(api: FakeProfileAPI())
///     let saved = try await model.save.run(Profile(name: "Ada"))
///     #expect(model.save.loadableState == .didSyncSuccessfully)
///     #expect(model.save.contents == saved)
/// }
/// ```
///
/// The rules:
/// - A new action is ``LoadableState/idle``, without contents or error.
/// - ``run(_:)`` and ``send(_:)`` first check, in this order: a cancelled calling task
///   (`CancellationError`), ``isEnabled`` (``LoadableActionError/disabled``), and, with
///   ``Concurrency/dropWhileRunning``, a running run (``LoadableActionError/busy``). A refused run
///   starts nothing, changes nothing and notifies nobody.
/// - An admitted run moves the action to ``LoadableState/syncing`` (the error is cleared, the
///   contents stay) and notifies observers once. When the action is already syncing (another run
///   is running or queued), admitting one more changes nothing visible and notifies nobody.
/// - The work runs in a task that the action creates, on the main actor; the caller awaits it.
///   Cancelling the caller's task cancels its run: a running run's task is cancelled (the work
///   stops when it checks; the caller gets what the work ends with, normally `CancellationError`),
///   and a queued run leaves the queue at once and throws `CancellationError` without its work
///   ever starting.
/// - A run counts as cancelled when it was cancelled (by its caller, by
///   ``Concurrency/cancelPrevious``, by the release of the action) or when its work threw
///   `CancellationError`. A cancelled run's output never reaches the state or the contents, even
///   if its work ignored the cancellation and returned one; its caller still gets it.
/// - The state shows the latest run, the most recently admitted one still running or queued.
///   When the last of them ends: success → ``LoadableState/didSyncSuccessfully`` and the output
///   becomes ``contents``; failure → ``LoadableState/didFailToSync`` with the error, contents
///   kept; cancelled → the state (and error) from before the runs began, contents kept. One
///   notification each. A run cancelled while its work still runs counts as running until the
///   work ends (so ``Concurrency/dropWhileRunning`` and ``Concurrency/enqueue`` never run two
///   works at once), and the state stays ``LoadableState/syncing`` meanwhile.
/// - ``isRunning`` is whether a run is running or queued, so it is `true` exactly while the state
///   is ``LoadableState/syncing``. ``canRun`` is whether a run would be admitted now (ignoring the
///   caller's cancellation).
/// - ``reset()`` goes back to ``LoadableState/idle`` (contents kept) when no run is running.
/// - Changing ``isEnabled`` notifies observers once; it does not stop runs already admitted.
/// - A `run(_:)` caller keeps the action alive (the action is the `self` of its call). When the
///   action is released while runs are pending (only ``send(_:)`` tasks wait, or the view model
///   that owned it is gone), it cancels the task of every running run and ends every queued run
///   with `CancellationError`, on the main actor (a release on another thread hands that to the
///   main actor). Neither the action nor its runs outlive them.
/// - Observers follow the rules of every loadable: called on the main actor, once per change, in
///   the order they were added; a change made by an observer (a run, a send, ``reset()``, a
///   change of ``isEnabled``, even releasing the action) is applied at once and notified in one
///   more round after the current one.
///
/// Isolated to the main actor; observers are called on the main actor. It conforms to
/// `Observable`: a SwiftUI view (or `withObservationTracking`) that reads ``loadableState``,
/// ``error``, ``isContentsAvailable``, ``contents``, ``isEnabled``, ``isRunning`` or ``canRun``
/// is updated after every change. `Input` and `Output` need not be `Sendable`: inputs and outputs
/// stay on the main actor (only ``send(_:)``, whose task hands the output to any caller, needs a
/// `Sendable` output).
@MainActor
public final class LoadableAction<Input, Output>: ContentsLoadable, Observable, @MainActor CustomStringConvertible {
    /// What a run does when another run of the same action is running.
    public enum Concurrency: Sendable, Hashable {
        /// A run admitted while another one runs is refused with ``LoadableActionError/busy``:
        /// a second tap on a "Save" button does nothing. The default.
        case dropWhileRunning
        /// A new run cancels the running one's task and takes its place: the state then shows
        /// only the new run (search as you type). The cancelled run's caller still gets what its
        /// work ends with.
        case cancelPrevious
        /// Runs wait for each other and run one at a time, in the order they were admitted
        /// (messages sent in order). Each successful run's output becomes the contents when it
        /// ends; an earlier run's failure goes to its caller only.
        case enqueue
    }

    /// The state, error, observers and Observation registrar, shared by every loadable type.
    package let core = LoadableCore()
    /// What a run does when another one is running; fixed at creation.
    public let concurrency: Concurrency
    private let work: @MainActor (Input) async throws -> Output
    private var storedContents: Output?
    private var storedIsEnabled: Bool
    /// The runs the state waits for, in the order they were admitted: the running one first (a
    /// cancelled run whose work has not ended yet included), then, with ``Concurrency/enqueue``,
    /// the queued ones. A run leaves when it ends, when its caller cancels it while queued, or
    /// when a newer run supersedes it (``Concurrency/cancelPrevious``). Non-empty exactly while
    /// the state is ``LoadableState/syncing``.
    private var runs: [Run] = []

    /// Creates an idle action without contents.
    ///
    /// - Parameters:
    ///   - concurrency: What a run does while another one runs; ``Concurrency/dropWhileRunning``
    ///     by default.
    ///   - isEnabled: Whether runs are admitted; a disabled action refuses them with
    ///     ``LoadableActionError/disabled``.
    ///   - work: What a run does with its input. It starts on the main actor, in a task of the
    ///     action's own, and may await anything; its output becomes the contents.
    public init(
        concurrency: Concurrency = .dropWhileRunning,
        isEnabled: Bool = true,
        work: @escaping @MainActor (Input) async throws -> Output
    ) {
        self.concurrency = concurrency
        self.storedIsEnabled = isEnabled
        self.work = work
    }

    deinit {
        // Runs that only `send` tasks wait for (a `run` caller keeps the action alive): cancel the
        // running ones' tasks and end the queued ones. On the main actor: at once on the main
        // thread, in a task otherwise.
        guard !runs.isEmpty else { return }
        let runs = runs
        runOnMainActor {
            for run in runs { run.cancel() }
        }
    }

    // MARK: - Reading

    /// The state of the latest run; see the type's rules.
    public var loadableState: LoadableState {
        core.trackAccess()
        return core.state
    }

    /// Why the latest run failed, while the state is ``LoadableState/didFailToSync``; `nil` in any
    /// other state.
    public var error: (any Error)? {
        core.trackAccess()
        return core.error
    }

    /// Whether a run ever succeeded (so ``contents`` holds its output).
    public var isContentsAvailable: Bool {
        core.trackAccess()
        return core.hasContents
    }

    /// The output of the last successful run whose output reached the state; kept across later
    /// runs, failures, cancellations and ``reset()``.
    public var contents: Output? {
        core.trackAccess()
        return storedContents
    }

    /// Whether runs are admitted; a disabled action refuses them with
    /// ``LoadableActionError/disabled``.
    ///
    /// Setting a different value notifies observers once (the state does not change); setting the
    /// same value does nothing. Disabling does not stop runs already admitted: a running run goes
    /// on and queued runs still run.
    public var isEnabled: Bool {
        get {
            core.trackAccess()
            return storedIsEnabled
        }
        set {
            guard newValue != storedIsEnabled else { return }
            core.willChange()
            storedIsEnabled = newValue
            core.didChange(NotificationSubject(self))
        }
    }

    /// Whether a run is running or queued; `true` exactly while the state is
    /// ``LoadableState/syncing``.
    ///
    /// A cancelled run counts until its work ends.
    public var isRunning: Bool {
        core.trackAccess()
        return !runs.isEmpty
    }

    /// Whether a run would be admitted now: the action is enabled and, with
    /// ``Concurrency/dropWhileRunning``, not running. For a button's enabled state.
    public var canRun: Bool {
        core.trackAccess()
        return storedIsEnabled && !(concurrency == .dropWhileRunning && !runs.isEmpty)
    }

    // MARK: - Running

    /// Runs the work with `input` and returns its output.
    ///
    /// The run is admitted, or refused, at once (see the type's rules); an admitted run moves the
    /// action to ``LoadableState/syncing`` before this call first suspends. With
    /// ``Concurrency/enqueue`` it may wait for earlier runs before its work starts. Cancelling the
    /// calling task cancels the run.
    ///
    /// The call keeps the action alive until the run ends.
    ///
    /// ```swift
    /// let message = try await send.run(draft)
    /// ```
    ///
    /// - Parameter input: What the work gets.
    /// - Returns: The work's output, also in ``contents`` unless the run was cancelled or a
    ///   later one was admitted.
    /// - Throws: `CancellationError` if the calling task is cancelled before the run is admitted
    ///   or while it is queued; ``LoadableActionError/disabled`` or ``LoadableActionError/busy``
    ///   if the run is refused; otherwise what the work throws.
    public func run(_ input: Input) async throws -> Output {
        let admitted = try admit(input)
        return try await admitted.value()
    }

    /// Goes back to ``LoadableState/idle`` and notifies once: a failure leaves the screen while
    /// the user edits. The error is cleared; the contents stay.
    ///
    /// Does nothing while a run is running or queued (the state shows it), and nothing when the
    /// action is already idle.
    public func reset() {
        guard runs.isEmpty, core.state != .idle else { return }
        core.willChange()
        core.store(state: .idle, error: nil)
        core.didChange(NotificationSubject(self))
    }

    /// Calls `handler` after every change until the returned token is cancelled or released.
    ///
    /// - Parameter handler: Called on the main actor with this action.
    /// - Returns: The token that keeps the observation alive.
    public func addObserver(
        _ handler: @escaping @MainActor (any PureLoadable) -> Void
    ) -> LoadableObservation {
        registerObserver(handler)
    }

    /// `<LoadableAction<Input, Output>: state, contents available: yes|no, concurrency: …,
    /// enabled: yes|no, runs: n>`.
    public var description: String {
        loadableDescription(
            details: ", concurrency: \(concurrency), enabled: \(storedIsEnabled ? "yes" : "no"), runs: \(runs.count)")
    }

    // MARK: - Runs

    /// Admits a run of `input` or throws why not; see the type's rules.
    private func admit(_ input: Input) throws -> Run {
        // A caller that is already cancelled would cancel the run at once: start nothing.
        if Task.isCancelled { throw CancellationError() }
        guard storedIsEnabled else { throw LoadableActionError.disabled }
        let wasRunning = !runs.isEmpty
        if concurrency == .dropWhileRunning, wasRunning { throw LoadableActionError.busy }
        let run = Run(owner: self, input: input)
        let superseded = concurrency == .cancelPrevious ? runs : []
        if !superseded.isEmpty { runs.removeAll() }
        runs.append(run)
        if concurrency != .enqueue || !wasRunning { start(run) }
        // The books are settled before any other code runs: cancelling a task runs the work's
        // cancellation handlers, and observers may run, send or reset.
        for previous in superseded { previous.cancel() }
        if !wasRunning {
            core.willChange()
            core.store(state: .syncing, error: nil)
            core.didChange(NotificationSubject(self))
        }
        return run
    }

    /// Starts the work of a queued run in a task of the action's own (which `cancelPrevious` and a
    /// release can cancel).
    private func start(_ run: Run) {
        guard case .queued(let input) = run.phase else { return }
        let work = work
        // Weakly: a pending run must not keep the action alive (its release cancels the run).
        let task = Task { @MainActor [weak self] in
            let result: Result<Output, any Error>
            do {
                result = .success(try await work(input))
            } catch {
                result = .failure(error)
            }
            if let self {
                self.runDidEnd(run, result)
            } else {
                run.end(result)
            }
        }
        run.phase = .running(task, isCancelled: false)
    }

    /// Ends `run` with `result`: its caller gets the result, and the state shows it if it was the
    /// last run the state waited for.
    private func runDidEnd(_ run: Run, _ result: Result<Output, any Error>) {
        let wasCancelled = run.isCancelled || result.isCancellation
        // The caller resumes later, on its own turn of the main actor, whatever observers do.
        run.end(result)
        // A superseded run is no longer in the books: only its caller gets its result.
        guard let index = runs.firstIndex(where: { $0 === run }) else { return }
        runs.remove(at: index)
        if let next = runs.first {
            // Only `.enqueue` has runs after the one that ended: the next one starts, and the
            // state stays syncing. A success shows its output; a failure or a cancel changes
            // nothing visible.
            start(next)
            guard case .success(let output) = result, !wasCancelled else { return }
            core.willChange()
            storedContents = output
            core.hasContents = true
            core.didChange(NotificationSubject(self))
            return
        }
        core.willChange()
        if wasCancelled {
            core.storeStateBeforeSyncing()
        } else {
            switch result {
            case .success(let output):
                storedContents = output
                core.hasContents = true
                core.store(state: .didSyncSuccessfully, error: nil)
                core.recordSuccess()
            case .failure(let error):
                core.store(state: .didFailToSync, error: error)
                core.recordFailure()
            }
        }
        core.didChange(NotificationSubject(self))
    }

    /// Removes a queued run whose caller cancelled it. Nothing visible changes: a run ahead of it
    /// is running.
    fileprivate func removeQueued(_ run: Run) {
        runs.removeAll { $0 === run }
    }

    /// One admitted run: its input until its work starts, its task while it runs, its result once
    /// it ended, and the caller waiting for that result.
    @MainActor
    fileprivate final class Run {
        /// Where the run is.
        enum Phase {
            /// Admitted, its work not started yet (waiting for its turn with `.enqueue`).
            case queued(Input)
            /// Its work runs in `task`; `isCancelled` once anything cancelled the run.
            case running(Task<Void, Never>, isCancelled: Bool)
            /// Ended; the caller gets `result`.
            case ended(Result<Output, any Error>)
        }

        var phase: Phase
        /// The action, to leave its queue when cancelled there; `nil` once it is released.
        private weak var owner: LoadableAction?
        /// The caller waiting in ``value()``.
        private var continuation: CheckedContinuation<Void, Never>?

        init(owner: LoadableAction, input: Input) {
            self.owner = owner
            phase = .queued(input)
        }

        /// Whether the running run was cancelled.
        var isCancelled: Bool {
            if case .running(_, let isCancelled) = phase { return isCancelled }
            return false
        }

        /// Waits for the run to end and returns its result; cancelling the waiting task cancels
        /// the run.
        func value() async throws -> Output {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    if case .ended = phase {
                        continuation.resume()
                    } else {
                        self.continuation = continuation
                    }
                }
            } onCancel: {
                // At once when the canceller is on the main thread, so that a queued run leaves
                // the queue before the canceller goes on.
                runOnMainActor { self.cancel() }
            }
            guard case .ended(let result) = phase else {
                preconditionFailure("a run's caller resumes only once the run ended")
            }
            return try result.get()
        }

        /// Cancels the run: a queued run leaves the queue and ends with `CancellationError`; a
        /// running run's task is cancelled and the run ends when its work does. Does nothing once
        /// ended.
        func cancel() {
            switch phase {
            case .queued:
                owner?.removeQueued(self)
                end(.failure(CancellationError()))
            case .running(let task, let isCancelled):
                guard !isCancelled else { return }
                phase = .running(task, isCancelled: true)
                task.cancel()
            case .ended:
                break
            }
        }

        /// Ends the run with `result` and resumes its caller. Does nothing once ended.
        func end(_ result: Result<Output, any Error>) {
            if case .ended = phase { return }
            phase = .ended(result)
            if let continuation {
                self.continuation = nil
                continuation.resume()
            }
        }
    }
}

extension LoadableAction where Output: Sendable {
    /// Runs the work with `input` without waiting: for a button.
    ///
    /// Admits the run exactly as ``run(_:)`` does, synchronously: when this returns, an admitted
    /// run has moved the action to ``LoadableState/syncing``. A refused run (busy, disabled, or a
    /// calling task that is already cancelled) throws nothing into the caller: the returned task
    /// fails at once with the reason, and nothing changes.
    ///
    /// ```swift
    /// Button("Send") { messages.send(draft) }
    ///     .disabled(!messages.canRun)
    /// ```
    ///
    /// The returned task does not keep the action alive: if the action is released first, the run
    /// is cancelled. Cancelling the task cancels the run.
    ///
    /// - Parameter input: What the work gets.
    /// - Returns: A task whose value is the run's output, or that throws what ``run(_:)`` would.
    @discardableResult
    public func send(_ input: Input) -> Task<Output, any Error> {
        let admitted: Run
        do {
            admitted = try admit(input)
        } catch {
            return Task { throw error }
        }
        return Task { @MainActor in try await admitted.value() }
    }
}

extension LoadableAction: LoadableCoreOwner {
    /// The action's own failure record: the error of the last failed run, kept until a run
    /// succeeds, and the number of failures since.
    package var failureRecord: (lastError: (any Error)?, consecutiveFailures: Int)? {
        (core.lastError, core.consecutiveFailures)
    }
}

extension Result {
    /// Whether this is a failure with `CancellationError`.
    fileprivate var isCancellation: Bool {
        if case .failure(let error) = self { return error is CancellationError }
        return false
    }
}
