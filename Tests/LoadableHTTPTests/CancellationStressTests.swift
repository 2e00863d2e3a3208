import Foundation
import LoadableCaching
import LoadableHTTP
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Cancelling a request just as its answer arrives, by every path the package has, never blocks
/// and never crashes, and a cancelled sync's answer never lands.
///
/// On Linux, FoundationNetworking's own async API deadlocks the cancelling thread (or stops the
/// process) when a cancel meets the completion of the same transfer; the `URLSession` transport
/// must never let that happen. Each path runs hundreds of cycles against a `LoopbackHTTPServer`
/// that answers at once: a cycle starts a request, waits until the server has it (its
/// ``LoopbackHTTPServer/arrivals``), gives a few turns so that the cancel lands anywhere from
/// before the answer is written to after it was read, then cancels. It runs in a child process
/// whose `alarm` bounds it in time, so that a deadlock fails the test instead of hanging the run.
@Suite("The URLSession transport: cancelling as the answer arrives never blocks")
struct CancellationStressTests {
    /// A way the package cancels a request.
    enum Path: String, CaseIterable, Codable, Sendable {
        case cancelSync, release, syncTimeout, storeRemove, storeRemoveAll, storeExpiry, actionCancel, screenClose
    }

    /// Cycles per path: 2,500 in all, a tenth under ThreadSanitizer.
    static let cycles = StressScale.rounds(320)
    /// Seconds a child may run before `alarm` stops it.
    static let bound: UInt32 = 120

    @Test("hundreds of cancels at arrival, by each path, end without blocking or crashing", arguments: Path.allCases)
    func cancelsAtArrival(path: Path) async {
        let result = await #expect(
            processExitsWith: .success, observing: [\.standardOutputContent],
            "\(path): the child blocked, crashed or failed"
        ) {
            [path = path as Path, cycles = Self.cycles as Int, bound = Self.bound as UInt32] in
            alarm(bound)
            // Failures are reported on the standard output; a block or a crash fails the exit.
            for failure in try await Stress.run(path, cycles: cycles) { ChildReport.fail(failure) }
        }
        ChildReport.recordFailures(of: result, context: "\(path)")
    }
}

struct Numbered: Decodable, Sendable, Equatable {
    let id: Int
}

/// The cycles of ``CancellationStressTests``, run in the child process.
@MainActor
enum Stress {
    /// Runs `cycles` cycles of `path`; returns what went wrong (nothing, when all is well).
    static func run(_ path: CancellationStressTests.Path, cycles: Int) async throws -> [String] {
        // Each answer carries the cycle of its request (`/item?cycle=7` gives `{"id":7}`), so a
        // late answer can be told apart from its loadable's own.
        let server = try LoopbackHTTPServer { request in
            .json(#"{"id":\#(request.target.split(separator: "=").last ?? "0")}"#)
        }
        let run = Run(server: server, path: path)
        for cycle in 0..<cycles {
            try await run.cycle(cycle)
        }
        await run.finish()
        return run.failures
    }

    /// One path's loadables, and what the cycles saw.
    @MainActor
    final class Run {
        let server: LoopbackHTTPServer
        let path: CancellationStressTests.Path
        let clock = ManualClock()
        var random = SeededRandomNumberGenerator(seed: 26)
        var failures: [String] = []
        /// The loadables whose sync a cancel ended before its answer landed, kept until the end:
        /// their answer must never show.
        var cancelled: [HTTPLoadable<Numbered>] = []
        var store: LoadableStore<Int, HTTPLoadable<Numbered>>!
        var action: LoadableAction<Int, Data>!

        init(server: LoopbackHTTPServer, path: CancellationStressTests.Path) {
            self.server = server
            self.path = path
            store = LoadableStore(retention: .seconds(10), clock: clock) { [unowned self] in self.loadable($0) }
            action = LoadableAction(concurrency: .cancelPrevious) { cycle in
                try await URLSession.shared.send(URLRequest(url: server.url("/item?cycle=\(cycle)")), maxBodySize: 100)
                    .1
            }
        }

        /// A loadable of the answer of `cycle`, through `URLSession.shared`.
        func loadable(_ cycle: Int) -> HTTPLoadable<Numbered> {
            HTTPLoadable<Numbered>(request: URLRequest(url: server.url("/item?cycle=\(cycle)")), clock: clock)
        }

        /// One request, cancelled once the server has it.
        func cycle(_ cycle: Int) async throws {
            let arrivals = server.arrivals
            switch path {
            case .cancelSync:
                let feed = loadable(cycle)
                feed.sync()
                await arrival(after: arrivals)
                feed.cancelSync()
                noteCancel(of: feed, cycle: cycle)
            case .release:
                var loadable: HTTPLoadable<Numbered>? = self.loadable(cycle)
                loadable?.sync()
                await arrival(after: arrivals)
                loadable = nil
            case .syncTimeout:
                let feed = loadable(cycle)
                feed.syncTimeout = .seconds(1)
                feed.sync()
                await arrival(after: arrivals)
                // The watchdog's timer sleeps on the clock unless the sync ended already.
                await settle { self.clock.pendingSleepCount > 0 || feed.loadableState != .syncing }
                await clock.advance(by: .seconds(1))
                noteCancel(of: feed, cycle: cycle)
            case .storeRemove, .storeRemoveAll:
                let lease = store.lease(cycle)
                lease.sync()
                await arrival(after: arrivals)
                if path == .storeRemove { store.remove(cycle) } else { store.removeAll() }
                noteCancel(of: lease.loadable, cycle: cycle)
                lease.release()
            case .storeExpiry:
                let lease = store.lease(cycle)
                lease.sync()
                await arrival(after: arrivals)
                let loadable = lease.loadable
                lease.release()
                await settle { self.clock.pendingSleepCount > 0 }
                await clock.advance(by: .seconds(10))
                if store.peek(cycle) != nil { failures.append("cycle \(cycle): the entry outlived its retention") }
                noteCancel(of: loadable, cycle: cycle)
            case .actionCancel:
                let run = action.send(cycle)
                await arrival(after: arrivals)
                run.cancel()
                _ = await run.result
            case .screenClose:
                var screen: [HTTPLoadable<Numbered>] = (0..<20).map { _ in self.loadable(cycle) }
                for loadable in screen { loadable.sync() }
                await arrival(after: arrivals + Int.random(in: 0..<20, using: &random))
                screen.removeAll()
            }
        }

        /// Waits until the server has the requests after the first `count`, then gives 0 to 3
        /// turns so that the cancel lands before, during or after the answer.
        func arrival(after count: Int) async {
            await server.waitForArrivals(count + 1)
            for _ in 0..<Int.random(in: 0...3, using: &random) { await Task.yield() }
        }

        /// A cancel ended the sync of `loadable`, the loadable of `cycle`: unless its answer had
        /// landed already, it must never show.
        func noteCancel(of loadable: HTTPLoadable<Numbered>, cycle: Int) {
            if loadable.loadableState == .syncing { failures.append("cycle \(cycle): still syncing after the cancel") }
            if loadable.contents == nil { cancelled.append(loadable) }
        }

        /// Lets late answers arrive, then checks that none of a cancelled sync showed.
        func finish() async {
            await server.waitUntilNoConnectionIsHeld()
            for _ in 0..<200 { await Task.yield() }
            let landed = cancelled.compactMap(\.contents?.id)
            if !landed.isEmpty { failures.append("answers of cancelled syncs landed: \(landed.prefix(10))") }
        }
    }
}
