internal import LoadableSyncer

/// The decisions of a ``LoadableOutbox``, as a pure value: what to send, when to retry, which saves
/// an item waits for. Inputs in, actions out; it never reads a clock (times are `Duration`s since
/// the outbox's origin) and never touches a change, a cache or a loadable.
///
/// Rules:
/// - Items belong to scopes (`nil` is one scope too). A scope sends its items in order, one at a
///   time; scopes send in parallel, at most ``maxConcurrentSends`` at once: of the scopes that may
///   send, the one whose next item is oldest in the whole queue first (no scope starves another). A failed or conflicted item does not hold its scope: the next one goes.
/// - An item is sent only once a save that carries it has finished, never while restoring, and
///   never while paused (inactive or offline; a running send goes on).
/// - A retryable failure holds only its scope, with the syncer's bookkeeping
///   (`SyncerStateMachine`, one per failing scope): the policy's backoff, `Retry-After`, no retry
///   while paused, a catch-up on return. A success forgets the scope's failures. Once the retries
///   are used up, the scope waits for a return to active and online, or for the app to enqueue
///   into it or retry or resolve one of its items.
/// - A scope may be held until a moment (`not before`, kept across launches with its items).
/// - A discarded item whose send still runs keeps its scope (and its share of the concurrency)
///   until that send ends: two sends of one scope never overlap.
struct OutboxStateMachine {
    /// A scope's key: the app's scope, or `nil` for items enqueued without one.
    typealias ScopeKey = String?

    /// Where an item is, as far as sending goes.
    enum SlotState: Hashable {
        case pending, sending, failed, conflict

        /// The state of an item as the outbox shows it.
        init<Change>(_ state: OutboxItem<Change>.State) {
            switch state {
            case .pending: self = .pending
            case .sending: self = .sending
            case .failed: self = .failed
            case .conflict: self = .conflict
            }
        }
    }

    /// What the outbox must do.
    enum Action: Hashable {
        /// Start sending the item.
        case send(String)
        /// Save the queue; the number identifies the save (``saveFinished(_:now:)``).
        case save(UInt64)
        /// Arm the one timer (replacing any armed one) to fire after the delay.
        case armTimer(after: Duration)
        /// Cancel the armed timer.
        case cancelTimer
    }

    /// How a send ended, as far as sending goes.
    enum SendResult: Hashable {
        /// The item left (applied, applied as another change, or dropped).
        case removed
        /// The item waits for the app's decision.
        case conflict
        /// The item failed for good.
        case failed
        /// The item is to be sent again, after the server's hint if it gave one.
        case retry(hint: Duration?)
    }

    private struct Slot {
        var scope: ScopeKey
        var state: SlotState
        /// The number of the save that first carries the item (0: restored).
        var sequence: UInt64
        /// The item's place in the whole queue: the scope whose next item is oldest sends first.
        var position = 0
    }

    private struct Scope {
        /// The scope's items in order, whatever their state.
        var ids: [String] = []
        /// The item being sent.
        var sending: String?
        /// Sends of discarded items still running.
        var draining = 0
        /// The retry bookkeeping, while the scope's last send failed and may be retried.
        var retry: SyncerStateMachine?
        /// When the scope's armed retry falls due.
        var armedAt: Duration?
        /// The scope sends nothing before this moment (a deadline of an earlier launch).
        var notBefore: Duration?

        var isEmpty: Bool { ids.isEmpty && sending == nil && draining == 0 && notBefore == nil }
    }

