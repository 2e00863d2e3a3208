import Loadable
import LoadableCaching
import Testing

/// A loadable for the exit tests; it is never synced.
private final class ExitLoadable: Loadable<Int> {
    override func doSync() {}
}

/// A negative `maxRestoreAge` stops the program with a message naming `maxRestoreAge` and the
/// value, for `persist` and for a store made with a cache, in debug and release builds alike.
@Suite("Persistence: bad configuration stops with a clear message")
struct PersistenceConfigurationExitTests {
    @Test("persist with a negative maxRestoreAge names maxRestoreAge")
    func negativeMaxRestoreAgeForPersist() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                _ = ExitLoadable().persist(in: InMemoryLoadableCache(), key: "k", maxRestoreAge: .milliseconds(-1))
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("ExitLoadable.persist(in:key:): maxRestoreAge must be .zero or more"))
            #expect(text.contains("-0.001 seconds"))
        }
    }

    @Test("a store with a cache and a negative maxRestoreAge names maxRestoreAge")
    func negativeMaxRestoreAgeForStore() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                _ = LoadableStore<Int, ExitLoadable>(
                    cache: InMemoryLoadableCache(), cacheKey: { "\($0)" }, maxRestoreAge: .seconds(-2)
                ) { _ in ExitLoadable() }
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("LoadableStore: maxRestoreAge must be .zero or more"))
            #expect(text.contains("-2.0 seconds"))
        }
    }

    @Test("maxRestoreAge .zero is valid for persist and for a store")
    @MainActor
    func zeroMaxRestoreAgeIsValid() {
        let cache = InMemoryLoadableCache()
        let persistence = ExitLoadable().persist(in: cache, key: "k", maxRestoreAge: .zero)
        let store = LoadableStore<Int, ExitLoadable>(cache: cache, cacheKey: { "\($0)" }, maxRestoreAge: .zero) { _ in
            ExitLoadable()
        }
        #expect(persistence.key == "k")
        #expect(store.count == 0)
    }
}
