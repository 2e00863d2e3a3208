import Foundation
import LoadableCaching
import LoadableTestSupport
import LoadableTesting
import Observation
import Testing

extension KeyedLoadableProxyTests {
    // MARK: - Placeholders

    @Test(".none shows nothing while the new entry loads")
    func placeholderNone() throws {
        let test = CountedStore()
        let proxy = KeyedLoadableProxy(store: test.store, key: 1)
        try #require(proxy.loadable).setDidSyncSuccessfully("one")
        #expect(proxy.contents == "one")
        proxy.key = 2
        #expect(proxy.loadableState == .idle)
        #expect(proxy.contents == nil)
        #expect(!proxy.isContentsAvailable)
        #expect(!proxy.isPlaceholder)
        proxy.syncIfNeeded()
        #expect(proxy.loadableState == .syncing)
        #expect(proxy.contents == nil)
        #expect(!proxy.isContentsAvailable)
        #expect(!proxy.isPlaceholder)
        try #require(proxy.loadable).setDidSyncSuccessfully("two")
        #expect(proxy.contents == "two")
        #expect(!proxy.isPlaceholder)
    }

    @Test(".previousContents shows the previous key's contents, marked, while the new entry is idle or syncing")
    func placeholderPreviousContents() throws {
        let test = CountedStore()
        let proxy = KeyedLoadableProxy(store: test.store, key: 1, placeholder: .previousContents)
        // The first key has no previous contents.
        #expect(!proxy.isPlaceholder)
        #expect(proxy.contents == nil)
        try #require(proxy.loadable).setDidSyncSuccessfully("one")
        #expect(!proxy.isPlaceholder)

        proxy.key = 2
        #expect(proxy.loadableState == .idle)
        #expect(proxy.contents == "one")
        #expect(proxy.isPlaceholder)
        #expect(proxy.isContentsAvailable)
        #expect(proxy.error == nil)
        #expect(proxy.description.contains("contents available: yes"))

        proxy.syncIfNeeded()
        let second = try #require(proxy.loadable)
        #expect(second.doSyncCount == 1)
        #expect(proxy.loadableState == .syncing)
        #expect(proxy.contents == "one")
        #expect(proxy.isPlaceholder)
        #expect(proxy.isContentsAvailable)

        second.setDidSyncSuccessfully("two")
        #expect(proxy.loadableState == .didSyncSuccessfully)
        #expect(proxy.contents == "two")
        #expect(!proxy.isPlaceholder)
        #expect(proxy.isContentsAvailable)

        // A later sync of the entry keeps its own contents.
        proxy.sync()
        #expect(proxy.contents == "two")
        #expect(!proxy.isPlaceholder)
    }

    @Test(".previousContents passes a placeholder on when the key changes again before anything loaded")
    func placeholderPassesOn() throws {
        let test = CountedStore()
        let proxy = KeyedLoadableProxy(store: test.store, key: 1, placeholder: .previousContents)
        try #require(proxy.loadable).setDidSyncSuccessfully("one")
        proxy.key = 2
        proxy.key = 3
        #expect(proxy.contents == "one")
        #expect(proxy.isPlaceholder)

        // A key whose entry already has contents shows them, not the placeholder.
        try #require(proxy.loadable).setDidSyncSuccessfully("three")
        proxy.key = 1
        #expect(proxy.contents == "one")
        #expect(!proxy.isPlaceholder)
        // Nothing selected in between: nothing to pass on.
        proxy.key = nil
        proxy.key = 4
        #expect(proxy.contents == nil)
        #expect(!proxy.isPlaceholder)
        #expect(!proxy.isContentsAvailable)
    }

    @Test(".contents { key in … } is asked once per key change, and its nil shows nothing")
    func placeholderContents() throws {
        let test = CountedStore()
        var asked: [Int] = []
        let proxy = KeyedLoadableProxy(
            store: test.store, key: 1,
            placeholder: .contents { key in
                asked.append(key)
                return key == 3 ? nil : "summary \(key)"
            })
        #expect(asked == [1])
        #expect(proxy.contents == "summary 1")
        #expect(proxy.isPlaceholder)
        #expect(proxy.isContentsAvailable)
        proxy.syncIfNeeded()
        #expect(proxy.contents == "summary 1")
        _ = proxy.isPlaceholder
        #expect(asked == [1])

        proxy.key = 2
        #expect(asked == [1, 2])
        #expect(proxy.contents == "summary 2")
        proxy.key = 2
        proxy.key = nil
        #expect(asked == [1, 2])
        #expect(proxy.contents == nil)

        proxy.key = 3
        #expect(asked == [1, 2, 3])
        #expect(proxy.contents == nil)
        #expect(!proxy.isPlaceholder)
        #expect(!proxy.isContentsAvailable)

        proxy.key = 1
        #expect(asked == [1, 2, 3, 1])
        #expect(proxy.contents == "summary 1")
        try #require(proxy.loadable).setDidSyncSuccessfully("one")
        #expect(proxy.contents == "one")
        #expect(!proxy.isPlaceholder)
        #expect(asked == [1, 2, 3, 1])
    }