    /// The most sends running at once.
    let maxConcurrentSends: Int
    private let policy: any TimeoutPolicy
    private var slots: [String: Slot] = [:]
    private var scopes: [ScopeKey: Scope] = [:]
    /// The scopes that have items or running sends, oldest first.
    private var scopeOrder: [ScopeKey] = []
    private var runningSends = 0
    /// The places given to the next item enqueued and to the next item put before the others.
    private var nextPosition = 0
    private var firstPosition = 0
    private(set) var isPaused: Bool
    private var isOffline: Bool
    private(set) var isRestoring = true
    /// Whether this outbox may send: always for one process; for an outbox whose cache another
    /// process may share, only while it holds the sender's lock.
    private(set) var isSender: Bool
    /// The moment the one timer is armed for.
    private var timerDeadline: Duration?
    /// The scopes whose retries go together (on a return, at one timer): each `start` may send
    /// them all, so that they take the free sends in the scopes' order, before later scopes.
    private var retrying: Set<ScopeKey> = []
    /// The number of the last save asked for, and of the last one finished.
    private(set) var requestedSave: UInt64 = 0
    private(set) var savedSequence: UInt64 = 0

    init(policy: any TimeoutPolicy, maxConcurrentSends: Int, isPaused: Bool, isOffline: Bool, isSender: Bool = true) {
        self.isSender = isSender
        self.policy = policy
        self.maxConcurrentSends = maxConcurrentSends
        self.isPaused = isPaused
        self.isOffline = isOffline
    }

    /// Whether a send runs (a discarded one included).
    var isSending: Bool { runningSends > 0 }

    /// The state of item `id`; `nil` when it is not in the queue.
    func state(of id: String) -> SlotState? { slots[id]?.state }

    /// The last item of `scope` if it is pending and not being sent: where a coalesced change goes.
    func lastPendingItem(in scope: ScopeKey) -> String? {
        guard let id = scopes[scope]?.ids.last, slots[id]?.state == .pending else { return nil }
        return id
    }

    /// The items of `id`'s scope after it, in order.
    func laterItems(inScopeOf id: String) -> [String] {
        guard let slot = slots[id], let ids = scopes[slot.scope]?.ids, let index = ids.firstIndex(of: id) else {
            return []
        }
        return Array(ids[(index + 1)...])
    }

    /// The items of `scope` in order.
    func items(in scope: ScopeKey) -> [String] { scopes[scope]?.ids ?? [] }

    /// When the scope of `id` may send again after its last failure, if a retry is scheduled or
    /// the server's `Retry-After` holds it: the later of the two.
    func holdDeadline(ofScopeOf id: String) -> Duration? {
        guard let slot = slots[id], let scope = scopes[slot.scope] else { return nil }
        let deadlines = [scope.armedAt, scope.retry?.deadline, scope.retry?.retryAfterDeadline, scope.notBefore]
        return deadlines.compactMap { $0 }.max()
    }

    // MARK: - Inputs

    /// Asks for a save of the queue as it is now.
    mutating func requestSave() -> Action {
        requestedSave += 1
        return .save(requestedSave)
    }

    /// A new item at the end of `scope`: saved, then sent in turn.
    mutating func enqueue(_ id: String, scope: ScopeKey, now: Duration) -> [Action] {
        let save = requestSave()
        slots[id] = Slot(scope: scope, state: .pending, sequence: requestedSave, position: nextPosition)
        nextPosition += 1
        appendToScope(scope) { $0.ids.append(id) }
        return [save] + start(explicitly: scope, now: now)
    }

    /// The restore finished: items may be sent (once ``adopt(_:now:)`` put the restored ones first).
    mutating func finishRestoring() {
        isRestoring = false
    }

    /// Item `id`'s change changed (merged, rebased): saved before it is sent.
    mutating func changed(_ id: String, now: Duration) -> [Action] {
        let save = requestSave()
        if slots[id]?.state == .pending { slots[id]?.sequence = requestedSave }
        return [save]
    }

