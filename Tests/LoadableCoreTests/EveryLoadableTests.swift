import Loadable
import LoadableGroup
import LoadableSupport
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

/// The observer rules and the Observation support that every public loadable type shares through
/// its core, checked on each type the same way.
@Suite("Every loadable type follows the observer rules and is Observable")
@MainActor
struct EveryLoadableTests {
    /// Counts Observation's change reports (its `onChange` closure must be `@Sendable`; here it
    /// runs synchronously on the main actor, inside the change).
    final class ChangeCounter: @unchecked Sendable {
        var count = 0
    }

    /// A property of a loadable a view may read.
    enum Property: String, CaseIterable, Sendable {
        case loadableState, error, isContentsAvailable
    }

    private static let changes: [LoadableState] = [.syncing, .didSyncSuccessfully, .syncing, .didFailToSync, .idle]

    @Test("every type is Observable", arguments: LoadableKind.all)
    func isObservable(kind: LoadableKind) {
        let subject = kind.make()
        #expect(subject.loadable is any Observable)
    }

    @Test(
        "reading a property inside withObservationTracking reports every later change",
        arguments: LoadableKind.all, Property.allCases)
    func observationTracksEachProperty(kind: LoadableKind, property: Property) {
        let subject = kind.make()
        let loadable = subject.loadable
        for state in Self.changes {
            let counter = ChangeCounter()
            withObservationTracking {
                switch property {
                case .loadableState: _ = loadable.loadableState
                case .error: _ = loadable.error
                case .isContentsAvailable: _ = loadable.isContentsAvailable
                }
            } onChange: {
                counter.count += 1
            }
            #expect(counter.count == 0)
            subject.set(state)
            #expect(counter.count == 1, "change to \(state) not reported")
            #expect(loadable.loadableState == state)
        }
    }

    /// The kinds whose `contents` getter is tracked with the rest of the loadable: a read of it is
    /// told of every change, not only of the contents' ones.
    private static let tracksContentsWithState: Set<String> = [
        "TestLoadable", "KeyedLoadableProxy", "KeyedLoadableProxy showing a placeholder", "CombinedLoadable",
    ]

    // Was "reports every later change": since "Equal contents notify nothing", Observation tracks
    // `contents` apart from the state, and a change of the state alone is not told to its readers.
    @Test(
        "reading contents inside withObservationTracking reports every change of the contents",
        arguments: LoadableKind.withContents)
    func observationTracksContents(kind: LoadableKind) throws {
        let subject = kind.make()
        let readContents = try #require(subject.readContents)
        for state in Self.changes {
            let counter = ChangeCounter()
            withObservationTracking {
                readContents()
            } onChange: {
                counter.count += 1
            }
            subject.set(state)
            // Only a success writes new contents.
            let changesContents = state == .didSyncSuccessfully || Self.tracksContentsWithState.contains(kind.name)
            #expect(counter.count == (changesContents ? 1 : 0), "change to \(state) reported \(counter.count) times")
        }
    }

    @Test("observers are called once per change, in the order they were added", arguments: LoadableKind.all)
    func order(kind: LoadableKind) {
        let subject = kind.make()
        var calls: [Int] = []
        let tokens = (0..<3).map { index in subject.loadable.addObserver { _ in calls.append(index) } }
        subject.set(.syncing)
        subject.set(.didSyncSuccessfully)
        #expect(calls == [0, 1, 2, 0, 1, 2])
        withExtendedLifetime(tokens) {}
    }

    @Test("an observer added during a round is not called in it, but in the next", arguments: LoadableKind.all)
    func addedDuringRound(kind: LoadableKind) {
        let subject = kind.make()
        var calls: [String] = []
        var late: LoadableObservation?
        let first = subject.loadable.addObserver { loadable in
            calls.append("first")
            if late == nil { late = loadable.addObserver { _ in calls.append("late") } }
        }
        subject.set(.syncing)
        #expect(calls == ["first"])
        subject.set(.didSyncSuccessfully)
        #expect(calls == ["first", "first", "late"])
        withExtendedLifetime((first, late)) {}
    }

