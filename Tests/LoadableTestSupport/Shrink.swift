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
