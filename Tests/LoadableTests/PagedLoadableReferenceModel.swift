import Loadable
import LoadableTestSupport
import LoadableTesting
import Testing

// The reference model that `PagedLoadableModelTests` runs every sequence against, written from
// the paging and freshness rules alone.
extension PagedLoadableModelTests {
    /// What the list should be, from the rules alone.
    struct Model {
        enum Kind { case refresh, nextPage }

        var now = 0
        var state = LoadableState.idle
        var error: Int?
        var lastError: Int?
        var consecutiveFailures = 0
        /// The state a cancelled refresh goes back to.
        var stateBeforeSyncing = LoadableState.idle
        var contents: [Int]?
        var nextPageState = LoadableState.idle
        var nextPageError: Int?
        var nextCursor: Int?
        var hasLoadedFirstPage = false
        /// When the contents were last confirmed (a refresh that succeeded); `nil`: never.
        var confirmedAt: Int?
        var isInvalidated = false
        /// Invalidated during a refresh: one more refresh follows it.
        var isSyncPending = false
        /// Every load started, in order.
        var loads: [Kind] = []
        /// The loads not answered yet, by index in ``loads``.
        var pending: [Int] = []
        /// The load whose answer counts, if one runs.
        var currentRefresh: Int?
        var currentNextPage: Int?

        init(contents: [Int]?) {
            self.contents = contents
        }

        var age: Int? { confirmedAt.map { now - $0 } }

        var isStale: Bool {
            guard contents != nil, !isInvalidated, let age else { return true }
            return age >= PagedLoadableModelTests.maxAgeSeconds
        }

        var needsSync: Bool {
            switch state {
            case .idle, .didFailToSync: true
            case .syncing, .didSyncSuccessfully: isStale
            }
        }

        var hasMorePages: Bool { hasLoadedFirstPage && nextCursor != nil }

        mutating func apply(_ operation: Operation) {
            switch operation {
            case .sync:
                sync()
            case .syncIfNeeded:
                if needsSync { sync() }
            case .loadNextPage:
                guard hasLoadedFirstPage, nextCursor != nil, nextPageState != .syncing, state != .syncing else {
                    return
                }
                nextPageState = .syncing
                nextPageError = nil
                currentNextPage = startLoad(.nextPage)
            case .cancel:
                guard state == .syncing else { return }
                isSyncPending = false
                currentRefresh = nil
                state = stateBeforeSyncing
                error = state == .didFailToSync ? lastError : nil
            case .invalidate:
                // Not in use: marked stale; during a refresh, one more follows it.
                isInvalidated = true
                if state == .syncing { isSyncPending = true }
            case .answer(let index, let answer):
                guard !pending.isEmpty else { return }
                let load = pending.remove(at: index % pending.count)
                switch loads[load] {
                case .refresh: finishRefresh(load, answer)
                case .nextPage: finishNextPage(load, answer)
                }
            case .advance(let seconds):
                now += seconds
            }
        }

        private mutating func sync() {
            guard state != .syncing else { return }
            // A refresh drops a next page in flight and resets the footer.
            currentNextPage = nil
            nextPageState = .idle
            nextPageError = nil
            stateBeforeSyncing = state
            state = .syncing
            error = nil
            currentRefresh = startLoad(.refresh)
        }

        private mutating func startLoad(_ kind: Kind) -> Int {
            loads.append(kind)
            pending.append(loads.count - 1)
            return loads.count - 1
        }

        private mutating func finishRefresh(_ load: Int, _ answer: Answer) {
            guard load == currentRefresh, state == .syncing else { return }
            currentRefresh = nil
            switch answer {
            case .page(let count, let hasNext):
                currentNextPage = nil
                nextPageState = .idle
                nextPageError = nil
                hasLoadedFirstPage = true
                nextCursor = PagedLoadableModelTests.cursor(of: load, hasNext: hasNext)
                contents = PagedLoadableModelTests.items(of: load, count: count)
                state = .didSyncSuccessfully
                error = nil
                lastError = nil
                consecutiveFailures = 0
                confirmedAt = now
                isInvalidated = false
            case .failure(let code):
                state = .didFailToSync
                error = code
                lastError = code
                consecutiveFailures += 1
            }
            if isSyncPending {
                isSyncPending = false
                isInvalidated = true
                sync()
            }
        }

        /// Paging is not syncing: only the contents, the cursor and the footer change.
        private mutating func finishNextPage(_ load: Int, _ answer: Answer) {
            guard load == currentNextPage, nextPageState == .syncing else { return }
            currentNextPage = nil
            switch answer {
            case .page(let count, let hasNext):
                nextPageState = .idle
                nextPageError = nil
                nextCursor = PagedLoadableModelTests.cursor(of: load, hasNext: hasNext)
                contents = (contents ?? []) + PagedLoadableModelTests.items(of: load, count: count)
            case .failure(let code):
                nextPageState = .didFailToSync
                nextPageError = code
            }
        }
    }
}
