/// What an outbox should do, as a plain value: the reference of `OutboxModelTests`.
///
/// The outbox under test carries `VersionedAppend`s in a few scopes, sends up to
/// ``Configuration/maxConcurrentSends`` at once through an `OutcomeServer` (which ends each send
/// when the test says, with any `OutboxOutcome` or error), retries with a policy of 1, 2, 4 … 64
/// seconds (no jitter, no retry limit), keeps its queue in an `InMemoryLoadableCache`, and runs on
/// a `ManualClock` that is its wall clock too. Every step of the test ends with the outbox quiet
/// (its saves done).
///
/// Idempotency keys are named here `k1`, `k2` … in the order the model hands them out (an enqueue,
/// a resolve); the test maps the outbox's keys onto these names.
struct OutboxReferenceModel {
    typealias Change = VersionedAppend

    /// What a seed draws besides its steps.
    struct Configuration: CustomStringConvertible {
        /// The scopes the test enqueues into (`nil` among them).
        var scopes: [String?]
        var maxConcurrentSends: Int
        /// Whether the outbox has a `coalesce` closure (``coalesced(_:_:)``).
        var coalesces: Bool
        /// Whether the outbox has a `rebase` closure (``rebased(_:onto:)``).
        var rebases: Bool
        /// Whether the cache says it locks across processes: the outbox then takes the sender's
        /// lock before it sends and reads its queue back every 5 s, which must change nothing that
        /// one process can see.
        var sharesQueue = false

        var description: String {
            let scopes = scopes.map { $0 ?? "nil" }.joined(separator: ",")
            return "scopes [\(scopes)], maxConcurrentSends \(maxConcurrentSends), coalesce \(coalesces), "
                + "rebase \(rebases)" + (sharesQueue ? ", shared" : "")
        }
    }

    /// An item's state, as `OutboxItem.State`.
    enum State: String, Equatable {
        case pending, sending, failed, conflict
    }

    /// The kind of an item's last error.
    enum ErrorKind: String, Equatable {
        case busy, refused
    }

    /// How a send ends.
    enum Outcome: Equatable, CustomStringConvertible {
        case applied
        /// Applied as the server's version (``serverVersion(of:)``).
        case appliedAs
        case dropped
        /// A conflict, with the server's side (``remote(of:)``) or without.
        case conflict(remote: Bool)
        /// Retryable, with the server's hint in seconds (0: none).
        case busy(retryAfter: Int)
        case refused

        var description: String {
            switch self {
            case .applied: "applied"
            case .appliedAs: "appliedAs"
            case .dropped: "dropped"
            case .conflict(let remote): remote ? "conflict(remote)" : "conflict(nil)"
            case .busy(let seconds): seconds == 0 ? "busy" : "busy(\(seconds)s)"
            case .refused: "refused"
            }
        }
    }

    /// One item.
    struct Item: CustomStringConvertible {
        var id: String
        /// The name of its idempotency key.
        var key: String
        var change: Change
        var state: State
        var attempts: Int
        var scope: String?
        var remote: Change?
        var lastError: ErrorKind?
        /// The attempts as the last save asked for wrote them: a send's count reaches the cache
        /// with the next save.
        var savedAttempts = 0
        /// The moment before which its scope sends nothing after a relaunch: the hold of its last
        /// retryable failure (the later of the retry's deadline and the server's hint).
        var notBefore: Int?
        /// Its change is not saved yet (enqueued, merged or rebased): it is not sent before.
        var awaitsSave = true
        /// The keys it had before its resolves.
        var earlierKeys: [String] = []

        /// What the test compares with the outbox's item.
        var description: String {
            var text = "\(change):\(state):\(attempts)"
            if let scope { text += " in \(scope)" }
            if let remote { text += " remote \(remote)" }
            if let lastError { text += " after \(lastError)" }
            return text
        }
    }

    /// A send that runs at the server.
    struct Send: Equatable {
        var key: String
        var change: Change
        var scope: String?
        /// The item sent; `nil` once it was discarded (its scope waits for the send's end).
        var itemID: String?
    }

    /// A scope's retry bookkeeping, from a retryable failure until another answer.
    private struct Retry {
        /// The failures since the backoff last started over.
        var step = 0
        /// Whether the scope waits for its retry (sends nothing meanwhile).
        var isWaiting = true
        /// When the retry falls due, while not paused.
        var deadline: Int?
        /// The failure's time plus the server's hint: a catch-up does not retry before.
        var retryAfterDeadline: Int?
    }

