public import Observation

/// A loadable its owner drives: a socket feed, a database listener, anything that pushes.
///
/// It has contents, setters, hooks, snapshots and observation like ``Loadable``, but no `sync()`:
/// only the owner changes it. Vend it as `any PureLoadable` (or `any ContentsLoadable<Contents>`)
/// so that nobody else can. ``Loadable`` is a `PushLoadable` that can also be asked to sync; the
/// two share this one implementation.
///
/// Isolated to the main actor; observers are called on the main actor. It conforms to
/// `Observable`, so a SwiftUI view (or `withObservationTracking`) that reads ``loadableState``,
/// ``error`` or ``isContentsAvailable`` is updated after every change, and one that reads
/// ``contents`` alone after every change of the contents.
///
/// ```swift
/// final class ChatFeed {
///     private let messages = PushLoadable<[Message]>()
///     var loadable: any ContentsLoadable<[Message]> { messages }
///
///     func socketDidConnect() { messages.setSyncing() }
///     func socketDidReceive(_ all: [Message]) { messages.setDidSyncSuccessfully(all) }
///     func socketDidFail(_ error: any Error) { messages.setDidFailToSync(error) }
/// }
/// ```
///
/// A setter that changes nothing a reader can see notifies nothing: when `Contents` is `Equatable`,
/// contents equal to those shown are no change of the contents (they are still confirmed: the
/// ``Loadable/age`` restarts), and the same state again (``setIdle()`` while idle, a success while
/// successful) tells no observer. A repeated ``setDidFailToSync(_:)`` still replaces the error and
/// notifies; ``notifyDidChange()`` always notifies. See "Equal contents notify nothing" in the
/// Concepts guide (`Docs/Concepts.md`).
@MainActor
open class PushLoadable<Contents>: ContentsLoadable, Observable, @MainActor CustomStringConvertible {
    // The core first, the generic contents (whose size only the runtime knows) last, so that the
    // core has a fixed offset.
    /// The state, error, observers and Observation registrar, shared by every loadable type.
    package final let core = LoadableCore()

    /// One of the package's loadables, with its core (a class member, so that a syncable subclass
    /// answers for itself).
    public var loadableCapabilities: LoadableCapabilities { LoadableCapabilities(owner: self) }
    /// The contents shown: the base contents with every pending change applied.
    private var storedContents: Contents?

    /// The state without telling Observation: for internal paths that are not reads of the
    /// loadable (``Loadable/sync()``), so that they neither count as one nor create the registrar.
    final var storedState: LoadableState { core.state }

    /// Creates an idle loadable.
    ///
    /// - Parameter contents: Contents to start with (for example from a cache); the state is
    ///   ``LoadableState/idle`` either way.
    public init(contents: Contents? = nil) {
        storedContents = contents
        core.hasContents = contents != nil
    }

    // MARK: - Reading

    /// The stage the loadable is at. Changes only through the setters.
    public final var loadableState: LoadableState {
        core.trackAccess()
        return core.state
    }

    /// The contents, kept across re-syncs and failures. Changes only through the setters and
    /// ``mutate(optimistic:commit:reconcile:)``.
    ///
    /// Observation tracks it apart from the rest of the loadable: a reader of it alone is told of
    /// changes of the contents, not of the state.
    ///
    /// While optimistic changes are pending, these are the base contents (what was last synced or
    /// written) with every pending change applied, in the order the changes began.
    public final var contents: Contents? {
        core.trackContentsAccess()
        return storedContents
    }

    /// The optimistic changes waiting for their commits and the base contents under them; `nil`
    /// when none is pending.
    ///
    /// Kept in the core's extras, made by the first change and reused, rather than in a stored
    /// property: a loadable that never changes optimistically must not grow (one more field
    /// moves `Loadable<Int>` to a larger malloc size class). The core's flag keeps the check on
    /// every write of contents to one byte.
    @inline(__always)
    private var pendingChanges: PendingChanges<Contents>? {
        guard core.hasPendingChanges, let changes = core.extras?.ownerStorage else { return nil }
        return unsafeDowncast(changes, to: PendingChanges<Contents>.self)
    }

    /// The contents without the pending optimistic changes: what was last synced or written, and
    /// what persistence saves. Equal to the stored contents when no change is pending.
    package final var baseContents: Contents? {
        if let changes = pendingChanges { return changes.base }
        return storedContents
    }

    /// The storage of the pending changes and of the base metadata, if it was made; unlike
    /// ``pendingChanges``, also when no change is pending.
    @inline(__always)
    private var baseStorage: PendingChanges<Contents>? {
        guard let storage = core.extras?.ownerStorage else { return nil }
        return unsafeDowncast(storage, to: PendingChanges<Contents>.self)
    }

    /// ``baseStorage``, made on first use.
    private var baseStorageForWriting: PendingChanges<Contents> {
        if let storage = baseStorage { return storage }
        let storage = PendingChanges<Contents>()
        core.extrasForWriting.ownerStorage = storage
        return storage
    }

    /// The strings that describe the base contents, as the source sent them with the last
    /// ``LoadResult`` (an HTTP answer's `ETag` and `Last-Modified`); empty when there are none.
    ///
    /// Set by a load's result, replaced by ``setContents(_:metadata:)``, dropped by a write of the
    /// app's own (``setContents(_:)``, ``updateContents(_:)``, a committed change applied as it
    /// was shown, an outbox change joining: the source never had those contents); kept by a
    /// change reconciled with the server's answer and by a failure. Persistence saves it with the
    /// base contents and gives it back with ``restoreContents(_:age:metadata:)``. Changed inside
    /// the change that writes the contents or the state, so that an observer reads it with them.
    package final var baseMetadata: [String: String] {
        baseStorage?.metadata ?? [:]
    }

