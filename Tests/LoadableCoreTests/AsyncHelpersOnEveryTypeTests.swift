import Loadable
import LoadableGroup
import LoadableTestSupport
import LoadableTesting
import Testing

/// The async helpers live on the protocols, so every loadable type has them: `synced()` on every
/// `SyncableLoadable`, `syncedContents()` where there are contents too, `snapshots()` wherever
/// there are contents, `states()` and `doneSyncing()` everywhere.
@Suite("Async helpers on every loadable type")
@MainActor
struct AsyncHelpersOnEveryTypeTests {
    @Test("syncedContents() on a combined loadable syncs its members and returns the combined contents")
    func combined() async throws {
        let user = AsyncLoadable { "Ada" }
        let count = AsyncLoadable { 3 }
        let dashboard = LoadableGroup.combine(user, count) { "\($0): \($1)" }
        let text = try await dashboard.syncedContents()
        #expect(text == "Ada: 3")
        #expect(user.loadableState == .didSyncSuccessfully)
    }

    @Test("synced() on a group waits for every member and throws the group's error")
    func group() async throws {
        let good = AsyncLoadable { 1 }
        let bad = AsyncLoadable<Int> { throw TestError("bad") }
        try await LoadableGroup([good]).synced()
        #expect(good.loadableState == .didSyncSuccessfully)
        await #expect(throws: LoadableGroupError.self) {
            try await LoadableGroup([good, bad]).synced(forceSync: true)
        }
        #expect(bad.error as? TestError == TestError("bad"))
    }

    @Test("syncedContents() on a proxy waits for a target that arrives later")
    func proxy() async throws {
        let proxy = LoadableProxy<AsyncLoadable<Int>>()
        async let contents = proxy.syncedContents()
        await yield(until: { proxy.loadableState == .syncing })
        proxy.target = AsyncLoadable { 7 }
        #expect(try await contents == 7)
    }

    @Test("syncedContents() on a mapped loadable syncs its source and returns the mapped contents")
    func mapped() async throws {
        let source = AsyncLoadable { [1, 2, 3] }
        let count = source.map(\.count)
        #expect(try await count.syncedContents() == 3)
    }

    @Test("synced() on a chain runs it and throws the failing item's error")
    func chain() async throws {
        let token = AsyncLoadable { "token" }
        let profile = AsyncLoadable<Int> { throw TestError("profile") }
        try await LoadableChain([.init(token)]).synced()
        await #expect(throws: LoadableChainError.self) {
            try await LoadableChain([.init(token), .init(profile)]).synced()
        }
    }

    @Test("synced() and syncedContents() from an already-cancelled task start nothing and throw")
    func alreadyCancelled() async {
        let test = TestLoadable<Int>()
        let loadable = AsyncLoadable { 1 }
        let group = LoadableGroup([TestLoadable<Int>()])
        let task = Task { @MainActor in
            withUnsafeCurrentTask { $0?.cancel() }
            var errors: [Bool] = []
            do { _ = try await test.syncedContents() } catch { errors.append(error is CancellationError) }
            do { _ = try await loadable.syncedContents() } catch { errors.append(error is CancellationError) }
            do { try await group.synced() } catch { errors.append(error is CancellationError) }
            return errors
        }
        #expect(await task.value == [true, true, true])
        #expect(test.syncCount == 0)
        #expect(loadable.loadableState == .idle)
        #expect(group.loadableState == .idle)
    }

    @Test("snapshots() on a combined loadable yields the current snapshot first, then each change")
    func snapshots() async {
        let a = PushLoadable<Int>()
        let b = PushLoadable<Int>(contents: 2)
        b.setDidSyncSuccessfully(2)
        let sum = LoadableGroup.combine(a, b) { $0 + $1 }
        var iterator = sum.snapshots(bufferingPolicy: .unbounded).makeAsyncIterator()
        #expect(await iterator.next()?.state == .idle)
        a.setDidSyncSuccessfully(1)
        let snapshot = await iterator.next()
        #expect(snapshot?.state == .didSyncSuccessfully)
        #expect(snapshot?.contents == 3)
    }

    @Test("states() and doneSyncing() on a group")
    func statesOfGroup() async throws {
        let member = TestLoadable<Int>()
        let group = PureLoadableGroup([member])
        var iterator = group.states().makeAsyncIterator()
        #expect(await iterator.next() == .idle)
        member.setSyncing()
        #expect(await iterator.next() == .syncing)
        async let done: Void = group.doneSyncing()
        await Task.yield()
        member.setDidSyncSuccessfully(1)
        try await done
        #expect(await iterator.next() == .didSyncSuccessfully)
    }
}
