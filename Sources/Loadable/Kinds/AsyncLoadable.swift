import LoadableSupport

/// A ``Loadable`` whose sync is one `async` call.
///
/// Pass the call as a closure, or subclass and override ``load()`` (or ``loadResult()``):
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
/// A load that can also answer "what you have is still current" (an HTTP `304`), or that brings
/// strings describing its contents (an `ETag`), returns a ``LoadResult``: pass
/// ``init(contents:clock:loadResult:)`` or override ``loadResult()``.
///
/// ```swift
/// let avatar = AsyncLoadable<Data>(loadResult: {
///     let answer = try await api.avatar(ifNoneMatch: avatarTag)
///     return answer.isNotModified ? .confirmed() : .loaded(answer.body, metadata: ["ETag": answer.etag])
/// })
/// ```
///
/// Each sync runs the closure given at init, or else ``loadResult()`` (which calls ``load()``
/// unless overridden), in a new task; with a closure, overrides of ``load()`` and
/// ``loadResult()`` are not called by a sync. ``Loadable/cancelSync()`` cancels that task and
/// restores the state from before the sync; a result that arrives after a cancel, or after a newer
/// sync started, is ignored. Releasing a closure-based loadable cancels its running load (a
/// subclass's ``load()`` keeps its loadable alive until it returns).
///
/// Isolated to the main actor; observers are called on the main actor.
@MainActor
open class AsyncLoadable<Contents>: Loadable<Contents> {
    /// The work given at init, as a load returning a ``LoadResult``; `nil` for a subclass that
    /// overrides ``load()`` or ``loadResult()``.
    private let loader: (@MainActor () async throws -> LoadResult<Contents>)?
    private var loadTask = LoadTask()

    /// Creates a loadable that runs `load` on each sync: the contents it returns become the
    /// loadable's.
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
        loader = { .loaded(try await load()) }
        super.init(contents: contents, clock: clock)
    }

    /// Creates a loadable that runs `loadResult` on each sync: new contents with their metadata,
    /// or a confirmation of the contents it has (see ``LoadResult``).
    ///
    /// - Parameters:
    ///   - contents: Contents to start with, if any.
    ///   - clock: The clock of the loadable's freshness and watchdog (see ``Loadable``).
    ///   - loadResult: The work of one sync, started on the main actor. Write its label: a trailing
    ///   closure that type-checks either way (one that only throws) is taken as `load`.
    @_disfavoredOverload
    public init(
        contents: Contents? = nil,
        clock: any Clock<Duration> = ContinuousClock(),
        loadResult: @escaping @MainActor () async throws -> LoadResult<Contents>
    ) {
        loader = loadResult
        super.init(contents: contents, clock: clock)
    }

    /// Creates a loadable for a subclass that overrides ``load()`` or ``loadResult()``.
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
    /// Called on the main actor in a new task for each sync (by ``loadResult()``, unless a
    /// subclass overrides that); the task is cancelled by ``Loadable/cancelSync()``. By default
    /// it runs the closure given at init: the contents loaded, or for a
    /// ``LoadResult/confirmed(metadata:)``, the contents the loadable has (when it has none, it
    /// throws ``LoadableError/nothingToConfirm``).
    open func load() async throws -> Contents {
        guard let loader else {
            fatalError(
                "\(type(of: self)) must override load() or be created with init(load:) (or override loadResult(), or be created with init(loadResult:))"
            )
        }
        switch try await loader() {
        case .loaded(let contents, _): return contents
        case .confirmed:
            guard let contents = core.readUntracked({ contents }) else { throw LoadableError.nothingToConfirm }
            return contents
        }
    }

    /// The work of one sync as a ``LoadResult``: new contents with their metadata, or a
    /// confirmation of the contents the loadable has; throws why it failed.
    ///
    /// Override it instead of ``load()`` when the source can answer "not modified", or describes
    /// its contents (an `ETag`). Called on the main actor in a new task for each sync when no
    /// closure was given at init; the task is cancelled by ``Loadable/cancelSync()``. By default
    /// it runs the closure given at init, or returns ``LoadResult/loaded(_:metadata:)`` of
    /// ``load()``.
    open func loadResult() async throws -> LoadResult<Contents> {
        if let loader { return try await loader() }
        return .loaded(try await load())
    }

    /// Starts the load in a task, cancelling one still running (a sync started after a public
    /// setter ended the previous one). Not meant to be overridden further.
    public final override func doSync() {
        beginLoadingBase()
        loadTask.start(for: self, closure: loader, method: { try await $0.loadResult() }) {
            loadable, generation, result in
            loadable.finish(generation, with: result)
        }
    }

    /// Cancels the running load task. Not meant to be overridden further.
    public final override func doCancelSync() {
        loadTask.cancel()
    }

    private func finish(_ generation: Int, with result: Result<LoadResult<Contents>, any Error>) {
        // A late result (after a cancel or a newer sync) is dropped.
        guard loadTask.finish(generation), storedState == .syncing else { return }
        switch result {
        case .success(let result): setDidSync(result)
        case .failure(let error): setDidFailToSync(error)
        }
    }

    deinit {
        loadTask.cancelTask()
    }
}