    /// Replaces ``baseMetadata``; makes no storage for empty metadata.
    @inline(__always)
    private func storeBaseMetadata(_ metadata: [String: String]) {
        if metadata.isEmpty {
            guard let storage = baseStorage, !storage.metadata.isEmpty else { return }
            storage.metadata = [:]
        } else {
            baseStorageForWriting.metadata = metadata
        }
    }

    /// A write of the app's own to the base contents: ``baseMetadata`` becomes `metadata` (what
    /// ``setContents(_:metadata:)`` gives; nothing otherwise), and a sync running now learns that
    /// what it asked the source about is not the base any more.
    private func baseWasWrittenLocally(metadata: [String: String]) {
        storeBaseMetadata(metadata)
        if storedState == .syncing { baseStorageForWriting.isBaseWrittenDuringSync = true }
    }

    /// Forgets the writes of the app's own made during an earlier sync: a load begins.
    package final func beginLoadingBase() {
        guard let storage = baseStorage, storage.isBaseWrittenDuringSync else { return }
        storage.isBaseWrittenDuringSync = false
    }

    /// Why the last sync failed, if it failed and said why; `nil` in any other state.
    public final var error: (any Error)? {
        core.trackAccess()
        return core.error
    }

    /// Whether there are contents to show; by default `contents != nil`.
    ///
    /// Override it for loadables whose contents come in parts (a chunked download that can show
    /// something before it is complete). ``LoadableState/didSyncSuccessfully`` must imply `true`.
    open var isContentsAvailable: Bool {
        core.trackAccess()
        return core.hasContents
    }

    /// The error of the last failed sync, kept while the next sync runs (and while the state is
    /// anything else) until a sync succeeds.
    ///
    /// ``error`` is `nil` while a retry runs; this is not, so a view can keep showing "couldn't
    /// load, retrying" instead of flipping from the error to a spinner and back.
    public final var lastError: (any Error)? {
        core.trackAccess()
        return core.lastError
    }

    /// The number of failures (``setDidFailToSync(_:)`` calls) since the last successful sync.
    ///
    /// With ``lastError``, it tells "retrying after a failure" (syncing, `consecutiveFailures > 0`)
    /// from "refreshing" (syncing, `0`).
    public final var consecutiveFailures: Int {
        core.trackAccess()
        return core.consecutiveFailures
    }

    /// Whether at least one observer is registered through ``addObserver(_:)``.
    public final var hasObservers: Bool { core.hasObservers }

    /// `<TypeName: state, contents available: yes|no>`.
    open var description: String { loadableDescription() }

    // MARK: - Setters

    /// Moves to ``LoadableState/syncing`` and notifies (nothing when syncing already). The error is
    /// cleared; contents stay.
    public final func setSyncing() {
        update(state: .syncing, error: nil)
    }

    /// Stores `contents`, moves to ``LoadableState/didSyncSuccessfully`` and notifies.
    ///
    /// Contents equal to those shown (`Contents` is `Equatable`) stay as they are and are not told
    /// to readers of ``contents``; when the state was ``LoadableState/didSyncSuccessfully``
    /// already, nothing is notified at all (the contents are still confirmed).
    ///
    /// - Parameter contents: The new contents.
    public final func setDidSyncSuccessfully(_ contents: Contents) {
        update(state: .didSyncSuccessfully, error: nil, contents: contents)
    }

    /// Moves to ``LoadableState/didSyncSuccessfully`` keeping the contents, and notifies.
    ///
    /// The contents are confirmed as they are (an HTTP `304`): readers of ``contents`` are not
    /// told, and when the state was ``LoadableState/didSyncSuccessfully`` already, nobody is. To
    /// announce contents changed in place, call ``notifyDidChange()``. Calling it while no
    /// contents are available is a programmer error and stops the program.
    public final func setDidSyncSuccessfully() {
        // Untracked: a setter is not a read for Observation.
        guard core.readUntracked({ isContentsAvailable }) else {
            // `fatalError` (unlike `precondition`) prints its message in release builds too.
            fatalError(
                "\(type(of: self)).setDidSyncSuccessfully() called while isContentsAvailable is false: "
                    + "a successful sync must leave contents available; pass them with setDidSyncSuccessfully(_:)"
            )
        }
        update(state: .didSyncSuccessfully, error: nil)
    }

    /// Stores `error`, moves to ``LoadableState/didFailToSync`` and notifies. Contents stay.
    ///
    /// A repeated failure replaces the error and notifies again.
    ///
    /// - Parameter error: Why the sync failed, or `nil` if unknown.
    public final func setDidFailToSync(_ error: (any Error)?) {
        update(state: .didFailToSync, error: error)
    }

    /// Moves to ``LoadableState/idle`` and notifies (nothing when idle already). The error is
    /// cleared; contents stay.
    public final func setIdle() {
        update(state: .idle, error: nil)
    }

