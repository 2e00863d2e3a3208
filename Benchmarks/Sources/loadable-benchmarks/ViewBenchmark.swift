import Foundation
import LoadableCaching
import LoadableSync
import LoadableSyncer

/// Live views of a synced collection (`RecordView`, issue 44), over collections of 100,000 tasks
/// (id, title, `updatedAt`, `done`; every other task done) loaded by a first pull from an
/// in-process remote, each on its own `InMemoryLoadableCache` (the outbox's saves cost no file
/// write) and an `ActivityMonitor()` that never changes. Every view has one observer that counts.
///
/// - Update + read: `update(id) { $0.updatedAt = next }` of an open task at a random place,
///   which moves it to the top of a view of all 100,000 sorted by `updatedAt` descending, then a
///   read of each view (`contents` count and first record), per call; on a collection with no
///   view (reading the record from `contents` instead), one with that view, and one with ten
///   views that all show the task (a mix of filters and sorts), the three taking turns update by
///   update (median of 2,000; pushes to the remote run every 100 updates, untimed). Against the
///   same update followed by a filter and a sort of `contents` by hand (20 of them).
/// - Build: `view(where:sortedBy:)` over 100,000 with every task kept and with the open half,
///   against `Array(contents).filter(_:).sorted(by:)` by hand, in turn (median of 7 each).
/// - A change no view shows: a done task's title changed, on collections with no view, one
///   view and ten views of the open tasks, in turn; the views must notify nothing. Per view:
///   (ten views − none) / 10. Also `update(id) { _ in }`, which changes nothing, and a pulled
///   page bringing a shown task with a new version and equal contents (checked, not timed).
@MainActor
func runViews(_ settings: Settings, into report: inout Report) async {
    let count = settings.viewRecords
    let rounds = settings.viewUpdates
    var random = SplitMix64(seed: 44)
    let stamps = Array(0..<count).shuffled(using: &random)
    let records = (0..<count).map {
        ViewTask(id: "t\($0)", title: "Task \($0)", updatedAt: stamps[$0], done: !$0.isMultiple(of: 2))
    }
    // Open tasks move to the top; done ones change where no view looks.
    let open = Array(stride(from: 0, to: count, by: 2).shuffled(using: &random).prefix(rounds))
    let done = Array(stride(from: 1, to: count, by: 2).shuffled(using: &random).prefix(rounds))

    // Update + read.
    let alone = ViewSide(await loadedCollection(records), shapes: [])
    let one = ViewSide(await loadedCollection(records), shapes: [latestFirst()])
    let ten = ViewSide(await loadedCollection(records), shapes: tenShapes())
    var nextStamp = count
    let moves = await interleaved([alone, one, ten], rounds: rounds) { side, round in
        let id = "t\(open[round])"
        side.tasks.update(id) { $0.updatedAt = nextStamp + round }
        side.read(id)
    } check: { side, round in
        side.checkFirst(id: "t\(open[round])", updatedAt: nextStamp + round)
    }
    nextStamp += rounds
    for side in [one, ten] {
        precondition(side.notifications.allSatisfy { $0.value == rounds }, "a view did not notify once per change")
        side.checkAgainstHand()
    }
    // By hand: the same update, then a filter and a sort of the contents.
    let shape = latestFirst()
    var byHand: [Sample] = []
    for round in 0..<20 {
        let id = "t\(open[round])"
        let stopwatch = Stopwatch.start()
        alone.tasks.update(id) { $0.updatedAt = nextStamp + round }
        let shown = Array(alone.tasks.contents!).filter(shape.isIncluded).sorted(by: shape.areInIncreasingOrder)
        blackHole(shown.count)
        blackHole(shown.first)
        byHand.append(stopwatch.stop())
        precondition(shown.first?.id == id, "the hand-sorted array does not start with the updated task")
    }
    nextStamp += 20
    await alone.drained()
    let aloneMove = Summary(moves[0])
    let oneMove = Summary(moves[1])
    let tenMove = Summary(moves[2])
    let hand = Summary(byHand)
    report.add(
        Row(
            scenario: "views: update + read, no view", value: aloneMove.median / 1e3, unit: "µs/op",
            allocationsPerOperation: aloneMove.allocations))
    report.add(
        Row(
            scenario: "views: update + read, 1 view (to the top)", value: oneMove.median / 1e3, unit: "µs/op",
            allocationsPerOperation: oneMove.allocations, baseline: "no view", baselineValue: aloneMove.median / 1e3,
            ratio: oneMove.median / aloneMove.median))
    report.add(
        Row(
            scenario: "views: update + filter + sort by hand", value: hand.median / 1e3, unit: "µs/op",
            allocationsPerOperation: hand.allocations, baseline: "1 view", baselineValue: oneMove.median / 1e3,
            ratio: hand.median / oneMove.median))
    report.add(
        Row(
            scenario: "views: update + read, 10 views", value: tenMove.median / 1e3, unit: "µs/op",
            allocationsPerOperation: tenMove.allocations, baseline: "1 view", baselineValue: oneMove.median / 1e3,
            ratio: tenMove.median / oneMove.median))
    let oneNet = oneMove.median - aloneMove.median
    let tenNet = tenMove.median - aloneMove.median
    report.add(
        Row(
            scenario: "views: 10 views, net of no view", value: tenNet / 1e3, unit: "µs/op", baseline: "1 view, net",
            baselineValue: oneNet / 1e3, ratio: tenNet / oneNet))
    report.add(
        Goal(
            name: "views: update of 1 of \(count.formatted) moving it to the top of a view of all, then a read",
            target: "<= 250 µs",
            measured: String(
                format: "%.1f µs (median of %d, 10th–90th percentile %.1f–%.1f µs; no view %.1f µs; "
                    + "filter + sort by hand %.1f ms)", oneMove.median / 1e3, rounds, oneMove.low / 1e3,
                oneMove.high / 1e3, aloneMove.median / 1e3, hand.median / 1e6),
            holds: oneMove.median <= 250_000))
    report.add(
        Goal(
            name: "views: ten views over one collection, per change, net of the collection alone",
            target: "<= 10x one view",
            measured: String(
                format: "%.2fx (%.1f against %.1f µs net; raw %.1f against %.1f µs, %.2fx)", tenNet / oneNet,
                tenNet / 1e3, oneNet / 1e3, tenMove.median / 1e3, oneMove.median / 1e3,
                tenMove.median / oneMove.median),
            holds: tenNet <= 10 * oneNet))

    // Build.
    var builds: [[Sample]] = Array(repeating: [], count: 4)
    let shapes = [latestFirst(), openShapes()[0]]
    for run in 0..<settings.viewBuilds {
        for (index, shape) in shapes.enumerated() {
            var sides: [() -> Void] = [
                {
                    let view = alone.tasks.view(where: shape.isIncluded, sortedBy: shape.areInIncreasingOrder)
                    blackHole(view.count)
                },
                {
                    let shown = Array(alone.tasks.contents!).filter(shape.isIncluded).sorted(
                        by: shape.areInIncreasingOrder)
                    blackHole(shown.count)
                },
            ]
            if !run.isMultiple(of: 2) { sides.reverse() }
            for (side, body) in sides.enumerated() {
                let stopwatch = Stopwatch.start()
                body()
                let sample = stopwatch.stop()
                let isView = run.isMultiple(of: 2) == (side == 0)
                builds[index * 2 + (isView ? 0 : 1)].append(sample)
            }
        }
    }
    let buildAll = Summary(builds[0])
    let buildHalf = Summary(builds[2])
    for (index, name) in ["all", "half"].enumerated() {
        let view = Summary(builds[index * 2])
        let hand = Summary(builds[index * 2 + 1])
        report.add(
            Row(
                scenario: "views: build, \(name) of \(count.formatted)", value: view.median / 1e6, unit: "ms",
                allocationsPerOperation: view.allocations, baseline: "filter + sort by hand",
                baselineValue: hand.median / 1e6, ratio: view.median / hand.median))
    }
    let handAll = Summary(builds[1])
    let handHalf = Summary(builds[3])
    report.add(
        Goal(
            name: "views: building a view of \(count.formatted) (all kept / half kept)",
            target: "<= 100 ms",
            measured: String(
                format: "%.1f / %.1f ms (median of %d, longest %.1f / %.1f ms; by hand %.1f / %.1f ms)",
                buildAll.median / 1e6, buildHalf.median / 1e6, settings.viewBuilds, buildAll.longest / 1e6,
                buildHalf.longest / 1e6, handAll.median / 1e6, handHalf.median / 1e6),
            holds: max(buildAll.median, buildHalf.median) <= 100_000_000))

    // A change no view shows.
    let none = ViewSide(await loadedCollection(records), shapes: [])
    let oneOpen = ViewSide(await loadedCollection(records), shapes: [openShapes()[0]])
    let tenOpen = ViewSide(await loadedCollection(records), shapes: openShapes())
    let unseen = await interleaved([none, oneOpen, tenOpen], rounds: rounds) { side, round in
        side.tasks.update("t\(done[round])") { $0.title = "Task \(done[round]), edited" }
    }
    let nothing = await interleaved([none, tenOpen], rounds: rounds) { side, round in
        side.tasks.update("t\(open[round])") { _ in }
    }
    for side in [oneOpen, tenOpen] {
        precondition(side.notifications.allSatisfy { $0.value == 0 }, "a view notified of a change it does not show")
    }
    // A pulled page bringing a shown task again, with a new version and equal contents.
    for side in [ten, tenOpen] {
        let told = side.notifications.map(\.value)
        side.tasks.remote.touch(open[0])
        side.tasks.sync()
        while side.tasks.loadableState == .syncing { await Task.yield() }
        precondition(side.notifications.map(\.value) == told, "a view notified of a pulled task equal to its own")
    }
    let unseenNone = Summary(unseen[0])
    let unseenOne = Summary(unseen[1])
    let unseenTen = Summary(unseen[2])
    let perView = (unseenTen.median - unseenNone.median) / 10
    for (summary, name) in [(unseenNone, "no view"), (unseenOne, "1 view"), (unseenTen, "10 views")] {
        report.add(
            Row(
                scenario: "views: change no view shows, \(name)", value: summary.median / 1e3, unit: "µs/op",
                allocationsPerOperation: summary.allocations))
    }
    report.add(Row(scenario: "views: change no view shows, per view", value: perView, unit: "ns/op"))
    for (samples, name) in [(nothing[0], "no view"), (nothing[1], "10 views")] {
        let summary = Summary(samples)
        report.add(
            Row(
                scenario: "views: update changing nothing, \(name)", value: summary.median, unit: "ns/op",
                allocationsPerOperation: summary.allocations))
    }
    report.add(
        Goal(
            name: "views: a change no view shows notifies nothing, per view",
            target: "<= 2 µs, 0 notifications",
            measured: String(
                format: "%.0f ns ((%.1f − %.1f µs) / 10, medians of %d; 1 view %.1f µs), 0 notifications",
                perView, unseenTen.median / 1e3, unseenNone.median / 1e3, rounds, unseenOne.median / 1e3),
            holds: perView <= 2_000))
}

