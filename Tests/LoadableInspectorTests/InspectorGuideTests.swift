import Foundation
import Loadable
import LoadableInspector
import LoadableTestSupport
import LoadableTesting
import Testing

/// The samples of `Docs/Inspector.md`, verbatim, run. Each attaches an inspector of its own while
/// it holds the process's inspector turn (`withInspector`), as every inspector test does.
@MainActor
@Suite("Docs/Inspector.md's samples")
struct InspectorGuideTests {
    @Test("attaching one: a stream of the syncs that ended")
    func attaching() async {
        await withInspector(LoadableInspector()) {
            let inspector = LoadableInspector()
            inspector.attach()
            let watching = Task {
                for await event in inspector.events where event.kind == .syncEnded {
                    print(LoadableInspector.jsonLine(event))
                }
            }
            #expect(LoadableInspector.attached === inspector)
            // The sample's inspector keeps its default 10,000 events, which the other tests of a busy
            // parallel run can fill before this test reads: what it records is tested elsewhere.
            watching.cancel()
            await watching.value
        }
    }

    @Test("an episode's timeline, for a golden file")
    func golden() async throws {
        try await withInspector(LoadableInspector()) {
            let timeline = try await feedEpisodeTimeline()
            #expect(
                timeline == """
                    {"kind":"syncStarted","label":"feed","time":0}
                    {"kind":"syncEnded","label":"feed","time":0,"duration":0,"result":"succeeded"}
                    {"kind":"invalidated","label":"feed","time":0,"deferred":false}

                    """)
        }
    }

    func feedEpisodeTimeline() async throws -> String {
        let clock = ManualClock()
        // Tests that run in parallel report to the same inspector: room for all of their events.
        let inspector = LoadableInspector(clock: clock, capacity: 1_000_000)
        inspector.attach()
        defer { inspector.detach() }
        let feed = AsyncLoadable(clock: clock) { [1, 2, 3] }
        feed.inspectorLabel = "feed"
        try await feed.synced()
        feed.invalidate()
        // Keep this episode's events.
        return inspector.recordedEvents.filter { $0.label == "feed" }
            .map { LoadableInspector.jsonLine($0) + "\n" }.joined()
    }

    @Test("the page, on the guide's port")
    func page() async throws {
        let inspector = LoadableInspector()
        let server = try inspector.serve(port: 8484)
        print("inspector page: \(server.url)")
        #expect(server.url.absoluteString == "http://127.0.0.1:8484/")
        server.stop()
    }
}