    /// Writes new contents without a sync: what an app does after a "create" call answered with
    /// the new item.
    ///
    /// The state, the error and any running sync are left alone (a later sync result still
    /// lands); the contents count as just confirmed (the age restarts and an invalidation is
    /// forgotten). Notifies once; contents equal to those shown (`Contents` is `Equatable`) are
    /// confirmed without a notification, unless an invalidation is forgotten (then readers of the
    /// state are told, readers of ``contents`` are not).
    ///
    /// - Parameter contents: The new contents.
    public final func setContents(_ contents: Contents) {
        setContents(contents, metadata: [:])
    }

    /// ``setContents(_:)`` with the strings that describe these contents (a write's answer with
    /// its `ETag`): ``baseMetadata`` becomes `metadata` instead of being dropped.
    ///
    /// - Parameters:
    ///   - contents: The new contents.
    ///   - metadata: What describes them.
    package final func setContents(_ contents: Contents, metadata: [String: String]) {
        if keepsEqualBase(contents, stateKept: true) {
            confirmEqualBase(metadata: metadata)
            return
        }
        core.willChange()
        core.willChangeContents()
        storeBaseContents(contents)
        confirmBaseContentsChange(origin: .local, metadata: metadata)
        finishChange(endingSync: false, changedContents: true)
    }

    /// Ends a sync with what its load returned; the one place that decides what a
    /// ``LoadResult`` does (see there): new contents and their metadata, or the contents
    /// confirmed as they are.
    ///
    /// - Parameter result: What the load returned.
    package final func setDidSync(_ result: LoadResult<Contents>) {
        let storage = baseStorage
        let isBaseWrittenDuringSync = storage?.isBaseWrittenDuringSync ?? false
        if isBaseWrittenDuringSync { storage?.isBaseWrittenDuringSync = false }
        switch result {
        case .loaded(let contents, let metadata):
            storeBaseMetadata(metadata)
            setDidSyncSuccessfully(contents)
        case .confirmed(let metadata):
            guard core.readUntracked({ isContentsAvailable }) else {
                setDidFailToSync(LoadableError.nothingToConfirm)
                return
            }
            // Confirmed are the contents the load asked about: after a write of the app's own,
            // those are not the base any more, and what the source sent does not describe it.
            if !metadata.isEmpty, !isBaseWrittenDuringSync {
                baseStorageForWriting.metadata.merge(metadata) { $1 }
            }
            setDidSyncSuccessfully()
        }
    }

    /// Changes the contents in place without a sync, as ``setContents(_:)`` does.
    ///
    /// Always a change of the contents, even when `body` leaves them equal: telling that apart
    /// would need a copy made before `body` runs.
    ///
    /// Does nothing when there are no contents. While `body` runs, the contents are taken out of
    /// the loadable (so that changing them copies nothing): reading ``contents`` inside `body`
    /// gives `nil`. While optimistic changes are pending, `body` changes the base contents, and
    /// the pending changes are applied again on top.
    ///
    /// ```swift
    /// posts.updateContents { $0.insert(created, at: 0) }
    /// ```
    ///
    /// - Parameter body: Changes the contents.
    public final func updateContents(_ body: (inout Contents) -> Void) {
        let taken: Contents?
        if let changes = pendingChanges { taken = changes.base.take() } else { taken = storedContents.take() }
        guard var contents = taken else { return }
        body(&contents)
        // Always a change of the contents: telling an equal result apart would need a copy made
        // before `body`, which would make every change in place copy the whole contents.
        core.willChange()
        core.willChangeContents()
        storeBaseContents(contents)
        confirmBaseContentsChange(origin: .local)
        finishChange(endingSync: false, changedContents: true)
    }

    /// Sets contents restored from a cache, confirmed `age` ago, with the metadata kept with
    /// them, without changing the state or the error, and notifies once. Not a change of the
    /// base contents: nothing is saved.
    ///
    /// - Parameters:
    ///   - contents: The restored contents.
    ///   - age: How long ago they were confirmed; ``Loadable/age`` continues from it.
    ///   - metadata: The strings kept with them; they become ``baseMetadata``.
    package final func restoreContents(_ contents: Contents, age: Duration, metadata: [String: String] = [:]) {
        // Equal contents stay, but their age is the cache's now, which may make them stale:
        // observers are told, readers of the contents are not.
        let changesContents = !keepsEqualBase(contents, stateKept: true)
        core.willChange()
        storeBaseMetadata(metadata)
        if changesContents {
            core.willChangeContents()
            storeBaseContents(contents)
        }
        core.confirmRestoredContents(age: age)
        finishChange(endingSync: false, changedContents: changesContents)
    }

    /// Stores contents that are not a confirmation, and notifies once: the state, the error, the
    /// failure record, the age and an invalidation stay, and nothing is saved.
    ///
    /// For a page appended to a `PagedLoadable`: loading more of a list is not syncing it, so it
    /// must neither make old contents look fresh nor count as a success or a failure.
    ///
    /// Equal contents (an empty page) stay, and only their readers are not told: the caller
    /// changed its own fields (the paging state) with them.
    ///
    /// - Parameter contents: The new contents.
    final func storeUnconfirmedContents(_ contents: Contents) {
        let changesContents = !keepsEqualBase(contents, stateKept: true)
        core.willChange()
        if changesContents {
            core.willChangeContents()
            storeBaseContents(contents)
        }
        finishChange(endingSync: false, changedContents: changesContents)
    }

