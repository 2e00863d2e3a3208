import Loadable
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
        await yieldUntil { profile.hasObservers }
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
