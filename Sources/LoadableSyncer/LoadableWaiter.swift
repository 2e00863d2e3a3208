/// Lets many callers wait, each with a timeout, until a loadable reaches a condition; keeps the
/// loadable syncing while anyone waits.
///
/// The typical use is an access token: every API call waits for the token before it sends its
/// request, one sync serves all of them, and failures are retried with backoff while calls wait.
///
/// ```swift
/// final class APIClient {
///     private let tokenWaiter: LoadableWaiter<AccessTokenLoadable>
///
///     init(token: AccessTokenLoadable) {
///         tokenWaiter = LoadableWaiter(token, timeout: .seconds(30))
///     }
///
///     func profile() async throws -> Profile {
///         let token = try await tokenWaiter.wait()   // syncs the token if needed
///         return try await send(.profile, bearer: token.contents!)
///     }
/// }
/// ```
///
/// Rules:
/// - A wait whose ``Condition-swift.enum`` already holds ends at once, with no timer and no sync.
/// - Otherwise it ends when the condition holds after a notification of the target (every pending
///   wait succeeds then, in the order they began), or with ``LoadableWaiterError/timedOut`` after
///   ``timeout``, or with `CancellationError` when its caller cancels it (only that wait ends).
/// - While anyone waits, if ``syncsIfPossible`` is `true` and the target is a
///   `SyncableLoadable`, the target is asked to `SyncableLoadable.syncIfNeeded()` when the first
///   wait begins and failures are retried with backoff by an internal ``LoadableSyncer`` (policy
///   ``LoadableSyncer/SyncPolicy/syncIfNeeded``, retry delays from `min(1 s, timeout)` growing by √2
///   up to `min(timeout, 30 s)`, no refresh). When the last wait ends, the retries stop.
/// - One timer serves all waits: it is armed for the earliest deadline.
///
/// The waiter holds its target **strongly**. A waiter with pending waits stays alive until they end
/// (each ends at its timeout at the latest), so a wait always ends exactly once even if you release
/// the waiter.
///
/// Tests drive the timeout with a `ManualClock`:
///
/// ```swift
/// let clock = ManualClock()
/// let token = TestLoadable<String>()
/// let waiter = LoadableWaiter(token, timeout: .seconds(10), clock: clock)
/// async let result = waiter.wait()        // token.syncCount == 1
/// await clock.waitForSleepers()
/// token.setDidSyncSuccessfully("secret")
/// #expect(try await result === token)
/// ```
///
/// Isolated to the main actor.
@MainActor
public final class LoadableWaiter<Target: PureLoadable> {
    /// What a wait waits for.
    ///
    /// ```swift
    /// let waiter = LoadableWaiter(token, condition: .didSyncSuccessfully, timeout: .seconds(5))
    /// ```
    public enum Condition: Sendable, Hashable, CaseIterable {
        /// `PureLoadable.isContentsAvailable` is `true` (stale contents count).
        case contentsAvailable
        /// The state is `LoadableState.didSyncSuccessfully`.
        case didSyncSuccessfully
    }

    /// What a callback wait ends with: the target, or why the wait failed.
    public typealias Completion = @MainActor (Result<Target, any Error>) -> Void

    /// A callback wait that its caller may cancel.
    ///
    /// Releasing the handle does not cancel the wait.
    ///
    /// ```swift
    /// let handle = waiter.wait { result in print(result) }
    /// handle.cancel()   // the completion gets CancellationError now
    /// ```
    ///
    /// Isolated to the main actor.
    @MainActor
    public final class Handle {
        private weak var waiter: LoadableWaiter?
        private let id: Int?

        init(waiter: LoadableWaiter, id: Int?) {
            self.waiter = waiter
            self.id = id
        }

        /// Whether the wait has not ended yet.
        public var isPending: Bool {
            guard let id, let waiter else { return false }
            return waiter.machine.contains(id)
        }

        /// Ends the wait now: its completion is called with `CancellationError`. Does nothing if
        /// the wait has ended.
        ///
        /// - Complexity: O(log n) for n pending waits.
        public func cancel() {
            guard let id else { return }
            waiter?.cancelWait(id)
        }
    }

    /// The loadable waited for; held strongly.
    public let target: Target
    /// What the waits wait for.
    public let condition: Condition
    /// How long each wait may last, from the moment it begins.
    public let timeout: Duration
    /// Whether a syncable target is kept syncing while anyone waits.
    public let syncsIfPossible: Bool

    fileprivate var machine: WaiterStateMachine
    private let clock: ElapsedClock
    private var completions: [Int: Completion] = [:]
    private var observation: LoadableObservation?
    private var syncer: LoadableSyncer?
    private var isWatching = false
    private var timerTask: Task<Void, Never>?
    private var timerGeneration = 0

    /// Creates a waiter.
    ///
    /// - Parameters:
    ///   - target: The loadable to wait for; held strongly.
    ///   - condition: What a wait waits for; contents available by default.
    ///   - timeout: How long each wait may last; greater than `.zero`.
    ///   - syncsIfPossible: Whether a syncable target is kept syncing (with retries) while anyone
    ///     waits; `true` by default.
    ///   - clock: The clock timeouts and retries sleep on; a `ManualClock` in tests.
    public init(
        _ target: Target,
        condition: Condition = .contentsAvailable,
        timeout: Duration,
        syncsIfPossible: Bool = true,
        clock: any Clock<Duration> = ContinuousClock()
    ) {
        requireValid(timeout > .zero, "LoadableWaiter: timeout must be > .zero, got \(timeout)")
        self.target = target
        self.condition = condition
        self.timeout = timeout
        self.syncsIfPossible = syncsIfPossible
        self.machine = WaiterStateMachine(timeout: timeout)
        self.clock = ElapsedClock(clock)
    }

