import Loadable
import LoadableTestSupport
import Testing

/// The core's named events: what persistence, store entries and chains subscribe to instead of
/// slots of their own in the core.
@Suite("Core events")
@MainActor
struct CoreEventsTests {
    /// Records every event it is told, before observers are notified.
    final class EventLog: LoadableCoreSubscriber {
        let coreEvents: LoadableCoreEvent.Kinds
        var events: [LoadableCoreEvent] = []
        /// Called after recording each event.
        var onEvent: (@MainActor (LoadableCoreEvent) -> Void)?

        init(_ kinds: LoadableCoreEvent.Kinds = [.contentsConfirmed, .baseContentsChanged, .stateChanged, .useChanged])
        {
            coreEvents = kinds
        }

        func loadableCoreDidEmit(_ event: LoadableCoreEvent) {
            events.append(event)
            onEvent?(event)
        }
    }

    /// A loadable whose syncs the test finishes.
    final class Manual: Loadable<Int> {
        override func doSync() {}
    }

    @Test(
        "a sync tells its state changes; a success with contents changes the base (the server's), one without confirms it"
    )
    func syncEvents() {
        let loadable = Manual()
        let log = EventLog()
        loadable.core.subscribe(log)
        loadable.sync()
        loadable.setDidSyncSuccessfully(1)
        #expect(
            log.events == [
                .stateChanged(from: .idle, to: .syncing), .stateChanged(from: .syncing, to: .didSyncSuccessfully),
                .baseContentsChanged(origin: .server),
            ])
        log.events = []
        // Confirmed as it is (what an HTTP 304 does): no change of the base.
        loadable.sync()
        loadable.setDidSyncSuccessfully()
        #expect(
            log.events == [
                .stateChanged(from: .didSyncSuccessfully, to: .syncing),
                .stateChanged(from: .syncing, to: .didSyncSuccessfully), .contentsConfirmed,
            ])
        log.events = []
        loadable.sync()
        loadable.setDidFailToSync(TestError())
        #expect(
            log.events == [
                .stateChanged(from: .didSyncSuccessfully, to: .syncing),
                .stateChanged(from: .syncing, to: .didFailToSync),
            ])
    }

    @Test("a write of contents confirms and changes the base; a restore does neither; the same state is no change")
    func writesAndRestores() {
        let loadable = PushLoadable<Int>()
        let log = EventLog()
        loadable.core.subscribe(log)
        loadable.setContents(1)
        loadable.updateContents { $0 += 1 }
        #expect(log.events == [.baseContentsChanged(origin: .local), .baseContentsChanged(origin: .local)])
        log.events = []
        loadable.restoreContents(5, age: .seconds(3))
        loadable.setIdle()
        #expect(log.events.isEmpty)
    }

    @Test(
        "an optimistic layer is not a change of the base; its commit is: the app's own, or the server's when reconciled"
    )
    func optimisticChanges() async throws {
        let loadable = PushLoadable<Int>(contents: 1)
        let log = EventLog([.baseContentsChanged])
        loadable.core.subscribe(log)
        try await loadable.mutate {
            $0 += 10
        } commit: {
            #expect(loadable.contents == 11)
            #expect(log.events.isEmpty)
        }
        #expect(log.events == [.baseContentsChanged(origin: .local)])
        #expect(loadable.contents == 11)
        log.events = []
        _ = try await loadable.mutate(
            optimistic: { $0 += 1 },
            commit: { 100 },
            reconcile: { contents, answer in contents = answer })
        #expect(log.events == [.baseContentsChanged(origin: .server)])
        #expect(loadable.contents == 100)
    }

    @Test("the first use and the end of the last one are told once each")
    func useEvents() {
        let loadable = Manual()
        let log = EventLog([.useChanged])
        loadable.core.subscribe(log)
        let first = loadable.lease()
        let second = loadable.lease()
        first.release()
        #expect(log.events == [.useChanged(isInUse: true)])
        second.release()
        #expect(log.events == [.useChanged(isInUse: true), .useChanged(isInUse: false)])
    }

    @Test("subscribers are told only the kinds they asked for, before observers")
    func kindsAndOrder() {
        let loadable = Manual()
        let states = EventLog([.stateChanged])
        let saves = EventLog([.baseContentsChanged])
        loadable.core.subscribe(states)
        loadable.core.subscribe(saves)
        var seenByObserver: [Int] = []
        let token = loadable.addObserver { _ in seenByObserver.append(states.events.count + saves.events.count) }
        loadable.setDidSyncSuccessfully(1)
        #expect(states.events == [.stateChanged(from: .idle, to: .didSyncSuccessfully)])
        #expect(saves.events == [.baseContentsChanged(origin: .server)])
        #expect(seenByObserver == [2])
        token.cancel()
    }

    @Test(
        "unsubscribing while told: the emission under way still tells the rest, no later one does"
    )
    func unsubscribeWhileTold() {
        let loadable = PushLoadable<Int>()
        let first = EventLog([.baseContentsChanged])
        let second = EventLog([.baseContentsChanged])
        first.onEvent = { _ in
            loadable.core.unsubscribe(first)
            loadable.core.unsubscribe(second)
        }
        loadable.core.subscribe(first)
        loadable.core.subscribe(second)
        loadable.setContents(1)
        loadable.setContents(2)
        #expect(first.events == [.baseContentsChanged(origin: .local)])
        // `second` was unsubscribed before its turn in the same emission: the copy taken for the
        // emission still tells it once, never after.
        #expect(second.events == [.baseContentsChanged(origin: .local)])
        #expect(loadable.core.subscriber(EventLog.self) == nil)
    }

    @Test("a client finds its own subscriber by type; unsubscribing one not subscribed does nothing")
    func lookup() {
        let loadable = PushLoadable<Int>()
        #expect(loadable.core.subscriber(EventLog.self) == nil)
        let log = EventLog()
        loadable.core.unsubscribe(log)
        loadable.core.subscribe(log)
        #expect(loadable.core.subscriber(EventLog.self) === log)
        loadable.core.unsubscribe(log)
        loadable.setContents(1)
        #expect(log.events.isEmpty)
    }
}
