/// What an outbox should do, as a plain value: the reference of `OutboxModelTests`.
///
/// The outbox under test sends through a `ScriptedServer`, retries with a policy of 1, 2, 4 … 64
/// seconds (no jitter, no retry limit), keeps its queue in an `InMemoryLoadableCache`, and runs on
/// a `ManualClock`. Every step of the test ends with the outbox quiet (its saves done), so an
/// item is sendable as soon as it is enqueued.
struct OutboxReferenceModel {
    /// One item.
    struct Item: Equatable, CustomStringConvertible {
        var id: String
        var word: String
        var state: State
        var attempts: Int

        var description: String { "\(word):\(state):\(attempts)" }
    }

    /// An item's state, as `OutboxItem.State`.
    enum State: String, Equatable {
        case pending, sending, failed
    }

    /// How a send ends.
    enum Outcome: Equatable, CustomStringConvertible {
        case success
        /// Retryable, with the server's hint in seconds (0: none).
        case busy(retryAfter: Int)
        case refused

        var description: String {
            switch self {
            case .success: "success"
            case .busy(let seconds): seconds == 0 ? "busy" : "busy(\(seconds)s)"
            case .refused: "refused"
            }
        }
    }

    /// The items not sent yet, in order.
    private(set) var items: [Item] = []
    /// The queue as last saved (`sending` kept as `pending`).
    private(set) var saved: [Item] = []
    /// The words the server applied, once per item.
    private(set) var applied: [String] = []
    private var appliedIDs: Set<String> = []
    /// The clock's time, in seconds.
    private(set) var now = 0
    private(set) var isOffline = false
    private(set) var isInactive = false
    /// The number of retries since the backoff last started over.
    private var backoffStep = 0
    /// When the next retry falls due; kept (not counting down) while paused.
    private(set) var retryDeadline: Int?
    /// The moment before which a catch-up may not retry: the failure's time plus its hint.
    private var retryAfterDeadline: Int?
    /// The item whose retryable failure a retry waits for.
    private var retryingID: String?

    var isPaused: Bool { isOffline || isInactive }

    /// The item being sent.
    var sending: Item? { items.first { $0.state == .sending } }

    // MARK: - Steps

    mutating func enqueue(id: String, word: String) {
        items.append(Item(id: id, word: word, state: .pending, attempts: 0))
        save()
        sendIfPossible()
    }

    /// The running send ends.
    mutating func finish(_ outcome: Outcome) {
        guard let index = items.firstIndex(where: { $0.state == .sending }) else { return }
        let id = items[index].id
        switch outcome {
        case .success:
            apply(items[index])
            items.remove(at: index)
            save()
            backoffStep = 0
            sendIfPossible()
        case .busy(let hint):
            items[index].state = .pending
            save()
            retryingID = id
            retryAfterDeadline = hint > 0 ? now + min(hint, 3600) : nil
            guard !isPaused else { return }
            var delay = min(1 << min(backoffStep, 6), 64)
            backoffStep += 1
            if hint > 0 { delay = min(max(delay, hint), 3600) }
            retryDeadline = now + delay
        case .refused:
            items[index].state = .failed
            save()
            sendIfPossible()
        }
    }

    /// Time moves on by `seconds`; a retry that falls due meanwhile starts.
    mutating func advance(by seconds: Int) {
        if let deadline = retryDeadline, !isPaused, deadline <= now + seconds {
            now = max(now, deadline)
            retryDeadline = nil
            retryingID = nil
            sendIfPossible(afterRetryTimer: true)
        }
        now += seconds
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
        sendIfPossible()
    }

    /// The item `id` goes; a send of it is cancelled, and ends with `lateOutcome` at the server.
    mutating func discard(_ id: String, lateOutcome: Outcome) {
        guard let index = items.firstIndex(where: { $0.id == id }) else { return }
        if items[index].state == .sending, lateOutcome == .success { apply(items[index]) }
        if retryingID == id { stopRetrying() }
        items.remove(at: index)
        save()
        sendIfPossible()
    }

    mutating func removeAll(lateOutcome: Outcome) {
        if let sending, lateOutcome == .success { apply(sending) }
        stopRetrying()
        items.removeAll()
        save()
    }

    /// The app dies (a send running ends at the server with `lateOutcome`) and starts again with
    /// the queue last saved; the retry machinery starts afresh.
    mutating func relaunch(lateOutcome: Outcome) {
        if let sending, lateOutcome == .success { apply(sending) }
        items = saved
        backoffStep = 0
        retryDeadline = nil
        retryAfterDeadline = nil
        retryingID = nil
        sendIfPossible()
    }

    // MARK: - Rules

    private mutating func apply(_ item: Item) {
        if appliedIDs.insert(item.id).inserted { applied.append(item.word) }
    }

    private mutating func save() {
        saved = items.map { item in
            var item = item
            if item.state == .sending { item.state = .pending }
            return item
        }
    }

    private mutating func stopRetrying() {
        retryingID = nil
        retryDeadline = nil
        retryAfterDeadline = nil
    }

    /// Sends the first pending item unless paused, sending, or waiting for a retry.
    private mutating func sendIfPossible(afterRetryTimer: Bool = false) {
        guard !isPaused, sending == nil, retryDeadline == nil, afterRetryTimer || retryingID == nil else { return }
        guard let index = items.firstIndex(where: { $0.state == .pending }) else {
            if afterRetryTimer { stopRetrying() }
            return
        }
        retryingID = nil
        items[index].state = .sending
        items[index].attempts += 1
    }

    private mutating func activityChanged(wasPaused: Bool) {
        guard wasPaused != isPaused else { return }
        guard !isPaused else { return }
        // Resumed: the backoff starts over, and a retry waiting for its time is caught up at
        // once, but never before the server's Retry-After.
        backoffStep = 0
        if retryingID != nil {
            if let hint = retryAfterDeadline, hint > now {
                retryDeadline = hint
                return
            }
            retryDeadline = nil
            sendIfPossible(afterRetryTimer: true)
            return
        }
        sendIfPossible()
    }
}
