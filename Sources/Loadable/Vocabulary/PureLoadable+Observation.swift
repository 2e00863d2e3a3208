extension PureLoadable {
    /// Calls `handler` with the typed loadable after every change, until the returned token is
    /// cancelled or released.
    ///
    /// ```swift
    /// let token = photos.observe { photos in
    ///     render(photos.snapshot)
    /// }
    /// ```
    ///
    /// - Parameter handler: Called on the main actor with this loadable.
    /// - Returns: The token that keeps the observation alive.
    public func observe(_ handler: @escaping @MainActor (Self) -> Void) -> LoadableObservation {
        addObserver { loadable in
            // Every loadable calls its own observers with itself, so this is always `Self`.
            handler(unsafeDowncast(loadable, to: Self.self))
        }
    }

    /// The loadable's state now and after every notification, as an async sequence.
    ///
    /// Yields the current state first. The sequence ends when the loadable is released or when
    /// the consuming task is cancelled. Every state is buffered, so a slow consumer sees each
    /// notification (repeated states included).
    ///
    /// ```swift
    /// for await state in token.states() where state == .didSyncSuccessfully {
    ///     break
    /// }
    /// ```
    public func states() -> AsyncStream<LoadableState> {
        makeStream(bufferingPolicy: .unbounded) { $0.loadableState }
    }

    /// Returns once the loadable is not ``LoadableState/syncing``; at once if it is not syncing now.
    ///
    /// Never starts a sync. Many tasks may wait on one loadable; cancelling one of them ends only
    /// its own wait.
    ///
    /// - Throws: `CancellationError` if the waiting task is cancelled.
    public func doneSyncing() async throws {
        try await wait { $0.loadableState != .syncing }
    }
}

extension PureLoadable {
    /// A stream yielding `value(self)` now and after every notification; it ends when the
    /// loadable is released or the consumer is cancelled.
    ///
    /// `value` is read untracked: a stream is not a view, and must not give the loadable an
    /// Observation registrar.
    package func makeStream<Element: Sendable>(
        bufferingPolicy: AsyncStream<Element>.Continuation.BufferingPolicy,
        _ value: @escaping @MainActor (Self) -> Element
    ) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self, bufferingPolicy: bufferingPolicy)
        continuation.yield(LoadableCore.readUntracked { value(self) })
        // The observer owns the finisher: when the loadable (and so its observers) goes away, the
        // finisher's deinit ends the stream.
        let finisher = StreamFinisher(continuation)
        let observation = observe { loadable in
            finisher.continuation.yield(LoadableCore.readUntracked { value(loadable) })
        }
        let box = ObservationBox(observation)
        continuation.onTermination = { _ in
            Task { @MainActor in box.cancel() }
        }
        return stream
    }

    /// Suspends until `condition(self)` holds (checked now and after every notification).
    ///
    /// `condition` is read untracked: a wait is not a view, and must not give the loadable an
    /// Observation registrar.
    ///
    /// - Throws: `CancellationError` if the waiting task is cancelled; only that wait ends.
    package func wait(until condition: @escaping @MainActor (Self) -> Bool) async throws {
        try Task.checkCancellation()
        if LoadableCore.readUntracked({ condition(self) }) { return }
        let waiter = ConditionWait()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                waiter.start(continuation) {
                    observe { loadable in
                        if LoadableCore.readUntracked({ condition(loadable) }) { waiter.finish(.success(())) }
                    }
                }
            }
        } onCancel: {
            Task { @MainActor in waiter.finish(.failure(CancellationError())) }
        }
    }
}

/// One pending ``PureLoadable/wait(until:)``: its continuation and observation.
@MainActor
private final class ConditionWait {
    private var continuation: CheckedContinuation<Void, any Error>?
    private var observation: LoadableObservation?
    private var isFinished = false

    func start(
        _ continuation: CheckedContinuation<Void, any Error>,
        observe: () -> LoadableObservation
    ) {
        if isFinished {
            // Cancelled before the wait began.
            continuation.resume(throwing: CancellationError())
            return
        }
        self.continuation = continuation
        observation = observe()
    }

    func finish(_ result: Result<Void, any Error>) {
        guard !isFinished else { return }
        isFinished = true
        observation?.cancel()
        observation = nil
        guard let continuation else { return }
        self.continuation = nil
        continuation.resume(with: result)
    }
}

/// Ends a stream when released.
private final class StreamFinisher<Element>: Sendable {
    let continuation: AsyncStream<Element>.Continuation
    init(_ continuation: AsyncStream<Element>.Continuation) { self.continuation = continuation }
    deinit { continuation.finish() }
}

/// Holds a stream's observation so its termination handler can cancel it on the main actor.
@MainActor
private final class ObservationBox {
    private var observation: LoadableObservation?
    init(_ observation: LoadableObservation) { self.observation = observation }
    func cancel() {
        observation?.cancel()
        observation = nil
    }
}
