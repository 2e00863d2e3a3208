import Loadable
import Testing

/// Every programmer error in the core stops the program with a message that names what is wrong,
/// in debug and release builds alike.
@Suite("Configuration errors stop with a clear message")
struct ConfigurationExitTests {
    @Test("an AsyncLoadable with neither a closure nor a load() override names load()")
    func asyncLoadableWithoutLoad() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            // The load runs in a task of its own; waiting for the contents waits for it.
            await Task { @MainActor in _ = try? await AsyncLoadable<Int>().syncedContents() }.value
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("must override load() or be created with init(load:)"))
        }
    }

    @Test("a PagedLoadable with neither a closure nor a loadPage(after:) override names loadPage(after:)")
    func pagedLoadableWithoutLoadPage() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await Task { @MainActor in _ = try? await PagedLoadable<Int, Int>().syncedContents() }.value
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("must override loadPage(after:)"))
        }
    }
}
