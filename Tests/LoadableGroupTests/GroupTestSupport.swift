import LoadableGroup
import LoadableTestSupport
import LoadableTesting
import Testing

/// A loadable whose `doSync()` finishes before it returns.
final class ImmediateLoadable: Loadable<Int> {
    /// What the next sync ends with: contents, or a failure (keeping any contents).
    var nextResult: Result<Int, TestError>

    init(_ nextResult: Result<Int, TestError> = .success(1)) {
        self.nextResult = nextResult
        super.init()
    }

    override func doSync() {
        switch nextResult {
        case .success(let value): setDidSyncSuccessfully(value)
        case .failure(let error): setDidFailToSync(error)
        }
    }
}
