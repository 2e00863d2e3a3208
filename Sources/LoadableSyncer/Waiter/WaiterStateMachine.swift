/// The bookkeeping of a ``LoadableWaiter``, as a pure value: the pending waits in the order they
/// began (which is the order of their deadlines), one timer for the earliest deadline, and whether
/// the target must be watched (someone waits).
///
/// Each wait holds a `Payload` (what to call when it ends) that the machine hands back when the
/// wait ends and never looks into.
///
/// Times are `Duration`s elapsed since an origin chosen by the caller. The timer is armed again
/// only when a new wait expires before the armed deadline; removing the earliest wait leaves the
/// timer armed (it fires early, expires nothing, and is armed for the next deadline), so adding a
/// wait costs O(1) and removing one O(log n).
struct WaiterStateMachine<Payload> {
    /// What the waiter must do.
    typealias Action = WaiterAction

    /// How long each wait may last.
    let timeout: Duration
    private var waits = WaitQueue<Payload>()
    /// When the armed timer falls due; `nil` when none is armed.
    private(set) var armedDeadline: Duration?

    init(timeout: Duration) {
        self.timeout = timeout
    }

    /// The number of pending waits.
    var count: Int { waits.count }

    /// The identifier the next wait added gets.
    var nextID: Int { waits.nextID }

    /// Adds a wait expiring `timeout` from `now`.
    ///
    /// Should `now` be earlier than when the previous pending wait began (a clock that went back),
    /// the new wait expires with that one, so that deadlines keep the order in which waits began.
    ///
    /// - Complexity: Amortized O(1).
    mutating func add(now: Duration, payload: Payload) -> (id: Int, actions: [Action]) {
        let deadline = max(now + timeout, waits.lastDeadline ?? now + timeout)
        let id = waits.append(deadline: deadline, payload: payload)
        var actions: [Action] = []
        // Arm before watching: watching may sync, and a sync that meets the condition at once ends
        // every wait (and cancels this timer) before `add` returns to its caller.
        if armedDeadline.map({ deadline < $0 }) ?? true {
            armedDeadline = deadline
            actions.append(.armTimer(after: deadline - now))
        }
        if waits.count == 1 { actions.append(.startWatching) }
        return (id, actions)
    }

    /// Removes the wait `id` (cancelled by its caller) and returns its payload; `nil` if it is not
    /// pending.
    ///
    /// - Complexity: O(log n), amortized.
    mutating func remove(_ id: Int) -> (removed: Payload?, actions: [Action]) {
        guard let payload = waits.remove(id) else { return (nil, []) }
        return (payload, waits.isEmpty ? stop() : [])
    }

    /// Removes every wait (the condition holds); returns their payloads in the order the waits
    /// began.
    ///
    /// - Complexity: O(n).
    mutating func removeAll() -> (removed: [Payload], actions: [Action]) {
        guard !waits.isEmpty else { return ([], []) }
        return (waits.removeAll(), stop())
    }

    /// The timer fired at `now`: removes the waits that expired, earliest first, returns their
    /// payloads, and arms the timer for the next deadline.
    ///
    /// - Complexity: O(k), amortized, for k expired waits.
    mutating func timerFired(now: Duration) -> (expired: [Payload], actions: [Action]) {
        armedDeadline = nil
        var expired: [Payload] = []
        while let first = waits.first, first.deadline <= now, let wait = waits.popFirst() {
            expired.append(wait.payload)
        }
        if let next = waits.first {
            armedDeadline = next.deadline
            return (expired, [.armTimer(after: next.deadline - now)])
        }
        return (expired, expired.isEmpty ? [] : [.stopWatching])
    }

    private mutating func stop() -> [Action] {
        var actions: [Action] = []
        if armedDeadline != nil {
            armedDeadline = nil
            actions.append(.cancelTimer)
        }
        actions.append(.stopWatching)
        return actions
    }
}

/// What a ``LoadableWaiter`` must do, as its ``WaiterStateMachine`` decides. (Not nested in the
/// generic machine, so that it stays one concrete type whatever the payload.)
enum WaiterAction: Hashable {
    /// The first wait arrived: observe the target and keep it syncing.
    case startWatching
    /// The last wait ended: stop observing and syncing.
    case stopWatching
    /// Arm the one timer (replacing the armed one) to fire after the delay.
    case armTimer(after: Duration)
    /// Cancel the timer.
    case cancelTimer
}
