import Foundation
import LoadableGroup
import LoadableTesting
import Testing

// The samples of Docs/Groups.md, verbatim (`GuideSamplesTests` checks it), so the guide's code
// compiles and its tests pass.

// MARK: - Guide: model

/// The user's profile, as the API returns it.
struct Profile: Sendable, Equatable {
    var name: String
}

/// The user's settings, as the API returns them.
struct Settings: Sendable, Equatable {
    var darkMode: Bool
}

/// The settings screen: a spinner until both the profile and the settings are loaded.
@MainActor
final class SettingsScreenModel {
    enum Display: Equatable {
        case loading
        case failed(String)
        case ready(name: String, darkMode: Bool)
    }

    private let profile: any SyncableLoadable & ContentsLoadable<Profile>
    private let settings: any SyncableLoadable & ContentsLoadable<Settings>
    private let group: LoadableGroup
    private var observation: LoadableObservation?
    private(set) var display: Display = .loading

    init(
        profile: any SyncableLoadable & ContentsLoadable<Profile>,
        settings: any SyncableLoadable & ContentsLoadable<Settings>
    ) {
        self.profile = profile
        self.settings = settings
        group = LoadableGroup([profile, settings])  // .strict: all or nothing
        observation = group.observe { [weak self] _ in self?.update() }
        update()
    }

    func screenDidAppear() {
        group.syncIfNeeded()  // syncs each member that needs it
    }

    private func update() {
        switch group.loadableState {
        case .didSyncSuccessfully:
            // A successful strict group means every member succeeded, so both have contents.
            display = .ready(name: profile.contents!.name, darkMode: settings.contents!.darkMode)
        case .didFailToSync:
            display = .failed(group.groupError!.description)
        case .idle, .syncing:
            display = .loading
        }
    }
}

// MARK: - Guide: test

@Suite @MainActor struct SettingsScreenModelTests {
    @Test("The screen shows both values once both members succeed, and why it failed otherwise")
    func settingsScreen() {
        let profile = TestLoadable<Profile>()
        let settings = TestLoadable<Settings>()
        let model = SettingsScreenModel(profile: profile, settings: settings)

        model.screenDidAppear()
        #expect(profile.syncCount == 1 && settings.syncCount == 1)
        #expect(model.display == .loading)

        profile.setDidSyncSuccessfully(Profile(name: "Ada"))
        #expect(model.display == .loading)
        settings.setDidSyncSuccessfully(Settings(darkMode: true))
        #expect(model.display == .ready(name: "Ada", darkMode: true))

        settings.setDidFailToSync(nil)
        #expect(model.display == .failed("Could not sync a member of the group: member #1 failed without an error"))
    }
}

// MARK: - Guide: policies

@Suite @MainActor struct GroupPolicyExamples {
    @Test(".never waits for every member and ignores failures; .any shows whatever loaded")
    func policies() {
        let weather = TestLoadable<String>()
        let news = TestLoadable<[String]>()
        let everything = PureLoadableGroup([weather, news], policy: .never)
        let anything = PureLoadableGroup([weather, news], policy: .any)

        weather.setDidSyncSuccessfully("sunny")
        news.setSyncing()
        #expect(everything.loadableState == .syncing)
        #expect(anything.loadableState == .syncing)  // a syncing member wins over a success...
        #expect(anything.isContentsAvailable)  // ...but the weather can be shown already

        news.setDidFailToSync(nil)
        #expect(everything.loadableState == .didSyncSuccessfully)  // a failed member counts as done
        #expect(everything.isContentsAvailable)  // every member that did not fail has contents
        #expect(everything.error == nil)  // a group that did not fail has no error
        #expect(anything.loadableState == .didSyncSuccessfully)
    }
}

// MARK: - Guide: errors

