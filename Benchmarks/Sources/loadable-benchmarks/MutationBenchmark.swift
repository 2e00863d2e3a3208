import Foundation
import Loadable

/// A post, changed optimistically.
struct BenchmarkPost {
    var title = "Hello"
    var isLiked = false
    var likes = 0
}

/// A loadable of one post that never syncs here.
final class BenchmarkPostLoadable: Loadable<BenchmarkPost> {
    override func doSync() {}
}

/// A commit that answers at once.
@MainActor
@inline(never)
func benchmarkCommit(_ value: Int) async -> Int { value }

/// An error of the benchmark's own, thrown by a failing commit.
struct BenchmarkCommitError: Error {}

/// Optimistic changes: `mutate` with a commit that answers at once, on a loadable with one
/// observer and nothing else pending ("no contention"), against two `setContents` calls (the
/// change shown, then written: what an app does by hand for the same two notifications).
@MainActor
func runMutation(_ settings: Settings, into report: inout Report) async {
    let count = settings.mutations

    /// Runs `count` changes through `change` on a fresh loadable with one counting observer;
    /// returns the sample and the notifications per change.
    func measure(
        _ change: (BenchmarkPostLoadable, Int) async -> Void
    ) async -> (sample: Sample, notifications: Double) {
        var notifications = 0.0
        let sample = await best(of: settings.runs) {
            let counter = Counter()
            let post = BenchmarkPostLoadable()
            post.setDidSyncSuccessfully(BenchmarkPost())
            let token = post.addObserver { _ in counter.value &+= 1 }
            // One change first, so that the loadable's one-time state exists (as in an app, after
            // the first like).
            await change(post, -1)
            counter.value = 0
            let stopwatch = Stopwatch.start()
            for index in 0..<count { await change(post, index) }
            let sample = stopwatch.stop()
            notifications = Double(counter.value) / Double(count)
            withExtendedLifetime(token) {}
            blackHole(post.contents)
            return sample
        }
        return (sample, notifications)
    }

    let succeeding = await measure { post, index in
        _ = try? await post.mutate {
            $0.isLiked = index & 1 == 0
        } commit: {
            await benchmarkCommit(index)
        }
    }
    let reconciled = await measure { post, index in
        _ = try? await post.mutate {
            $0.isLiked = true
        } commit: {
            await benchmarkCommit(index)
        } reconcile: {
            $0.likes = $1
        }
    }
    let failing = await measure { post, index in
        _ = try? await post.mutate {
            $0.likes = index
        } commit: { () async throws -> Int in
            throw BenchmarkCommitError()
        }
    }
    let byHand = await measure { post, index in
        // Show the change, commit, write it (no rollback, no layers): two notifications.
        var shown = post.contents ?? BenchmarkPost()
        shown.isLiked = index & 1 == 0
        post.setContents(shown)
        blackHole(await benchmarkCommit(index))
        post.setContents(shown)
    }
    let floor = await measure { post, index in
        var shown = post.contents ?? BenchmarkPost()
        shown.isLiked = index & 1 == 0
        post.setContents(shown)
        post.setContents(shown)
    }

    let floorNanoseconds = floor.sample.nanoseconds(per: count)
    func add(_ name: String, _ result: (sample: Sample, notifications: Double)) {
        let nanoseconds = result.sample.nanoseconds(per: count)
        report.add(
            Row(
                scenario: name, value: nanoseconds, unit: "ns/op",
                allocationsPerOperation: result.sample.allocations(per: count),
                baseline: "two setContents", baselineValue: floorNanoseconds,
                ratio: nanoseconds / floorNanoseconds))
    }
    add("mutate, commit succeeds (\(count.formatted))", succeeding)
    add("mutate, commit succeeds, reconcile", reconciled)
    add("mutate, commit fails (rollback)", failing)
    add("by hand: setContents, commit, setContents", byHand)
    report.add(
        Row(
            scenario: "mutation floor: two setContents", value: floorNanoseconds, unit: "ns/op",
            allocationsPerOperation: floor.sample.allocations(per: count)))

    let worstNotifications = [succeeding, reconciled, failing].map(\.notifications).max() ?? 0
    report.add(
        Goal(
            name: "mutation notifications (succeeds, reconcile, fails)", target: "<= 2 per change",
            measured: String(
                format: "%.2f, %.2f, %.2f per change", succeeding.notifications, reconciled.notifications,
                failing.notifications),
            holds: worstNotifications <= 2))
    let allocations = [succeeding, reconciled].map { $0.sample.allocations(per: count) }
    report.add(
        Goal(
            name: "mutation allocations, no contention (succeeds, reconcile)", target: "<= 3 per change",
            measured: String(format: "%.2f, %.2f per change", allocations[0], allocations[1]),
            holds: (allocations.max() ?? 0) <= 3))
}
