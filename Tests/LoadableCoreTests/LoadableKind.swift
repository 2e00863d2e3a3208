import Loadable
import LoadableCaching
import LoadableGroup
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// One public loadable type under test, and how to make it change.
///
/// Each kind drives its loadable through the simplest thing it follows: a loadable's own setters,
/// a proxy's target, a mapped loadable's source, the one member of a group that decides its state.
/// ``set(_:)`` moves the loadable to a state (with contents for a success) and makes it notify
/// once; it reads nothing through Observation.
@MainActor
final class Subject {
    /// The loadable under test.
    let loadable: any PureLoadable
    /// Moves the loadable to `state`; its observers are notified once.
    let set: @MainActor (LoadableState) -> Void
    /// Reads the loadable's typed contents, when it has contents.
    let readContents: (@MainActor () -> Void)?
    /// The loadable under test and every loadable it follows or is made of (a proxy's target, a
    /// group's members, a store's entry), for checks that look at all of them.
    let involved: [any PureLoadable]

    init(
        _ loadable: any PureLoadable,
        involving others: [any PureLoadable] = [],
        readContents: (@MainActor () -> Void)?,
        set: @escaping @MainActor (LoadableState) -> Void
    ) {
        self.loadable = loadable
        self.readContents = readContents
        self.set = set
        involved = [loadable] + others
    }

    /// A subject whose loadable is a `PushLoadable<Int>` (or a subclass): its own setters drive it.
    static func driving(_ loadable: PushLoadable<Int>) -> Subject {
        Subject(loadable, readContents: { [weak loadable] in _ = loadable?.contents }) { [weak loadable] state in
            loadable?.drive(to: state)
        }
    }

    /// A subject whose loadable follows `source` (held by the driver, so the subject's loadable can
    /// be released on its own).
    static func following(
        _ loadable: some PureLoadable,
        readContents: (@MainActor () -> Void)?,
        source: PushLoadable<Int>,
        involving others: [any PureLoadable] = []
    ) -> Subject {
        Subject(loadable, involving: [source] + others, readContents: readContents) { state in source.drive(to: state) }
    }
}

extension PushLoadable<Int> {
    /// Moves to `state` with one setter (a success brings contents), reading nothing through
    /// Observation.
    func drive(to state: LoadableState) {
        switch state {
        case .idle: setIdle()
        case .syncing: setSyncing()
        case .didSyncSuccessfully: setDidSyncSuccessfully((baseContents ?? 0) + 1)
        case .didFailToSync: setDidFailToSync(TestError("failed"))
        }
    }
}

/// A `Loadable` subclass whose sync the test finishes.
final class PlainLoadable: Loadable<Int> {
    override func doSync() {}
}

/// An `AutosyncLoadable` whose sync the test finishes.
final class PlainAutosyncLoadable: AutosyncLoadable<Int> {
    override func doSync() {}
}

/// Every public loadable type, as a test argument.
struct LoadableKind: Sendable, CustomTestStringConvertible {
    let name: String
    /// Whether the type has typed contents (a `ContentsLoadable`).
    let hasContents: Bool
    let make: @MainActor @Sendable () -> Subject

    init(name: String, hasContents: Bool = true, make: @escaping @MainActor @Sendable () -> Subject) {
        self.name = name
        self.hasContents = hasContents
        self.make = make
    }

    var testDescription: String { name }

    /// The kinds with typed contents.
    static var withContents: [LoadableKind] { all.filter(\.hasContents) }

