import Dispatch
import Foundation
import LoadableCaching
import LoadableInspector
import LoadableSupport
import LoadableTesting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `--inspect` and `--events`: the simulated tour with a `LoadableInspector` attached on its clock.
@MainActor
enum Inspect {
    /// A tour whose clock is the inspector's, with the inspector attached before anything is built,
    /// and readable labels for the loadables that have no key.
    static func makeTour(options: DemoOptions) -> (Tour, LoadableInspector) {
        let clock = ManualClock()
        let inspector = LoadableInspector(clock: clock)
        inspector.attach()
        // The timeline names outbox items by id: the same seed must give the same ids.
        OutboxIdentifiers.replayableSource = SeededRandomNumberGenerator(seed: options.seed)
        let tour = Tour(options: options, clock: clock)
        tour.token.inspectorLabel = "access-token"
        for (name, feed) in tour.feeds { feed.inspectorLabel = "feed \(name)" }
        return (tour, inspector)
    }

    /// Runs the tour without its text and prints the inspector's timeline (JSON Lines).
    static func printEvents(options: DemoOptions) async -> Int32 {
        let (tour, inspector) = makeTour(options: options)
        let standardOutput = silenceStandardOutput()
        await tour.run()
        restoreStandardOutput(standardOutput)
        print(inspector.timeline(), terminator: "")
        fflush(nil)
        return 0
    }

    /// Serves the inspector page, prints its address, runs the tour, then serves until SIGINT or
    /// SIGTERM; meanwhile simulated time follows real time, so that a sync asked for from the page
    /// ends.
    static func serve(options: DemoOptions) async -> Int32 {
        let (tour, inspector) = makeTour(options: options)
        let server: LoadableInspectorServer
        do {
            server = try inspector.serve(port: options.port ?? 0)
        } catch {
            printToStandardError("loadable-demo: \(error)\n")
            return 1
        }
        // Watched before anything runs, so a signal during the tour is not lost.
        let termination = TerminationSignals()
        print(server.url.absoluteString)
        fflush(nil)
        await tour.run()
        print("\nThe inspector page stays at \(server.url.absoluteString) until interrupted (Ctrl-C).")
        fflush(nil)
        let clock = tour.clock
        let realTime = Task { @MainActor in
            // Real time only here, in the demo: the library takes its time from the clock.
            for _ in 0..<Int.max {
                guard (try? await Task.sleep(for: .milliseconds(100))) != nil else { return }
                await clock.advance(by: .milliseconds(100))
            }
        }
        let signal = await termination.next()
        realTime.cancel()
        server.stop()
        printToStandardError("loadable-demo: stopped by signal \(signal)\n")
        return 0
    }

    /// Points standard output at /dev/null; returns the descriptor to restore it with.
    private static func silenceStandardOutput() -> Int32 {
        fflush(nil)
        let saved = dup(1)
        let null = open("/dev/null", O_WRONLY)
        if null >= 0 {
            dup2(null, 1)
            close(null)
        }
        return saved
    }

    private static func restoreStandardOutput(_ saved: Int32) {
        fflush(nil)
        guard saved >= 0 else { return }
        dup2(saved, 1)
        close(saved)
    }
}

/// SIGINT and SIGTERM, caught instead of ending the process: ``next()`` returns the first.
@MainActor
final class TerminationSignals {
    private let queue = DispatchQueue(label: "loadable-demo.signals")
    private let state = Locked<(signal: Int32?, waiter: CheckedContinuation<Int32, Never>?)>((nil, nil))
    private let sources: [any DispatchSourceSignal]

    init() {
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            sources.append(source)
        }
        self.sources = sources
        for (source, number) in zip(sources, [SIGINT, SIGTERM]) {
            source.setEventHandler(handler: Self.handler(for: number, state: state))
            source.resume()
        }
    }

    /// What the signal source of `number` runs, on its queue: not on the main actor.
    private nonisolated static func handler(
        for number: Int32, state: Locked<(signal: Int32?, waiter: CheckedContinuation<Int32, Never>?)>
    ) -> @Sendable () -> Void {
        {
            let waiter = state.withLock { state in
                if state.signal == nil { state.signal = number }
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: number)
        }
    }

    /// The first signal received, once there is one.
    func next() async -> Int32 {
        await withCheckedContinuation { continuation in
            let signal = state.withLock { state in
                if state.signal == nil { state.waiter = continuation }
                return state.signal
            }
            if let signal { continuation.resume(returning: signal) }
        }
    }
}
