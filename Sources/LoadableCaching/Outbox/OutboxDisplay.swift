internal import Loadable

/// The items of an outbox shown as optimistic layers on one loadable: what
/// ``LoadableOutbox/show(on:_:)`` sets up. The loadable is held weakly.
@MainActor
class OutboxDisplay<Change> {
    /// Whether the loadable is gone.
    var isGone: Bool { true }

    /// Whether this display shows on `loadable`.
    func shows(on loadable: AnyObject) -> Bool { false }

    /// Shows `change` (of item `id`) as a layer, above the layers shown already.
    func add(_ id: String, _ change: Change) {}

    /// Shows `change`, which the server has already, above the contents until the loadable's next
    /// successful sync; `settled` is called then, if the change concerned the contents.
    func addSent(_ change: Change, settled: @escaping @MainActor () -> Void) {}

    /// Item `id`'s change is now `change` (merged, rebased, resolved, or the server's version):
    /// its layer shows that instead, in its place.
    func replace(_ id: String, _ change: Change) {}

    /// The item `id` reached the server: its change joins the base contents. Returns whether the
    /// change concerned the loadable's contents (`false` also when it has none yet: then the
    /// change stays above the first contents until the next successful sync).
    func join(_ id: String) -> Bool { false }

    /// The item `id` was discarded: its layer goes.
    func drop(_ id: String) {}
}

/// An ``OutboxDisplay`` on a loadable with contents of type `Contents`.
final class OutboxLoadableDisplay<Change, Contents>: OutboxDisplay<Change> {
    private weak var loadable: PushLoadable<Contents>?
    private let apply: @MainActor (inout Contents, Change) -> Bool
    /// The loadable's layer of each item shown, and where the layer says whether it concerns the
    /// contents.
    private var layers: [String: (layer: Int, concern: PendingChangeConcern)] = [:]

    init(loadable: PushLoadable<Contents>, apply: @escaping @MainActor (inout Contents, Change) -> Bool) {
        self.loadable = loadable
        self.apply = apply
    }

    override var isGone: Bool { loadable == nil }

    override func shows(on loadable: AnyObject) -> Bool { self.loadable === loadable }

    override func add(_ id: String, _ change: Change) {
        guard let loadable else { return }
        let concern = PendingChangeConcern()
        let layer = loadable.addPendingChange(applying(change, concern), concern: concern)
        layers[id] = (layer, concern)
    }

    override func addSent(_ change: Change, settled: @escaping @MainActor () -> Void) {
        guard let loadable else { return }
        let concern = PendingChangeConcern()
        concern.settled = settled
        _ = loadable.addPendingChange(applying(change, concern), concern: concern, isSent: true)
    }

    override func replace(_ id: String, _ change: Change) {
        guard let shown = layers[id] else { return }
        loadable?.replacePendingChange(shown.layer, with: applying(change, shown.concern))
    }

    override func join(_ id: String) -> Bool {
        guard let shown = layers.removeValue(forKey: id), let loadable else { return false }
        let hasContents = loadable.baseContents != nil
        loadable.joinPendingChange(shown.layer)
        return hasContents && shown.concern.concerns
    }

    override func drop(_ id: String) {
        guard let shown = layers.removeValue(forKey: id) else { return }
        loadable?.dropPendingChange(shown.layer)
    }

    private func applying(
        _ change: Change, _ concern: PendingChangeConcern
    ) -> @MainActor (inout Contents) -> Void {
        let apply = self.apply
        return { concern.concerns = apply(&$0, change) }
    }
}
