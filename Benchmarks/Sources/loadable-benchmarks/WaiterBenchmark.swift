import Foundation
import Loadable
import LoadableSyncer
import LoadableTesting

/// Waiters: N pending waits on one ``LoadableWaiter`` resolved by one success of the target, with
/// the callback form and with `wait()` from N tasks; and N waits expiring together on a
/// `ManualClock`. Each timing covers beginning the waits and ending them.
@MainActor
func runWaiters(_ settings: Settings, into report: inout Report) async {
    var callbackMilliseconds: [Int: Double] = [:]
    for count in settings.waitCounts {
        let sample = best(of: settings.runs) {
            let clock = ManualClock()
            let target = PendingLoadable()
            let waiter = LoadableWaiter(target, timeout: .seconds(60), clock: clock)
            let counter = Counter()
            let stopwatch = Stopwatch.start()
            for _ in 0..<count {
                waiter.wait { result in
                    if case .success = result { counter.value &+= 1 }
                }
            }
            target.setDidSyncSuccessfully(1)
            let sample = stopwatch.stop()
            precondition(counter.value == count)
            return sample
        }
        callbackMilliseconds[count] = sample.duration.nanoseconds / 1e6
        report.add(
            Row(
                scenario: "waiters: \(count.formatted) callback waits resolved",
                value: sample.duration.nanoseconds / 1e6,
                unit: "ms", allocationsPerOperation: sample.allocations(per: count)))
    }

    var asyncMilliseconds: [Int: Double] = [:]
    for count in settings.waitCounts {
        let sample = await best(of: settings.runs) { await resolveAsyncWaits(count) }
        asyncMilliseconds[count] = sample.duration.nanoseconds / 1e6
        report.add(
            Row(
                scenario: "waiters: \(count.formatted) async waits resolved", value: sample.duration.nanoseconds / 1e6,
                unit: "ms", allocationsPerOperation: sample.allocations(per: count)))
    }

    var expiryMilliseconds: [Int: Double] = [:]
    for count in settings.expiryCounts {
        let sample = await best(of: settings.runs) {
            let clock = ManualClock()
            let target = PendingLoadable()
            let waiter = LoadableWaiter(target, timeout: .seconds(10), clock: clock)
            let counter = Counter()
            let stopwatch = Stopwatch.start()
            for _ in 0..<count {
                waiter.wait { result in
                    if case .failure(LoadableWaiterError.timedOut) = result { counter.value &+= 1 }
                }
            }
            await clock.waitForSleepers(count: 1)
            await clock.advance(by: .seconds(10))
            var spins = 0
            while counter.value < count, spins < 1000 {
                await Task.yield()
                spins += 1
            }
            let sample = stopwatch.stop()
            precondition(counter.value == count, "only \(counter.value) of \(count) waits expired")
            return sample
        }
        expiryMilliseconds[count] = sample.duration.nanoseconds / 1e6
        report.add(
            Row(
                scenario: "waiters: \(count.formatted) waits expire (ManualClock)",
                value: sample.duration.nanoseconds / 1e6, unit: "ms",
                allocationsPerOperation: sample.allocations(per: count)))
    }

    for (name, figures) in [
        ("callback", callbackMilliseconds), ("async", asyncMilliseconds), ("expiry", expiryMilliseconds),
    ] {
        for count in figures.keys.sorted() {
            guard let small = figures[count], let large = figures[count * 4] else { continue }
            report.add(
                Row(
                    scenario: "waiters (\(name)): \((count * 4).formatted) vs \(count.formatted) (4×)", value: large,
                    unit: "ms", baseline: "\(count.formatted) waits", baselineValue: small, ratio: large / small))
        }
    }

    let slowest = [callbackMilliseconds[40_000], asyncMilliseconds[40_000]].compactMap { $0 }.max()
    if let slowest {
        report.add(
            Goal(
                name: "40,000 waits resolved (slower of callback and async forms)", target: "<= 200 ms",
                measured: String(format: "%.1f ms", slowest), holds: slowest <= 200))
    }
    for (name, figures) in [("callback", callbackMilliseconds), ("async", asyncMilliseconds)] {
        guard let small = figures[10_000], let large = figures[40_000] else { continue }
        let ratio = large / small
        report.add(
            Goal(
                name: "waits linear (\(name), 40k vs 10k)", target: "<= 5x time",
                measured: String(format: "%.2fx", ratio), holds: ratio <= 5))
    }
}

/// One run of `count` tasks each awaiting `wait()`, resolved by one success.
@MainActor
private func resolveAsyncWaits(_ count: Int) async -> Sample {
    let clock = ManualClock()
    let target = PendingLoadable()
    let waiter = LoadableWaiter(target, timeout: .seconds(60), clock: clock)
    let stopwatch = Stopwatch.start()
    var tasks: [Task<Bool, Never>] = []
    tasks.reserveCapacity(count)
    for _ in 0..<count {
        tasks.append(Task { @MainActor in (try? await waiter.wait()) != nil })
    }
    while waiter.pendingWaitCount < count { await Task.yield() }
    target.setDidSyncSuccessfully(1)
    var succeeded = 0
    for task in tasks where await task.value { succeeded += 1 }
    let sample = stopwatch.stop()
    precondition(succeeded == count)
    return sample
}
