import LoadableSupport

/// A ``Loadable`` whose sync is one `async` call.
///
/// Pass the call as a closure, or subclass and override ``load()``:
///
/// ```swift
/// let profile = AsyncLoadable { try await api.profile() }
/// profile.sync()
///
/// final class FeedLoadable: AsyncLoadable<[Post]> {
///     let api: API
///     init(api: API) { self.api = api; super.init() }
///     override func load() async throws -> [Post] { try await api.feed() }
/// }
/// ```
///
/// Each sync runs ``load()`` in a new task. ``Loadable/cancelSync()`` cancels that task and
/// restores the state from before the sync; a result that arrives after a cancel, or after a newer
/// sync started, is ignored. Releasing a closure-based loadable cancels its running load (a
/// subclass's ``load()`` keeps its loadable alive until it returns).
///
/// Isolated to the main actor; observers are called on the main actor.
@MainActor
open class AsyncLoadable<Contents>: Loadable<Contents> {
    private let loader: (@MainActor () async throws -> Contents)?
    private var loadTask = LoadTask()

    /// Creates a loadable that runs `load` on each sync.
    ///
    /// - Parameters:
    ///   - contents: Contents to start with, if any.
    ///   - clock: The clock of the loadable's freshness and watchdog (see ``Loadable``).
    ///   - load: The work of one sync, started on the main actor.
    public init(
        contents: Contents? = nil,
        clock: any Clock<Duration> = ContinuousClock(),
        load: @escaping @MainActor () async throws -> Contents
    ) {
        loader = load
        super.init(contents: contents, clock: clock)
    }

    /// Creates a loadable for a subclass that overrides ``load()``.
    ///
    /// - Parameters:
    ///   - contents: Contents to start with, if any.
    ///   - clock: The clock of the loadable's freshness and watchdog (see ``Loadable``).
    public override init(contents: Contents? = nil, clock: any Clock<Duration> = ContinuousClock()) {
        loader = nil
        super.init(contents: contents, clock: clock)
    }

    /// The work of one sync: returns the new contents or throws why it failed.
    ///
    /// Called on the main actor in a new task for each sync; the task is cancelled by
    /// ``Loadable/cancelSync()``. By default it calls the closure given to ``init(contents:clock:load:)``.
    open func load() async throws -> Contents {
        guard let loader else {
            fatalError(
                "\(type(of: self)) must override load() or be created with init(load:)"
            )
        }
        return try await loader()
    }

    /// Starts ``load()`` in a task, cancelling one still running (a sync started after a public
    /// setter ended the previous one). Not meant to be overridden further.
    public final override func doSync() {
        loadTask.start(for: self, closure: loader, method: { try await $0.load() }) { loadable, generation, result in
            loadable.finish(generation, with: result)
        }
    }

    /// Cancels the running ``load()`` task. Not meant to be overridden further.
    public final override func doCancelSync() {
        loadTask.cancel()
    }

    private func finish(_ generation: Int, with result: Result<Contents, any Error>) {
        // A late result (after a cancel or a newer sync) is dropped.
        guard loadTask.finish(generation), storedState == .syncing else { return }
        switch result {
        case .success(let contents): setDidSyncSuccessfully(contents)
        case .failure(let error as ContentsConfirmed):
            // Confirmed without new contents (an HTTP 304): the sync succeeds, contents untouched.
            if core.readUntracked({ isContentsAvailable }) {
                setDidSyncSuccessfully()
            } else {
                setDidFailToSync(error.fallback)
            }
        case .failure(let error): setDidFailToSync(error)
        }
    }

    deinit {
        loadTask.cancelTask()
    }
}

/// What a ``AsyncLoadable/load()`` throws when the source confirmed the contents the loadable has
/// (an HTTP 304 Not Modified): the sync succeeds and the contents stay exactly as they are, with
/// no new value written (pending optimistic changes stay on top of the same base).
package struct ContentsConfirmed: Error {
    /// The error the sync fails with if the loadable has no contents to keep after all.
    package let fallback: any Error

    /// A confirmation; `fallback` is the failure when there are no contents to confirm.
    package init(fallback: any Error) {
        self.fallback = fallback
    }
}
