public import Testing

/// Removes operations from a failing sequence while it keeps failing, to report a short one.
///
/// ``checkRandomSequences(count:baseSeed:operations:mismatch:sourceLocation:)`` reports the
/// shortest failing sequence it finds with it, after the seed that produced the failure.
@MainActor
public func shrink<Operation>(
    _ operations: [Operation],
    stillFails: @MainActor ([Operation]) async -> Bool
) async -> [Operation] {
    var current = operations
    var index = 0
    while index < current.count {
        var candidate = current
        candidate.remove(at: index)
        if await stillFails(candidate) {
            current = candidate
        } else {
            index += 1
        }
    }
    return current
}

/// Runs `count` random sequences of a model test, with seeds `baseSeed`, `baseSeed + 1`, …:
/// `operations` makes a sequence from its seed, and `mismatch` runs it against the code and the
/// reference model and describes the first difference (`nil` when there is none).
///
/// At the first failing sequence it records an issue with the seed, the failure, the shortest
/// sequence that still fails (by ``shrink(_:stillFails:)``) and that sequence's failure, and stops.
///
/// - Returns: Whether every sequence matched (a test that also counts what its sequences reached
///   checks the counts only then).
@MainActor
@discardableResult
public func checkRandomSequences<Operation>(
    count: Int,
    baseSeed: UInt64,
    operations makeOperations: (UInt64) -> [Operation],
    mismatch: @MainActor ([Operation]) async -> String?,
    sourceLocation: SourceLocation = #_sourceLocation
) async -> Bool {
    await runRandomSequences(
        count: count,
        baseSeed: baseSeed,
        scenario: { ((), makeOperations($0)) },
        mismatch: { await mismatch($1) },
        shrinkSetup: { setup, _ in setup },
        header: { seed, _ in "seed \(seed)" },
        describe: { "\($1)" },
        explain: { "its failure: \(await mismatch($1) ?? "?")" },
        sourceLocation: sourceLocation)
}

/// The same as ``checkRandomSequences(count:baseSeed:operations:mismatch:sourceLocation:)``, for
/// model tests whose seed makes a setup (a configuration, the starting members) as well as a
/// sequence of operations.
///
/// The report names the seed and the setup (`describeSetup`), the shortest failing sequence
/// (`describe`, of the shrunk setup and operations) and then `explain`'s account of it (by default
/// "its failure: …", its mismatch).
///
/// - Parameters:
///   - scenario: Makes the setup and the operations of a seed.
///   - mismatch: Runs operations from a setup; describes the first difference, or returns `nil`.
///   - shrinkSetup: Shrinks the setup of a failing sequence, once its operations are shrunk, given
///     a check of whether a setup still fails with them; by default the setup stays as it is.
///   - describeSetup: The setup, as the report's first line names it after the seed.
///   - describe: A failing sequence, as the report shows the shortest one.
///   - explain: The lines after it: what goes wrong in the shortest sequence.
/// - Returns: Whether every sequence matched.
@MainActor
@discardableResult
public func checkRandomSequences<Setup, Operation>(
    count: Int,
    baseSeed: UInt64,
    scenario: (UInt64) -> (Setup, [Operation]),
    mismatch: @MainActor (Setup, [Operation]) async -> String?,
    shrinkSetup: @MainActor (Setup, _ stillFails: @MainActor (Setup) async -> Bool) async -> Setup = { setup, _ in
        setup
    },
    describeSetup: (Setup) -> String = { "\($0)" },
    describe: (Setup, [Operation]) -> String = { "\($1)" },
    explain: (@MainActor (Setup, [Operation]) async -> String)? = nil,
    sourceLocation: SourceLocation = #_sourceLocation
) async -> Bool {
    await runRandomSequences(
        count: count,
        baseSeed: baseSeed,
        scenario: scenario,
        mismatch: mismatch,
        shrinkSetup: shrinkSetup,
        header: { seed, setup in "seed \(seed), \(describeSetup(setup))" },
        describe: describe,
        explain: { setup, operations in
            if let explain { return await explain(setup, operations) }
            return "its failure: \(await mismatch(setup, operations) ?? "?")"
        },
        sourceLocation: sourceLocation)
}

