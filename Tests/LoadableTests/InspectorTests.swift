import Foundation
import Loadable
import LoadableSupport
import LoadableTestSupport
import LoadableTesting
import Testing

/// The inspector's own part (module Loadable): the events of a loadable's syncs, invalidations and
/// watchdog, their JSON, the timeline, the stream, attaching, and the actions. The other modules'
/// events are tested in their own targets.
@Suite("LoadableInspector: events, timeline, actions")
@MainActor
struct InspectorTests {
    let clock = ManualClock()

    /// The events recorded about `label`: other suites' loadables report to the attached inspector
    /// too.
    private func events(_ inspector: LoadableInspector, _ label: String) -> [LoadableEvent] {
        inspector.recordedEvents.filter { $0.label == label }
    }

    @Test("a sync that succeeds, one that fails and one cancelled: started and ended, with durations")
    func syncsStartAndEnd() async {
        let inspector = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
        let loadable = ManualLoadable(clock: clock)
        loadable.inspectorLabel = "inspector.syncs"
        await withInspector(inspector) {
            loadable.sync()
            await clock.advance(by: .milliseconds(250))
            loadable.setDidSyncSuccessfully(1)
            loadable.sync()
            await clock.advance(by: .seconds(2))
            loadable.setDidFailToSync(TestError())
            loadable.sync()
            loadable.cancelSync()
        }
        #expect(
            events(inspector, "inspector.syncs") == [
                .syncStarted(label: "inspector.syncs", time: .zero),
                .syncEnded(
                    label: "inspector.syncs", time: .milliseconds(250), duration: .milliseconds(250),
                    result: .succeeded, status: nil),
                .syncStarted(label: "inspector.syncs", time: .milliseconds(250)),
                .syncEnded(
                    label: "inspector.syncs", time: .milliseconds(2250), duration: .seconds(2),
                    result: .failed("\(TestError())"), status: nil),
                .syncStarted(label: "inspector.syncs", time: .milliseconds(2250)),
                .syncEnded(
                    label: "inspector.syncs", time: .milliseconds(2250), duration: .zero, result: .cancelled,
                    status: nil),
            ])
    }

    @Test("an AsyncLoadable's sync is recorded with its default label, the type")
    func asyncLoadableDefaultLabel() async {
        let inspector = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
        let loadable = AsyncLoadable(clock: clock) { 7 }
        #expect(loadable.inspectorLabel == "AsyncLoadable<Int>")
        await withInspector(inspector) {
            loadable.sync()
            await settle(until: { loadable.loadableState == .didSyncSuccessfully })
        }
        // Other tests' AsyncLoadable<Int>s may report too: this one's sync is among them.
        let kinds = events(inspector, "AsyncLoadable<Int>").map(\.kind)
        #expect(kinds.contains(.syncStarted))
        #expect(kinds.contains(.syncEnded))
    }

    @Test("invalidation: deferred behind a running sync, or not")
    func invalidation() async {
        let inspector = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
        let loadable = ManualLoadable(contents: 1, clock: clock)
        loadable.inspectorLabel = "inspector.invalidation"
        await withInspector(inspector) {
            loadable.invalidate()
            loadable.sync()
            loadable.invalidate()
        }
        let invalidations = events(inspector, "inspector.invalidation").filter { $0.kind == .invalidated }
        #expect(
            invalidations == [
                .invalidated(label: "inspector.invalidation", time: .zero, deferred: false),
                .invalidated(label: "inspector.invalidation", time: .zero, deferred: true),
            ])
    }

    @Test("the watchdog: slow, then timed out (the sync then fails)")
    func watchdog() async {
        let inspector = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
        let loadable = ManualLoadable(clock: clock)
        loadable.inspectorLabel = "inspector.watchdog"
        loadable.slowSyncAfter = .seconds(1)
        loadable.syncTimeout = .seconds(3)
        await withInspector(inspector) {
            loadable.sync()
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(1))
            #expect(loadable.isSlowSync)
            await clock.waitForSleepers()
            await clock.advance(by: .seconds(2))
            #expect(loadable.loadableState == .didFailToSync)
        }
        #expect(
            events(inspector, "inspector.watchdog") == [
                .syncStarted(label: "inspector.watchdog", time: .zero),
                .watchdog(label: "inspector.watchdog", time: .seconds(1), alarm: .slow),
                .watchdog(label: "inspector.watchdog", time: .seconds(3), alarm: .timedOut),
                .syncEnded(
                    label: "inspector.watchdog", time: .seconds(3), duration: .seconds(3),
                    result: .failed("\(LoadableError.timedOut)"), status: nil),
            ])
    }

    @Test("nothing is recorded while no inspector is attached, nor after detach()")
    func nothingWhileDetached() async {
        let inspector = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
        let loadable = ManualLoadable(clock: clock)
        loadable.inspectorLabel = "inspector.detached"
        loadable.finishInDoSync = .succeed(1)
        loadable.sync()
        await withInspector(inspector) {
            loadable.sync()
        }
        loadable.sync()
        loadable.invalidate()
        #expect(events(inspector, "inspector.detached").count == 2)
    }

    @Test("attach() replaces the attached inspector; detach() of one not attached does nothing")
    func attachReplaces() async {
        let first = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
        let second = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
        await withInspector(first) {
            #expect(LoadableInspector.attached === first)
            second.detach()
            #expect(LoadableInspector.attached === first)
            second.attach()
            #expect(LoadableInspector.attached === second)
            first.detach()
            #expect(LoadableInspector.attached === second)
            first.attach()
        }
        #expect(LoadableInspector.attached !== first)
    }

    @Test("the label can be set; a type of the app's own without a core keeps its type name")
    func labels() {
        let loadable = ManualLoadable(clock: clock)
        #expect(loadable.inspectorLabel == "ManualLoadable")
        loadable.inspectorLabel = "feed"
        #expect(loadable.inspectorLabel == "feed")
        let own = OwnLoadable()
        own.inspectorLabel = "ignored"
        #expect(own.inspectorLabel == "OwnLoadable")
    }

    // MARK: - JSON

    /// One event of every kind.
    nonisolated static let everyKind: [LoadableEvent] = [
        .syncStarted(label: "a", time: .milliseconds(1500)),
        .syncEnded(label: "a", time: .seconds(2), duration: .milliseconds(500), result: .succeeded, status: 304),
        .syncEnded(label: "a\"b", time: .seconds(2), duration: .zero, result: .failed("bad\nline"), status: nil),
        .syncEnded(label: "a", time: .seconds(2), duration: .zero, result: .cancelled, status: nil),
        .retryScheduled(label: "a", time: .seconds(3), delay: .microseconds(1), cause: .retryAfter),
        .retryScheduled(label: "a", time: .seconds(3), delay: .seconds(4), cause: .backoff),
        .watchdog(label: "a", time: .seconds(3), alarm: .slow),
        .leaseTaken(label: "a", time: .seconds(3), leases: 2),
        .leaseReleased(label: "a", time: .seconds(3), leases: 1),
        .invalidated(label: "a", time: .seconds(3), deferred: true),
        .cacheRestored(label: "a", time: .seconds(3), found: false),
        .cacheSaved(label: "a", time: .seconds(3)),
        .cacheTouched(label: "a", time: .seconds(3)),
        .cacheEvicted(label: "a", time: .seconds(3)),
        .outboxEnqueued(label: "o", time: .seconds(3), item: "1"),
        .outboxSent(label: "o", time: .seconds(3), item: "1"),
        .outboxOutcome(label: "o", time: .seconds(3), item: "1", outcome: "delivered"),
        .collectionPulled(label: "c", time: .seconds(3), changes: 3),
        .collectionPushed(label: "c", time: .seconds(3), changes: 1),
        .collectionConflict(label: "c", time: .seconds(3), record: "r1"),
        .paused(label: "s", time: .seconds(3), reason: .offline),
        .resumed(label: "s", time: .seconds(3)),
    ]

    @Test("every kind has an example here")
    func everyKindCovered() {
        #expect(Set(Self.everyKind.map(\.kind)) == Set(LoadableEvent.Kind.allCases))
    }

    @Test("a JSON line is flat, its keys in a fixed order, seconds in plain decimal")
    func jsonLines() {
        #expect(
            LoadableInspector.jsonLine(Self.everyKind[1])
                == #"{"kind":"syncEnded","label":"a","time":2,"duration":0.5,"result":"succeeded","status":304}"#)
        #expect(
            LoadableInspector.jsonLine(Self.everyKind[2])
                == #"{"kind":"syncEnded","label":"a\"b","time":2,"duration":0,"result":"failed","error":"bad\nline"}"#)
        #expect(
            LoadableInspector.jsonLine(Self.everyKind[4])
                == #"{"kind":"retryScheduled","label":"a","time":3,"delay":0.000001,"cause":"retryAfter"}"#)
        #expect(LoadableInspector.jsonLine(Self.everyKind[0]) == #"{"kind":"syncStarted","label":"a","time":1.5}"#)
    }

    @Test("every kind round-trips through JSONEncoder and through its JSON line", arguments: everyKind)
    func roundTrip(_ event: LoadableEvent) throws {
        let encoded = try JSONEncoder().encode(event)
        #expect(try JSONDecoder().decode(LoadableEvent.self, from: encoded) == event)
        let line = Data(LoadableInspector.jsonLine(event).utf8)
        #expect(try JSONDecoder().decode(LoadableEvent.self, from: line) == event)
    }

    @Test("bad JSON from outside is a DecodingError that says what is missing, never a trap")
    func badJSON() {
        let missing = Data(#"{"kind":"leaseTaken","label":"a","time":1}"#.utf8)
        #expect {
            try JSONDecoder().decode(LoadableEvent.self, from: missing)
        } throws: { error in
            "\(error)".contains("a leaseTaken event needs `leases`")
        }
        let unknownKind = Data(#"{"kind":"teleported","label":"a","time":1}"#.utf8)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(LoadableEvent.self, from: unknownKind) }
        let badResult = Data(#"{"kind":"syncEnded","label":"a","time":1,"duration":0,"result":"maybe"}"#.utf8)
        #expect {
            try JSONDecoder().decode(LoadableEvent.self, from: badResult)
        } throws: { error in
            "\(error)".contains("unknown sync result \"maybe\"")
        }
        let badAction = Data(#"{"action":"explode"}"#.utf8)
        #expect {
            try JSONDecoder().decode(LoadableInspectorAction.self, from: badAction)
        } throws: { error in
            "\(error)".contains("unknown action \"explode\"")
        }
    }

    @Test("actions round-trip through JSON")
    func actionsRoundTrip() throws {
        for action in [LoadableInspectorAction.sync(label: "x"), .invalidate(label: "y"), .setOffline(true)] {
            let data = try JSONEncoder().encode(action)
            #expect(try JSONDecoder().decode(LoadableInspectorAction.self, from: data) == action)
        }
        #expect(
            try JSONDecoder().decode(LoadableInspectorAction.self, from: Data(#"{"action":"sync","label":"x"}"#.utf8))
                == .sync(label: "x"))
    }

    // MARK: - Timeline

    /// A scripted episode on a fresh clock: the timeline it records.
    private static func scriptedTimeline() async -> String {
        let clock = ManualClock()
        let inspector = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
        let loadable = ManualLoadable(clock: clock)
        loadable.inspectorLabel = "inspector.replay"
        loadable.slowSyncAfter = .milliseconds(300)
        await withInspector(inspector) {
            for round in 0..<3 {
                loadable.sync()
                await clock.waitForSleepers()
                await clock.advance(by: .milliseconds(100 * (round + 2)))
                if round == 1 { loadable.setDidFailToSync(TestError()) } else { loadable.setDidSyncSuccessfully(round) }
                loadable.invalidate()
            }
        }
        return inspector.recordedEvents.filter { $0.label == "inspector.replay" }
            .map { LoadableInspector.jsonLine($0) + "\n" }.joined()
    }

    @Test("the same episode under ManualClock gives the same timeline bytes")
    func replayableTimeline() async {
        let first = await Self.scriptedTimeline()
        let second = await Self.scriptedTimeline()
        #expect(first == second)
        #expect(first.split(separator: "\n").count == 11)
        #expect(first.hasPrefix(#"{"kind":"syncStarted","label":"inspector.replay","time":0}"#))
    }

    @Test("timeline() is the recorded events as JSON Lines, and capacity drops the oldest")
    func timelineAndCapacity() async {
        let inspector = LoadableInspector(clock: clock, capacity: 3)
        let loadable = ManualLoadable(clock: clock)
        loadable.inspectorLabel = "inspector.capacity"
        loadable.finishInDoSync = .succeed(1)
        await withInspector(inspector) {
            loadable.sync()  // started, ended
            loadable.sync()  // started, ended
        }
        let mine = events(inspector, "inspector.capacity")
        // The inspector keeps the newest 3 of everything it was told, this test's events among them.
        #expect(inspector.recordedEvents.count == 3)
        #expect(mine.last?.kind == .syncEnded)
        #expect(inspector.timeline() == inspector.recordedEvents.map { LoadableInspector.jsonLine($0) + "\n" }.joined())
        #expect(inspector.droppedEventCount >= 1)
    }

    // MARK: - The stream

    @Test("events streams get what is recorded after they were made; a stream cancelled stops getting them")
    func eventsStream() async {
        let inspector = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
        let loadable = ManualLoadable(clock: clock)
        loadable.inspectorLabel = "inspector.stream"
        loadable.finishInDoSync = .succeed(1)
        await withInspector(inspector) {
            loadable.invalidate()
            let stream = inspector.events
            loadable.sync()
            var seen: [LoadableEvent.Kind] = []
            for await event in stream where event.label == "inspector.stream" {
                seen.append(event.kind)
                if seen.count == 2 { break }
            }
            #expect(seen == [.syncStarted, .syncEnded])
        }
    }

    @Test("a stream ends when its inspector is released")
    func streamEndsWithInspector() async {
        var inspector: LoadableInspector? = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
        let stream = inspector!.events
        weak let released = inspector
        inspector = nil
        #expect(released == nil)
        var count = 0
        for await _ in stream { count += 1 }
        #expect(count == 0)
    }

    @Test("an inspector released on another thread ends its streams")
    func releasedOnAnotherThread() async {
        let box = Locked<LoadableInspector?>(LoadableInspector(clock: clock))
        let stream = box.withLock { $0!.events }
        weak let released = box.withLock { $0 }
        releaseOnAnotherThread(box)
        #expect(released == nil)
        var count = 0
        for await _ in stream { count += 1 }
        #expect(count == 0)
    }

    // MARK: - Actions

    @Test("sync and invalidate reach a loadable the inspector has seen; an unknown label does nothing")
    func actions() async {
        let inspector = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
        let loadable = ManualLoadable(contents: 1, clock: clock)
        loadable.inspectorLabel = "inspector.actions"
        await withInspector(inspector) {
            loadable.invalidate()
            #expect(inspector.actionLabels.contains("inspector.actions"))
            #expect(inspector.perform(.sync(label: "inspector.actions")))
            #expect(loadable.doSyncCount == 1)
            loadable.setDidSyncSuccessfully(2)
            #expect(!loadable.isStale)
            #expect(inspector.perform(.invalidate(label: "inspector.actions")))
            #expect(loadable.isStale)
            #expect(!inspector.perform(.sync(label: "inspector.nobody")))
        }
    }

    @Test("an action on a loadable released since does nothing")
    func actionOnReleased() async {
        let inspector = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
        await withInspector(inspector) {
            var loadable: ManualLoadable? = ManualLoadable(contents: 1, clock: clock)
            loadable!.inspectorLabel = "inspector.gone"
            loadable!.invalidate()
            loadable = nil
            #expect(!inspector.perform(.sync(label: "inspector.gone")))
            #expect(!inspector.actionLabels.contains("inspector.gone"))
        }
    }

    @Test("an observer that detaches the inspector while told of a sync: the sync's end is not recorded")
    func detachDuringCallback() async {
        let inspector = LoadableInspector(clock: clock, capacity: inspectorTestCapacity)
        let loadable = ManualLoadable(clock: clock)
        loadable.inspectorLabel = "inspector.reentrant"
        await withInspector(inspector) {
            let observation = loadable.addObserver { _ in
                if loadable.loadableState == .syncing { inspector.detach() }
            }
            loadable.sync()
            loadable.setDidSyncSuccessfully(1)
            observation.cancel()
        }
        #expect(events(inspector, "inspector.reentrant").map(\.kind) == [.syncStarted])
    }
}

/// A loadable of the app's own, with no core of the package.
@MainActor
private final class OwnLoadable: PureLoadable {
    private let inner = ManualLoadable()
    var loadableState: LoadableState { inner.loadableState }
    var error: (any Error)? { inner.error }
    var isContentsAvailable: Bool { inner.isContentsAvailable }
    func addObserver(_ handler: @escaping @MainActor (any PureLoadable) -> Void) -> LoadableObservation {
        inner.addObserver(handler)
    }
}