/// A task of the `views` scenario, as a to-do app keeps it.
struct ViewTask: Identifiable, Codable, Sendable, Equatable {
    var id: String
    var title: String
    var updatedAt: Int
    var done: Bool
}

/// A view's filter and sort.
private struct ViewShape {
    var isIncluded: (ViewTask) -> Bool
    var areInIncreasingOrder: (ViewTask, ViewTask) -> Bool
}

/// The goals' view: every task, the last changed first.
private func latestFirst() -> ViewShape {
    ViewShape(isIncluded: { _ in true }, areInIncreasingOrder: { $0.updatedAt > $1.updatedAt })
}

/// Ten views a task app might keep, each showing every open task: the goals' view first.
private func tenShapes() -> [ViewShape] {
    let all: (ViewTask) -> Bool = { _ in true }
    let open: (ViewTask) -> Bool = { !$0.done }
    return [
        latestFirst(),
        ViewShape(isIncluded: open, areInIncreasingOrder: { $0.updatedAt > $1.updatedAt }),
        ViewShape(isIncluded: all, areInIncreasingOrder: { $0.updatedAt < $1.updatedAt }),
        ViewShape(isIncluded: all, areInIncreasingOrder: { $0.title < $1.title }),
        ViewShape(isIncluded: open, areInIncreasingOrder: { $0.title > $1.title }),
        ViewShape(isIncluded: all, areInIncreasingOrder: { $0.id < $1.id }),
        ViewShape(isIncluded: all, areInIncreasingOrder: { !$0.done && $1.done }),
        ViewShape(
            isIncluded: all,
            areInIncreasingOrder: { $0.done == $1.done ? $0.updatedAt > $1.updatedAt : !$0.done }),
        ViewShape(
            isIncluded: open,
            areInIncreasingOrder: { ($0.title.utf8.count, $1.updatedAt) < ($1.title.utf8.count, $0.updatedAt) }),
        ViewShape(isIncluded: { $0.updatedAt >= 0 }, areInIncreasingOrder: { $0.updatedAt > $1.updatedAt }),
    ]
}