    /// Items of an earlier launch (oldest first), each with its scope, its state and the moment
    /// its scope may send again (an earlier launch's retry deadline, in this clock's time): they go
    /// before the items enqueued since. Items already known are skipped.
    mutating func adopt(
        _ restored: [(id: String, scope: ScopeKey, state: SlotState, notBefore: Duration?)], now: Duration
    ) -> [Action] {
        var restoredScopes: [ScopeKey] = []
        var byScope: [ScopeKey: [String]] = [:]
        let found = restored.filter { slots[$0.id] == nil }
        firstPosition -= found.count
        for (offset, item) in found.enumerated() {
            slots[item.id] = Slot(scope: item.scope, state: item.state, sequence: 0, position: firstPosition + offset)
            if byScope[item.scope] == nil { restoredScopes.append(item.scope) }
            byScope[item.scope, default: []].append(item.id)
            if let notBefore = item.notBefore, notBefore > now {
                var scope = scopes[item.scope] ?? Scope()
                scope.notBefore = Swift.max(scope.notBefore ?? notBefore, notBefore)
                scopes[item.scope] = scope
            }
        }
        for key in restoredScopes {
            var scope = scopes[key] ?? Scope()
            scope.ids.insert(contentsOf: byScope[key] ?? [], at: 0)
            scopes[key] = scope
        }
        scopeOrder = restoredScopes + scopeOrder.filter { !restoredScopes.contains($0) }
        return start(explicitly: nil, now: now) + rearm(now: now)
    }

    /// The save `sequence` finished (or failed: the items are sent all the same).
    mutating func saveFinished(_ sequence: UInt64, now: Duration) -> [Action] {
        guard sequence > savedSequence else { return [] }
        savedSequence = sequence
        return start(explicitly: nil, now: now)
    }

    /// The send of `id` ended with `result`.
    mutating func sendEnded(_ id: String, result: SendResult, now: Duration) -> [Action] {
        guard let slot = slots[id], slot.state == .sending, var scope = scopes[slot.scope], scope.sending == id
        else { return [] }
        scope.sending = nil
        runningSends -= 1
        var retryActions: [SyncerStateMachine.Action] = []
        switch result {
        case .removed, .conflict, .failed:
            // The server answered: the scope's failures are forgotten.
            scope.retry = nil
            scope.armedAt = nil
            if result == .removed {
                slots[id] = nil
                scope.ids.removeAll { $0 == id }
            } else {
                slots[id]?.state = result == .conflict ? .conflict : .failed
            }
        case .retry(let hint):
            slots[id]?.state = .pending
            var retry =
                scope.retry
                ?? SyncerStateMachine(policy: policy, syncPolicy: .sync, isPaused: isPaused, isOffline: isOffline)
            retryActions = retry.stateChanged(to: .didFailToSync, retryAllowed: true, retryAfter: hint, now: now)
            scope.retry = retry
        }
        scopes[slot.scope] = scope
        var actions = [requestSave()]
        actions += perform(retryActions, in: slot.scope, now: now)
        actions += start(explicitly: nil, now: now)
        dropIfEmpty(slot.scope)
        return actions + rearm(now: now)
    }

    /// A discarded item's send ended (it had left the queue when it was discarded).
    mutating func discardedSendEnded(scope key: ScopeKey, now: Duration) -> [Action] {
        guard var scope = scopes[key], scope.draining > 0 else { return [] }
        scope.draining -= 1
        runningSends -= 1
        scopes[key] = scope
        let actions = start(explicitly: nil, now: now)
        dropIfEmpty(key)
        return actions + rearm(now: now)
    }

    /// The app removed item `id`. Returns whether its send runs: the scope then waits for it to end
    /// (``discardedSendEnded(scope:now:)``).
    mutating func discard(_ id: String, now: Duration) -> (wasSending: Bool, actions: [Action]) {
        guard let slot = slots.removeValue(forKey: id), var scope = scopes[slot.scope] else { return (false, []) }
        // The item a retry waits for is the scope's first pending one.
        let isRetrying =
            scope.retry != nil && slot.state == .pending
            && scope.ids.first(where: { $0 == id || slots[$0]?.state == .pending }) == id
        scope.ids.removeAll { $0 == id }
        let wasSending = scope.sending == id
        if wasSending {
            scope.sending = nil
            scope.draining += 1
        } else if isRetrying {
            // The item the retry waits for went: no retry; the next item goes.
            scope.retry = nil
            scope.armedAt = nil
        }
        scopes[slot.scope] = scope
        var actions = [requestSave()]
        actions += start(explicitly: nil, now: now)
        dropIfEmpty(slot.scope)
        return (wasSending, actions + rearm(now: now))
    }

