import LoadableSupport

/// Saves (and restores) that a ``CacheQueue`` had waiting for one cache object, which that object
/// writes in one transaction: each save is still its own (it fails alone), but the group commits
/// once.
///
/// The queue makes a group when two or more repeatable saves or reads for the same object wait in
/// a row, and runs their work with the group as ``current`` (a task-local value: calls from any
/// other task are not in it). The object (`SQLiteLoadableCache`) opens its transaction at the
/// group's first save, reads inside it, and tells the group how to commit it
/// (``opened(commit:)``); any call of its own that is not a save or load of the group commits it
/// first. The queue ends the group with ``end()``, and hands over the jobs' main-actor steps only
/// then; when a save of the group was lost (its transaction rolled back, or a commit failed),
/// ``end()`` says so and the queue runs every job of the group again, one by one, outside any
/// group, and hands over those results instead.
package final class CacheWriteGroup: Sendable {
    /// The group whose saves the current task runs, set by the queue around them.
    @TaskLocal package static var current: CacheWriteGroup?

    /// The object the group's saves are for (``LoadableCacheEntries/groupWriter``); another
    /// object ignores the group.
    package let writer: ObjectIdentifier

    private struct State {
        /// Commits the transaction open for the group, if one is.
        var commit: (@Sendable () async -> Void)?
        /// Whether a save of the group was lost.
        var failed = false
        /// Whether the queue runs a job's work of the group now.
        var isRunningWork = false
    }

    private let state = Locked(State())

    /// A group of saves for `writer`.
    package init(writer: ObjectIdentifier) {
        self.writer = writer
    }

    /// Whether a call of `object` in a task that sees this group as ``current`` belongs to it:
    /// the object is the group's writer, and the queue runs a job's work of the group now. (A task
    /// that a job's work starts sees the group too, and may call later: it is not in the group.)
    package func includes(_ object: AnyObject) -> Bool {
        ObjectIdentifier(object) == writer && state.withLock { $0.isRunningWork }
    }

    /// Runs `work`, a job's work of the group, as ``current``.
    package func run<Result>(
        isolation: isolated (any Actor)? = #isolation, _ work: () async throws -> Result
    ) async rethrows -> Result {
        state.withLock { $0.isRunningWork = true }
        defer { state.withLock { $0.isRunningWork = false } }
        return try await Self.$current.withValue(self) { try await work() }
    }

    /// Called by the writer when a save of the group opened its transaction; `commit` commits it,
    /// and calls ``closed(failed:)``.
    package func opened(commit: @escaping @Sendable () async -> Void) {
        state.withLock { $0.commit = commit }
    }

    /// Called by the writer when its transaction closed: committed (`failed` when the commit
    /// failed), early for a call outside the group or at ``end()``, or rolled back by SQLite
    /// (`failed`).
    package func closed(failed: Bool) {
        state.withLock { state in
            state.commit = nil
            if failed { state.failed = true }
        }
    }

    /// Commits what is open; returns whether every save of the group that returned is written.
    package func end() async -> Bool {
        let commit = state.withLock { state in
            defer { state.commit = nil }
            return state.commit
        }
        await commit?()
        return !state.withLock { $0.failed }
    }
}
