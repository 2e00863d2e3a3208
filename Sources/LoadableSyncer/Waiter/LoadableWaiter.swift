import LoadableSupport

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
///   wait succeeds then, in the order they began; a resumed task passes through the global
///   executor on its way back to the main actor, so tasks may run in another order), or with
///   ``LoadableWaiterError/timedOut`` after ``timeout``, or with `CancellationError` when its
///   caller cancels it (only that wait ends).
/// - While anyone waits, if ``syncsIfPossible`` is `true` and the target is a
///   `SyncableLoadable`, the target is asked to `SyncableLoadable.syncIfNeeded()` when the first
///   wait begins and failures are retried with backoff by an internal ``LoadableSyncer`` (policy
///   ``LoadableSyncer/SyncPolicy/syncIfNeeded``, retry delays from `min(1 s, timeout)` growing by √2
///   up to `min(timeout, 30 s)`, no refresh). When the last wait ends, the retries stop.
/// - When that syncer gives up (the target failed with an error it does not retry: one whose
///   ``RetryAfterProviding/isRetryable`` is `false`, such as a token endpoint's 401), every
///   pending wait fails at once with ``LoadableWaiterError/targetFailed(_:)``, carrying the
///   target's error, and so does every later wait whose condition does not hold, without starting
///   a sync, until the target notifies in another state (someone syncs it again, after a new
///   login say). Without that syncer (``syncsIfPossible`` `false`, or a target that is not
///   syncable) a failure changes nothing: the waits wait for whoever syncs the target.
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
        /// `PureLoadable.isContentsAvailable` is `true` and the contents are not stale: not
        /// invalidated since they were last confirmed, and not older than the loadable's `maxAge`
        /// (see `Loadable.isStale`; for a group, no syncable member is stale).
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
        fileprivate let id: Int
        /// The wait's completion until the wait ends; `nil` after.
        private var completion: Completion?

        /// A handle to the wait `id` of `waiter`, pending while it holds a completion.
        fileprivate init(waiter: LoadableWaiter?, id: Int, completion: Completion?) {
            self.waiter = waiter
            self.id = id
            self.completion = completion
        }

        /// Whether the wait has not ended yet.
        public var isPending: Bool { completion != nil }

        /// Ends the wait now: its completion is called with `CancellationError`. Does nothing if
        /// the wait has ended.
        ///
        /// - Complexity: O(log n) for n pending waits.
        public func cancel() {
            guard completion != nil else { return }
            waiter?.cancelWait(id)
        }

        /// Calls the completion (the wait ended; the waiter removed it) and releases it.
        fileprivate func end(with result: Result<Target, any Error>) {
            let completion = completion
            self.completion = nil
            completion?(result)
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

    private var machine: WaiterStateMachine<WaitResumption>
    private let clock: ElapsedClock
    private var observation: LoadableObservation?
    private var syncer: LoadableSyncer?
    private var isWatching = false
    private var timer = ClockTimer()
    /// The target, when it has a core: read without telling Observation.
    private let coreOwner: (any LoadableCoreOwner)?
    /// The error of the failure the waiter's syncer gave up on; `nil` once the target notified in
    /// another state. While set, waits whose condition does not hold fail at once.
    private var targetFailure: (any Error)?
    /// The number of pending ``waitAfterSync()`` waits.
    private var afterSyncWaitCount = 0

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
        coreOwner = target.loadableCapabilities.owner
    }

    /// Whether the condition holds now.
    public var isConditionMet: Bool {
        switch condition {
        case .contentsAvailable: target.isContentsAvailable && !target.isStaleUntracked
        case .didSyncSuccessfully: target.loadableState == .didSyncSuccessfully
        }
    }

    /// ``isConditionMet``, read without telling Observation where the target has a core.
    package var isConditionMetUntracked: Bool {
        isConditionMet(status)
    }

    /// Whether a wait may end with the target now: the condition holds (read without telling
    /// Observation where the target has a core) and, while a ``waitAfterSync()`` is pending, the
    /// target is not syncing.
    private var isSatisfied: Bool {
        let status = status
        if afterSyncWaitCount > 0, status.state == .syncing { return false }
        return isConditionMet(status)
    }

    /// Whether the condition holds for a target with this `status`.
    private func isConditionMet(_ status: (state: LoadableState, isContentsAvailable: Bool)) -> Bool {
        switch condition {
        case .contentsAvailable: status.isContentsAvailable && !(coreOwner?.untrackedIsStale ?? false)
        case .didSyncSuccessfully: status.state == .didSyncSuccessfully
        }
    }

    /// The target's state and availability, read without telling Observation where it has a core:
    /// the waiter's bookkeeping is not a view's read, and must not make every change of the target
    /// pay for a registrar.
    private var status: (state: LoadableState, isContentsAvailable: Bool) {
        coreOwner?.untrackedStatus ?? (target.loadableState, target.isContentsAvailable)
    }

    /// The number of waits that have not ended.
    public var pendingWaitCount: Int { machine.count }

    /// Waits until the condition holds and returns the target.
    ///
    /// Returns at once if the condition holds now. Many tasks may wait together; cancelling one
    /// of them ends only its own wait.
    ///
    /// - Returns: The target, once the condition holds.
    /// - Throws: ``LoadableWaiterError/timedOut`` after ``timeout``;
    ///   ``LoadableWaiterError/targetFailed(_:)`` when the target failed with an error the
    ///   waiter's syncer does not retry; `CancellationError` if the waiting task is cancelled.
    /// - Complexity: O(log n) to begin and to end, for n pending waits.
    public func wait() async throws -> Target {
        try await wait(afterSync: false)
    }

    /// Waits as ``wait()`` does, and also until a sync of the target that runs now has ended.
    ///
    /// For a caller that had the target sync (an authorization renewing a token after a 401) and
    /// must not take what the target held before: with ``Condition-swift.enum/contentsAvailable``
    /// the old contents meet the condition while the new ones load. While such a wait is pending,
    /// every wait of this waiter waits for the running sync to end too.
    ///
    /// - Returns: The target, once the condition holds and it is not syncing.
    /// - Throws: What ``wait()`` throws.
    package func waitAfterSync() async throws -> Target {
        try await wait(afterSync: true)
    }

    private func wait(afterSync: Bool) async throws -> Target {
        try Task.checkCancellation()
        if afterSync { afterSyncWaitCount += 1 }
        if isSatisfied {
            if afterSync { afterSyncWaitCount -= 1 }
            return target
        }
        if let targetFailure {
            if afterSync { afterSyncWaitCount -= 1 }
            throw LoadableWaiterError.targetFailed(targetFailure)
        }
        // The operation and the continuation's body run at once, on the main actor, with no
        // suspension in between: the wait gets this identifier. A cancellation handler that runs
        // before the wait begins (the task was cancelled meanwhile) finds it begun all the same,
        // since its main-actor hop runs after this job.
        let id = machine.nextID
        try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
                let added = begin(afterSync ? .taskAfterSync(continuation) : .task(continuation))
                assert(added == id, "LoadableWaiter: wait \(added) began, expected \(id)")
            }
        } onCancel: {
            Task { @MainActor in self.cancelWait(id) }
        }
        return target
    }

    /// Waits until the condition holds, then calls `completion` with the target.
    ///
    /// The completion is called exactly once, on the main actor: synchronously, before this method
    /// returns, if the condition holds now (or with ``LoadableWaiterError/targetFailed(_:)`` if
    /// the target failed with an error the waiter's syncer does not retry); otherwise with the
    /// target when the condition holds, with ``LoadableWaiterError/timedOut`` after ``timeout``,
    /// with ``LoadableWaiterError/targetFailed(_:)`` when the target fails so, or with
    /// `CancellationError` when the returned handle is cancelled.
    ///
    /// - Parameter completion: Called once with the outcome.
    /// - Returns: A handle to cancel the wait; releasing it does not cancel the wait.
    /// - Complexity: O(log n) to begin and to end, for n pending waits.
    @discardableResult
    public func wait(_ completion: @escaping Completion) -> Handle {
        if isSatisfied {
            completion(.success(target))
            return Handle(waiter: nil, id: -1, completion: nil)
        }
        if let targetFailure {
            completion(.failure(LoadableWaiterError.targetFailed(targetFailure)))
            return Handle(waiter: nil, id: -1, completion: nil)
        }
        // The handle holds the completion: it must exist before the wait begins, which may end it.
        let handle = Handle(waiter: self, id: machine.nextID, completion: completion)
        let id = begin(.callback(handle))
        assert(id == handle.id, "LoadableWaiter: wait \(id) began, expected \(handle.id)")
        return handle
    }

    // MARK: - Carrying out the machine's actions

    /// Begins a wait (the condition does not hold) and returns its identifier.
    private func begin(_ resumption: WaitResumption) -> Int {
        let (id, actions) = machine.add(now: clock.elapsed, payload: resumption)
        perform(actions)
        return id
    }

    /// Ends the waits, in order, with `error`, or, when `error` is `nil`, with the target.
    private func end(_ resumptions: some Sequence<WaitResumption>, throwing error: (any Error)?) {
        // Made once: in this generic class, making a `Result` looks up its type at run time.
        let result: Result<Target, any Error> = error.map { .failure($0) } ?? .success(target)
        for resumption in resumptions {
            switch resumption {
            case .callback(let handle):
                // `wait(_:)` stores this waiter's handles only.
                unsafeDowncast(handle, to: Handle.self).end(with: result)
            case .task(let continuation):
                resume(continuation, throwing: error)
            case .taskAfterSync(let continuation):
                afterSyncWaitCount -= 1
                resume(continuation, throwing: error)
            }
        }
    }

    private func resume(_ continuation: UnsafeContinuation<Void, any Error>, throwing error: (any Error)?) {
        if let error {
            continuation.resume(throwing: error)
        } else {
            continuation.resume()
        }
    }

    fileprivate func cancelWait(_ id: Int) {
        let (removed, actions) = machine.remove(id)
        guard let removed else { return }
        perform(actions)
        end(CollectionOfOne(removed), throwing: CancellationError())
    }

    private func targetDidChange() {
        if targetFailure != nil, status.state != .didFailToSync {
            // The target syncs again (or was set by hand): waits wait for it again.
            targetFailure = nil
            if !isWatching { stopObserving() }
        }
        guard machine.count > 0, isSatisfied else { return }
        succeedAll()
    }

    /// The waiter's syncer gave up on the target's failure: every pending wait fails at once, and
    /// later ones too until the target notifies in another state.
    private func syncerDidGiveUp(_ error: any Error) {
        guard isWatching else { return }
        targetFailure = error
        let (removed, actions) = machine.removeAll()
        perform(actions)
        end(removed, throwing: LoadableWaiterError.targetFailed(error))
    }

    private func succeedAll() {
        let (removed, actions) = machine.removeAll()
        perform(actions)
        end(removed, throwing: nil)
    }

    private func timerDidFire(_ generation: Int) {
        guard timer.fired(generation) else { return }
        // A target may change without notifying: look once more before failing anyone.
        if isSatisfied {
            succeedAll()
            return
        }
        let (expired, actions) = machine.timerFired(now: clock.elapsed)
        perform(actions)
        end(expired, throwing: LoadableWaiterError.timedOut)
    }

    private func perform(_ actions: [WaiterAction]) {
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
        if observation == nil {
            observation = target.addObserver { [weak self] _ in
                self?.targetDidChange()
            }
        }
        guard syncsIfPossible, let syncable = target.loadableCapabilities.syncable else { return }
        syncable.syncIfNeeded()
        // The sync may have met the condition at once and ended every wait.
        guard isWatching else { return }
        let syncer = LoadableSyncer(
            syncable,
            syncPolicy: .syncIfNeeded,
            timeoutPolicy: Self.retryPolicy(timeout: timeout),
            clock: clock.base,
            didGiveUp: { [weak self] error in self?.syncerDidGiveUp(error) }
        )
        // A target that had failed already may have been given up during the init, which ended
        // every wait.
        if isWatching { self.syncer = syncer }
    }

    private func stopWatching() {
        isWatching = false
        syncer = nil
        // After a failure given up, the waiter keeps observing to learn when the target syncs again.
        if targetFailure == nil { stopObserving() }
    }

    private func stopObserving() {
        observation?.cancel()
        observation = nil
    }

    /// Retries from `min(1 s, timeout)` growing by √2 up to `min(timeout, 30 s)`; no refresh.
    static func retryPolicy(timeout: Duration) -> BackoffTimeoutPolicy {
        let min = Swift.min(.seconds(1), timeout)
        let max = Swift.max(min, Swift.min(timeout, .seconds(30)))
        return BackoffTimeoutPolicy(min: min, max: max)
    }

    private func armTimer(after delay: Duration) {
        // The task holds the waiter strongly while waits are pending, so every wait ends once
        // even if its owner releases the waiter; the last wait to end cancels the timer.
        timer.arm(after: delay, on: clock) { generation in
            self.timerDidFire(generation)
        }
    }

    private func cancelTimer() {
        timer.cancel()
    }
}

/// How a wait of a ``LoadableWaiter`` tells its caller that it ended.
///
/// Not generic, so that the code of the waiter's ``WaiterStateMachine`` is specialized for it
/// whatever the target: generic payloads made every wait pay runtime metadata lookups.
private enum WaitResumption {
    /// A callback wait: the waiter's `Handle`, which holds the completion.
    case callback(AnyObject)
    /// A task suspended in `wait()`.
    case task(UnsafeContinuation<Void, any Error>)
    /// A task suspended in `waitAfterSync()`.
    case taskAfterSync(UnsafeContinuation<Void, any Error>)
}