    let configuration: Configuration
    /// The items, oldest first.
    private(set) var items: [Item] = []
    /// The sends running at the server, in the order they began.
    private(set) var sends: [Send] = []
    /// What the server applied, once per key, in order: the key's name and the change.
    private(set) var applied: [(key: String, change: Change)] = []
    private var appliedKeys: Set<String> = []
    private var retries: [String?: Retry] = [:]
    /// The scopes held after a relaunch, until the moment kept with their items.
    private var notBefore: [String?: Int] = [:]
    private var keyCount = 0
    /// The clock's time, in seconds.
    private(set) var now = 0
    private(set) var isOffline = false
    private(set) var isInactive = false
    /// How often each case worth reaching was reached: the test checks that its sequences reach
    /// them all.
    private(set) var reached: [Reached: Int] = [:]

    /// A case worth reaching.
    enum Reached: String, CaseIterable, Comparable {
        case merged, notMerged, rebased, conflict, resolvedConflict, resolvedFailed, appliedAgainAfterResolve
        case appliedTwice, discardedWhileSending, waitedForDiscardedSend, retryFell, caughtUp, caughtUpAtHint
        case heldAfterRelaunch, conflictRelaunched, severalSends, waitedForSend, lateApplied

        static func < (lhs: Reached, rhs: Reached) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    init(configuration: Configuration) {
        self.configuration = configuration
    }

    var isPaused: Bool { isOffline || isInactive }
    var isSending: Bool { !sends.isEmpty }
    var pendingCount: Int { items.count { $0.state == .pending || $0.state == .sending } }

    // MARK: - The test's rules for the server and the closures

    /// The version the server answers with for `change` (`appliedAs`): the next version.
    static func serverVersion(of change: Change) -> Change {
        Change(word: change.word, version: change.version + 1)
    }

    /// The server's side of a conflict on `change`.
    static func remote(of change: Change) -> Change {
        Change(word: "~\(change.word)", version: change.version + 10)
    }

    /// What the app resolves a conflicted or failed `change` with.
    static func resolution(of change: Change, remote: Change?) -> Change {
        Change(word: "\(change.word)!", version: remote?.version ?? change.version)
    }

    /// The outbox's `coalesce`: two appends become one list of at most three words.
    static func coalesced(_ earlier: Change, _ later: Change) -> Change? {
        let words = earlier.word.split(separator: "+").count + later.word.split(separator: "+").count
        guard words <= 3 else { return nil }
        return Change(word: "\(earlier.word)+\(later.word)", version: earlier.version)
    }

    /// The outbox's `rebase`: a later change is made on the version the server gave.
    static func rebased(_ later: Change, onto applied: Change) -> Change {
        Change(word: later.word, version: applied.version)
    }

    // MARK: - Steps

    /// The app enqueues `change` into `scope`; `newID` is the id a new item gets. Returns the id
    /// the outbox should return: the new one, or that of the item the change merges into.
    mutating func enqueue(_ change: Change, scope: String?, newID: String) -> String {
        if configuration.coalesces, let index = items.lastIndex(where: { $0.scope == scope }),
            items[index].state == .pending, items[index].attempts == 0,
            let merged = Self.coalesced(items[index].change, change)
        {
            items[index].change = merged
            items[index].awaitsSave = true
            reached[.merged, default: 0] += 1
            afterChange()
            return items[index].id
        }
        if configuration.coalesces, let last = items.last(where: { $0.scope == scope }), last.state == .pending,
            last.attempts == 0
        {
            reached[.notMerged, default: 0] += 1
        }
        items.append(
            Item(id: newID, key: newKey(), change: change, state: .pending, attempts: 0, scope: scope))
        afterChange()
        return newID
    }

    /// The running send with key `key` ends with `outcome`.
    mutating func finish(key: String, with outcome: Outcome) {
        guard let sendIndex = sends.firstIndex(where: { $0.key == key }) else { return }
        let send = sends.remove(at: sendIndex)
        serverAnswers(send, with: outcome)
        guard let id = send.itemID, let index = items.firstIndex(where: { $0.id == id }) else {
            // A discarded item's send: its scope may go on.
            fill()
            return
        }
        let scope = send.scope
        switch outcome {
        case .applied, .dropped:
            items.remove(at: index)
            retries[scope] = nil
        case .appliedAs:
            let version = Self.serverVersion(of: send.change)
            items.remove(at: index)
            retries[scope] = nil
            if configuration.rebases {
                for later in index..<items.count where items[later].scope == scope {
                    items[later].change = Self.rebased(items[later].change, onto: version)
                    items[later].awaitsSave = true
                    reached[.rebased, default: 0] += 1
                }
            }
        case .conflict(let hasRemote):
            items[index].state = .conflict
            reached[.conflict, default: 0] += 1
            items[index].remote = hasRemote ? Self.remote(of: send.change) : nil
            // A conflict answers: the scope's backoff is forgotten, kept deadline included.
            items[index].notBefore = nil
            retries[scope] = nil
        case .refused:
            items[index].state = .failed
            items[index].lastError = .refused
            items[index].notBefore = nil
            retries[scope] = nil
        case .busy(let hint):
            items[index].state = .pending
            items[index].lastError = .busy
            items[index].notBefore = failRetryably(in: scope, hint: hint)
        }
        afterChange()
    }

