import Loadable
import LoadableCaching
import LoadableTesting
import Testing

/// An outbox set up wrongly stops the program with a message naming what is wrong, in debug and
/// release builds alike.
@Suite("Outbox: bad configuration stops with a clear message")
struct OutboxConfigurationExitTests {
    @Test("maxConcurrentSends below 1 names maxConcurrentSends and the value")
    func maxConcurrentSendsBelowOne() async {
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                _ = LoadableOutbox<Int>(cache: InMemoryLoadableCache(), maxConcurrentSends: 0) { _, _ in .applied }
            }
        }
        .map { result in
            let text = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(text.contains("maxConcurrentSends must be 1 or more"))
            #expect(text.contains("got 0"))
        }
    }
}
