/// The one load a loadable runs at a time: its task, and the generation that tells a late result
/// from the current one.
///
/// Used by `AsyncLoadable` (its sync) and `PagedLoadable` (its refresh and its next page): each
/// load runs in a new task; starting a load or cancelling cancels the task that runs, and a result
/// that arrives after that is dropped. Built on ``LatestTask``, like ``ClockTimer``.
package struct LoadTask: Sendable {
    private var latest = LatestTask()

    package init() {}

    /// Grows with every start and cancel: a caller that notifies before starting a load compares
    /// it to learn whether an observer started or cancelled a load meanwhile.
    package var generationNumber: Int { latest.generationNumber }

    /// Cancels the running load, if any; its result will be dropped.
    package mutating func cancel() {
        latest.cancel()
    }

    /// Starts a load in a new task, cancelling the running one.
    ///
    /// With a `closure`, the task holds only the closure while it loads, so releasing `owner`
    /// cancels nothing but drops the result (the owner's `deinit` cancels the task). Without one,
    /// the task calls `method` on `owner`, which keeps the owner alive until it returns (a
    /// subclass's override needs its object).
    ///
    /// - Parameters:
    ///   - owner: The loadable that loads.
    ///   - closure: The work given at init, if any.
    ///   - method: The owner's overridable method, used when there is no closure.
    ///   - finish: Called on the main actor with the owner, the load's generation (pass it to
    ///     ``finish(_:)``) and its result, unless the owner was released meanwhile.
    @MainActor
    package mutating func start<Owner: AnyObject & Sendable, Value>(
        for owner: Owner,
        closure: (@MainActor () async throws -> Value)?,
        method: @escaping @MainActor (Owner) async throws -> Value,
        finish: @escaping @MainActor (Owner, _ generation: Int, Result<Value, any Error>) -> Void
    ) {
        latest.start { generation in
            if let closure {
                return Task { @MainActor [weak owner] in
                    let result: Result<Value, any Error>
                    do { result = .success(try await closure()) } catch { result = .failure(error) }
                    if let owner { finish(owner, generation, result) }
                }
            }
            return Task { @MainActor in
                let result: Result<Value, any Error>
                do { result = .success(try await method(owner)) } catch { result = .failure(error) }
                finish(owner, generation, result)
            }
        }
    }

    /// Ends the load `generation` if it is the current one and returns `true`; returns `false`
    /// for a late result (the load was cancelled or another started since).
    package mutating func finish(_ generation: Int) -> Bool {
        latest.finish(generation)
    }

    /// Cancels the task without touching anything else: for a `deinit`.
    package func cancelTask() {
        latest.cancelTask()
    }
}
