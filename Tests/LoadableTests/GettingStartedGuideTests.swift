import Foundation
import Loadable
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

// The samples of Docs/GettingStarted.md, verbatim (`GuideSamplesTests` checks it), so CI proves
// they compile and work.

struct Profile: Sendable { var name: String }
protocol ProfileAPI: Sendable { func profile() async throws -> Profile }

final class ProfileLoadable: Loadable<Profile> {
    private let api: any ProfileAPI
    init(api: any ProfileAPI) {
        self.api = api
        super.init()
    }
    override func doSync() {
        Task {
            do {
                setDidSyncSuccessfully(try await api.profile())
            } catch {
                setDidFailToSync(error)
            }
        }
    }
}

extension Profile: Equatable {}

struct FixedProfileAPI: ProfileAPI {
    func profile() async throws -> Profile { Profile(name: "Ada") }
}

/// What the guide's view code calls, recorded.
@MainActor
final class Screen {
    var shown: [String] = []
}

/// Prints the state of a loadable now and after every change, and keeps what it printed.
@MainActor
final class StatePrinter {
    private let loadable: any PureLoadable
    private(set) var printed: [LoadableState] = []

    init(_ loadable: any PureLoadable) {
        self.loadable = loadable
        track()
    }

    private func track() {
        let state = withObservationTracking {
            loadable.loadableState
        } onChange: { [weak self] in
            // Before the change, maybe off the main actor: read the new state after it, and track
            // again, on the main actor.
            Task { @MainActor in self?.track() }
        }
        printed.append(state)
        print("state: \(state)")
    }
}

@Suite("Getting started guide")
@MainActor
struct GettingStartedGuideTests {
    /// What the guide's view code calls.
    let screen = Screen()
    func showSpinner(over cached: Profile?) { screen.shown.append("spinner over \(cached?.name ?? "nothing")") }
    func show(_ value: Profile) { screen.shown.append("profile \(value.name)") }
    func showEmptyState() { screen.shown.append("empty") }
    func showError(_ error: any Error, over cached: Profile?) { screen.shown.append("error") }
    func render(_ snapshot: LoadableSnapshot<Profile>) { screen.shown.append("snapshot \(snapshot.state)") }

    @Test("observing with a token and switching over the phase")
    func observeSample() async throws {
        let api = FixedProfileAPI()
        let profile = AsyncLoadable { try await api.profile() }
        let token = profile.observe { profile in
            switch profile.snapshot.phase {
            case .idle(let cached), .syncing(let cached): showSpinner(over: cached)
            case .loaded(let value): show(value)
            case .empty: showEmptyState()
            case .failed(let error, let cached): showError(error, over: cached)
            }
        }
        let value = try await profile.syncedContents()
        #expect(value.name == "Ada")
        #expect(screen.shown == ["spinner over nothing", "profile Ada"])
        token.cancel()
    }

    @Test("the subclass from the guide loads through its API")
    func subclassSample() async throws {
        let profile = ProfileLoadable(api: FixedProfileAPI())
        #expect(try await profile.syncedContents() == Profile(name: "Ada"))
    }

    @Test("iterating snapshots until the task is cancelled")
    func snapshotsSample() async {
        let profile = ProfileLoadable(api: FixedProfileAPI())
        let consumer = Task { @MainActor in
            for await snapshot in profile.snapshots() {
                render(snapshot)
            }
        }
        await yield(until: { profile.hasObservers })
        profile.sync()
        await yield(until: { screen.shown.last == "snapshot did-sync-successfully" })
        consumer.cancel()
        await consumer.value  // cancelling the task ends the sequence, and so the loop
    }

    @Test("the Linux entry-point sample")
    func linuxSample() async throws {
        let api = FixedProfileAPI()
        @MainActor
        func run() async throws {
            let profile = AsyncLoadable { try await api.profile() }
            print(try await profile.syncedContents())
        }

        try await run()
    }

    @Test("the withObservationTracking sample prints every state, re-armed on the main actor")
    func observationTrackingSample() async {
        let api = FixedProfileAPI()
        let profile = AsyncLoadable { try await api.profile() }
        let printer = StatePrinter(profile)  // prints "state: idle"
        profile.sync()  // then prints "state: syncing", and "state: did-sync-successfully" once loaded

        #expect(printer.printed == [.idle])  // onChange only queued the re-arming task
        await yield(until: { printer.printed.count == 3 })
        #expect(printer.printed == [.idle, .syncing, .didSyncSuccessfully])
    }

    @Test("changes made in one main-actor turn are printed once, with the newest state")
    func observationTrackingCoalesces() async {
        let feed = PushLoadable<[String]>()
        let printer = StatePrinter(feed)
        feed.setSyncing()
        feed.setDidSyncSuccessfully(["news"])
        feed.setDidFailToSync(nil)
        await yield(until: { printer.printed.count == 2 })
        #expect(printer.printed == [.idle, .didFailToSync])

        // Tracking goes on after a coalesced change, and a notification without a new state is
        // a change too.
        feed.notifyDidChange()
        await yield(until: { printer.printed.count == 3 })
        #expect(printer.printed == [.idle, .didFailToSync, .didFailToSync])
    }

    @Test("proxies, map and TestLoadable are tracked the same way")
    func observationTrackingOtherTypes() async {
        let source = PushLoadable<Profile>()
        let names = source.map(\.name)
        let proxy = PureLoadableProxy(target: source)
        let test = TestLoadable<Int>()
        let printers = [StatePrinter(names), StatePrinter(proxy), StatePrinter(test)]

        source.setSyncing()
        test.sync()
        await yield(until: { printers.allSatisfy { $0.printed.count == 2 } })
        #expect(printers.map(\.printed) == Array(repeating: [.idle, .syncing], count: 3))

        source.setDidSyncSuccessfully(Profile(name: "Ada"))
        test.setDidSyncSuccessfully(1)
        await yield(until: { printers.allSatisfy { $0.printed.count == 3 } })
        #expect(printers.map { $0.printed.last } == Array(repeating: .didSyncSuccessfully, count: 3))
    }

    @Test("a released StatePrinter stops tracking")
    func observationTrackingEndsWithThePrinter() async {
        let feed = PushLoadable<Int>()
        weak var released: StatePrinter?
        do {
            let printer = StatePrinter(feed)
            released = printer
            #expect(printer.printed == [.idle])
        }
        #expect(released == nil)
        feed.setSyncing()  // calls onChange, whose task finds no printer
        for _ in 0..<100 { await Task.yield() }
        #expect(released == nil)
    }
}

#if canImport(SwiftUI)
    import SwiftUI

    struct ProfileView: View {
        let profile: ProfileLoadable

        var body: some View {
            Group {
                if let value = profile.contents {
                    Text(value.name)
                } else if profile.loadableState == .didFailToSync {
                    Button("Retry") { profile.sync() }
                } else {
                    ProgressView()
                }
            }
            .task { profile.syncIfNeeded() }
        }
    }
#endif
