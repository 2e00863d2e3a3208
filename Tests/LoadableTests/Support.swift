import Loadable
import Testing

/// An error with a name, for asserting which error a loadable reports.
struct TestError: Error, Equatable, CustomStringConvertible {
    var name: String
    init(_ name: String = "test") { self.name = name }
    var description: String { name }
}

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

/// Records what observers saw, as `state` descriptions (optionally with contents).
@MainActor
final class Recorder {
    private(set) var states: [LoadableState] = []
    var count: Int { states.count }
    func record(_ loadable: any PureLoadable) { states.append(loadable.loadableState) }
}

/// Lets other main-actor tasks run until `condition` holds; fails the test after `limit` turns.
///
/// Never sleeps: each turn is a `Task.yield()`.
@MainActor
func yieldUntil(
    limit: Int = 10_000,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: @MainActor () -> Bool
) async {
    for _ in 0..<limit {
        if condition() { return }
        await Task.yield()
    }
    Issue.record("condition did not hold after \(limit) turns", sourceLocation: sourceLocation)
}
