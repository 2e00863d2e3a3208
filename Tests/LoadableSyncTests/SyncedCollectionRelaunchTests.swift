import Foundation
import LoadableSync
import LoadableTestSupport
import LoadableTesting
import Testing

/// A collection dropped and made again on the same cache and key in one process (a relaunch in
/// tests, a signed-out account signed in again): the new one must not meet the old one's outbox.
@Suite struct SyncedCollectionRelaunchTests {
    /// The child of the exit test: an outbox still alive on the key would stop the program. Many
    /// rounds, each on a new cache: what keeps the old collection alive (a task, a job of the
    /// cache's queue on another thread) is most often gone already by the time the new one is
    /// made.
    @MainActor
    static func dropAndMakeAgainAtOnce() async {
        for round in 0..<200 {
            let server = SyncTestServer<TaskRecord>()
            let cache = InMemoryLoadableCache()
            do {
                let first = makeCollection(server: server, cache: cache)
                first.insert(TaskRecord(id: "a", title: "A"))
            }
            let again = makeCollection(server: server, cache: cache)
            await again.restored()
            if again.contents?[id: "a"]?.title != "A" {
                ChildReport.fail("round \(round): the insert was not restored")
            }
        }
    }

    @Test("a collection dropped before its outbox restored can be made again on its key at once")
    func madeAgainAtOnce() async {
        let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
            await SyncedCollectionRelaunchTests.dropAndMakeAgainAtOnce()
        }
        ChildReport.recordFailures(of: result, context: "made again at once")
    }
}
