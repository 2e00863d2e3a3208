import Foundation
import Loadable
import LoadableInspector
import Testing

/// `loadable-demo --events`: the inspector's timeline of the tour is the same bytes on every run,
/// and the same as the golden file.
@MainActor
@Suite("The demo's golden timeline")
struct DemoGoldenTimelineTests {
    /// The golden timeline of `loadable-demo --events --seed 7 --failure-rate 0.6` (the failures bring
    /// the syncer's retries in).
    static let golden = packageRoot.appendingPathComponent("Tests/LoadableInspectorTests/Golden/demo-events.jsonl")
    static let arguments = ["--events", "--seed", "7", "--failure-rate", "0.6"]

    @Test("two runs print the same bytes, equal to Golden/demo-events.jsonl (LOADABLE_UPDATE_GOLDEN=1 writes it)")
    func goldenTimeline() async throws {
        let demo = try demoExecutable
        let first = try await ChildProcess.run(demo, Self.arguments)
        let second = try await ChildProcess.run(demo, Self.arguments)
        #expect(first == second, "two runs of loadable-demo \(Self.arguments.joined(separator: " ")) differ")
        #expect(first.hasSuffix("\n"))
        #expect(first.split(separator: "\n").count > 20)

        if ProcessInfo.processInfo.environment["LOADABLE_UPDATE_GOLDEN"] == "1" {
            try Data(first.utf8).write(to: Self.golden)
            Issue.record(
                "LOADABLE_UPDATE_GOLDEN=1: wrote \(Self.golden.path); run the tests again without it to check it")
            return
        }
        let expected = try String(contentsOf: Self.golden, encoding: .utf8)
        if first != expected {
            let firstDifference = zip(first.split(separator: "\n"), expected.split(separator: "\n")).enumerated()
                .first { $0.element.0 != $0.element.1 }
            Issue.record(
                """
                loadable-demo \(Self.arguments.joined(separator: " ")) printed another timeline than \(Self.golden.path) \
                (\(first.split(separator: "\n").count) lines, the file has \(expected.split(separator: "\n").count)); \
                first difference at line \((firstDifference?.offset ?? 0) + 1):
                  now:    \(firstDifference.map { String($0.element.0) } ?? "(the shorter ends)")
                  golden: \(firstDifference.map { String($0.element.1) } ?? "(the shorter ends)")
                If the change is meant, run the tests with LOADABLE_UPDATE_GOLDEN=1 and commit the file.
                """)
        }
    }

    @Test("every line of the golden timeline decodes as a LoadableEvent and encodes back to the same line")
    func linesRoundTrip() throws {
        let text = try String(contentsOf: Self.golden, encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(!lines.isEmpty)
        for line in lines {
            let event = try JSONDecoder().decode(LoadableEvent.self, from: Data(line.utf8))
            #expect(LoadableInspector.jsonLine(event) == String(line))
        }
        // The tour's scripted episodes are there: syncs of the labelled loadables, the watchdog.
        let events = try lines.map { try JSONDecoder().decode(LoadableEvent.self, from: Data($0.utf8)) }
        let kinds = Set(events.map(\.kind))
        #expect(kinds.isSuperset(of: [.syncStarted, .syncEnded, .watchdog, .invalidated]))
        #expect(Set(events.map(\.label)).isSuperset(of: ["access-token", "feed profile", "feed photos"]))
    }
}