    /// Whether the condition holds now.
    public var isConditionMet: Bool {
        switch condition {
        case .contentsAvailable: target.isContentsAvailable
        case .didSyncSuccessfully: target.loadableState == .didSyncSuccessfully
        }
    }

    /// The number of waits that have not ended.
    public var pendingWaitCount: Int { machine.count }

    /// Waits until the condition holds and returns the target.
    ///
    /// Returns at once if the condition holds now. Many tasks may wait together; cancelling one
    /// of them ends only its own wait.
    ///
    /// - Returns: The target, once the condition holds.
    /// - Throws: ``LoadableWaiterError/timedOut`` after ``timeout``; `CancellationError` if the
    ///   waiting task is cancelled.
    /// - Complexity: O(log n) to begin and to end, for n pending waits.
    public func wait() async throws -> Target {
        try Task.checkCancellation()
        if isConditionMet { return target }
        let cancellation = WaitCancellation()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                guard !cancellation.isCancelled else {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                let handle = wait { result in
                    continuation.resume(with: result.map { _ in () })
                }
                cancellation.onCancel = { handle.cancel() }
            }
        } onCancel: {
            Task { @MainActor in cancellation.cancel() }
        }
        return target
    }

    /// Waits until the condition holds, then calls `completion` with the target.
    ///
    /// The completion is called exactly once, on the main actor: synchronously, before this method
    /// returns, if the condition holds now; otherwise with the target when the condition holds,
    /// with ``LoadableWaiterError/timedOut`` after ``timeout``, or with `CancellationError` when
    /// the returned handle is cancelled.
    ///
    /// - Parameter completion: Called once with the outcome.
    /// - Returns: A handle to cancel the wait; releasing it does not cancel the wait.
    /// - Complexity: O(log n) to begin and to end, for n pending waits.
    @discardableResult
    public func wait(_ completion: @escaping Completion) -> Handle {
        if isConditionMet {
            completion(.success(target))
            return Handle(waiter: self, id: nil)
        }
        let (id, actions) = machine.add(now: clock.elapsed)
        completions[id] = completion
        let handle = Handle(waiter: self, id: id)
        perform(actions)
        return handle
    }

    // MARK: - Carrying out the machine's actions

    fileprivate func cancelWait(_ id: Int) {
        let (removed, actions) = machine.remove(id)
        guard removed, let completion = completions.removeValue(forKey: id) else { return }
        perform(actions)
        completion(.failure(CancellationError()))
    }

    private func targetDidChange() {
        guard machine.count > 0, isConditionMet else { return }
        succeedAll()
    }

    private func succeedAll() {
        let (ids, actions) = machine.removeAll()
        let finished = ids.compactMap { completions.removeValue(forKey: $0) }
        perform(actions)
        for completion in finished { completion(.success(target)) }
    }

    private func timerDidFire(_ generation: Int) {
        guard generation == timerGeneration else { return }
        timerTask = nil
        // A target may change without notifying: look once more before failing anyone.
        if isConditionMet {
            succeedAll()
            return
        }
        let (expired, actions) = machine.timerFired(now: clock.elapsed)
        let finished = expired.compactMap { completions.removeValue(forKey: $0) }
        perform(actions)
        for completion in finished { completion(.failure(LoadableWaiterError.timedOut)) }
    }

    private func perform(_ actions: [WaiterStateMachine.Action]) {
        for action in actions {
            switch action {
            case .armTimer(let delay): armTimer(after: delay)
            case .cancelTimer: cancelTimer()
            case .startWatching: startWatching()
            case .stopWatching: stopWatching()
            }
        }
    }

    private func startWatching() {
        isWatching = true
        observation = target.addObserver { [weak self] _ in
            self?.targetDidChange()
        }
        guard syncsIfPossible, let syncable = target as? any SyncableLoadable else { return }
        syncable.syncIfNeeded()
        // The sync may have met the condition at once and ended every wait.
        guard isWatching else { return }
        syncer = LoadableSyncer(
            syncable,
            syncPolicy: .syncIfNeeded,
            timeoutPolicy: Self.retryPolicy(timeout: timeout),
            clock: clock.base
        )
    }

    private func stopWatching() {
        isWatching = false
        observation?.cancel()
        observation = nil
        syncer = nil
    }

    /// Retries from `min(1 s, timeout)` growing by √2 up to `min(timeout, 30 s)`; no refresh.
    static func retryPolicy(timeout: Duration) -> BackoffTimeoutPolicy {
        let min = Swift.min(.seconds(1), timeout)
        let max = Swift.max(min, Swift.min(timeout, .seconds(30)))
        return BackoffTimeoutPolicy(min: min, max: max)
    }

    private func armTimer(after delay: Duration) {
        timerTask?.cancel()
        timerGeneration += 1
        let generation = timerGeneration
        let clock = clock
        // The task holds the waiter strongly while waits are pending, so every wait ends once
        // even if its owner releases the waiter; the last wait to end cancels the task.
        timerTask = Task {
            do {
                try await clock.sleep(for: delay)
            } catch {
                return
            }
            self.timerDidFire(generation)
        }
    }

    private func cancelTimer() {
        timerTask?.cancel()
        timerTask = nil
        timerGeneration += 1
    }
}

/// The cancellation of one async wait, shared by the waiting task and its cancellation handler.
@MainActor
private final class WaitCancellation {
    /// Cancels the wait once it began.
    var onCancel: (@MainActor () -> Void)?
    private(set) var isCancelled = false

    func cancel() {
        isCancelled = true
        let onCancel = onCancel
        self.onCancel = nil
        onCancel?()
    }
}