    /// The app sends the failed or conflicted item `id` again, in its place (with a new change, for
    /// a resolved conflict). Returns `nil` when it is neither.
    mutating func retry(_ id: String, now: Duration) -> [Action]? {
        guard let slot = slots[id], slot.state == .failed || slot.state == .conflict else { return nil }
        let save = requestSave()
        // Sent once the save that carries it (a resolve's new change and key) finished.
        slots[id]?.state = .pending
        slots[id]?.sequence = requestedSave
        return [save] + start(explicitly: slot.scope, now: now)
    }

    /// The app holds the pending or failed item `id` as a conflict (a synced collection found one
    /// on a pull): it is not sent until retried or resolved, and no longer holds its scope. Returns
    /// `nil` when the item is neither (a conflicted item stays one: only its record changes).
    mutating func holdAsConflict(_ id: String, now: Duration) -> [Action]? {
        guard let slot = slots[id], slot.state == .pending || slot.state == .failed, var scope = scopes[slot.scope]
        else { return nil }
        // The item a retry waits for is the scope's first pending one.
        if scope.retry != nil, scope.ids.first(where: { slots[$0]?.state == .pending }) == id {
            scope.retry = nil
            scope.armedAt = nil
            scopes[slot.scope] = scope
        }
        slots[id]?.state = .conflict
        return [requestSave()] + start(explicitly: nil, now: now) + rearm(now: now)
    }

    /// Every item goes (logout). Returns the ids of the items whose sends run: each scope waits for
    /// its send to end.
    mutating func removeAll(now: Duration) -> (sending: [(id: String, scope: ScopeKey)], actions: [Action]) {
        var sending: [(id: String, scope: ScopeKey)] = []
        for key in scopeOrder {
            guard var scope = scopes[key] else { continue }
            if let id = scope.sending {
                sending.append((id, key))
                scope.sending = nil
                scope.draining += 1
            }
            scope.ids.removeAll()
            scope.retry = nil
            scope.armedAt = nil
            scope.notBefore = nil
            scopes[key] = scope
        }
        slots.removeAll()
        for key in scopeOrder { dropIfEmpty(key) }
        return (sending, [requestSave()] + rearm(now: now))
    }

    /// The one timer fired.
    mutating func timerFired(now: Duration) -> [Action] {
        timerDeadline = nil
        var due: [(key: ScopeKey, actions: [SyncerStateMachine.Action])] = []
        for key in scopeOrder {
            guard var scope = scopes[key] else { continue }
            if let notBefore = scope.notBefore, notBefore <= now {
                scope.notBefore = nil
                scopes[key] = scope
                dropIfEmpty(key)
            }
            guard let armedAt = scope.armedAt, armedAt <= now, var retry = scope.retry else { continue }
            scope.armedAt = nil
            let fired = retry.timerFired(now: now)
            scope.retry = retry
            scopes[key] = scope
            due.append((key, fired))
        }
        return performTogether(due, now: now) + start(explicitly: nil, now: now) + rearm(now: now)
    }

    /// The app became inactive or active, offline or online.
    mutating func activityChanged(paused: Bool, offline: Bool, now: Duration) -> [Action] {
        let resumes = isPaused && !paused
        isPaused = paused
        isOffline = offline
        var changes: [(key: ScopeKey, actions: [SyncerStateMachine.Action])] = []
        for key in scopeOrder {
            guard var retry = scopes[key]?.retry else { continue }
            let needsSync = scopes[key]?.ids.contains { slots[$0]?.state == .pending } ?? false
            let changed = retry.activityChanged(
                paused: paused, offline: offline, retryAllowed: true, needsSync: needsSync, now: now)
            scopes[key]?.retry = retry
            changes.append((key, changed))
        }
        var actions = performTogether(changes, now: now)
        if resumes { actions += start(explicitly: nil, now: now) }
        return actions + rearm(now: now)
    }