    /// Time moves on by `seconds`; the retries and holds that fall due meanwhile end, in order.
    mutating func advance(by seconds: Int) {
        let end = now + seconds
        while !isPaused, let next = nextDeadline(), next <= end {
            now = max(now, next)
            for (scope, retry) in retries where retry.isWaiting && retry.deadline.map({ $0 <= now }) == true {
                retries[scope] = Retry(step: retry.step, isWaiting: false)
                reached[.retryFell, default: 0] += 1
            }
            notBefore = notBefore.filter { $0.value > now }
            fill()
        }
        now = end
    }

    mutating func setOffline(_ offline: Bool) {
        let wasPaused = isPaused
        isOffline = offline
        activityChanged(wasPaused: wasPaused)
    }

    mutating func setInactive(_ inactive: Bool) {
        let wasPaused = isPaused
        isInactive = inactive
        activityChanged(wasPaused: wasPaused)
    }

    /// The failed item `id` goes back in line.
    mutating func retry(_ id: String) {
        guard let index = items.firstIndex(where: { $0.id == id }), items[index].state == .failed else { return }
        items[index].state = .pending
        save()
        fill()
    }

    /// The conflicted or failed item `id` takes ``resolution(of:remote:)`` and a new key.
    mutating func resolve(_ id: String) {
        guard let index = items.firstIndex(where: { $0.id == id }),
            items[index].state == .conflict || items[index].state == .failed
        else { return }
        reached[items[index].state == .conflict ? .resolvedConflict : .resolvedFailed, default: 0] += 1
        items[index].change = Self.resolution(of: items[index].change, remote: items[index].remote)
        items[index].earlierKeys.append(items[index].key)
        items[index].key = newKey()
        items[index].remote = nil
        items[index].state = .pending
        save()
        fill()
    }

    /// The item `id` goes; a send of it is cancelled, and its scope waits for that send's end.
    mutating func discard(_ id: String) {
        guard let index = items.firstIndex(where: { $0.id == id }) else { return }
        let item = items[index]
        if item.state == .sending, let send = sends.firstIndex(where: { $0.itemID == id }) {
            sends[send].itemID = nil
            reached[.discardedWhileSending, default: 0] += 1
        } else if item.state == .pending, retries[item.scope] != nil,
            items.first(where: { $0.scope == item.scope && $0.state == .pending })?.id == id
        {
            // The item the scope's retry waits for: the wait ends, the next item goes.
            retries[item.scope] = nil
        }
        items.remove(at: index)
        afterChange()
    }

    /// Logout: every item goes; the running sends are cancelled and their scopes wait for them.
    mutating func removeAll() {
        for index in sends.indices { sends[index].itemID = nil }
        items.removeAll()
        retries.removeAll()
        notBefore.removeAll()
    }

    /// The app dies and starts again with the queue as saved; the sends running end at the server
    /// with `late` (by key name, in the order the test ends them). The retry machinery starts
    /// afresh, but each scope keeps the hold its items were saved with.
    mutating func relaunch(late: [(key: String, outcome: Outcome)]) {
        for (key, outcome) in late {
            guard let send = sends.first(where: { $0.key == key }) else { continue }
            if outcome == .applied || outcome == .appliedAs { reached[.lateApplied, default: 0] += 1 }
            serverAnswers(send, with: outcome)
        }
        if items.contains(where: { $0.state == .conflict }) { reached[.conflictRelaunched, default: 0] += 1 }
        sends.removeAll()
        for index in items.indices {
            if items[index].state == .sending { items[index].state = .pending }
            items[index].attempts = items[index].savedAttempts
            items[index].awaitsSave = false
        }
        retries.removeAll()
        notBefore.removeAll()
        for item in items {
            guard let moment = item.notBefore, moment > now else { continue }
            notBefore[item.scope] = max(notBefore[item.scope] ?? moment, moment)
            reached[.heldAfterRelaunch, default: 0] += 1
        }
        fill()
    }

    // MARK: - Rules

    private mutating func newKey() -> String {
        keyCount += 1
        return "k\(keyCount)"
    }

