import Foundation
import Loadable
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

// The samples of Docs/GettingStarted.md, so CI proves they compile and work.

struct Profile: Sendable, Equatable { var name: String }
protocol ProfileAPI: Sendable { func profile() async throws -> Profile }

// swift-format-ignore
final class ProfileLoadable: Loadable<Profile> {
    private let api: any ProfileAPI
    init(api: any ProfileAPI) {
        self.api = api
        super.init()
    }
    override func doSync() {
        Task {
            do { setDidSyncSuccessfully(try await api.profile()) }
            catch { setDidFailToSync(error) }
        }
    }
}

struct FixedProfileAPI: ProfileAPI {
    func profile() async throws -> Profile { Profile(name: "Ada") }
}

/// What the guide's view code calls, recorded.
@MainActor
final class Screen {
    var shown: [String] = []
    func showSpinner(over cached: Profile?) { shown.append("spinner over \(cached?.name ?? "nothing")") }
    func show(_ value: Profile) { shown.append("profile \(value.name)") }
    func showEmptyState() { shown.append("empty") }
    func showError(_ error: any Error, over cached: Profile?) { shown.append("error") }
    func render(_ snapshot: LoadableSnapshot<Profile>) { shown.append("snapshot \(snapshot.state)") }
}

// MARK: - Guide: observation tracking

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

// MARK: - End of guide sample

@Suite("Getting started guide")
@MainActor
struct GettingStartedGuideTests {
    @Test("observing with a token and switching over the phase")
    func observeSample() async throws {
        let api = FixedProfileAPI()
        let screen = Screen()
        let profile = AsyncLoadable { try await api.profile() }
        let token = profile.observe { profile in
            switch profile.snapshot.phase {
            case .idle(let cached), .syncing(let cached): screen.showSpinner(over: cached)
            case .loaded(let value): screen.show(value)
            case .empty: screen.showEmptyState()
            case .failed(let error, let cached): screen.showError(error, over: cached)
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

    @Test("iterating snapshots")
    func snapshotsSample() async {
        let screen = Screen()
        let profile = ProfileLoadable(api: FixedProfileAPI())
        let consumer = Task { @MainActor in
            for await snapshot in profile.snapshots() {
                screen.render(snapshot)
                if snapshot.state == .didSyncSuccessfully { break }
            }
        }
        await yield(until: { profile.hasObservers })
        profile.sync()
        await consumer.value
        #expect(screen.shown.last == "snapshot did-sync-successfully")
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

    @Test("Docs/GettingStarted.md shows the StatePrinter of this file verbatim")
    func observationTrackingSampleMatchesGuide() throws {
        let thisFile = URL(fileURLWithPath: #filePath)
        let source = try String(contentsOf: thisFile, encoding: .utf8)
        let guideURL = thisFile.deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Docs/GettingStarted.md")
        let guide = try String(contentsOf: guideURL, encoding: .utf8)

        let start = try #require(source.range(of: "// MARK: - " + "Guide: observation tracking\n"))
        let end = try #require(source.range(of: "// MARK: - " + "End of guide sample"))
        let sample = source[start.upperBound..<end.lowerBound].trimmingCharacters(in: .newlines)
        #expect(guide.contains(sample))
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