    static let all: [LoadableKind] = [
        LoadableKind(name: "PushLoadable") { .driving(PushLoadable<Int>()) },
        LoadableKind(name: "Loadable subclass") { .driving(PlainLoadable()) },
        LoadableKind(name: "AsyncLoadable") { .driving(AsyncLoadable<Int> { 1 }) },
        LoadableKind(name: "AutosyncLoadable") {
            // Successful already, so that a first observer starts no sync of its own.
            let loadable = PlainAutosyncLoadable(autosyncInterval: .seconds(60), clock: ManualClock())
            loadable.setDidSyncSuccessfully(0)
            return .driving(loadable)
        },
        LoadableKind(name: "PagedLoadable") {
            let paged = PagedLoadable<Int, Int> { _ in .init(items: [], nextCursor: nil) }
            return Subject(paged, readContents: { [weak paged] in _ = paged?.contents }) { [weak paged] state in
                guard let paged else { return }
                switch state {
                case .idle: paged.setIdle()
                case .syncing: paged.setSyncing()
                case .didSyncSuccessfully: paged.setDidSyncSuccessfully([(paged.baseContents?.count ?? 0) + 1])
                case .didFailToSync: paged.setDidFailToSync(TestError("failed"))
                }
            }
        },
        LoadableKind(name: "LoadableChain") {
            let chain = LoadableChain([])
            return Subject(chain, readContents: { [weak chain] in _ = chain?.contents }) { [weak chain] state in
                guard let chain else { return }
                switch state {
                case .idle: chain.setIdle()
                case .syncing: chain.setSyncing()
                case .didSyncSuccessfully: chain.setDidSyncSuccessfully(())
                case .didFailToSync: chain.setDidFailToSync(TestError("failed"))
                }
            }
        },
        LoadableKind(name: "TestLoadable") {
            let test = TestLoadable<Int>()
            return Subject(test, readContents: { [weak test] in _ = test?.contents }) { [weak test] state in
                guard let test else { return }
                switch state {
                case .idle: test.setIdle()
                case .syncing: test.setSyncing()
                case .didSyncSuccessfully:
                    test.setDidSyncSuccessfully((test.core.readUntracked { test.contents } ?? 0) + 1)
                case .didFailToSync: test.setDidFailToSync(TestError("failed"))
                }
            }
        },
        LoadableKind(name: "PureLoadableProxy") {
            let target = PushLoadable<Int>()
            let proxy = PureLoadableProxy(target: target)
            return .following(proxy, readContents: { [weak proxy] in _ = proxy?.contents }, source: target)
        },
        LoadableKind(name: "LoadableProxy") {
            let target = PlainLoadable()
            let proxy = LoadableProxy(target: target)
            return .following(proxy, readContents: { [weak proxy] in _ = proxy?.contents }, source: target)
        },
        LoadableKind(name: "LoadableLease") {
            let loadable = PlainLoadable()
            let lease = loadable.lease()
            return .following(lease, readContents: { [weak lease] in _ = lease?.contents }, source: loadable)
        },
        LoadableKind(name: "LoadableLease from a LoadableStore") {
            let store = LoadableStore<Int, PlainLoadable>(clock: ManualClock()) { _ in PlainLoadable() }
            let lease = store.lease(1)
            let entry = lease.loadable
            // The driver keeps the store, which its lease holds only through the entry, weakly.
            return Subject(lease, involving: [entry], readContents: { [weak lease] in _ = lease?.contents }) { state in
                withExtendedLifetime(store) { entry.drive(to: state) }
            }
        },
        LoadableKind(name: "KeyedLoadableProxy") {
            let store = LoadableStore<Int, PlainLoadable>(clock: ManualClock()) { _ in PlainLoadable() }
            let proxy = KeyedLoadableProxy(store: store, key: 1)
            let entry = proxy.loadable!
            return .following(proxy, readContents: { [weak proxy] in _ = proxy?.contents }, source: entry)
        },
        LoadableKind(name: "KeyedLoadableProxy showing a placeholder") {
            // Key 1 has contents; key 2 has none yet, so the proxy starts on key 1's, as a
            // placeholder, until key 2's entry succeeds or fails.
            let store = LoadableStore<Int, PlainLoadable>(clock: ManualClock()) { _ in PlainLoadable() }
            let proxy = KeyedLoadableProxy(store: store, key: 1, placeholder: .previousContents)
            proxy.loadable!.setDidSyncSuccessfully(10)
            proxy.key = 2
            let entry = proxy.loadable!
            return .following(proxy, readContents: { [weak proxy] in _ = proxy?.contents }, source: entry)
        },
        LoadableKind(name: "MappedLoadable") {
            let source = PushLoadable<Int>()
            let mapped = source.map { $0 * 2 }
            return .following(mapped, readContents: { [weak mapped] in _ = mapped?.contents }, source: source)
        },
        LoadableKind(name: "PureLoadableGroup", hasContents: false) {
            let member = PushLoadable<Int>()
            return .following(PureLoadableGroup([member]), readContents: nil, source: member)
        },
        LoadableKind(name: "LoadableGroup", hasContents: false) {
            let member = PlainLoadable()
            return .following(LoadableGroup([member], policy: .any), readContents: nil, source: member)
        },
        LoadableKind(name: "CombinedLoadable") {
            // The second member succeeded: the combined state follows the first.
            let first = PushLoadable<Int>()
            let second = PushLoadable<Int>(contents: 10)
            second.setDidSyncSuccessfully(10)
            let combined = LoadableGroup.combine(first, second) { $0 + $1 }
            return Subject(
                combined, involving: [first, second, combined.group],
                readContents: { [weak combined] in _ = combined?.contents }
            ) { state in
                withExtendedLifetime(second) { first.drive(to: state) }
            }
        },
    ]
}