    /// This outbox took the sender's lock, or let it go.
    mutating func senderChanged(_ isSender: Bool, now: Duration) -> [Action] {
        self.isSender = isSender
        return isSender ? start(explicitly: nil, now: now) + rearm(now: now) : []
    }

    /// Whether no item waits to be sent (pending) and no send runs.
    var isIdle: Bool { runningSends == 0 && !slots.values.contains { $0.state == .pending } }

    /// The queue as another process left it (read from the cache), in order: items not known here
    /// are added, items no longer there leave (unless sending here), and the states of the others
    /// are taken, except for `keeping` (changed here and not saved yet) and the items sending here.
    /// The scopes keep their retry bookkeeping.
    mutating func replaceQueue(
        _ queue: [(id: String, scope: ScopeKey, state: SlotState)], keeping: Set<String>, now: Duration
    ) -> [Action] {
        var newSlots: [String: Slot] = [:]
        var order: [ScopeKey] = []
        var ids: [ScopeKey: [String]] = [:]
        func add(_ id: String, _ slot: Slot) {
            newSlots[id] = slot
            if ids[slot.scope] == nil { order.append(slot.scope) }
            ids[slot.scope, default: []].append(id)
        }
        var listed = Set<String>()
        for item in queue {
            listed.insert(item.id)
            if var known = slots[item.id], known.state == .sending || keeping.contains(item.id) {
                known.position = firstPosition + listed.count
                add(item.id, known)
            } else {
                let sequence = slots[item.id]?.sequence ?? 0
                add(
                    item.id,
                    Slot(
                        scope: item.scope, state: item.state, sequence: sequence, position: firstPosition + listed.count
                    ))
            }
        }
        // Known here and not in the cache's queue: sending here, or not saved yet.
        for key in scopeOrder {
            for id in scopes[key]?.ids ?? [] where !listed.contains(id) {
                guard var known = slots[id], known.state == .sending || keeping.contains(id) else { continue }
                known.position = firstPosition + listed.count
                listed.insert(id)
                add(id, known)
            }
        }
        slots = newSlots
        var newScopes: [ScopeKey: Scope] = [:]
        for key in order {
            var scope = scopes[key] ?? Scope()
            scope.ids = ids[key] ?? []
            newScopes[key] = scope
        }
        // Scopes without items that still have sends to finish.
        for key in scopeOrder where newScopes[key] == nil {
            guard var scope = scopes[key], scope.sending != nil || scope.draining > 0 else { continue }
            scope.ids = []
            newScopes[key] = scope
            order.append(key)
        }
        scopes = newScopes
        scopeOrder = order
        return start(explicitly: nil, now: now) + rearm(now: now)
    }

    // MARK: - Deciding

    /// Carries out the retry actions of several scopes, told together: the scopes that retry go in
    /// the scopes' order, with the others.
    private mutating func performTogether(
        _ changes: [(key: ScopeKey, actions: [SyncerStateMachine.Action])], now: Duration
    ) -> [Action] {
        retrying = Set(changes.filter { $0.actions.contains(.sync) || $0.actions.contains(.syncIfNeeded) }.map(\.key))
        defer { retrying = [] }
        var actions: [Action] = []
        for change in changes { actions += perform(change.actions, in: change.key, now: now) }
        return actions
    }