    @Test("an observer removed during a round and not yet called is skipped", arguments: LoadableKind.all)
    func removedDuringRound(kind: LoadableKind) {
        let subject = kind.make()
        var calls: [String] = []
        var second: LoadableObservation?
        let first = subject.loadable.addObserver { _ in
            calls.append("first")
            second?.cancel()
        }
        second = subject.loadable.addObserver { _ in calls.append("second") }
        let third = subject.loadable.addObserver { _ in calls.append("third") }
        subject.set(.syncing)
        #expect(calls == ["first", "third"])
        withExtendedLifetime((first, third)) {}
    }

    @Test(
        "a change made by an observer is applied at once and notified in one more round, never nested",
        arguments: LoadableKind.all)
    func nestedChangeIsQueued(kind: LoadableKind) {
        let subject = kind.make()
        var log: [String] = []
        var changed = false
        let first = subject.loadable.addObserver { loadable in
            log.append("first sees \(loadable.loadableState)")
            guard !changed else { return }
            changed = true
            subject.set(.didSyncSuccessfully)
            log.append("after the change: \(loadable.loadableState)")
        }
        let second = subject.loadable.addObserver { loadable in
            log.append("second sees \(loadable.loadableState)")
        }
        subject.set(.syncing)
        #expect(
            log == [
                "first sees syncing",
                "after the change: did-sync-successfully",
                "second sees did-sync-successfully",
                "first sees did-sync-successfully",
                "second sees did-sync-successfully",
            ])
        withExtendedLifetime((first, second)) {}
    }

    @Test("a loadable released inside its own callback does not crash", arguments: LoadableKind.all)
    func releasedInsideCallback(kind: LoadableKind) {
        final class Holder {
            var subject: Subject?
        }
        let holder = Holder()
        holder.subject = kind.make()
        let set = holder.subject!.set
        weak let weakLoadable = holder.subject?.loadable
        var calls = 0
        let first = holder.subject?.loadable.addObserver { loadable in
            calls += 1
            holder.subject = nil
            // The loadable stays valid until the round ends.
            #expect(loadable.loadableState == .syncing)
        }
        let second = holder.subject?.loadable.addObserver { _ in calls += 1 }
        set(.syncing)
        #expect(calls == 2)
        #expect(weakLoadable == nil)
        #expect(first?.isActive == false)
        withExtendedLifetime(second) {}
    }

    @Test(
        "an observer whose token was released on another thread is never called again",
        arguments: LoadableKind.all)
    func tokenReleasedOnAnotherThread(kind: LoadableKind) async {
        let subject = kind.make()
        var calls = 0
        let box = Locked<LoadableObservation?>(subject.loadable.addObserver { _ in calls += 1 })
        releaseOnAnotherThread(box)
        // Before the main actor had a chance to run the removal handed to it.
        subject.set(.syncing)
        #expect(calls == 0)
        // The removal runs later and changes nothing more.
        for _ in 0..<100 { await Task.yield() }
        subject.set(.didSyncSuccessfully)
        #expect(calls == 0)
    }

    @Test("a LoadableProxy without a target reports sync() to Observation, and the target's arrival")
    func proxyWithoutTarget() {
        let proxy = LoadableProxy<TestLoadable<Int>>()
        let syncing = ChangeCounter()
        withObservationTracking {
            _ = proxy.loadableState
        } onChange: {
            syncing.count += 1
        }
        proxy.sync()
        #expect(syncing.count == 1)
        #expect(proxy.loadableState == .syncing)
        let arriving = ChangeCounter()
        withObservationTracking {
            _ = proxy.loadableState
        } onChange: {
            arriving.count += 1
        }
        let target = TestLoadable<Int>()
        proxy.target = target
        #expect(arriving.count == 1)
        // The sync asked for before the target existed reached it.
        #expect(target.syncCount == 1)
    }
}
