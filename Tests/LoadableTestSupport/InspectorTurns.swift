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
