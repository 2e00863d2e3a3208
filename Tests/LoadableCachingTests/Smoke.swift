import LoadableCaching
import LoadableTesting
import Testing

@Suite("LoadableStore smoke")
@MainActor
struct StoreSmokeTests {
    @Test func leaseShares() {
        let clock = ManualClock()
        var made = 0
        let store = LoadableStore<Int, TestLoadable<String>>(retention: .seconds(10), clock: clock) { _ in
            made += 1
            return TestLoadable()
        }
        let a = store.lease(1)
        let b = store.lease(1)
        #expect(a.loadable === b.loadable)
        #expect(made == 1)
        a.syncIfNeeded()
        b.syncIfNeeded()
        #expect(a.loadable.syncIfNeededCount == 2)
        #expect(store.syncingCount == 1)
        a.loadable.setDidSyncSuccessfully("x")
        #expect(store.syncingCount == 0)
    }
}

@Suite("LoadableStore expiry smoke")
@MainActor
struct StoreExpirySmokeTests {
    @Test func expires() async {
        let clock = ManualClock()
        var made = 0
        let store = LoadableStore<Int, TestLoadable<String>>(retention: .seconds(10), clock: clock) { _ in
            made += 1
            return TestLoadable()
        }
        var a: LoadableLease<TestLoadable<String>>? = store.lease(1)
        a?.syncIfNeeded()
        weak let value = a?.loadable
        a = nil
        #expect(store.count == 1)
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(10) - .milliseconds(1))
        #expect(store.count == 1)
        await clock.advance(by: .milliseconds(2))
        #expect(store.count == 0)
        #expect(value == nil)
        #expect(store.syncingCount == 0)
    }
}
