import Loadable
import LoadableTestSupport
import Testing

@Suite("LoadableState and LoadableSnapshot")
struct LoadableStateTests {
    @Test(
        "descriptions are the kebab-case names",
        arguments: [
            (LoadableState.idle, "idle"),
            (.syncing, "syncing"),
            (.didSyncSuccessfully, "did-sync-successfully"),
            (.didFailToSync, "did-fail-to-sync"),
        ])
    func descriptions(state: LoadableState, text: String) {
        #expect(state.description == text)
        #expect("\([state])" == "[\(text)]")
    }

    @Test("a snapshot's phase follows its state and keeps cached contents")
    func phases() {
        if case .idle(let cached) = LoadableSnapshot(state: .idle, contents: 1).phase {
            #expect(cached == 1)
        } else {
            Issue.record("expected idle")
        }
        if case .syncing(let cached) = LoadableSnapshot<Int>(state: .syncing).phase {
            #expect(cached == nil)
        } else {
            Issue.record("expected syncing")
        }
        if case .loaded(let value) = LoadableSnapshot(state: .didSyncSuccessfully, contents: 3).phase {
            #expect(value == 3)
        } else {
            Issue.record("expected loaded")
        }
        if case .failed(let error, let cached) = LoadableSnapshot(
            state: .didFailToSync, contents: 4, error: TestError("boom")
        ).phase {
            #expect(error as? TestError == TestError("boom"))
            #expect(cached == 4)
        } else {
            Issue.record("expected failed")
        }
    }

    @Test("a failure without an error shows LoadableError.unspecified")
    func failedWithoutError() {
        guard case .failed(let error, _) = LoadableSnapshot<Int>(state: .didFailToSync).phase else {
            Issue.record("expected failed")
            return
        }
        #expect(error as? LoadableError == .unspecified)
    }

    @Test("an empty collection after a successful sync is .empty, a non-empty one is .loaded")
    func emptyPhase() {
        guard case .empty = LoadableSnapshot(state: .didSyncSuccessfully, contents: [Int]()).phase else {
            Issue.record("expected empty")
            return
        }
        guard case .empty = LoadableSnapshot(state: .didSyncSuccessfully, contents: "").phase else {
            Issue.record("expected empty for an empty string")
            return
        }
        guard case .loaded([1]) = LoadableSnapshot(state: .didSyncSuccessfully, contents: [1]).phase else {
            Issue.record("expected loaded")
            return
        }
        // Syncing with an empty cached collection is still syncing, not empty.
        guard case .syncing = LoadableSnapshot(state: .syncing, contents: [Int]()).phase else {
            Issue.record("expected syncing")
            return
        }
    }

    @Test("availability defaults to contents != nil and can be given")
    func availability() {
        #expect(LoadableSnapshot(state: .idle, contents: 1).isContentsAvailable)
        #expect(!LoadableSnapshot<Int>(state: .idle).isContentsAvailable)
        #expect(!LoadableSnapshot(state: .idle, contents: 1, isContentsAvailable: false).isContentsAvailable)
        #expect(
            LoadableSnapshot(state: .didFailToSync, contents: 1, error: TestError("x")).description
                == "<did-fail-to-sync, contents available: yes, error: x, failures: 1>")
    }
}