    /// The server applies what an `applied` or `appliedAs` send carries, once per key.
    private mutating func serverAnswers(_ send: Send, with outcome: Outcome) {
        let change: Change
        switch outcome {
        case .applied: change = send.change
        case .appliedAs: change = Self.serverVersion(of: send.change)
        case .dropped, .conflict, .busy, .refused: return
        }
        guard appliedKeys.insert(send.key).inserted else {
            reached[.appliedTwice, default: 0] += 1
            return
        }
        applied.append((send.key, change))
        if let item = items.first(where: { $0.id == send.itemID }),
            item.earlierKeys.contains(where: appliedKeys.contains)
        {
            reached[.appliedAgainAfterResolve, default: 0] += 1
        }
    }

    /// A change of the queue: it is saved; sends start, then those waiting for the save.
    private mutating func afterChange() {
        save()
        fill()
        for index in items.indices { items[index].awaitsSave = false }
        fill()
    }

    /// A save is asked for: it carries the attempts counted so far.
    private mutating func save() {
        for index in items.indices { items[index].savedAttempts = items[index].attempts }
    }

    /// A retryable failure in `scope`: the scope waits for the policy's backoff (or the server's
    /// hint if longer) unless paused. Returns the hold kept for a relaunch.
    private mutating func failRetryably(in scope: String?, hint: Int) -> Int? {
        var retry = retries[scope] ?? Retry()
        retry.isWaiting = true
        retry.retryAfterDeadline = hint > 0 ? now + hint : nil
        if isPaused {
            // No retry is armed and the backoff stays; the catch-up on return retries.
            retry.deadline = nil
        } else {
            let backoff = min(1 << min(retry.step, 7), 64)
            retry.step += 1
            retry.deadline = now + (hint > 0 ? max(backoff, hint) : backoff)
        }
        retries[scope] = retry
        return [retry.deadline, retry.retryAfterDeadline].compactMap { $0 }.max()
    }

    private mutating func activityChanged(wasPaused: Bool) {
        guard wasPaused != isPaused else { return }
        if isPaused {
            // The retry timers stop; a return catches up.
            for scope in retries.keys { retries[scope]?.deadline = nil }
            return
        }
        // Resumed: every backoff starts over; a scope waiting for its retry retries at once, but
        // never before the server's hint.
        for (scope, var retry) in retries {
            retry.step = 0
            if retry.isWaiting {
                if let hint = retry.retryAfterDeadline, hint > now {
                    retry.deadline = hint
                    reached[.caughtUpAtHint, default: 0] += 1
                } else {
                    retry = Retry(step: 0, isWaiting: false)
                    reached[.caughtUp, default: 0] += 1
                }
            }
            retries[scope] = retry
        }
        fill()
    }

    /// The earliest moment a retry or a hold falls due.
    private func nextDeadline() -> Int? {
        let retryDeadlines = retries.values.compactMap { $0.isWaiting ? $0.deadline : nil }
        return (retryDeadlines + notBefore.values).min()
    }

    /// Starts every send that may start: unless paused, in each scope that sends nothing (and
    /// waits for no cancelled send, no retry, no hold), its first pending item if it is saved;
    /// the scope whose next item is oldest first, at most `maxConcurrentSends` at once.
    private mutating func fill() {
        guard !isPaused else { return }
        defer { if sends.count > 1 { reached[.severalSends, default: 0] += 1 } }
        // Of the scopes that may send, the one whose next item is oldest in the queue first.
        var byNextItem: [String?] = []
        for item in items where item.state == .pending && !byNextItem.contains(item.scope) {
            byNextItem.append(item.scope)
        }
        for scope in byNextItem {
            guard sends.count < configuration.maxConcurrentSends else {
                let sendingScopes = sends.map(\.scope)
                if items.contains(where: { $0.state == .pending && !sendingScopes.contains($0.scope) }) {
                    reached[.waitedForSend, default: 0] += 1
                }
                return
            }
            if sends.contains(where: { $0.scope == scope && $0.itemID == nil }),
                items.contains(where: { $0.scope == scope && $0.state == .pending })
            {
                reached[.waitedForDiscardedSend, default: 0] += 1
            }
            guard !sends.contains(where: { $0.scope == scope }), retries[scope]?.isWaiting != true,
                notBefore[scope].map({ $0 <= now }) ?? true,
                let index = items.firstIndex(where: { $0.scope == scope && $0.state == .pending }),
                !items[index].awaitsSave
            else { continue }
            items[index].state = .sending
            items[index].attempts += 1
            sends.append(
                Send(key: items[index].key, change: items[index].change, scope: scope, itemID: items[index].id))
            if let retry = retries[scope] { retries[scope] = Retry(step: retry.step, isWaiting: false) }
        }
    }
}
