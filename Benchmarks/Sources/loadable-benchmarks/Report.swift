import Foundation

/// One line of the table: a scenario's figure, its baseline's and the ratio between them.
struct Row: Codable {
    var scenario: String
    /// The figure, in ``unit``.
    var value: Double
    var unit: String
    var allocationsPerOperation: Double?
    var baseline: String?
    var baselineValue: Double?
    /// `value / baselineValue`.
    var ratio: Double?
}

/// One of the goals of `Docs/Performance.md` and whether it held in this run.
///
/// Every scenario adds its goals with ``Report/add(_:)-(Goal)``; the run ends by printing each as
/// one line, `goal holds` or `goal missed`, with the machine's load average while its scenario ran.
struct Goal: Codable {
    var name: String
    var target: String
    /// The figure, and how it was found where that is not one run (`median of 5 runs`, its range).
    var measured: String
    var holds: Bool
    /// The scenario that measured it (set by ``Report/endScenario()``).
    var scenario: String?
    /// The load average when that scenario started and when it ended.
    var loadAtStart: LoadAverage?
    var loadAtEnd: LoadAverage?
}

/// Everything one run measured.
struct Report: Codable {
    var date: String
    var cores: Int
    var command: String
    var quick: Bool
    var rows: [Row] = []
    var goals: [Goal] = []
    /// The scenario running now, its load average at the start and the number of goals before it.
    private var currentScenario: (name: String, load: LoadAverage?, firstGoal: Int, start: ContinuousClock.Instant)?

    private enum CodingKeys: String, CodingKey {
        case date, cores, command, quick, rows, goals
    }

    init(quick: Bool) {
        let formatter = ISO8601DateFormatter()
        date = formatter.string(from: Date())
        cores = ProcessInfo.processInfo.activeProcessorCount
        command =
            "swift run -c release --package-path Benchmarks loadable-benchmarks"
            + CommandLine.arguments.dropFirst().map { " " + $0 }.joined()
        self.quick = quick
    }

    /// Adds `row` and prints it at once, so a long run shows progress.
    mutating func add(_ row: Row) {
        rows.append(row)
        print(Self.format(row))
        fflush(nil)
    }

    /// Adds `goal`, printed with the others at the end of the run.
    mutating func add(_ goal: Goal) {
        goals.append(goal)
    }

    /// Notes that the scenario `name` starts: prints its name and the load average.
    mutating func beginScenario(_ name: String) {
        let load = LoadAverage.now()
        currentScenario = (name, load, goals.count, ContinuousClock.now)
        print("-- \(name): load average \(load?.description ?? "unknown")")
        fflush(nil)
    }

    /// Notes that the scenario begun last ended: its goals get its name and the load average at its
    /// start and now.
    mutating func endScenario() {
        guard let scenario = currentScenario else { return }
        currentScenario = nil
        let load = LoadAverage.now()
        for index in scenario.firstGoal..<goals.count {
            goals[index].scenario = scenario.name
            goals[index].loadAtStart = scenario.load
            goals[index].loadAtEnd = load
        }
        let seconds = (ContinuousClock.now - scenario.start).nanoseconds / 1e9
        print(
            "-- \(scenario.name) took \(String(format: "%.1f", seconds)) s: load average \(load?.description ?? "unknown")"
        )
        fflush(nil)
    }

    static let header =
        pad("scenario", 44) + pad("value", 16, right: true) + pad("allocs/op", 11, right: true) + "  "
        + pad("baseline", 34) + pad("baseline value", 16, right: true) + pad("ratio", 9, right: true)

    static func format(_ row: Row) -> String {
        var line = pad(row.scenario, 44) + pad(format(row.value, row.unit), 16, right: true)
        line += pad(row.allocationsPerOperation.map { String(format: "%.2f", $0) } ?? "-", 11, right: true)
        line += "  " + pad(row.baseline ?? "-", 34)
        line += pad(row.baselineValue.map { format($0, row.unit) } ?? "-", 16, right: true)
        line += pad(row.ratio.map { String(format: "%.2fx", $0) } ?? "-", 9, right: true)
        return line
    }

    static func format(_ value: Double, _ unit: String) -> String {
        switch unit {
        case "ms": String(format: "%.2f ms", value)
        case "bytes": String(format: "%.0f B", value)
        default: String(format: "%.1f %@", value, unit)
        }
    }

    private static func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
        let padding = String(repeating: " ", count: max(width - text.count, 1))
        return right ? padding + text : text + padding
    }

    /// The line that reports `goal`: `goal holds` or `goal missed`, the goal, its target, the
    /// figure and the 1-minute load average at the start and end of its scenario.
    static func line(_ goal: Goal) -> String {
        var line =
            (goal.holds ? "goal holds  " : "goal missed ")
            + "\(goal.name): target \(goal.target), measured \(goal.measured)"
        if let start = goal.loadAtStart, let end = goal.loadAtEnd {
            line += String(format: "; load %.2f → %.2f", start.oneMinute, end.oneMinute)
        }
        return line
    }

    /// Prints every goal, one line each, with its verdict.
    func printGoals() {
        print("")
        let missed = goals.filter { !$0.holds }.count
        print(
            "Goals (\(cores) cores, release build; load: the 1-minute load average at the start → end of the goal's scenario):"
        )
        for goal in goals { print("  " + Self.line(goal)) }
        print("\(goals.count) goals: \(goals.count - missed) hold, \(missed) missed")
    }

    /// Writes the report as JSON to `path`.
    func write(to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(self).write(to: URL(fileURLWithPath: path))
    }
}
