import Loadable
import Testing

/// Invalid freshness and watchdog settings stop the program with a message that names the
/// property and the value given.
@Suite("Freshness configuration errors stop with a clear message")
struct FreshnessConfigurationExitTests {
    /// The captured standard error of an exit test, as text.
    private func standardError(_ result: ExitTest.Result?) -> String {
        String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
    }

    @Test("a negative maxAge names maxAge and the value")
    func negativeMaxAge() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let loadable = ManualLoadable()
                loadable.maxAge = .seconds(-1)
            }
        }
        let text = standardError(result)
        #expect(text.contains("ManualLoadable.maxAge must be >= .zero or nil, got \(Duration.seconds(-1))"))
    }

    @Test("a zero syncTimeout names syncTimeout and the value")
    func zeroSyncTimeout() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let loadable = ManualLoadable()
                loadable.syncTimeout = .zero
            }
        }
        let text = standardError(result)
        #expect(text.contains("ManualLoadable.syncTimeout must be > .zero or nil, got \(Duration.zero)"))
    }

    @Test("a negative syncTimeout names syncTimeout and the value")
    func negativeSyncTimeout() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let loadable = ManualLoadable()
                loadable.syncTimeout = .milliseconds(-250)
            }
        }
        let text = standardError(result)
        #expect(
            text.contains("ManualLoadable.syncTimeout must be > .zero or nil, got \(Duration.milliseconds(-250))"))
    }

    @Test("a zero slowSyncAfter names slowSyncAfter and the value")
    func zeroSlowSyncAfter() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let loadable = ManualLoadable()
                loadable.slowSyncAfter = .zero
            }
        }
        let text = standardError(result)
        #expect(text.contains("ManualLoadable.slowSyncAfter must be > .zero or nil, got \(Duration.zero)"))
    }

    @Test("a negative slowSyncAfter names slowSyncAfter and the value")
    func negativeSlowSyncAfter() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let loadable = ManualLoadable()
                loadable.slowSyncAfter = .seconds(-3)
            }
        }
        let text = standardError(result)
        #expect(text.contains("ManualLoadable.slowSyncAfter must be > .zero or nil, got \(Duration.seconds(-3))"))
    }
}
