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

    /// The item `id` reached the server: its change joins the base contents.
    func join(_ id: String) {}

    /// The item `id` was discarded: its layer goes.
    func drop(_ id: String) {}
}

/// An ``OutboxDisplay`` on a loadable with contents of type `Contents`.
final class OutboxLoadableDisplay<Change, Contents>: OutboxDisplay<Change> {
    private weak var loadable: PushLoadable<Contents>?
    private let apply: @MainActor (inout Contents, Change) -> Bool
    /// The loadable's layer of each item shown.
    private var layers: [String: Int] = [:]

    init(loadable: PushLoadable<Contents>, apply: @escaping @MainActor (inout Contents, Change) -> Bool) {
        self.loadable = loadable
        self.apply = apply
    }

    override var isGone: Bool { loadable == nil }

    override func shows(on loadable: AnyObject) -> Bool { self.loadable === loadable }

    override func add(_ id: String, _ change: Change) {
        guard let loadable else { return }
        let apply = self.apply
        let concern = PendingChangeConcern()
        layers[id] = loadable.addPendingChange({ concern.concerns = apply(&$0, change) }, concern: concern)
    }

    override func join(_ id: String) {
        guard let layer = layers.removeValue(forKey: id) else { return }
        loadable?.joinPendingChange(layer)
    }

    override func drop(_ id: String) {
        guard let layer = layers.removeValue(forKey: id) else { return }
        loadable?.dropPendingChange(layer)
    }
}
