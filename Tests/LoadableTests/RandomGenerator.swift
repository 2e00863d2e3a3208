/// Removes operations from a failing sequence while it keeps failing, to report a short one.
func shrink<Operation>(_ operations: [Operation], stillFails: ([Operation]) -> Bool) -> [Operation] {
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