    /// Changes the contents in place without confirming them, for a loadable that keeps its own
    /// model of what it shows (a synced collection): the state, the error, the age and the
    /// freshness stay, no event is told (nothing is saved), and observers are notified once, only
    /// when `body` returns `true` (it changed them). The contents are taken out while `body` runs,
    /// so changing them copies nothing; `nil` in, or out, means no contents.
    ///
    /// Not for a loadable with optimistic layers (they are not applied again).
    ///
    /// - Parameters:
    ///   - body: Changes the contents; returns whether it changed them.
    ///   - beforeNotifying: Runs when `body` changed them, once they are stored, before observers
    ///     are told: what derives from the contents (a collection's views) is brought up to date
    ///     first, so that no observer sees it behind.
    package final func modifyContents(_ body: (inout Contents?) -> Bool, beforeNotifying: () -> Void = {}) {
        var taken = storedContents.take()
        let changed = body(&taken)
        guard changed else {
            storedContents = taken
            return
        }
        core.willChange()
        core.willChangeContents()
        storedContents = taken
        core.hasContents = taken != nil
        beforeNotifying()
        finishChange(endingSync: false, changedContents: true)
    }

    // MARK: - Optimistic changes

    /// Shows a change at once, runs `commit` (the call that makes it on the server), and keeps
    /// the change if the commit succeeds or takes it back if it fails.
    ///
    /// ```swift
    /// try await post.mutate { $0.isLiked = true } commit: {
    ///     try await api.like(postID)
    /// }
    /// ```
    ///
    /// Each pending change is a *layer* over the base contents (what was last synced or written):
    /// ``contents`` are the base with every pending layer applied, in the order the changes began.
    /// - **Commit succeeds:** with `reconcile`, the commit's answer is written into the base;
    ///   without it, `optimistic` itself is applied to the base. Either way the layer goes. That
    ///   is a write of the base contents like ``setContents(_:)``: they count as just confirmed,
    ///   and persistence saves them. If a sync is running, one more sync follows it (a ``Loadable``
    ///   only), since the running one may have started before the server saw the change.
    /// - **Commit throws or is cancelled:** only this layer goes (other pending changes stay), and
    ///   the error is thrown to the caller. The state and ``error`` are untouched.
    /// - **A sync succeeds meanwhile:** its contents become the base, and the pending layers are
    ///   applied again on top, so a refresh never hides a pending change. Write changes as
    ///   "set to" where you can (`isLiked = true`): a counter change (`likes += 1`) applied again
    ///   on contents that already include the server's change counts twice until the commit
    ///   answers.
    /// - **No contents yet:** the layer waits for the first contents and applies to them. A change
    ///   committed before there are any has nothing to write into: it goes.
    ///
    /// Observers are notified once when the layer is added and once when it goes (nothing when
    /// there are no contents to show it on). While `optimistic` runs on the shown contents, they
    /// are taken out of the loadable: reading ``contents`` inside it gives `nil`. `optimistic` and
    /// `reconcile` should change only the contents they are given.
    ///
    /// The call keeps the loadable alive until `commit` returns (as any method call does). To give
    /// up on a commit, cancel the calling task: a commit that honours cancellation ends with
    /// `CancellationError`, and the layer goes. A commit that never returns keeps its layer.
    ///
    /// - Parameters:
    ///   - optimistic: Applies the change to contents; called now, and again whenever the base
    ///     contents change while the commit runs.
    ///   - commit: Makes the change for real; runs in the calling task.
    ///   - reconcile: Writes the commit's answer into the base contents; `nil` (the default) to
    ///     apply `optimistic` to them instead.
    /// - Returns: What `commit` returned.
    /// - Throws: What `commit` threw; `CancellationError`, without applying anything, when the
    ///   calling task is already cancelled.
    @discardableResult
    public final func mutate<R: Sendable>(
        optimistic: @escaping @MainActor (inout Contents) -> Void,
        commit: @MainActor () async throws -> R,
        reconcile: (@MainActor (inout Contents, R) -> Void)? = nil
    ) async throws -> R {
        try Task.checkCancellation()
        let id = addLayer(optimistic, concern: nil)
        let result: R
        do {
            result = try await commit()
        } catch {
            dropPendingChange(id)
            throw error
        }
        commitPendingChange(id, result: result, reconcile: reconcile)
        return result
    }

    /// Stores new base contents: the stored contents, or, while changes are pending, the base
    /// under them (the pending changes are then applied again). Does not notify.
    @inline(__always)
    private func storeBaseContents(_ contents: Contents) {
        if let changes = pendingChanges {
            changes.base = contents
            applyPendingChanges(changes)
        } else {
            storedContents = contents
        }
        core.hasContents = true
    }

    /// Shows the base contents with every pending change applied, in the order they began, and
    /// records which of them changed anything.
    private func applyPendingChanges(_ changes: PendingChanges<Contents>) {
        changes.applyCount &+= 1
        let applyCount = changes.applyCount
        guard var shown = changes.base else {
            storedContents = nil
            return
        }
        // A copy: a layer that changes the loadable (misuse, but defined) may change the layers.
        let layers = changes.layers
        var changed: [Bool] = []
        changed.reserveCapacity(layers.count)
        for layer in layers { changed.append(layer.applied(to: &shown)) }
        // A change of the loadable made from inside a layer applied the layers itself, to newer
        // base contents: its result stands.
        guard changes.applyCount == applyCount else { return }
        for index in changes.layers.indices where changes.layers[index].changesContents != changed[index] {
            changes.layers[index].changesContents = changed[index]
        }
        storedContents = shown
    }

