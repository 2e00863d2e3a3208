import Loadable
import LoadableTestSupport
import Testing

/// A loadable whose `doSync` the test controls: it records calls and can finish at once.
@MainActor
final class ManualLoadable: Loadable<Int> {
    enum Finish { case never, succeed(Int), fail(TestError) }
    var finishInDoSync: Finish = .never
    private(set) var doSyncCount = 0
    private(set) var doCancelSyncCount = 0

    override func doSync() {
        doSyncCount += 1
        switch finishInDoSync {
        case .never: break
        case .succeed(let value): setDidSyncSuccessfully(value)
        case .fail(let error): setDidFailToSync(error)
        }
    }

    override func doCancelSync() { doCancelSyncCount += 1 }
}
