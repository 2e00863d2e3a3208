import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableTestSupport
import LoadableTesting
import Testing

// MARK: - Types of these tests

/// Contents that cannot be encoded.
struct Unencodable: Codable, Sendable, Equatable {
    var value: Int

    func encode(to encoder: any Encoder) throws {
        throw TestError("cannot encode")
    }
}

/// Contents with a date, for the encoder's and decoder's date strategies.
struct Event: Codable, Sendable, Equatable {
    var name: String
    var at: Date
}

/// Holds a loadable for an observer that releases it.
@MainActor
final class Holder {
    var loadable: PersistedLoadable<Int>?
    /// The contents each notification showed.
    var seen: [Int?] = []
}

/// The state a loadable is in when its restore lands.
enum StateAtRestore: String, CaseIterable, Sendable {
    case idle, syncing, failed

    var state: LoadableState {
        switch self {
        case .idle: .idle
        case .syncing: .syncing
        case .failed: .didFailToSync
        }
    }

    /// Puts `loadable` in this state.
    @MainActor
    func apply(to loadable: PersistedLoadable<Int>) {
        switch self {
        case .idle: break
        case .syncing: loadable.sync()
        case .failed:
            loadable.sync()
            loadable.setDidFailToSync(TestError("offline"))
        }
    }
}

/// A confirmation of the contents: what a restore must not go back from, and what is saved.
enum ContentsConfirmation: String, CaseIterable, Sendable {
    /// `setDidSyncSuccessfully(2)`.
    case syncWithContents
    /// A sync that ends with `setDidSyncSuccessfully()`, keeping the contents 1.
    case syncKeepingContents
    case setContents
    /// `updateContents { $0 += 1 }` on the contents 1.
    case updateContents

    /// Confirms the contents of `loadable`, which holds 1: afterwards it holds ``expected``.
    @MainActor
    func apply(to loadable: PersistedLoadable<Int>) {
        switch self {
        case .syncWithContents:
            loadable.sync()
            loadable.setDidSyncSuccessfully(2)
        case .syncKeepingContents:
            loadable.sync()
            loadable.setDidSyncSuccessfully()
        case .setContents: loadable.setContents(2)
        case .updateContents: loadable.updateContents { $0 += 1 }
        }
    }

    var expected: Int { self == .syncKeepingContents ? 1 : 2 }
}

/// A change that is not a change of the base contents: nothing is saved after it.
enum UnsavedChange: String, CaseIterable, Sendable {
    case failure, cancelSync, setSyncing, setIdle, invalidate

    @MainActor
    func apply(to loadable: PersistedLoadable<Int>) {
        switch self {
        case .failure:
            loadable.sync()
            loadable.setDidFailToSync(TestError("offline"))
        case .cancelSync:
            loadable.sync()
            loadable.cancelSync()
        case .setSyncing: loadable.setSyncing()
        case .setIdle:
            loadable.setSyncing()
            loadable.setIdle()
        case .invalidate: loadable.invalidate()
        }
    }
}
