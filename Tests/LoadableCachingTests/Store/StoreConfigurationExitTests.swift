import Loadable
import LoadableCaching
import LoadableTesting
import Testing

/// A loadable of the app's own type (it conforms to `SyncableLoadable` directly), for the check
/// that an entry owns its loadable when the store cannot mark the loadable's core.
@MainActor
private final class OwnTypeLoadable: SyncableLoadable {
    private let inner = PushLoadable<Int>()
    var loadableState: LoadableState { inner.loadableState }
    var error: (any Error)? { inner.error }
    var isContentsAvailable: Bool { inner.isContentsAvailable }
    var needsSync: Bool { true }
    func sync() {}
    func syncIfNeeded() {}
    func invalidate() {}
    func cancelSync() {}

    func addObserver(_ handler: @escaping @MainActor (any PureLoadable) -> Void) -> LoadableObservation {
        inner.addObserver(handler)
    }
}

/// A weak reference to a store, for a `make` that leases from the store it belongs to.
@MainActor
private final class ExitStoreRef {
    weak var store: LoadableStore<Int, TestLoadable<Int>>?
}

/// A store set up wrongly stops the program with a message naming what is wrong, in debug and
/// release builds alike.
@Suite("LoadableStore: bad configuration stops with a clear message")
struct StoreConfigurationExitTests {
    @Test("a negative retention names retention")
    func negativeRetention() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                _ = LoadableStore<Int, TestLoadable<Int>>(retention: .milliseconds(-1)) { _ in TestLoadable() }
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("LoadableStore: retention must be zero or more"))
            #expect(text.contains("-0.001 seconds"))
        }
    }

    @Test("a negative maxRetained names maxRetained")
    func negativeMaxRetained() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                _ = LoadableStore<Int, TestLoadable<Int>>(maxRetained: -1) { _ in TestLoadable() }
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("LoadableStore: maxRetained must be nil (no limit) or 0 or more, got -1"))
        }
    }

    @Test("make returning the same loadable for two keys: an entry must own its loadable")
    func sameLoadableForTwoKeys() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let shared = TestLoadable<Int>()
                let store = LoadableStore<Int, TestLoadable<Int>> { _ in shared }
                let first = store.lease(1)
                let second = store.lease(2)
                withExtendedLifetime((first, second)) {}
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("make(2) returned a loadable that is already an entry of a store"))
            #expect(text.contains("an entry must own its loadable"))
        }
    }

    @Test("make returning the same loadable of the app's own type for two keys: an entry must own its loadable")
    func sameOwnTypeLoadableForTwoKeys() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let shared = OwnTypeLoadable()
                let store = LoadableStore<Int, OwnTypeLoadable> { _ in shared }
                let first = store.lease(1)
                let second = store.lease(2)
                withExtendedLifetime((first, second)) {}
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("make(2) returned a loadable that is already an entry of this store"))
            #expect(text.contains("an entry must own its loadable"))
        }
    }

    @Test("make leasing the key it is making names make")
    func makeLeasesItsOwnKey() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let ref = ExitStoreRef()
                let store = LoadableStore<Int, TestLoadable<Int>> { key in
                    _ = ref.store?.lease(key)
                    return TestLoadable()
                }
                ref.store = store
                _ = store.lease(1)
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("make(1) asked the store for 1 itself; make must not lease the key it is making"))
        }
    }

    @Test("make leasing the key it is making through another key's make names make")
    func makeLeasesItsOwnKeyIndirectly() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let ref = ExitStoreRef()
                let store = LoadableStore<Int, TestLoadable<Int>> { key in
                    _ = ref.store?.lease(key == 1 ? 2 : 1)
                    return TestLoadable()
                }
                ref.store = store
                _ = store.lease(1)
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("make(1) asked the store for 1 itself; make must not lease the key it is making"))
        }
    }
}