    /// Adds a pending change over the contents and notifies when it changed the contents shown
    /// (there are contents, and `apply` set `concern` to say it did); returns its id.
    ///
    /// `apply` changes the contents it is given and sets ``PendingChangeConcern/concerns`` to
    /// whether it changed anything: a change that does not concern these contents sets `false`,
    /// and then nothing is notified when it is added, taken back, or joins the base. (A flag
    /// beside the closure, not a closure that returns it: `mutate`, which shares the layers,
    /// would pay an allocation for a wrapper.)
    ///
    /// For changes kept elsewhere (an outbox) that show on this loadable until they reach the
    /// server.
    ///
    /// A change added with `isSent` is one the server has already: it shows above the contents
    /// (restored ones included) until the loadable's next successful sync, whose contents include
    /// it, and is never written into the base.
    package final func addPendingChange(
        _ apply: @escaping @MainActor (inout Contents) -> Void, concern: PendingChangeConcern, isSent: Bool = false
    ) -> Int {
        let id = addLayer(apply, concern: concern)
        if isSent, let changes = pendingChanges, let index = changes.layers.lastIndex(where: { $0.id == id }) {
            changes.layers[index].isSent = true
        }
        return id
    }

    /// Replaces the change of the pending change `id`, in its place among the others, and shows
    /// the contents again (notifying when the old or the new change concerned them). An unknown
    /// `id` does nothing.
    package final func replacePendingChange(_ id: Int, with apply: @escaping @MainActor (inout Contents) -> Void) {
        guard let changes = pendingChanges, let index = changes.layers.firstIndex(where: { $0.id == id }) else {
            return
        }
        let changedShown = changes.layers[index].changesContents
        changes.layers[index].apply = apply
        guard changes.base != nil else { return }
        applyPendingChanges(changes)
        guard changedShown || (changes.layers.first { $0.id == id }?.changesContents ?? false) else { return }
        // Told after the contents changed: the new change had to be applied to know whether it
        // concerns them.
        core.willChange()
        core.willChangeContents()
        finishChange(endingSync: false, changedContents: true)
    }

    /// Adds a pending change; `concern` is `nil` for `mutate`'s, which always change the contents.
    private func addLayer(
        _ apply: @escaping @MainActor (inout Contents) -> Void, concern: PendingChangeConcern?
    ) -> Int {
        let changes = baseStorageForWriting
        let id = changes.nextID
        changes.nextID &+= 1
        if changes.layers.isEmpty { changes.base = storedContents }
        changes.layers.append(PendingChanges.Layer(id: id, apply: apply, concern: concern))
        core.hasPendingChanges = true
        // No contents yet: the change waits for them, and nothing shown changes.
        guard var shown = storedContents.take() else { return id }
        changes.applyCount &+= 1
        let applyCount = changes.applyCount
        apply(&shown)
        let changesContents = concern?.concerns ?? true
        guard changes.applyCount == applyCount else { return id }
        // Written only when it is not the default: a write costs `mutate` an allocation.
        if !changesContents, let index = changes.layers.lastIndex(where: { $0.id == id }) {
            changes.layers[index].changesContents = false
        }
        guard changesContents else {
            storedContents = shown
            return id
        }
        core.willChange()
        core.willChangeContents()
        storedContents = shown
        finishChange(endingSync: false, changedContents: true)
        return id
    }

    /// Removes the layer at `index`, keeping the core's flag in step.
    @inline(__always)
    private func removeLayer(at index: Int, of changes: PendingChanges<Contents>) {
        changes.layers.remove(at: index)
        core.hasPendingChanges = !changes.layers.isEmpty
    }

    /// Shows the base with the layers left after one was removed: the base itself when none is
    /// left.
    @inline(__always)
    private func showBaseAfterRemoval(_ changes: PendingChanges<Contents>) {
        if changes.layers.isEmpty {
            storedContents = changes.base.take()
        } else {
            applyPendingChanges(changes)
        }
    }

    /// A successful sync brought the server's contents: the changes it has already (sent layers)
    /// leave, and each that concerned the contents is told. `reapplying`: the base stays (a `304`),
    /// so what is shown is made again here.
    private func dropSentLayers(reapplying: Bool) {
        guard let changes = pendingChanges, changes.layers.contains(where: \.isSent) else { return }
        let sent = changes.layers.filter(\.isSent)
        changes.layers.removeAll(where: \.isSent)
        core.hasPendingChanges = !changes.layers.isEmpty
        if reapplying, changes.base != nil { showBaseAfterRemoval(changes) }
        for layer in sent where layer.changesContents { layer.concern?.settled?() }
    }

    /// Takes back the pending change `id` (its commit failed or was cancelled, or it was
    /// discarded) and notifies (when it changed the contents shown). An unknown `id` does nothing.
    package final func dropPendingChange(_ id: Int) {
        guard let changes = pendingChanges, let index = changes.layers.firstIndex(where: { $0.id == id }) else {
            return
        }
        let changedShown = changes.layers[index].changesContents
        removeLayer(at: index, of: changes)
        guard changes.base != nil else { return }
        guard changedShown else {
            // It changed nothing: what is shown stays.
            if changes.layers.isEmpty { storedContents = changes.base.take() }
            return
        }
        core.willChange()
        core.willChangeContents()
        showBaseAfterRemoval(changes)
        finishChange(endingSync: false, changedContents: true)
    }