    /// Carries out a scope's retry actions: a sync is a send of the scope's next item, asked for
    /// as the app would (a retry is what it waited for).
    private mutating func perform(
        _ retryActions: [SyncerStateMachine.Action], in key: ScopeKey, now: Duration
    )
        -> [Action]
    {
        var actions: [Action] = []
        for action in retryActions {
            switch action {
            case .cancelTimer:
                scopes[key]?.armedAt = nil
            case .schedule(let delay):
                scopes[key]?.armedAt = now + delay
            case .sync, .syncIfNeeded:
                actions += start(explicitly: key, now: now)
                guard var retry = scopes[key]?.retry else { continue }
                let state: LoadableState = scopes[key]?.sending == nil ? .idle : .syncing
                let handled = retry.syncRequestHandled(state: state, retryAllowed: true, now: now)
                scopes[key]?.retry = retry
                actions += perform(handled, in: key, now: now)
            }
        }
        return actions
    }

    /// Starts every send that may start now. `explicitly`: the app asked for a send in that scope
    /// (an enqueue, a retry, a resolve, or the retry timer), which may go once the retries are used
    /// up.
    private mutating func start(explicitly explicitScope: ScopeKey??, now: Duration) -> [Action] {
        guard !isRestoring, !isPaused, isSender else { return [] }
        // The scopes that may send now, with their next item; the one whose item is oldest first.
        var ready: [(key: ScopeKey, id: String, position: Int)] = []
        for key in scopeOrder {
            guard var scope = scopes[key], scope.sending == nil, scope.draining == 0 else { continue }
            if let notBefore = scope.notBefore {
                guard notBefore <= now else { continue }
                scope.notBefore = nil
                scopes[key] = scope
            }
            if let retry = scope.retry {
                if retry.purpose == .retry { continue }
                if retry.observedState == .didFailToSync, explicitScope != .some(key), !retrying.contains(key) {
                    continue
                }
            }
            guard let id = scope.ids.first(where: { slots[$0]?.state == .pending }),
                let slot = slots[id], slot.sequence <= savedSequence
            else { continue }
            ready.append((key, id, slot.position))
        }
        ready.sort { $0.position < $1.position }
        var actions: [Action] = []
        for (key, id, _) in ready.prefix(Swift.max(maxConcurrentSends - runningSends, 0)) {
            guard var scope = scopes[key] else { continue }
            slots[id]?.state = .sending
            scope.sending = id
            runningSends += 1
            if var retry = scope.retry {
                _ = retry.stateChanged(to: .syncing, retryAllowed: true, now: now)
                scope.retry = retry
                scope.armedAt = nil
            }
            scopes[key] = scope
            actions.append(.send(id))
        }
        // Scopes whose hold ended with nothing left in them.
        for key in scopeOrder { dropIfEmpty(key) }
        return actions
    }

    /// Arms the one timer for the earliest moment a scope waits for, if it changed.
    private mutating func rearm(now: Duration) -> [Action] {
        var earliest: Duration?
        if !isPaused {
            for key in scopeOrder {
                guard let scope = scopes[key] else { continue }
                for deadline in [scope.armedAt, scope.notBefore].compactMap({ $0 })
                where earliest.map({ deadline < $0 }) ?? true {
                    earliest = deadline
                }
            }
        }
        guard earliest != timerDeadline else { return [] }
        timerDeadline = earliest
        guard let earliest else { return [.cancelTimer] }
        return [.armTimer(after: Swift.max(earliest - now, .zero))]
    }

    private mutating func appendToScope(_ key: ScopeKey, _ body: (inout Scope) -> Void) {
        if scopes[key] == nil {
            scopes[key] = Scope()
            scopeOrder.append(key)
        } else if scopes[key]!.ids.isEmpty {
            // Kept only for a hold or a discarded item's send: its items go after the others, as
            // those of a forgotten scope.
            scopeOrder.removeAll { $0 == key }
            scopeOrder.append(key)
        }
        body(&scopes[key]!)
    }

    /// Forgets a scope with nothing left in it (and no deadline of its own to keep).
    private mutating func dropIfEmpty(_ key: ScopeKey) {
        guard let scope = scopes[key], scope.isEmpty else { return }
        scopes[key] = nil
        scopeOrder.removeAll { $0 == key }
    }
}