/// Ten views of the open tasks, in different orders: none shows a done task.
private func openShapes() -> [ViewShape] {
    let open: (ViewTask) -> Bool = { !$0.done }
    var sorts: [(ViewTask, ViewTask) -> Bool] = []
    sorts.append { $0.updatedAt > $1.updatedAt }
    sorts.append { $0.updatedAt < $1.updatedAt }
    sorts.append { $0.title < $1.title }
    sorts.append { $0.title > $1.title }
    sorts.append { $0.id < $1.id }
    sorts.append { $0.id > $1.id }
    sorts.append { ($0.title.utf8.count, $1.updatedAt) < ($1.title.utf8.count, $0.updatedAt) }
    sorts.append { ($0.updatedAt % 7, $0.updatedAt) < ($1.updatedAt % 7, $1.updatedAt) }
    sorts.append { ($0.title.utf8.count, $0.id) < ($1.title.utf8.count, $1.id) }
    sorts.append { $0.updatedAt / 10 > $1.updatedAt / 10 }
    return sorts.map { ViewShape(isIncluded: open, areInIncreasingOrder: $0) }
}

/// A collection, its views and their observers' counters.
@MainActor
private final class ViewSide {
    let tasks: SyncedCollection<PagedRemote<ViewTask>>
    let views: [RecordView<ViewTask>]
    let notifications: [Counter]
    private let shapes: [ViewShape]
    private let observations: [LoadableObservation]