    /// Applies the pending change `id` to the base contents, as a committed
    /// ``mutate(optimistic:commit:reconcile:)`` without `reconcile` does, and drops its layer:
    /// for a change that reached the server some other way (an outbox sent it).
    ///
    /// When the change concerns neither the base nor what is shown (its `apply` returned `false`
    /// for both), its layer goes silently: the base is not written, nothing is saved or notified.
    /// An unknown `id` does nothing.
    package final func joinPendingChange(_ id: Int) {
        guard let (changes, index, layer, taken) = takeBaseToWrite(change: id, keepsAsSent: true) else { return }
        var base = taken
        let changesBase = layer.applied(to: &base)
        changes.base = base
        guard changesBase || layer.changesContents else {
            removeLayer(at: index, of: changes)
            if changes.layers.isEmpty { storedContents = changes.base.take() }
            return
        }
        core.willChange()
        core.willChangeContents()
        removeLayer(at: index, of: changes)
        showBaseAfterRemoval(changes)
        core.hasContents = true
        if changesBase {
            confirmBaseContentsChange(origin: .local)
            if storedState == .syncing { baseDidChangeDuringSync() }
        }
        finishChange(endingSync: false, changedContents: true)
    }

    /// The pending change `id` (with its index), and the base contents taken out to write it into.
    /// `nil` for an unknown `id`, and when there are no contents yet: then the change goes (a
    /// `mutate`'s) or stays as a sent layer (`keepsAsSent`, an outbox's: above the first contents,
    /// restored ones included, until the next successful sync), and since a sync running now may
    /// have started before the server saw the change, one more follows it.
    private func takeBaseToWrite(
        change id: Int, keepsAsSent: Bool = false
    ) -> (PendingChanges<Contents>, Int, PendingChanges<Contents>.Layer, Contents)? {
        guard let changes = pendingChanges, let index = changes.layers.firstIndex(where: { $0.id == id }) else {
            return nil
        }
        guard let base = changes.base.take() else {
            if keepsAsSent {
                // Nothing to write into yet (a restore may still come): the change stays above the
                // first contents until a successful sync brings the server's, which include it.
                changes.layers[index].isSent = true
            } else {
                removeLayer(at: index, of: changes)
            }
            if storedState == .syncing { baseDidChangeDuringSync() }
            return nil
        }
        return (changes, index, changes.layers[index], base)
    }

    /// Writes the committed change `id` into the base contents (through `reconcile`, or by
    /// applying the change itself), drops its layer, and notifies once.
    private func commitPendingChange<R>(
        _ id: Int, result: R, reconcile: (@MainActor (inout Contents, R) -> Void)?
    ) {
        guard let (changes, index, layer, taken) = takeBaseToWrite(change: id) else { return }
        var base = taken
        core.willChange()
        // The one pending change, applied the same way: what is shown already is the new base.
        let keepsShown = reconcile == nil && changes.layers.count == 1
        if !keepsShown { core.willChangeContents() }
        if keepsShown {
            changes.layers.removeAll(keepingCapacity: true)
            core.hasPendingChanges = false
        } else {
            if let reconcile { reconcile(&base, result) } else { layer.apply(&base) }
            changes.base = base
            removeLayer(at: index, of: changes)
            showBaseAfterRemoval(changes)
        }
        core.hasContents = true
        // Reconciled with the server's answer, the base is what the server has; applied as it was
        // shown, it is the app's guess.
        confirmBaseContentsChange(origin: reconcile == nil ? .local : .server)
        if storedState == .syncing { baseDidChangeDuringSync() }
        finishChange(endingSync: false, changedContents: !keepsShown)
    }

    /// A commit changed the base contents while a sync runs; ``Loadable`` queues one more sync.
    func baseDidChangeDuringSync() {}

    /// Notifies observers that the contents changed in place (the state stays as it is); readers
    /// of ``contents`` are told too. Always notifies.
    public final func notifyDidChange() {
        core.willChange()
        core.willChangeContents()
        core.didChange(NotificationSubject(self), changedContents: true)
    }

    /// Stores a new state and error, contents untouched, with one Observation mutation, then
    /// notifies observers.
    ///
    /// - Parameters:
    ///   - state: The new state.
    ///   - error: The new error; must be `nil` when `state` is ``LoadableState/syncing``.
    package final func update(state: LoadableState, error: (any Error)?) {
        update(state: state, error: error, confirmingEqualBase: false)
    }

    /// ``update(state:error:)``; `confirmingEqualBase`: for contents written equal to the base, so
    /// that a success tells ``LoadableCoreEvent/baseContentsChanged(origin:)`` as a write of them
    /// does (persistence saves, as for any write).
    private func update(state: LoadableState, error: (any Error)?, confirmingEqualBase: Bool) {
        let dropsSentLayers = state == .didSyncSuccessfully && hasSentLayers
        guard dropsSentLayers || changesWhatReadersSee(state: state) else {
            // The same state, no error, no contents changed: nothing a reader sees changes, so
            // nothing is told; a success still confirms the contents.
            core.store(state: state, error: error)
            recordOutcome(state, changedBase: confirmingEqualBase)
            return
        }
        core.willChange()
        // Sent layers leaving show the base again.
        if dropsSentLayers { core.willChangeContents() }
        let oldState = core.state
        let endsSync = oldState == .syncing && state != .syncing
        core.store(state: state, error: error)
        inspectStateChange(from: oldState)
        if dropsSentLayers { dropSentLayers(reapplying: true) }
        recordOutcome(state, changedBase: confirmingEqualBase)
        finishChange(endingSync: endsSync, changedContents: dropsSentLayers)
    }

