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

/// One of the issue's goals and whether it held in this run.
struct Goal: Codable {
    var name: String
    var target: String
    var measured: String
    var holds: Bool
}

/// Everything one run measured.
struct Report: Codable {
    var date: String
    var cores: Int
    var command: String
    var quick: Bool
    var rows: [Row] = []
    var goals: [Goal] = []

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

    /// Adds `goal`.
    mutating func add(_ goal: Goal) {
        goals.append(goal)
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

    /// Prints the goals with their verdicts.
    func printGoals() {
        print("")
        print("Goals (\(cores) cores, release build):")
        for goal in goals {
            let verdict = goal.holds ? "holds" : "MISSED"
            print("  [\(verdict)] \(goal.name): target \(goal.target), measured \(goal.measured)")
        }
    }

    /// Writes the report as JSON to `path`.
    func write(to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(self).write(to: URL(fileURLWithPath: path))
    }
}
