import Loadable
import LoadableTestSupport
import Observation
import Testing

@Suite("Observation framework integration")
@MainActor
struct ObservationTests {
    // Case 1 (`contents`) used to be reported too: since "Equal contents notify nothing",
    // Observation tracks the contents apart, and a sync starting changes only the state.
    @Test("reading loadableState tracks state changes", arguments: 0..<4)
    func tracksEachProperty(property: Int) {
        let loadable = ManualLoadable()
        let counter = trackObservationChanges {
            switch property {
            case 0: _ = loadable.loadableState
            case 1: _ = loadable.contents
            case 2: _ = loadable.error
            default: _ = loadable.isContentsAvailable
            }
        }
        #expect(counter.count == 0)
        loadable.sync()
        #expect(counter.count == (property == 1 ? 0 : 1))
    }

    @Test("every setter and notifyDidChange is reported", arguments: 0..<6)
    func settersReported(setter: Int) {
        let loadable = ManualLoadable(contents: 1)
        // Syncing first for `setIdle()`: an idle loadable moved to idle again tells nobody.
        if setter == 4 { loadable.setSyncing() }
        let counter = trackObservationChanges { _ = loadable.snapshot }
        switch setter {
        case 0: loadable.setSyncing()
        case 1: loadable.setDidSyncSuccessfully(2)
        case 2: loadable.setDidSyncSuccessfully()
        case 3: loadable.setDidFailToSync(nil)
        case 4: loadable.setIdle()
        default: loadable.notifyDidChange()
        }
        #expect(counter.count == 1)
    }

    @Test("a loadable is Observable")
    func isObservable() {
        let loadable: any Observable = ManualLoadable()
        #expect(loadable is ManualLoadable)
    }
}