    /// Stores a new state, error and contents with one Observation mutation, then notifies
    /// observers.
    ///
    /// - Parameters:
    ///   - state: The new state.
    ///   - error: The new error; must be `nil` when `state` is ``LoadableState/syncing``.
    ///   - contents: The new contents.
    package final func update(state: LoadableState, error: (any Error)?, contents: Contents) {
        let dropsSentLayers = state == .didSyncSuccessfully && hasSentLayers
        if !dropsSentLayers, keepsEqualBase(contents, stateKept: core.state == state && state != .didFailToSync) {
            // Equal contents: a change of the state only (a success confirms them).
            update(state: state, error: error, confirmingEqualBase: true)
            return
        }
        core.willChange()
        core.willChangeContents()
        let oldState = core.state
        let endsSync = oldState == .syncing && state != .syncing
        core.store(state: state, error: error)
        inspectStateChange(from: oldState)
        if state == .didSyncSuccessfully, core.hasPendingChanges { dropSentLayers(reapplying: false) }
        storeBaseContents(contents)
        recordOutcome(state, changedBase: true)
        finishChange(endingSync: endsSync, changedContents: true)
    }

    // MARK: - Equal contents

    /// Whether pending optimistic changes include some the server has already (they leave at the
    /// next successful sync).
    private var hasSentLayers: Bool {
        guard let changes = pendingChanges else { return false }
        return changes.layers.contains(where: \.isSent)
    }

    /// Whether storing `state` (with a success's confirmation) changes something a reader sees,
    /// the contents aside: the state; the error (a repeated failure replaces it); the freshness
    /// (a success forgets an invalidation and a stale announcement).
    @inline(__always)
    private func changesWhatReadersSee(state: LoadableState) -> Bool {
        core.state != state || state == .didFailToSync
            || (state == .didSyncSuccessfully && core.confirmationChangesFreshness)
    }

    /// Whether `contents` equal the base contents (`Contents` is `Equatable` and the loadable has
    /// contents), so that a write of them keeps the contents it has and tells their readers
    /// nothing.
    ///
    /// Compared only when the answer matters: when the write keeps the state (`stateKept`: then
    /// equal contents spare observers a notification), or when Observation tracks a read of the
    /// contents. Otherwise `false`, and the write goes on as a change, as it always did: the sync
    /// cycle of a loadable that only observers and readers of the state follow compares nothing.
    ///
    /// With optimistic changes pending, the new base is compared with the base: an equal one
    /// shows the same contents under the same changes.
    @inline(__always)
    private func keepsEqualBase(_ contents: Contents, stateKept: Bool) -> Bool {
        guard core.hasContents, stateKept || core.isContentsObserved else { return false }
        return isEqualToBase(contents)
    }

    /// Whether `contents` equal the base contents; `false` when `Contents` is not `Equatable`, or
    /// there are none.
    @inline(never)
    private func isEqualToBase(_ contents: Contents) -> Bool {
        if let changes = pendingChanges {
            guard let base = changes.base else { return false }
            return areEqualIfEquatable(base, contents)
        }
        guard let stored = storedContents else { return false }
        return areEqualIfEquatable(stored, contents)
    }

    /// Confirms equal contents written without a sync as any write of them: their age restarts,
    /// and ``LoadableCoreEvent/baseContentsChanged(origin:)`` is told (persistence saves, an HTTP
    /// loadable drops its validators). Observers are told only when the confirmation changes the
    /// freshness (an invalidation or a stale announcement is forgotten); readers of the contents
    /// never.
    private func confirmEqualBase(metadata: [String: String]) {
        let changesFreshness = core.confirmationChangesFreshness
        if changesFreshness { core.willChange() }
        confirmBaseContentsChange(origin: .local, metadata: metadata)
        if changesFreshness { finishChange(endingSync: false) }
    }

    /// The base contents were written (not synced): they count as confirmed now, and
    /// ``LoadableCoreEvent/baseContentsChanged(origin:)`` is told (persistence saves them). A
    /// write of the app's own (`.local`) replaces ``baseMetadata`` with `metadata` first.
    @inline(__always)
    private func confirmBaseContentsChange(origin: BaseContentsOrigin, metadata: [String: String] = [:]) {
        if origin == .local { baseWasWrittenLocally(metadata: metadata) }
        core.confirmContents()
        core.emit(.baseContentsChanged(origin: origin))
    }

    /// Counts a failure, or records a success (the contents are confirmed, the failures
    /// forgotten) and tells whether the sync changed the base
    /// (``LoadableCoreEvent/baseContentsChanged(origin:)``: persistence saves it) or confirmed it as
    /// it is (``LoadableCoreEvent/contentsConfirmed``: persistence touches it).
    @inline(__always)
    private func recordOutcome(_ state: LoadableState, changedBase: Bool) {
        switch state {
        case .didSyncSuccessfully:
            core.recordSuccess()
            core.emit(changedBase ? .baseContentsChanged(origin: .server) : .contentsConfirmed)
        case .didFailToSync: core.recordFailure()
        case .idle, .syncing: break
        }
    }

