/// The bookkeeping of a ``LoadableWaiter``, as a pure value: waits in a heap by deadline, one timer
/// for the earliest deadline, and whether the target must be watched (someone waits).
///
/// Times are `Duration`s elapsed since an origin chosen by the caller. The timer is armed again
/// only when a new wait expires before the armed deadline; removing the earliest wait leaves the
/// timer armed (it fires early, expires nothing, and is armed for the next deadline), so adding and
/// removing a wait each cost O(log n).
struct WaiterStateMachine {
    /// What the waiter must do.
    enum Action: Hashable {
        /// The first wait arrived: observe the target and keep it syncing.
        case startWatching
        /// The last wait ended: stop observing and syncing.
        case stopWatching
        /// Arm the one timer (replacing the armed one) to fire after the delay.
        case armTimer(after: Duration)
        /// Cancel the timer.
        case cancelTimer
    }

    /// How long each wait may last.
    let timeout: Duration
    private var heap = WaitHeap()
    private var nextID = 0
    /// When the armed timer falls due; `nil` when none is armed.
    private(set) var armedDeadline: Duration?

    init(timeout: Duration) {
        self.timeout = timeout
    }

    /// The number of pending waits.
    var count: Int { heap.count }

    /// Whether the wait `id` is pending.
    func contains(_ id: Int) -> Bool { heap.contains(id) }

    /// Adds a wait expiring `timeout` from `now`.
    ///
    /// - Complexity: O(log n).
    mutating func add(now: Duration) -> (id: Int, actions: [Action]) {
        let id = nextID
        nextID += 1
        let deadline = now + timeout
        heap.insert(id: id, deadline: deadline)
        var actions: [Action] = []
        // Arm before watching: watching may sync, and a sync that meets the condition at once ends
        // every wait (and cancels this timer) before `add` returns to its caller.
        if armedDeadline.map({ deadline < $0 }) ?? true {
            armedDeadline = deadline
            actions.append(.armTimer(after: timeout))
        }
        if heap.count == 1 { actions.append(.startWatching) }
        return (id, actions)
    }

    /// Removes the wait `id` (cancelled by its caller).
    ///
    /// - Complexity: O(log n).
    mutating func remove(_ id: Int) -> (removed: Bool, actions: [Action]) {
        guard heap.remove(id) else { return (false, []) }
        return (true, heap.isEmpty ? stop() : [])
    }

    /// Removes every wait (the condition holds); returns them in the order they were added.
    ///
    /// - Complexity: O(n log n).
    mutating func removeAll() -> (ids: [Int], actions: [Action]) {
        guard !heap.isEmpty else { return ([], []) }
        return (heap.removeAll(), stop())
    }

    /// The timer fired at `now`: removes the waits that expired, earliest first, and arms the timer
    /// for the next deadline.
    ///
    /// - Complexity: O(k log n) for k expired waits.
    mutating func timerFired(now: Duration) -> (expired: [Int], actions: [Action]) {
        armedDeadline = nil
        var expired: [Int] = []
        while let first = heap.first, first.deadline <= now {
            _ = heap.popFirst()
            expired.append(first.id)
        }
        if let next = heap.first {
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
