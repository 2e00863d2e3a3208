public import Testing

/// Removes operations from a failing sequence while it keeps failing, to report a short one.
///
/// The model tests of every test target report the shortest failing sequence they can find with
/// it, after the seed that produced the failure.
public func shrink<Operation>(_ operations: [Operation], stillFails: ([Operation]) -> Bool) -> [Operation] {
    var current = operations
    var index = 0
    while index < current.count {
        var candidate = current
        candidate.remove(at: index)
        if stillFails(candidate) {
            current = candidate
        } else {
            index += 1
        }
    }
    return current
}

/// The same as ``shrink(_:stillFails:)``, for checks that must `await` on the main actor.
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
/// sequence that still fails (by `shrink(_:stillFails:)`) and that sequence's failure, and stops.
@MainActor
public func checkRandomSequences<Operation>(
    count: Int,
    baseSeed: UInt64,
    operations makeOperations: (UInt64) -> [Operation],
    mismatch: @MainActor ([Operation]) async -> String?,
    sourceLocation: SourceLocation = #_sourceLocation
) async {
    for sequence in 0..<count {
        let seed = baseSeed &+ UInt64(sequence)
        let operations = makeOperations(seed)
        let failure = await mismatch(operations)
        // The main actor is shared with every other test: a sequence that never suspends would
        // keep it for the whole loop, and starve tests waiting on it with real timeouts.
        await Task.yield()
        guard let failure else { continue }
        let shortest = await shrink(operations) { await mismatch($0) != nil }
        Issue.record(
            """
            seed \(seed): \(failure)
            shortest failing sequence: \(shortest)
            its failure: \(await mismatch(shortest) ?? "?")
            """,
            sourceLocation: sourceLocation)
        return
    }
}
