import Foundation
import LoadableSupport
import Testing

/// The package's root: three folders above this file.
let packageRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// `loadable-demo`, built by SwiftPM before the tests (it is a dependency of this test target), in
/// the folder of the test binary.
var demoExecutable: URL {
    get throws {
        var folders: [URL] = []
        if let first = CommandLine.arguments.first {
            folders.append(URL(fileURLWithPath: first).resolvingSymlinksInPath().deletingLastPathComponent())
        }
        folders.append(Bundle.main.bundleURL)
        folders.append(Bundle.main.bundleURL.deletingLastPathComponent())
        for folder in folders {
            let candidate = folder.appendingPathComponent("loadable-demo")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        throw DemoProcessError(
            description: "loadable-demo is not next to the test binary (looked in \(folders.map(\.path)))")
    }
}

/// Why a child process could not be run as the test wanted.
struct DemoProcessError: Error, CustomStringConvertible {
    let description: String
}

/// A child process whose standard output is read as it comes (a pipe nobody reads would fill, and
/// stop the child), with bounded waits of real time for a line and for its end.
final class ChildProcess: Sendable {
    private let process: Process
    private let output = Locked(Data())
    private let errors = Locked(Data())
    /// Signalled each time output arrives or the output ends.
    private let outputChanged = Locked<[DispatchSemaphore]>([])
    private let outputEnded = Locked(false)
    private let exited = DispatchSemaphore(value: 0)

    /// Starts `executable` with `arguments`.
    init(_ executable: URL, _ arguments: [String]) throws {
        process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = FileHandle.nullDevice
        let exited = exited
        process.terminationHandler = { _ in exited.signal() }
        try process.run()
        let (output, errors, outputChanged, outputEnded) = (output, errors, outputChanged, outputEnded)
        let stdoutReader = stdout.fileHandleForReading
        Thread.detachNewThread {
            // Each round reads a chunk, or ends with the output.
            for _ in 0..<Int.max {
                let chunk = stdoutReader.availableData
                if chunk.isEmpty { break }
                output.withLock { $0.append(chunk) }
                for waiter in outputChanged.withLock({ $0 }) { waiter.signal() }
            }
            outputEnded.withLock { $0 = true }
            for waiter in outputChanged.withLock({ $0 }) { waiter.signal() }
        }
        let stderrReader = stderr.fileHandleForReading
        Thread.detachNewThread {
            for _ in 0..<Int.max {
                let chunk = stderrReader.availableData
                if chunk.isEmpty { return }
                errors.withLock { $0.append(chunk) }
            }
        }
    }

    deinit {
        if process.isRunning { process.terminate() }
    }

    /// Everything it wrote on standard output so far.
    var standardOutput: String { String(decoding: output.withLock { $0 }, as: UTF8.self) }
    /// Everything it wrote on standard error so far.
    var standardError: String { String(decoding: errors.withLock { $0 }, as: UTF8.self) }

    /// Waits, on a thread of its own, until standard output holds a line for which `matches`
    /// holds; `nil` when the output ends or `seconds` pass first.
    func line(within seconds: Int, where matches: @escaping @Sendable (String) -> Bool) async throws -> String? {
        let waiter = DispatchSemaphore(value: 0)
        outputChanged.withLock { $0.append(waiter) }
        let (output, outputEnded) = (output, outputEnded)
        return try await blocking {
            let deadline = DispatchTime.now() + .seconds(seconds)
            // Each round waits for more output, or ends.
            for _ in 0..<1_000_000 {
                let text = String(decoding: output.withLock { $0 }, as: UTF8.self)
                let complete = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
                if let line = complete.first(where: { matches(String($0)) }) { return String(line) }
                if outputEnded.withLock({ $0 }) { return nil }
                if waiter.wait(timeout: deadline) == .timedOut { return nil }
            }
            return nil
        }
    }

    /// Waits at most `seconds` for the process to end; kills it if it has not, and returns its
    /// exit status (`nil` when it had to be killed).
    func waitForExit(within seconds: Int) async throws -> Int32? {
        let (exited, process) = (exited, process)
        let ended = try await blocking { exited.wait(timeout: .now() + .seconds(seconds)) == .success }
        guard ended else {
            process.terminate()
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            return nil
        }
        exited.signal()  // for a later wait
        return process.terminationStatus
    }

    /// Sends `signal` to the process, unless it has ended (its id may be another process's now).
    func send(_ signal: Int32) {
        guard process.isRunning else { return }
        kill(process.processIdentifier, signal)
    }

    /// Runs `executable` with `arguments` to its end (at most `seconds`) and returns its standard
    /// output; records an issue with its standard error when it fails.
    static func run(
        _ executable: URL, _ arguments: [String], within seconds: Int = 120,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> String {
        let child = try ChildProcess(executable, arguments)
        let status = try await child.waitForExit(within: seconds)
        // The reader may still hold the last chunk: the output's end is its last line.
        _ = try await child.line(within: 10) { _ in false }
        guard status == 0 else {
            throw DemoProcessError(
                description: "\(executable.lastPathComponent) \(arguments.joined(separator: " ")) "
                    + (status.map { "exited with \($0)" } ?? "did not end within \(seconds) s")
                    + "; its standard error:\n\(child.standardError)")
        }
        return child.standardOutput
    }
}
