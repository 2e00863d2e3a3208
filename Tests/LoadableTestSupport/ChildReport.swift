public import Testing

/// How the child process of an exit test tells its parent what went wrong: one line per failure
/// on its standard output, which the parent records as issues. A block or a crash shows in the
/// exit status instead.
public enum ChildReport {
    private static let prefix = "failure: "

    /// Reports `message` from the child process.
    public static func fail(_ message: String) {
        print(prefix + message)
    }

    /// Records an issue, in the parent, for each failure the child reported in `result` (observed
    /// with `\.standardOutputContent`), prefixed with `context`.
    public static func recordFailures(
        of result: ExitTest.Result?,
        context: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let output = result.map { String(decoding: $0.standardOutputContent, as: UTF8.self) } ?? ""
        for line in output.split(separator: "\n") where line.hasPrefix(prefix) {
            Issue.record("\(context): \(line.dropFirst(prefix.count))", sourceLocation: sourceLocation)
        }
    }
}
