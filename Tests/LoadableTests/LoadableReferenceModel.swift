import Loadable
import LoadableTestSupport
import LoadableTesting
import Testing

// The reference model that `LoadableModelTests` runs every sequence against, written from
// `Docs/Concepts.md` alone.
extension LoadableModelTests {
    @MainActor final class Model {
        struct Observer {
            var id: Int
            var reaction: Reaction
            var active = true
            var reactions = 0
            var addedChild = false
        }

        var state = LoadableState.idle
        var contents: Int?
        var errorCode: Int?
        var isError = false
        var before: (LoadableState, Int?, Bool) = (.idle, nil, false)
        var observers: [Observer] = []
        var log: [Seen] = []
        var doSyncCount = 0
        var doCancelSyncCount = 0
        /// Between `sync()` moving to syncing and calling `doSync()`: a cancel then has no work to
        /// stop, so `doCancelSync()` is not called; and a sync that an observer starts meanwhile
        /// calls `doSync()` itself and clears it, so the outer `sync()` does not call it again.
        var awaitingDoSync = false
        var notifying = false
        var queued = false
        var nextID = 0

        var needsSync: Bool {
            switch state {
            case .idle, .didFailToSync: true
            case .syncing, .didSyncSuccessfully: contents == nil
            }
        }

        func update(_ newState: LoadableState, errorCode: Int?, isError: Bool, contents: Int?? = .none) {
            // A setter that changes nothing a reader can see notifies nothing ("Equal contents
            // notify nothing"): the same state (not a failure, which replaces its error) and no
            // contents, or contents equal to those shown.
            let keepsContents: Bool
            if case .some(let value) = contents { keepsContents = value == self.contents } else { keepsContents = true }
            if newState == state, newState != .didFailToSync, keepsContents { return }
            if newState == .syncing, state != .syncing { before = (state, self.errorCode, self.isError) }
            if newState != .syncing { awaitingDoSync = false }
            state = newState
            self.errorCode = errorCode
            self.isError = isError
            if case .some(let value) = contents { self.contents = value }
            notify()
        }

        func notify() {
            if notifying {
                queued = true
                return
            }
            notifying = true
            repeat {
                queued = false
                let end = observers.count
                var index = 0
                while index < end {
                    if observers[index].active { call(index) }
                    index += 1
                }
            } while queued
            notifying = false
        }

        func call(_ index: Int) {
            log.append(Seen(observer: observers[index].id, state: state, contents: contents, errorCode: errorCode))
            switch observers[index].reaction {
            case .none: break
            case .syncOnFailure:
                if state == .didFailToSync, observers[index].reactions < LoadableModelTests.reactionLimit {
                    observers[index].reactions += 1
                    sync()
                }
            case .cancelSelf:
                observers[index].active = false
            case .addObserver:
                if !observers[index].addedChild {
                    observers[index].addedChild = true
                    add(.none)
                }
            case .cancelNext:
                if index + 1 < observers.count { observers[index + 1].active = false }
            case .cancelOnSyncing:
                if state == .syncing, observers[index].reactions < LoadableModelTests.reactionLimit {
                    observers[index].reactions += 1
                    cancel()
                }
            }
        }

        func add(_ reaction: Reaction) {
            observers.append(Observer(id: nextID, reaction: reaction))
            nextID += 1
        }

        func sync() {
            guard state != .syncing else { return }
            awaitingDoSync = true
            update(.syncing, errorCode: nil, isError: false)
            guard state == .syncing, awaitingDoSync else { return }
            awaitingDoSync = false
            doSyncCount += 1
        }

        func cancel() {
            guard state == .syncing else { return }
            if !awaitingDoSync { doCancelSyncCount += 1 }
            update(before.0, errorCode: before.1, isError: before.2)
        }

        func apply(_ operation: Operation) {
            switch operation {
            case .sync: sync()
            case .syncIfNeeded: if needsSync { sync() }
            case .succeed(let value): update(.didSyncSuccessfully, errorCode: nil, isError: false, contents: value)
            case .succeedKeepingContents:
                if contents != nil { update(.didSyncSuccessfully, errorCode: nil, isError: false) }
            case .fail(let code): update(.didFailToSync, errorCode: code, isError: code != nil)
            case .cancel: cancel()
            case .setIdle: update(.idle, errorCode: nil, isError: false)
            case .setSyncing: update(.syncing, errorCode: nil, isError: false)
            case .notify: notify()
            case .addObserver(let reaction): add(reaction)
            case .cancelObserver(let index), .releaseObserver(let index):
                if index < observers.count { observers[index].active = false }
            }
        }
    }
}
