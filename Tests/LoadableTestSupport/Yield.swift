public import Testing

/// Gives other main-actor tasks turns until `condition` holds; records an issue after `limit`
/// turns. Never sleeps: each turn is a `Task.yield()`.
@MainActor
public func yield(
    until condition: @MainActor () -> Bool,
    limit: Int = 10_000,
    sourceLocation: SourceLocation = #_sourceLocation
) async {
    for _ in 0..<limit {
        if condition() { return }
        await Task.yield()
    }
    if !condition() {
        Issue.record("the condition did not hold after \(limit) turns", sourceLocation: sourceLocation)
    }
}

/// Gives the main actor and the global executor turns until `condition` holds; returns whether it
/// held within `rounds` rounds. Never sleeps: for work that hops between a timer task, a
/// `ManualClock` and the main actor.
@MainActor
@discardableResult
public func settle(rounds: Int = 2_000, until condition: @MainActor () -> Bool) async -> Bool {
    for _ in 0..<rounds {
        if condition() { return true }
        await Task.yield()
        await Task.detached {}.value
    }
    return condition()
}
