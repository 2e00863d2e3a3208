import LoadableTesting
import Testing

// The samples of Docs/Testing.md, verbatim, so CI proves they compile and pass.

@MainActor
final class GreetingViewModel {
    let name: TestLoadable<String>
    private var token: LoadableObservation?
    private(set) var text = ""

    init(name: TestLoadable<String>) {
        self.name = name
        token = name.observe { [weak self] name in
            self?.text = name.contents.map { "Hello, \($0)" } ?? (name.loadableState == .syncing ? "…" : "")
        }
        name.syncIfNeeded()
    }
}

@Test @MainActor func greetsOnceTheNameIsLoaded() {
    let name = TestLoadable<String>()
    let model = GreetingViewModel(name: name)
    #expect(name.syncCount == 1)
    #expect(model.text == "…")
    name.setDidSyncSuccessfully("Ada")
    #expect(model.text == "Hello, Ada")
}

@MainActor
final class Ticker {
    private(set) var ticks = 0
    private var task: Task<Void, Never>?

    init(clock: any Clock<Duration>) {
        task = Task { [weak self] in
            while (try? await clock.sleep(for: .seconds(10))) != nil {
                self?.ticks += 1
            }
        }
    }

    deinit { task?.cancel() }
}

@Test @MainActor func ticksEveryTenSeconds() async {
    let clock = ManualClock()
    let ticker = Ticker(clock: clock)
    await clock.waitForSleepers()
    await clock.advance(by: .seconds(25))
    #expect(ticker.ticks == 2)
    #expect(clock.requestedSleeps == [.seconds(10), .seconds(10), .seconds(10)])
}
