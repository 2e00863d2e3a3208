public import Loadable

/// Runs `body` with `inspector` attached, and detaches it after, one such body at a time in the
/// whole test process.
///
/// The attached inspector is global to the process while suites run in parallel: two tests that
/// each attached their own would take it from each other and miss events. Every test that attaches
/// one goes through here; it still filters what it reads to its own labels, since other tests'
/// loadables report to it while it is attached.
@MainActor
public func withInspector<Result>(
    _ inspector: LoadableInspector, _ body: () async throws -> Result
) async rethrows -> Result {
    await InspectorTurns.shared.take()
    inspector.attach()
    defer {
        inspector.detach()
        InspectorTurns.shared.give()
    }
    return try await body()
}

/// The capacity of the inspectors of tests: while one is attached, every test running in parallel
/// reports to it, and a busy run records well over the default 10,000 events before a test reads
/// its own (the oldest, dropped first, were the test's).
public let inspectorTestCapacity = 1_000_000

/// Attaches `inspector` when its turn comes (see ``withInspector(_:_:)``), for a test that
/// cannot put its body in a closure: end the turn with ``InspectorTurn/end()`` (in a `defer`).
@MainActor
public func takeInspectorTurn(attaching inspector: LoadableInspector) async -> InspectorTurn {
    await InspectorTurns.shared.take()
    inspector.attach()
    return InspectorTurn(inspector: inspector)
}

/// A turn taken by ``takeInspectorTurn(attaching:)``.
@MainActor
public struct InspectorTurn {
    let inspector: LoadableInspector

    /// Detaches the inspector and gives the turn to the next test.
    public func end() {
        inspector.detach()
        InspectorTurns.shared.give()
    }
}

/// Runs `body` with a new inspector on `clock` attached (see ``withInspector(_:_:)``), and
/// detaches it after.
@MainActor
public func withAttachedInspector<Result>(
    clock: any Clock<Duration>, _ body: (LoadableInspector) async throws -> Result
) async rethrows -> Result {
    let inspector = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
    return try await withInspector(inspector) { try await body(inspector) }
}

extension LoadableInspector {
    /// The recorded events about `label`: the inspector records other tests' events too.
    public func events(of label: String) -> [LoadableEvent] {
        recordedEvents.filter { $0.label == label }
    }
}

/// The turns of ``withInspector(_:_:)``: a first-come queue on the main actor.
@MainActor
final class InspectorTurns {
    static let shared = InspectorTurns()
    private var isTaken = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func take() async {
        guard isTaken else {
            isTaken = true
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    func give() {
        guard !waiting.isEmpty else {
            isTaken = false
            return
        }
        waiting.removeFirst().resume()
    }
}
