import Loadable
import LoadableTestSupport
import LoadableTesting
import Testing

/// Composites release what they do not own, and nothing outlives the last token or task.
@Suite("Leaks in the core")
@MainActor
struct LeakTests {
    @Test("a proxy is released while its target lives on, and stops observing it")
    func proxyReleased() {
        let target = TestLoadable<Int>()
        var proxy: LoadableProxy<TestLoadable<Int>>? = LoadableProxy(target: target)
        weak let weakProxy = proxy
        let token = proxy?.addObserver { _ in }
        proxy = nil
        #expect(weakProxy == nil)
        #expect(token?.isActive == false)
        #expect(!target.hasObservers)
    }

    @Test("a mapped loadable is released while its source lives on, and stops observing it")
    func mappedReleased() {
        let source = TestLoadable<Int>()
        var mapped: MappedLoadable<TestLoadable<Int>, String>? = source.map { "\($0)" }
        weak let weakMapped = mapped
        mapped = nil
        #expect(weakMapped == nil)
        #expect(!source.hasObservers)
    }

    @Test("a mapped loadable keeps its source alive, and releases it with itself")
    func mappedOwnsSource() {
        var source: TestLoadable<Int>? = TestLoadable<Int>()
        weak let weakSource = source
        var mapped = source?.map { $0 + 1 }
        source = nil
        #expect(weakSource != nil)
        mapped = nil
        #expect(weakSource == nil)
        withExtendedLifetime(mapped) {}
    }

    @Test("a stream does not keep its loadable alive")
    func streamDoesNotRetain() async {
        var loadable: ManualLoadable? = ManualLoadable()
        weak let weakLoadable = loadable
        let stream = loadable?.snapshots()
        loadable = nil
        #expect(weakLoadable == nil)
        var count = 0
        if let stream { for await _ in stream { count += 1 } }
        #expect(count == 1)
    }

    @Test("a cancelled stream consumer leaves no observer behind")
    func cancelledConsumer() async {
        let loadable = ManualLoadable()
        let consumer = Task { @MainActor in
            for await _ in loadable.snapshots() {}
        }
        await yield(until: { loadable.hasObservers })
        consumer.cancel()
        await consumer.value
        await yield(until: { !loadable.hasObservers })
    }

    @Test("an observer closure that captures its loadable weakly does not keep it alive")
    func observerDoesNotRetain() {
        var loadable: ManualLoadable? = ManualLoadable()
        weak let weakLoadable = loadable
        let token = loadable?.observe { _ in }
        loadable = nil
        #expect(weakLoadable == nil)
        #expect(token?.isActive == false)
    }

    @Test("a finished wait leaves no observer behind")
    func finishedWait() async throws {
        let loadable = ManualLoadable()
        loadable.finishInDoSync = .succeed(1)
        _ = try await loadable.syncedContents()
        #expect(!loadable.hasObservers)
    }
}
