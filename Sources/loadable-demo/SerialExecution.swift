#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Runs the whole tour on one serial queue, so that a seed replays exactly.
///
/// Swift resumes a task that awaited a continuation (a sleeper woken by `ManualClock`, a wait ended
/// by `LoadableWaiter`) on the global concurrent executor, and only then does the task hop back to
/// the main actor. When several tasks resume at the same simulated instant, the threads of the
/// global pool race to the main actor: on a busy machine, one seed could print its lines in another
/// order. With every global job sent to the main queue instead, jobs run one at a time, in the
/// order they were enqueued, and the same seed prints the same timeline.
///
/// This uses the Swift runtime's `swift_task_enqueueGlobal_hook`, the hook that test tools use for
/// the same purpose. It is for a simulation like this tour, never for an app: an app wants its
/// background work on the global executor.
enum SerialExecution {
    private typealias EnqueueGlobal = @convention(thin) (UnownedJob) -> Void
    private typealias EnqueueGlobalHook = @convention(thin) (UnownedJob, EnqueueGlobal) -> Void

    /// Sends every job meant for the global executor to the main actor's queue from now on.
    ///
    /// Call it once, before any task starts. Returns `false` (and changes nothing) if the runtime
    /// does not offer the hook; the tour still runs, but a replay may then differ on a busy machine.
    @discardableResult
    static func install() -> Bool {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "swift_task_enqueueGlobal_hook") else {
            return false
        }
        symbol.assumingMemoryBound(to: EnqueueGlobalHook?.self).pointee = { job, _ in
            MainActor.shared.enqueue(job)
        }
        return true
    }
}