    init(_ tasks: SyncedCollection<PagedRemote<ViewTask>>, shapes: [ViewShape]) {
        self.tasks = tasks
        self.shapes = shapes
        views = shapes.map { tasks.view(where: $0.isIncluded, sortedBy: $0.areInIncreasingOrder) }
        let notifications = views.map { _ in Counter() }
        self.notifications = notifications
        observations = zip(views, notifications).map { view, counter in
            view.addObserver { _ in counter.value += 1 }
        }
    }

    /// Reads each view's count and first task, as a screen would, and lets the arrays go; with
    /// no view, the task `id` from the collection.
    func read(_ id: String) {
        guard !views.isEmpty else {
            blackHole(tasks.contents?[id: id])
            return
        }
        for view in views {
            let contents = view.contents!
            blackHole(contents.count)
            blackHole(contents.first)
        }
    }

    /// Checks that the views sorted by `updatedAt` descending start with task `id`.
    func checkFirst(id: String, updatedAt: Int) {
        guard let first = views.first?.contents?.first else { return }
        precondition(first.id == id && first.updatedAt == updatedAt, "the updated task is not first in the view")
    }

    /// Checks that each view shows what a filter and a stable sort of the collection give.
    func checkAgainstHand() {
        for (view, shape) in zip(views, shapes) {
            let shown = Array(tasks.contents!).filter(shape.isIncluded).sorted(by: shape.areInIncreasingOrder)
            precondition(view.contents == shown, "a view differs from its filter and sort by hand")
        }
    }

    /// Returns once the collection's pending changes were pushed.
    func drained() async {
        while tasks.status.pendingCount > 0 { await Task.yield() }
    }
}

/// Runs `body` on each side `rounds` times, timing each call; the sides take turns, in the
/// reverse order every other round, so that a busy moment slows each alike. `check` runs after
/// each timed call, untimed; the pushes are drained every 100 rounds, untimed.
///
/// - Returns: For each side, its samples in order.
@MainActor
private func interleaved(
    _ sides: [ViewSide], rounds: Int, _ body: (ViewSide, Int) -> Void, check: (ViewSide, Int) -> Void = { _, _ in }
) async -> [[Sample]] {
    var samples = Array(repeating: [Sample](), count: sides.count)
    for round in 0..<rounds {
        let order = round.isMultiple(of: 2) ? Array(sides.indices) : sides.indices.reversed()
        for index in order {
            let stopwatch = Stopwatch.start()
            body(sides[index], round)
            samples[index].append(stopwatch.stop())
            check(sides[index], round)
        }
        if round % 100 == 99 || round == rounds - 1 {
            for side in sides { await side.drained() }
        }
    }
    return samples
}

/// The median, 10th and 90th percentiles and longest of samples, in nanoseconds, and their
/// allocations per sample.
private struct Summary {
    var median: Double
    var low: Double
    var high: Double
    var longest: Double
    var allocations: Double

    init(_ samples: [Sample]) {
        let sorted = samples.map(\.duration.nanoseconds).sorted()
        median = sorted[sorted.count / 2]
        low = sorted[sorted.count / 10]
        high = sorted[sorted.count * 9 / 10]
        longest = sorted.last!
        allocations = Double(samples.reduce(0) { $0 + $1.allocations }) / Double(samples.count)
    }
}

/// A seeded generator (SplitMix64), so that every run moves the same tasks.
private struct SplitMix64: RandomNumberGenerator {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A collection of `records` on a fresh `InMemoryLoadableCache`, after its first pull.
@MainActor
private func loadedCollection(_ records: [ViewTask]) async -> SyncedCollection<PagedRemote<ViewTask>> {
    let tasks = SyncedCollection(
        remote: PagedRemote(records, pageSize: 1_000), cache: InMemoryLoadableCache(), conflicts: .serverWins,
        activity: ActivityMonitor())
    await tasks.restored()
    tasks.sync()
    while tasks.loadableState == .syncing { await Task.yield() }
    await tasks.saved()
    precondition(tasks.contents?.count == records.count, "the first pull showed \(tasks.contents?.count ?? 0) tasks")
    return tasks
}