/// The same as ``checkRandomSequences(count:baseSeed:scenario:mismatch:shrinkSetup:describeSetup:describe:explain:sourceLocation:)``,
/// for a model test whose run can report its steps: the report of the shortest failing sequence
/// shows its steps ("its steps: …", by ``explanationTracingSteps(_:)``) and then its failure.
///
/// ```swift
/// await checkRandomSequences(count: 300, baseSeed: 0x9E25_157E) { seed in
///     var random = SeededRandomNumberGenerator(seed: seed)
///     return (randomConfiguration(&random), randomOperations(&random))
/// } tracing: { configuration, operations, trace in
///     await mismatch(in: operations, configuration: configuration, trace: trace)
/// }
/// ```
///
/// - Parameters:
///   - scenario: Makes the setup and the operations of a seed.
///   - run: Runs operations from a setup and describes the first difference, or returns `nil`;
///     calls `trace` with each step when it is given (only to explain the shortest failing
///     sequence, so a run that counts what the sequences reached counts only when it is `nil`).
/// - Returns: Whether every sequence matched.
@MainActor
@discardableResult
public func checkRandomSequences<Setup, Operation>(
    count: Int,
    baseSeed: UInt64,
    scenario: (UInt64) -> (Setup, [Operation]),
    tracing run: @MainActor (Setup, [Operation], _ trace: ((String) -> Void)?) async -> String?,
    sourceLocation: SourceLocation = #_sourceLocation
) async -> Bool {
    await runRandomSequences(
        count: count,
        baseSeed: baseSeed,
        scenario: scenario,
        mismatch: { await run($0, $1, nil) },
        shrinkSetup: { setup, _ in setup },
        header: { seed, setup in "seed \(seed), \(setup)" },
        describe: { "\($1)" },
        explain: { setup, operations in
            await explanationTracingSteps { trace in await run(setup, operations, trace) }
        },
        sourceLocation: sourceLocation)
}

/// The loop both `checkRandomSequences` share: seed, generate, run, shrink, report.
@MainActor
private func runRandomSequences<Setup, Operation>(
    count: Int,
    baseSeed: UInt64,
    scenario makeScenario: (UInt64) -> (Setup, [Operation]),
    mismatch: @MainActor (Setup, [Operation]) async -> String?,
    shrinkSetup: @MainActor (Setup, _ stillFails: @MainActor (Setup) async -> Bool) async -> Setup,
    header: (UInt64, Setup) -> String,
    describe: (Setup, [Operation]) -> String,
    explain: @MainActor (Setup, [Operation]) async -> String,
    sourceLocation: SourceLocation
) async -> Bool {
    for sequence in 0..<count {
        let seed = baseSeed &+ UInt64(sequence)
        let (setup, operations) = makeScenario(seed)
        let failure = await mismatch(setup, operations)
        // The main actor is shared with every other test: a sequence that never suspends would
        // keep it for the whole loop, and starve tests waiting on it with real timeouts.
        await Task.yield()
        guard let failure else { continue }
        let shortest = await shrink(operations) { await mismatch(setup, $0) != nil }
        // The check only runs during the call; Swift cannot tell that a non-escaping closure handed
        // to another non-escaping one does not run again after it.
        let shortestSetup = await withoutActuallyEscaping(mismatch) { mismatch in
            await shrinkSetup(setup) { await mismatch($0, shortest) != nil }
        }
        Issue.record(
            """
            \(header(seed, setup)): \(failure)
            shortest failing sequence: \(describe(shortestSetup, shortest))
            \(await explain(shortestSetup, shortest))
            """,
            sourceLocation: sourceLocation)
        return false
    }
    return true
}

/// An `explain` for ``checkRandomSequences(count:baseSeed:scenario:mismatch:shrinkSetup:describeSetup:describe:explain:sourceLocation:)``
/// from a run that reports each of its steps: "its steps: …" (joined by "; "), then "its failure:
/// …".
///
/// - Parameter run: Runs the shortest failing sequence, calling `trace` with each step, and
///   returns its mismatch.
/// - Returns: The lines of the report after the sequence.
@MainActor
public func explanationTracingSteps(
    _ run: @MainActor (_ trace: @escaping (String) -> Void) async -> String?
) async -> String {
    final class Steps {
        var lines: [String] = []
    }
    let steps = Steps()
    let failure = await run { steps.lines.append($0) }
    return """
        its steps: \(steps.lines.joined(separator: "; "))
        its failure: \(failure ?? "?")
        """
}
