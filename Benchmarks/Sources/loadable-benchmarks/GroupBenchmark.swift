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
///
/// Every figure is the median of ``Settings/medianRuns`` runs, with its range. The runs take
/// turns: each round runs every size with and without a group, in reverse order every other round,
/// so that a busy moment of the machine slows the sizes and sides alike. A run of a size under
/// 100,000 members is that many groups one after the other, timed together, to 100,000 members in
/// all (10 groups of 10,000), and its figure is the time of one of them (see ``cycles(_:_:)``).
/// The 4× scaling is the ratio of two medians.
@MainActor
func runGroup(_ settings: Settings, into report: inout Report) {
    let sizes = settings.groupSizes
    let membersPerRun = min(100_000, sizes.max() ?? 0)
    func groups(_ size: Int) -> Int { max(1, membersPerRun / size) }
    var sides: [() -> Sample] = []
    for size in sizes {
        sides.append { cycles(groups(size)) { groupRun(members: size) } }
        sides.append { cycles(groups(size)) { membersAloneRun(members: size) } }
    }
    let samples = alternatingRuns(settings.medianRuns, sides)

    var spreads: [Int: Spread] = [:]
    for (offset, size) in sizes.enumerated() {
        let group = Spread(milliseconds: samples[2 * offset], cycles: groups(size))
        let alone = Spread(milliseconds: samples[2 * offset + 1], cycles: groups(size))
        spreads[size] = group
        report.add(
            Row(
                scenario: "group: \(size.formatted) members sync + succeed", value: group.median, unit: "ms",
                allocationsPerOperation: median(samples[2 * offset]).allocations(per: size * groups(size)),
                baseline: "members alone, 1 observer each", baselineValue: alone.median,
                ratio: group.median / alone.median))
    }

    for size in sizes where sizes.contains(size * 4) {
        guard let small = spreads[size], let large = spreads[size * 4] else { continue }
        report.add(
            Row(
                scenario: "group: \((size * 4).formatted) vs \(size.formatted) members (4×)", value: large.median,
                unit: "ms", baseline: "\(size.formatted) members", baselineValue: small.median,
                ratio: large.median / small.median))
    }

    guard let time = spreads[100_000] else { return }
    let runs = "median of \(time.runs) runs"
    report.add(
        Goal(
            name: "group of 100,000 members", target: "<= 100 ms",
            measured: "\(time.formatted("%.1f", " ms")), \(runs)", holds: time.median <= 100))
    if let large = spreads[400_000] {
        let ratio = large.median / time.median
        report.add(
            Goal(
                name: "group 400,000 vs 100,000 members", target: "<= 5x time",
                measured: String(format: "%.2fx", ratio)
                    + " (\(large.formatted("%.1f", " ms")) vs \(time.formatted("%.1f", " ms")), \(runs))",
                holds: ratio <= 5))
    }
}

/// One timed run of a group of `count` new members: made, observed, synced, every member succeeds.
@MainActor
private func groupRun(members count: Int) -> Sample {
    let members = (0..<count).map { _ in PendingLoadable() }
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

/// The baseline of ``groupRun(members:)``: `count` new members, each observed, synced and succeeded
/// without a group.
@MainActor
private func membersAloneRun(members count: Int) -> Sample {
    let members = (0..<count).map { _ in PendingLoadable() }
    let counter = Counter()
    let stopwatch = Stopwatch.start()
    let tokens = members.map { $0.addObserver { _ in counter.value &+= 1 } }
    for member in members { member.sync() }
    for member in members { member.setDidSyncSuccessfully(1) }
    let sample = stopwatch.stop()
    precondition(counter.value == 2 * count)
    withExtendedLifetime(tokens) {}
    return sample
}
