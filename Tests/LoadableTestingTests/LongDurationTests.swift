import Foundation
import LoadableTesting
import Testing

/// The testing module's durations accept every value up to `.seconds(Int64.max)`.
@Suite("Testing durations of centuries")
struct TestingLongDurationTests {
    @Test("a LoopbackHTTPServer with a lifetime of .seconds(Int64.max) starts and stops without trapping")
    func serverLifetime() async {
        await #expect(processExitsWith: .success) {
            let server = try? LoopbackHTTPServer(lifetime: .seconds(Int64.max)) { _ in .status(204) }
            #expect(server != nil)
            for _ in 0..<50 { await Task.yield() }
            server?.stop()
        }
    }

    @Test("a ManualClock sleeper of .seconds(Int64.max) wakes when time moves that far")
    @MainActor
    func manualClockSleep() async throws {
        let clock = ManualClock()
        var woke = false
        let task = Task { @MainActor in
            try await clock.sleep(for: .seconds(Int64.max))
            woke = true
        }
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(Int64.max - 1))
        #expect(!woke)
        await clock.advance(by: .seconds(1))
        #expect(woke)
        try await task.value
    }
}