@Suite @MainActor struct GroupErrorExamples {
    @Test("A failed group's error lists every failed member, in member order")
    func errors() {
        let first = TestLoadable<Int>()
        let second = TestLoadable<Int>()
        let third = TestLoadable<Int>()
        let group = PureLoadableGroup([first, second, third])
        first.setDidFailToSync(TimedOut())
        second.setDidSyncSuccessfully(2)
        third.setDidFailToSync(nil)

        if let error = group.groupError {  // non-nil only while the group is did-fail-to-sync
            for failure in error.failures {
                print(failure.index, failure.error.map { "\($0)" } ?? "no error given")
            }
            // Could not sync 2 members of the group: member #0: timed out; member #2 failed without an error
            print(error)
        }
        let error = group.groupError
        #expect(error?.failures.map(\.index) == [0, 2])
        #expect(
            error?.description
                == "Could not sync 2 members of the group: member #0: timed out; member #2 failed without an error")

        third.setDidSyncSuccessfully(3)
        first.setDidSyncSuccessfully(1)
        #expect(group.groupError == nil)
    }
}

/// An error that describes itself as the guide's sample prints it.
struct TimedOut: Error, CustomStringConvertible {
    var description: String { "timed out" }
}

// MARK: - Guide: combine

struct Account: Equatable {
    var profile: Profile
    var settings: Settings
}

@Suite @MainActor struct CombineExamples {
    @Test("combine turns two loadables into one loadable of a typed value")
    func account() {
        let profile = TestLoadable<Profile>()
        let settings = TestLoadable<Settings>()
        let account = LoadableGroup.combine(profile, settings) { Account(profile: $0, settings: $1) }

        account.syncIfNeeded()
        profile.setDidSyncSuccessfully(Profile(name: "Ada"))
        #expect(account.contents == nil)  // not every member has contents yet
        settings.setDidSyncSuccessfully(Settings(darkMode: false))
        #expect(account.contents == Account(profile: Profile(name: "Ada"), settings: Settings(darkMode: false)))

        profile.contents = Profile(name: "Ada Lovelace")
        profile.notifyDidChange()  // contents changed in place: recomputed
        #expect(account.contents?.profile.name == "Ada Lovelace")
    }
}

// MARK: - Guide: combined await

struct OfflineError: Error {}

@Suite @MainActor struct CombinedAwaitExamples {
    @Test("syncedContents loads every member and returns the combined value")
    func dashboard() async throws {
        let profile = AsyncLoadable { Profile(name: "Ada") }
        let settings = AsyncLoadable { Settings(darkMode: true) }
        let dashboard = LoadableGroup.combine(profile, settings) { Account(profile: $0, settings: $1) }

        let account = try await dashboard.syncedContents()
        #expect(account == Account(profile: Profile(name: "Ada"), settings: Settings(darkMode: true)))

        let failing = AsyncLoadable<Settings> { throw OfflineError() }
        let broken = LoadableGroup.combine(profile, failing) { Account(profile: $0, settings: $1) }
        await #expect(throws: LoadableGroupError.self) { try await broken.syncedContents() }
    }
}

// MARK: - Guide: chain

enum SignInError: Error, Equatable {
    case noName
}

@Suite @MainActor struct ChainExamples {
    @Test("A chain gets the token first, then the profile, and refuses profiles without a name")
    func signIn() throws {
        let token = TestLoadable<String>()
        let profile = TestLoadable<Profile>()
        let signIn = LoadableChain([
            .init(token),
            .init(profile) { profile.contents!.name.isEmpty ? .fail(SignInError.noName) : .proceed },
        ])

        signIn.syncIfNeeded()
        #expect(token.loadableState == .syncing && profile.loadableState == .idle)
        token.setDidSyncSuccessfully("secret")
        #expect(profile.loadableState == .syncing)
        profile.setDidFailToSync(nil)  // and no contents from before
        let error = try #require(signIn.error as? LoadableChainError)
        #expect(error.index == 1 && error.underlying == nil)

        // A new sync passes the token through (it does not need a sync) and retries the profile.
        signIn.syncIfNeeded()
        #expect(token.syncCount == 1 && profile.syncCount == 2)
        profile.setDidSyncSuccessfully(Profile(name: ""))
        #expect(signIn.error as? SignInError == .noName)
    }
}

// MARK: - End
