import LoadableGroup
import LoadableTesting
import Testing

/// An error with a name, for telling errors apart in expectations.
struct TestError: Error, Equatable, CustomStringConvertible {
    var name: String
    init(_ name: String) { self.name = name }
    var description: String { name }
}

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

/// Records what a loadable's observers see: one entry per notification.
@MainActor
final class NotificationRecorder {
    private(set) var states: [LoadableState] = []
    private var observation: LoadableObservation?

    init(_ loadable: some PureLoadable) {
        observation = loadable.addObserver { [unowned self] loadable in
            self.states.append(loadable.loadableState)
        }
    }

    var count: Int { states.count }
}