    @Test("once the new entry fails, its error shows with no contents: not the placeholder, not the old error")
    func failureShowsOwnError() throws {
        let test = CountedStore()
        let proxy = KeyedLoadableProxy(store: test.store, key: 1, placeholder: .previousContents)
        let first = try #require(proxy.loadable)
        first.setDidSyncSuccessfully("one")
        first.setDidFailToSync(TestError("old"))
        #expect(proxy.error as? TestError == TestError("old"))
        #expect(proxy.contents == "one")

        proxy.key = 2
        #expect(proxy.isPlaceholder)
        #expect(proxy.contents == "one")
        #expect(proxy.error == nil)
        proxy.syncIfNeeded()
        #expect(proxy.error == nil)
        let second = try #require(proxy.loadable)
        second.setDidFailToSync(TestError("new"))
        #expect(proxy.loadableState == .didFailToSync)
        #expect(proxy.error as? TestError == TestError("new"))
        #expect(proxy.contents == nil)
        #expect(!proxy.isContentsAvailable)
        #expect(!proxy.isPlaceholder)
        #expect(proxy.description.contains("contents available: no"))
    }

    @Test("a retry after a failure does not bring the placeholder back (a Loadable entry)")
    func retryAfterFailure() throws {
        let test = CountedStore()
        let proxy = KeyedLoadableProxy(store: test.store, key: 1, placeholder: .previousContents)
        try #require(proxy.loadable).setDidSyncSuccessfully("one")
        proxy.key = 2
        proxy.syncIfNeeded()
        let second = try #require(proxy.loadable)
        second.setDidFailToSync(TestError("new"))

        proxy.sync()
        #expect(second.doSyncCount == 2)
        #expect(proxy.loadableState == .syncing)
        #expect(proxy.contents == nil)
        #expect(!proxy.isContentsAvailable)
        #expect(!proxy.isPlaceholder)

        // Cancelled, the retry goes back to the failure.
        proxy.cancelSync()
        #expect(proxy.loadableState == .didFailToSync)
        #expect(proxy.error as? TestError == TestError("new"))
        #expect(!proxy.isPlaceholder)

        // Set idle by its owner, it still has failed since it was made.
        second.setIdle()
        #expect(proxy.contents == nil)
        #expect(!proxy.isPlaceholder)
    }

    @Test("a retry after a failure does not bring the placeholder back (a TestLoadable entry)")
    func retryAfterFailureOfTestLoadable() throws {
        let test = TestStore()
        let proxy = KeyedLoadableProxy(store: test.store, key: 1, placeholder: .previousContents)
        try #require(proxy.loadable).setDidSyncSuccessfully("one")
        proxy.key = 2
        let second = try #require(proxy.loadable)
        proxy.syncIfNeeded()
        #expect(proxy.isPlaceholder)
        second.setDidFailToSync(TestError("new"))
        #expect(!proxy.isPlaceholder)
        #expect(proxy.contents == nil)

        proxy.sync()
        #expect(second.syncCount == 2)
        #expect(proxy.loadableState == .syncing)
        #expect(proxy.contents == nil)
        #expect(!proxy.isContentsAvailable)
        #expect(!proxy.isPlaceholder)
    }

    @Test("a retry after a failure seen by an observer does not bring the placeholder back (a TestLoadable entry)")
    func retryAfterObservedFailureOfTestLoadable() throws {
        let test = TestStore()
        let proxy = KeyedLoadableProxy(store: test.store, key: 1, placeholder: .previousContents)
        try #require(proxy.loadable).setDidSyncSuccessfully("one")
        var seen: [String] = []
        try observing(
            proxy,
            { _ in
                seen.append("\(proxy.loadableState) \(proxy.contents ?? "nil") \(proxy.isPlaceholder)")
            }
        ) {
            proxy.key = 2
            let second = try #require(proxy.loadable)
            proxy.syncIfNeeded()
            second.setDidFailToSync(TestError("new"))
            proxy.sync()
            #expect(
                seen == [
                    "idle one true",
                    "syncing one true",
                    "did-fail-to-sync nil false",
                    "syncing nil false",
                ])
        }
    }

    @Test("a failure an observer was told of but nobody read still ends the placeholder (a TestLoadable entry)")
    func retryAfterUnreadFailureOfTestLoadable() throws {
        let test = TestStore()
        let proxy = KeyedLoadableProxy(store: test.store, key: 1, placeholder: .previousContents)
        try #require(proxy.loadable).setDidSyncSuccessfully("one")
        // Reads only the state: the placeholder is not looked at while the entry has failed.
        let recorder = Recorder(proxy)
        proxy.key = 2
        let second = try #require(proxy.loadable)
        proxy.syncIfNeeded()
        second.setDidFailToSync(TestError("new"))
        proxy.sync()
        #expect(recorder.states == [.idle, .syncing, .didFailToSync, .syncing])
        #expect(proxy.contents == nil)
        #expect(!proxy.isContentsAvailable)
        #expect(!proxy.isPlaceholder)
    }

    @Test("a cancelled first sync (back to idle without contents) shows the placeholder again")
    func cancelledFirstSync() throws {
        let test = CountedStore()
        let proxy = KeyedLoadableProxy(store: test.store, key: 1, placeholder: .previousContents)
        try #require(proxy.loadable).setDidSyncSuccessfully("one")
        proxy.key = 2
        proxy.syncIfNeeded()
        #expect(proxy.isPlaceholder)
        proxy.cancelSync()
        #expect(proxy.loadableState == .idle)
        #expect(proxy.isPlaceholder)
        #expect(proxy.contents == "one")
        #expect(proxy.isContentsAvailable)
        #expect(proxy.error == nil)
    }
}
