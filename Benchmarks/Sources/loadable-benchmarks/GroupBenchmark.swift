import Foundation
import Loadable
import LoadableGroup

/// A loadable whose sync never finishes by itself: the benchmark finishes it.
final class PendingLoadable: Loadable<Int> {
    override func doSync() {}
}

/// Group: a strict ``LoadableGroup`` of N members, observed, synced through the group, then every
/// member succeeds. Timed from creating the group until it is `didSyncSuccessfully` (members are
/// created beforehand). The baseline is the same members, each with one observer of its own,
/// synced and succeeded without a group.
@MainActor
func runGroup(_ settings: Settings, into report: inout Report) {
    var milliseconds: [Int: Double] = [:]
    for size in settings.groupSizes {
        let group = best(of: settings.groupRuns) {
            let members = (0..<size).map { _ in PendingLoadable() }
            let counter = Counter()
            let stopwatch = Stopwatch.start()
            let group = LoadableGroup(members, policy: .strict)
            let token = group.addObserver { _ in counter.value &+= 1 }
            group.sync()
            for member in members { member.setDidSyncSuccessfully(1) }
            let sample = stopwatch.stop()
            precondition(group.loadableState == .didSyncSuccessfully && counter.value == 2)
            withExtendedLifetime(token) {}
            return sample
        }

        let membersOnly = best(of: settings.groupRuns) {
            let members = (0..<size).map { _ in PendingLoadable() }
            let counter = Counter()
            let stopwatch = Stopwatch.start()
            let tokens = members.map { $0.addObserver { _ in counter.value &+= 1 } }
            for member in members { member.sync() }
            for member in members { member.setDidSyncSuccessfully(1) }
            let sample = stopwatch.stop()
            precondition(counter.value == 2 * size)
            withExtendedLifetime(tokens) {}
            return sample
        }

        let groupMilliseconds = group.duration.nanoseconds / 1e6
        let baselineMilliseconds = membersOnly.duration.nanoseconds / 1e6
        milliseconds[size] = groupMilliseconds
        report.add(
            Row(
                scenario: "group: \(size.formatted) members sync + succeed", value: groupMilliseconds, unit: "ms",
                allocationsPerOperation: group.allocations(per: size),
                baseline: "members alone, 1 observer each", baselineValue: baselineMilliseconds,
                ratio: groupMilliseconds / baselineMilliseconds))
    }

    for size in settings.groupSizes where settings.groupSizes.contains(size * 4) {
        guard let small = milliseconds[size], let large = milliseconds[size * 4] else { continue }
        report.add(
            Row(
                scenario: "group: \((size * 4).formatted) vs \(size.formatted) members (4×)", value: large, unit: "ms",
                baseline: "\(size.formatted) members", baselineValue: small, ratio: large / small))
    }

    if let time = milliseconds[100_000] {
        report.add(
            Goal(
                name: "group of 100,000 members", target: "<= 100 ms",
                measured: String(format: "%.1f ms", time), holds: time <= 100))
        if let large = milliseconds[400_000] {
            let ratio = large / time
            report.add(
                Goal(
                    name: "group 400,000 vs 100,000 members", target: "<= 5x time",
                    measured: String(format: "%.2fx", ratio), holds: ratio <= 5))
        }
    }
}