    /// Ends a change: notifies, through ``notifyAfterFreshnessChange(endingSync:)`` when the
    /// loadable has freshness work to do (a sync pending after this one, a slow sync to clear,
    /// a deadline to set).
    ///
    /// - Parameters:
    ///   - endingSync: Whether the change ends a sync.
    ///   - changedContents: Whether it began with ``LoadableCore/willChangeContents()``.
    @inline(__always)
    final func finishChange(endingSync: Bool, changedContents: Bool = false) {
        if (endingSync && !core.freshness.isEmpty) || core.extras?.hasDeadlines == true {
            notifyAfterFreshnessChange(endingSync: endingSync, changedContents: changedContents)
        } else {
            core.didChange(NotificationSubject(self), changedContents: changedContents)
        }
    }

    /// Notifies observers of a change that has freshness work to do; ``Loadable`` does it.
    func notifyAfterFreshnessChange(endingSync: Bool, changedContents: Bool) {
        core.didChange(NotificationSubject(self), changedContents: changedContents)
    }

    /// Tells the attached ``LoadableInspector``, if any, that the state moved from `oldState`
    /// (a sync began or ended). One load and compare when none is attached.
    /// `cancellingSync`: the sync was cancelled, whatever state it went back to.
    @inline(__always)
    final func inspectStateChange(from oldState: LoadableState, cancellingSync: Bool = false) {
        guard let inspector = LoadableInspection.inspector else { return }
        inspectStateChangeSlowly(inspector, from: oldState, cancellingSync: cancellingSync)
    }

    @inline(never)
    private func inspectStateChangeSlowly(
        _ inspector: LoadableInspector, from oldState: LoadableState, cancellingSync: Bool
    ) {
        let newState = core.state
        guard newState != oldState else { return }
        inspector.stateChanged(self, from: oldState, to: cancellingSync ? .idle : newState, error: core.error)
    }

    /// Called when the first observer arrived or the last one left, before the public hooks.
    func observersDidChange() {}

    /// Goes back to the state and error the loadable had before the current sync began, with one
    /// Observation mutation, then notifies observers. Contents are untouched.
    final func restoreStateBeforeSyncing() {
        core.willChange()
        let oldState = core.state
        core.storeStateBeforeSyncing()
        inspectStateChange(from: oldState, cancellingSync: true)
        core.freshness.subtract([.pendingSync, .slowSync])
        core.didChange(NotificationSubject(self))
    }

    /// Calls `handler` after every change until the returned token is cancelled or released.
    ///
    /// - Parameter handler: Called on the main actor with this loadable.
    /// - Returns: The token that keeps the observation alive.
    public final func addObserver(
        _ handler: @escaping @MainActor (any PureLoadable) -> Void
    ) -> LoadableObservation {
        registerObserver(handler)
    }

    /// Called after the first observer was added. Does nothing by default.
    ///
    /// Override it to start work only while someone watches (open a socket, start a timer).
    open func didAddFirstObserver() {}

    /// Called after the last observer was removed. Does nothing by default.
    open func didRemoveLastObserver() {}
}

extension PushLoadable: LoadableCoreOwner {
    package func observersDidBecomeNonEmpty() {
        observersDidChange()
        core.emit(.observedChanged(isObserved: true))
        didAddFirstObserver()
    }

    package func observersDidBecomeEmpty() {
        observersDidChange()
        core.emit(.observedChanged(isObserved: false))
        didRemoveLastObserver()
    }

    package var failureRecord: (lastError: (any Error)?, consecutiveFailures: Int)? {
        (core.lastError, core.consecutiveFailures)
    }

    package var untrackedIsStale: Bool {
        core.readUntracked { !isContentsAvailable || core.isStaleByInvalidationOrAge }
    }
}

/// The optimistic changes of a ``PushLoadable`` waiting for their commits, the base contents
/// under them, and the metadata of the base contents: what most loadables never need, made on
/// first use.
@MainActor
final class PendingChanges<Contents> {
    /// One pending change.
    struct Layer {
        /// Tells this change from the others.
        let id: Int
        /// Applies the change to contents.
        var apply: @MainActor (inout Contents) -> Void
        /// Where `apply` says whether it changed the contents; `nil`: it always does (`mutate`).
        let concern: PendingChangeConcern?
        /// Whether the change changed the contents shown when it was last applied to them.
        var changesContents = true
        /// Whether the server has the change already (it was sent before the loadable had contents
        /// to write it into, or before it was shown): it stays above the contents until the next
        /// successful sync, whose contents include it.
        var isSent = false

        /// Applies the change to `contents`; returns whether it changed them.
        @MainActor
        func applied(to contents: inout Contents) -> Bool {
            apply(&contents)
            return concern?.concerns ?? true
        }
    }

    /// The pending changes, in the order they began.
    var layers: [Layer] = []
    /// The base contents while ``layers`` is not empty (`nil`: none yet); unused otherwise.
    var base: Contents?
    /// The id of the next change.
    var nextID = 0
    /// Grows each time the layers are applied: tells a nested application from the outer one.
    var applyCount = 0
    /// ``PushLoadable/baseMetadata``.
    var metadata: [String: String] = [:]
    /// Whether the app wrote the base contents while the current sync runs (see
    /// ``PushLoadable/setDidSync(_:)``).
    var isBaseWrittenDuringSync = false
}

/// Where a pending change added with ``PushLoadable/addPendingChange(_:concern:)`` says, each time
/// it is applied, whether it changed the contents.
@MainActor
package final class PendingChangeConcern {
    /// Whether the last application changed the contents; set by the change.
    package var concerns = true
    /// Called when a change the server has already (a sent layer) left because a successful sync
    /// brought contents that include it, if it concerned the contents then.
    package var settled: (@MainActor () -> Void)?

    package init() {}
}
