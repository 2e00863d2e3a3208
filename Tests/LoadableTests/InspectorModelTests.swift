import Loadable
import LoadableTestSupport
import LoadableTesting
import Testing

/// The inspector against a reference model: random sequences of syncs, their ends, cancels,
/// invalidations, time passing, and the inspector detached and attached again, on three loadables.
/// After every step the events recorded about them must be the model's, in order.
@Suite("LoadableInspector: model")
@MainActor
struct InspectorModelTests {
    enum Operation: Equatable, CustomStringConvertible {
        case sync(Int)
        case succeed(Int)
        case fail(Int)
        case cancel(Int)
        case invalidate(Int)
        case advance(milliseconds: Int)
        case detach
        case attach

        var description: String {
            switch self {
            case .sync(let index): "sync(\(index))"
            case .succeed(let index): "succeed(\(index))"
            case .fail(let index): "fail(\(index))"
            case .cancel(let index): "cancel(\(index))"
            case .invalidate(let index): "invalidate(\(index))"
            case .advance(let milliseconds): "advance(\(milliseconds) ms)"
            case .detach: "detach"
            case .attach: "attach"
            }
        }
    }

    /// What the model knows of one loadable.
    struct ModelLoadable {
        var isSyncing = false
        /// Invalidated while syncing: one more sync follows the running one.
        var hasPendingSync = false
        /// When the inspector saw the running sync begin; `nil` when it did not see it.
        var startedAt: Duration?
    }

    /// The reference: which events the inspector must have recorded.
    struct Model {
        var loadables = Array(repeating: ModelLoadable(), count: 3)
        var now: Duration = .zero
        var isAttached = true
        var events: [LoadableEvent] = []

        static func label(_ index: Int) -> String { "inspector.model.\(index)" }

        mutating func record(_ event: LoadableEvent) {
            if isAttached { events.append(event) }
        }

        mutating func begin(_ index: Int) {
            loadables[index].isSyncing = true
            if isAttached { loadables[index].startedAt = now }
            record(.syncStarted(label: Self.label(index), time: now))
        }

        mutating func end(_ index: Int, _ result: LoadableEvent.SyncResult) {
            let start = loadables[index].startedAt
            loadables[index].isSyncing = false
            if isAttached { loadables[index].startedAt = nil }
            record(
                .syncEnded(
                    label: Self.label(index), time: now, duration: start.map { now - $0 } ?? .zero, result: result,
                    status: nil))
            if loadables[index].hasPendingSync, result != .cancelled {
                loadables[index].hasPendingSync = false
                begin(index)
            }
            loadables[index].hasPendingSync = false
        }

        mutating func apply(_ operation: Operation) {
            switch operation {
            case .sync(let index):
                if !loadables[index].isSyncing { begin(index) }
            case .succeed(let index):
                if loadables[index].isSyncing { end(index, .succeeded) }
            case .fail(let index):
                if loadables[index].isSyncing { end(index, .failed("\(TestError())")) }
            case .cancel(let index):
                if loadables[index].isSyncing { end(index, .cancelled) }
            case .invalidate(let index):
                record(.invalidated(label: Self.label(index), time: now, deferred: loadables[index].isSyncing))
                if loadables[index].isSyncing { loadables[index].hasPendingSync = true }
            case .advance(let milliseconds):
                now += .milliseconds(milliseconds)
            case .detach:
                isAttached = false
            case .attach:
                guard !isAttached else { return }
                isAttached = true
                // The inspector forgets the starts it saw before: their syncs may have ended unseen.
                for index in loadables.indices { loadables[index].startedAt = nil }
            }
        }
    }

    static func randomOperation(_ random: inout SeededRandomNumberGenerator) -> Operation {
        let index = Int(random.next() % 3)
        switch random.next() % 16 {
        case 0..<3: return .sync(index)
        case 3..<5: return .succeed(index)
        case 5..<7: return .fail(index)
        case 7: return .cancel(index)
        case 8..<10: return .invalidate(index)
        case 10..<13: return .advance(milliseconds: Int(random.next() % 2_000))
        case 13: return .detach
        default: return .attach
        }
    }

    /// Runs `operations` on real loadables with an inspector; describes the first difference from
    /// the model, or returns `nil`.
    static func mismatch(in operations: [Operation]) async -> String? {
        let clock = ManualClock()
        let inspector = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
        let loadables = (0..<3).map { index in
            let loadable = ManualLoadable(clock: clock)
            loadable.inspectorLabel = Model.label(index)
            return loadable
        }
        var model = Model()
        return await withInspector(inspector) { () async -> String? in
            // While attached, the inspector records every test's events: read only those recorded
            // since the last step, keeping this run's, so that a step costs what it added.
            var examined = 0
            var recorded: [LoadableEvent] = []
            for (step, operation) in operations.enumerated() {
                switch operation {
                case .sync(let index): loadables[index].sync()
                case .succeed(let index):
                    if loadables[index].loadableState == .syncing { loadables[index].setDidSyncSuccessfully(step) }
                case .fail(let index):
                    if loadables[index].loadableState == .syncing { loadables[index].setDidFailToSync(TestError()) }
                case .cancel(let index): loadables[index].cancelSync()
                case .invalidate(let index): loadables[index].invalidate()
                case .advance(let milliseconds): await clock.advance(by: .milliseconds(milliseconds))
                case .detach: inspector.detach()
                case .attach: inspector.attach()
                }
                model.apply(operation)
                let all = inspector.recordedEvents
                recorded += all[examined...].filter { $0.label.hasPrefix("inspector.model.") }
                examined = all.count
                if recorded != model.events {
                    let index =
                        zip(recorded, model.events).enumerated().first { $0.element.0 != $0.element.1 }?.offset
                        ?? min(recorded.count, model.events.count)
                    let real = index < recorded.count ? LoadableInspector.jsonLine(recorded[index]) : "nothing"
                    let expected =
                        index < model.events.count ? LoadableInspector.jsonLine(model.events[index]) : "nothing"
                    return "after step \(step), \(operation): event \(index) is \(real), the model's \(expected)"
                }
            }
            let timeline = model.events.map { LoadableInspector.jsonLine($0) + "\n" }.joined()
            let recordedTimeline = recorded.map { LoadableInspector.jsonLine($0) + "\n" }.joined()
            return timeline == recordedTimeline ? nil : "the JSON Lines differ"
        }
    }

    @Test("random sequences match the model")
    func randomSequences() async {
        await checkRandomSequences(count: StressScale.rounds(200), baseSeed: 0x1A5_BEC7) { seed in
            var random = SeededRandomNumberGenerator(seed: seed)
            return (0..<Int(random.next() % 40) + 1).map { _ in Self.randomOperation(&random) }
        } mismatch: {
            await Self.mismatch(in: $0)
        }
    }
}
