/// A task of which only the latest counts: starting one cancels the one before, and the
/// generation it was started with tells its callback from an older one's.
///
/// The one bookkeeping under ``ClockTimer`` (a sleeping timer) and ``LoadTask`` (a load): the
/// owner starts a task, the task calls the owner back with its generation, and the owner asks
/// ``finish(_:)`` whether that call is current before acting on it.
///
/// A `Sendable` value with no isolation of its own, so that a `deinit` can call
/// ``cancelTask()``.
package struct LatestTask: Sendable {
    private var task: Task<Void, Never>?
    private var generation = 0

    /// Creates a holder with no task.
    package init() {}

    /// Whether a task was started and has neither finished (see ``finish(_:)``) nor been
    /// cancelled since.
    package var isRunning: Bool { task != nil }

    /// Grows with every start and cancel: a caller that does something between deciding to start
    /// and starting (notifying observers, say) compares it to learn whether a task was started or
    /// cancelled meanwhile.
    package var generationNumber: Int { generation }

    /// Cancels the running task, if any, and keeps the one `makeTask` makes.
    ///
    /// - Parameter makeTask: Makes the task, given the generation it must report when it calls
    ///   back.
    package mutating func start(_ makeTask: (_ generation: Int) -> Task<Void, Never>) {
        cancel()
        task = makeTask(generation)
    }

    /// Cancels the running task, if any: a callback from it will not be current.
    package mutating func cancel() {
        generation += 1
        task?.cancel()
        task = nil
    }

    /// Whether a callback with `generation` is from the current task; if it is, the task is over.
    ///
    /// - Parameter generation: The generation the task was started with.
    /// - Returns: `true` only for the current task, and only once.
    package mutating func finish(_ generation: Int) -> Bool {
        guard generation == self.generation, task != nil else { return false }
        task = nil
        return true
    }

    /// Cancels the running task without changing anything else: for the owner's `deinit`, which
    /// cannot mutate its stored properties from outside its actor.
    package func cancelTask() {
        task?.cancel()
    }
}
