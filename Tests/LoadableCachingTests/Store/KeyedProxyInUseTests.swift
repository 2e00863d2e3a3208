import LoadableCaching
import LoadableTesting
import Testing

/// A keyed proxy passes its own "in use" on like every loadable that stands for another.
@Suite("KeyedLoadableProxy in use")
@MainActor
struct KeyedProxyInUseTests {
    @Test("a keyed proxy in use passes its use to its entry, and from the old entry to the new one on a key change")
    func passesUse() throws {
        let store = LoadableStore<Int, TestLoadable<Int>>(retention: .seconds(60), clock: ManualClock()) { _ in
            TestLoadable()
        }
        let proxy = KeyedLoadableProxy(store: store, key: 1)
        let first = try #require(store.peek(1))
        let use = proxy.lease()
        #expect(proxy.isInUse)
        #expect(first.isInUse)

        proxy.key = 2
        let second = try #require(store.peek(2))
        #expect(second.isInUse)
        #expect(!first.isInUse)  // its lease went, and so did the proxy's use

        // The proxy's use ends on the entry it was passed to; the proxy's own lease keeps it.
        use.release()
        #expect(second.isInUse)
        proxy.key = nil
        #expect(!second.isInUse)
    }
}
