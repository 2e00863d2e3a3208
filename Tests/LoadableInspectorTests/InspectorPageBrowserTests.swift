import Foundation
import LoadableTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The inspector page in a real headless browser (Debian's `chromium`), against
/// `loadable-demo --inspect`: the page shows the tour's events, its filters hide what does not
/// match, and its sync button reaches the loadable. Leaves a screenshot in
/// `.build/inspector-page.png` for the documentation.
///
/// Skipped, with a message saying how to run it, when no chromium is found; `.ci/run` installs it
/// and fails when this suite was skipped.
@MainActor
@Suite("The inspector page in a browser", .enabled(if: Chromium.path != nil, Chromium.notFound))
struct InspectorPageBrowserTests {
    /// The tour's seed: the page's first events are the golden timeline's.
    static let seed = "7"
    /// The screenshot, under the package's `.build/`.
    static let screenshot = packageRoot.appendingPathComponent(".build/inspector-page.png")

    @Test("the page shows the tour's events, filters them, and its sync button reaches the loadable")
    func pageInABrowser() async throws {
        let chromium = try #require(Chromium.path)
        // One minute of real time for all of it; whatever is still running then is killed.
        let end = ContinuousClock.now + .seconds(60)
        func secondsLeft(keeping reserve: Int = 0) -> Int {
            max(1, Int(ContinuousClock.now.duration(to: end).components.seconds) - reserve)
        }
        let demo = try ChildProcess(try demoExecutable, ["--inspect", "--seed", Self.seed])
        defer { demo.send(SIGKILL) }
        let address = try await demo.line(within: secondsLeft(keeping: 40)) { $0.hasPrefix("http://") }
        let url = try #require(address, "loadable-demo --inspect printed no address; stderr:\n\(demo.standardError)")
        #expect(url.range(of: #"^http://127\.0\.0\.1:[0-9]+/$"#, options: .regularExpression) != nil)
        // The tour has run once this line is out: every later event comes from the page's action
        // or the syncer's own schedule.
        let toured = try await demo.line(within: secondsLeft(keeping: 40)) {
            $0.hasPrefix("The inspector page stays at")
        }
        try #require(toured != nil, "the tour did not end; stdout:\n\(demo.standardOutput)")

        try? FileManager.default.removeItem(at: Self.screenshot)
        let script = packageRoot.appendingPathComponent("Tests/LoadableInspectorTests/Browser/drive_page.py")
        let driverDeadline = secondsLeft(keeping: 10)
        let driver = try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "python3", script.path, "--chromium", chromium, "--url", url, "--screenshot", Self.screenshot.path,
                "--sync-label", "feed profile", "--expect-kind", "syncStarted", "--expect-kind", "syncEnded",
                "--expect-kind", "watchdog", "--expect-kind", "invalidated", "--expect-label", "access-token",
                "--expect-label", "feed photos", "--expect-label", "feed notifications", "--filter-kind", "watchdog",
                "--deadline", "\(driverDeadline)",
            ])
        let driverStatus = try await driver.waitForExit(within: driverDeadline + 5)
        _ = try await driver.line(within: 5) { _ in false }  // its whole output
        let output = driver.standardOutput
        let noResult = Comment(
            rawValue: "the driver printed no result (status \(driverStatus.map(String.init) ?? "killed")); "
                + "stdout:\n\(output)\nstderr:\n\(driver.standardError)")
        let resultLine = try #require(output.split(separator: "\n").last { $0.hasPrefix("{") }, noResult)
        let result = try JSONDecoder().decode(DriverResult.self, from: Data(resultLine.utf8))
        #expect(result.errors.isEmpty, "\(result.errors)")
        #expect(result.pageExceptions?.isEmpty != false, "the page threw: \(result.pageExceptions ?? [])")
        #expect(driverStatus == 0, "the driver's result: \(resultLine)")
        #expect(result.ok, "the driver's result: \(resultLine)")
        #expect(Set(result.kinds ?? []).isSuperset(of: ["syncStarted", "syncEnded", "watchdog", "invalidated"]))
        #expect(Set(result.labels ?? []).isSuperset(of: ["access-token", "feed profile", "feed photos"]))
        #expect(result.kindFilterHidesOthers == true)
        #expect(result.labelFilterHidesOthers == true)
        #expect((result.syncStartedAfter ?? 0) > (result.syncStartedBefore ?? .max))
        #expect(FileManager.default.fileExists(atPath: Self.screenshot.path))
        let png = try Data(contentsOf: Self.screenshot)
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]), "the screenshot is not a PNG")

        // SIGTERM ends the demo's serving with status 0.
        demo.send(SIGTERM)
        let status = try await demo.waitForExit(within: secondsLeft())
        #expect(status == 0, "loadable-demo --inspect after SIGTERM: \(status.map(String.init) ?? "still running")")
    }

    /// What `drive_page.py` prints.
    struct DriverResult: Decodable {
        var ok: Bool
        var errors: [String]
        var pageExceptions: [String]?
        var kinds: [String]?
        var labels: [String]?
        var kindFilterHidesOthers: Bool?
        var labelFilterHidesOthers: Bool?
        var syncStartedBefore: Int?
        var syncStartedAfter: Int?
        var screenshot: String?
    }
}

/// Where the browser test finds Chromium.
enum Chromium {
    /// `$LOADABLE_CHROMIUM`, `/usr/bin/chromium`, or `chromium` on the `PATH`; `nil` when none is
    /// an executable.
    static var path: String? {
        let environment = ProcessInfo.processInfo.environment
        if let path = environment["LOADABLE_CHROMIUM"], !path.isEmpty {
            return FileManager.default.isExecutableFile(atPath: path) ? path : nil
        }
        var candidates = ["/usr/bin/chromium"]
        for folder in (environment["PATH"] ?? "").split(separator: ":") {
            candidates.append("\(folder)/chromium")
        }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Why the browser test is skipped, and how to run it.
    static let notFound: Comment =
        "Chromium is not installed: install Debian's chromium (apt-get install chromium) or set LOADABLE_CHROMIUM to a Chromium, then `swift test` (`.ci/run` installs it)"
}
