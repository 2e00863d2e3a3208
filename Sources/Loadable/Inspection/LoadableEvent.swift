/// Something the data layer did, and why, as a ``LoadableInspector`` records it.
///
/// Every event has the ``label`` of the object it is about (a loadable's
/// ``PureLoadable/inspectorLabel``, an outbox's or a collection's own label) and the ``time`` it
/// happened on the inspector's clock, counted from the moment the inspector was made. Nothing is
/// recorded, and nothing is built, while no inspector is attached
/// (``LoadableInspector/attach()``).
///
/// Events are `Codable` as one flat JSON object each: `kind` (the ``Kind`` raw value), `label`,
/// `time` in seconds, and the fields of the case (durations in seconds). That is the form of a
/// line of ``LoadableInspector/timeline()`` and of the inspector page.
///
/// ```swift
/// for await event in inspector.events {
///     if case .syncEnded(let label, _, let duration, .failed(let message), _) = event {
///         print("\(label) failed after \(duration): \(message)")
///     }
/// }
/// ```
public enum LoadableEvent: Sendable, Equatable, Codable {
    /// A sync began.
    case syncStarted(label: String, time: Duration)
    /// A sync ended, `duration` after it began (zero when the inspector did not see it begin);
    /// `status` is the HTTP status that ended it (`200`, or `304` for a sync that confirmed the
    /// contents) when the loadable speaks HTTP.
    case syncEnded(label: String, time: Duration, duration: Duration, result: SyncResult, status: Int?)
    /// A retry of a failed sync was scheduled `delay` from now, for `cause`.
    case retryScheduled(label: String, time: Duration, delay: Duration, cause: RetryCause)
    /// A sync's watchdog fired: it went on past `slowSyncAfter`, or past `syncTimeout` (the sync
    /// is then cancelled and fails).
    case watchdog(label: String, time: Duration, alarm: WatchdogAlarm)
    /// A lease was taken; `leases` are the loadable's live leases now.
    case leaseTaken(label: String, time: Duration, leases: Int)
    /// A lease was released or let go; `leases` are the loadable's live leases now.
    case leaseReleased(label: String, time: Duration, leases: Int)
    /// The contents were invalidated; `deferred` when a sync was running, so that one more sync
    /// follows it instead of one starting now.
    case invalidated(label: String, time: Duration, deferred: Bool)
    /// A persisted loadable's restore from its cache ended; `found` when an entry was there.
    case cacheRestored(label: String, time: Duration, found: Bool)
    /// A persisted loadable's contents were saved to its cache.
    case cacheSaved(label: String, time: Duration)
    /// A persisted loadable's entry got a new save date and metadata, its contents unchanged (a
    /// sync that confirmed them, such as a `304`).
    case cacheTouched(label: String, time: Duration)
    /// A persisted loadable's entry was found gone from its cache (evicted by the cache's limit,
    /// or removed) when it was to be touched; it is saved again whole.
    case cacheEvicted(label: String, time: Duration)
    /// An operation joined an outbox; `item` is its id.
    case outboxEnqueued(label: String, time: Duration, item: String)
    /// An outbox began sending an item.
    case outboxSent(label: String, time: Duration, item: String)
    /// An outbox's send ended: `outcome` is what the outbox made of it (`delivered`, `conflict`,
    /// `failed`, `retrying`, `discarded`).
    case outboxOutcome(label: String, time: Duration, item: String, outcome: String)
    /// A synced collection's pull ended with `changes` records (tombstones included) applied.
    case collectionPulled(label: String, time: Duration, changes: Int)
    /// A synced collection's push ended with `changes` records accepted by the server.
    case collectionPushed(label: String, time: Duration, changes: Int)
    /// A synced collection met a conflict on `record` (its id).
    case collectionConflict(label: String, time: Duration, record: String)
    /// Automatic syncing paused: the app went inactive, or offline.
    case paused(label: String, time: Duration, reason: PauseReason)
    /// Automatic syncing resumed after a pause.
    case resumed(label: String, time: Duration)

    /// How a sync ended.
    public enum SyncResult: Sendable, Equatable {
        /// It succeeded (new contents, or the same ones confirmed).
        case succeeded
        /// It failed; the message describes the error.
        case failed(String)
        /// It was cancelled before it ended.
        case cancelled
    }

    /// Why a retry was scheduled.
    public enum RetryCause: String, Sendable, Equatable, Codable {
        /// The syncer's backoff after a failure.
        case backoff
        /// The server's `Retry-After`.
        case retryAfter
    }

    /// What a sync's watchdog saw.
    public enum WatchdogAlarm: String, Sendable, Equatable, Codable {
        /// The sync went on past `slowSyncAfter`.
        case slow
        /// The sync went on past `syncTimeout`, and was cancelled.
        case timedOut
    }

    /// Why automatic syncing paused.
    public enum PauseReason: String, Sendable, Equatable, Codable {
        /// The app is not active.
        case inactive
        /// The network is unreachable.
        case offline
    }

    /// The kinds of event, as the `kind` field of their JSON names them.
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        /// ``LoadableEvent/syncStarted(label:time:)``.
        case syncStarted
        /// ``LoadableEvent/syncEnded(label:time:duration:result:status:)``.
        case syncEnded
        /// ``LoadableEvent/retryScheduled(label:time:delay:cause:)``.
        case retryScheduled
        /// ``LoadableEvent/watchdog(label:time:alarm:)``.
        case watchdog
        /// ``LoadableEvent/leaseTaken(label:time:leases:)``.
        case leaseTaken
        /// ``LoadableEvent/leaseReleased(label:time:leases:)``.
        case leaseReleased
        /// ``LoadableEvent/invalidated(label:time:deferred:)``.
        case invalidated
        /// ``LoadableEvent/cacheRestored(label:time:found:)``.
        case cacheRestored
        /// ``LoadableEvent/cacheSaved(label:time:)``.
        case cacheSaved
        /// ``LoadableEvent/cacheTouched(label:time:)``.
        case cacheTouched
        /// ``LoadableEvent/cacheEvicted(label:time:)``.
        case cacheEvicted
        /// ``LoadableEvent/outboxEnqueued(label:time:item:)``.
        case outboxEnqueued
        /// ``LoadableEvent/outboxSent(label:time:item:)``.
        case outboxSent
        /// ``LoadableEvent/outboxOutcome(label:time:item:outcome:)``.
        case outboxOutcome
        /// ``LoadableEvent/collectionPulled(label:time:changes:)``.
        case collectionPulled
        /// ``LoadableEvent/collectionPushed(label:time:changes:)``.
        case collectionPushed
        /// ``LoadableEvent/collectionConflict(label:time:record:)``.
        case collectionConflict
        /// ``LoadableEvent/paused(label:time:reason:)``.
        case paused
        /// ``LoadableEvent/resumed(label:time:)``.
        case resumed
    }

    /// The flat form of every event: what is encoded and decoded.
    struct Fields: Codable {
        var kind: Kind
        var label: String
        var time: Double
        var duration: Double?
        var result: String?
        var error: String?
        var status: Int?
        var delay: Double?
        var cause: RetryCause?
        var alarm: WatchdogAlarm?
        var leases: Int?
        var deferred: Bool?
        var found: Bool?
        var item: String?
        var outcome: String?
        var changes: Int?
        var record: String?
        var reason: PauseReason?
    }

    /// The kind of this event.
    public var kind: Kind { fields.kind }

    /// The label of the object the event is about.
    public var label: String {
        switch self {
        case .syncStarted(let label, _), .syncEnded(let label, _, _, _, _), .retryScheduled(let label, _, _, _),
            .watchdog(let label, _, _), .leaseTaken(let label, _, _), .leaseReleased(let label, _, _),
            .invalidated(let label, _, _), .cacheRestored(let label, _, _), .cacheSaved(let label, _),
            .cacheTouched(let label, _), .cacheEvicted(let label, _), .outboxEnqueued(let label, _, _),
            .outboxSent(let label, _, _), .outboxOutcome(let label, _, _, _), .collectionPulled(let label, _, _),
            .collectionPushed(let label, _, _), .collectionConflict(let label, _, _), .paused(let label, _, _),
            .resumed(let label, _):
            label
        }
    }

    /// When the event happened, on the inspector's clock (from the moment the inspector was made).
    public var time: Duration {
        switch self {
        case .syncStarted(_, let time), .syncEnded(_, let time, _, _, _), .retryScheduled(_, let time, _, _),
            .watchdog(_, let time, _), .leaseTaken(_, let time, _), .leaseReleased(_, let time, _),
            .invalidated(_, let time, _), .cacheRestored(_, let time, _), .cacheSaved(_, let time),
            .cacheTouched(_, let time), .cacheEvicted(_, let time), .outboxEnqueued(_, let time, _),
            .outboxSent(_, let time, _), .outboxOutcome(_, let time, _, _), .collectionPulled(_, let time, _),
            .collectionPushed(_, let time, _), .collectionConflict(_, let time, _), .paused(_, let time, _),
            .resumed(_, let time):
            time
        }
    }

    var fields: Fields {
        func base(_ kind: Kind, _ label: String, _ time: Duration) -> Fields {
            Fields(kind: kind, label: label, time: Self.seconds(time))
        }
        switch self {
        case .syncStarted(let label, let time):
            return base(.syncStarted, label, time)
        case .syncEnded(let label, let time, let duration, let result, let status):
            var fields = base(.syncEnded, label, time)
            fields.duration = Self.seconds(duration)
            switch result {
            case .succeeded: fields.result = "succeeded"
            case .failed(let message): (fields.result, fields.error) = ("failed", message)
            case .cancelled: fields.result = "cancelled"
            }
            fields.status = status
            return fields
        case .retryScheduled(let label, let time, let delay, let cause):
            var fields = base(.retryScheduled, label, time)
            (fields.delay, fields.cause) = (Self.seconds(delay), cause)
            return fields
        case .watchdog(let label, let time, let alarm):
            var fields = base(.watchdog, label, time)
            fields.alarm = alarm
            return fields
        case .leaseTaken(let label, let time, let leases):
            var fields = base(.leaseTaken, label, time)
            fields.leases = leases
            return fields
        case .leaseReleased(let label, let time, let leases):
            var fields = base(.leaseReleased, label, time)
            fields.leases = leases
            return fields
        case .invalidated(let label, let time, let deferred):
            var fields = base(.invalidated, label, time)
            fields.deferred = deferred
            return fields
        case .cacheRestored(let label, let time, let found):
            var fields = base(.cacheRestored, label, time)
            fields.found = found
            return fields
        case .cacheSaved(let label, let time):
            return base(.cacheSaved, label, time)
        case .cacheTouched(let label, let time):
            return base(.cacheTouched, label, time)
        case .cacheEvicted(let label, let time):
            return base(.cacheEvicted, label, time)
        case .outboxEnqueued(let label, let time, let item):
            var fields = base(.outboxEnqueued, label, time)
            fields.item = item
            return fields
        case .outboxSent(let label, let time, let item):
            var fields = base(.outboxSent, label, time)
            fields.item = item
            return fields
        case .outboxOutcome(let label, let time, let item, let outcome):
            var fields = base(.outboxOutcome, label, time)
            (fields.item, fields.outcome) = (item, outcome)
            return fields
        case .collectionPulled(let label, let time, let changes):
            var fields = base(.collectionPulled, label, time)
            fields.changes = changes
            return fields
        case .collectionPushed(let label, let time, let changes):
            var fields = base(.collectionPushed, label, time)
            fields.changes = changes
            return fields
        case .collectionConflict(let label, let time, let record):
            var fields = base(.collectionConflict, label, time)
            fields.record = record
            return fields
        case .paused(let label, let time, let reason):
            var fields = base(.paused, label, time)
            fields.reason = reason
            return fields
        case .resumed(let label, let time):
            return base(.resumed, label, time)
        }
    }

    /// Encodes the event as one flat object (see the type's documentation).
    public func encode(to encoder: any Encoder) throws {
        try fields.encode(to: encoder)
    }

    /// Decodes an event from its flat object; a field its kind needs that is missing or of the
    /// wrong type is a `DecodingError`.
    public init(from decoder: any Decoder) throws {
        let fields = try Fields(from: decoder)
        func need<Value>(_ value: Value?, _ name: String) throws -> Value {
            guard let value else {
                throw DecodingError.dataCorrupted(
                    DecodingError.Context(
                        codingPath: decoder.codingPath,
                        debugDescription: "a \(fields.kind.rawValue) event needs `\(name)`"))
            }
            return value
        }
        let (label, time) = (fields.label, Self.duration(fields.time))
        switch fields.kind {
        case .syncStarted:
            self = .syncStarted(label: label, time: time)
        case .syncEnded:
            let result: SyncResult
            switch try need(fields.result, "result") {
            case "succeeded": result = .succeeded
            case "cancelled": result = .cancelled
            case "failed": result = .failed(fields.error ?? "")
            case let other:
                throw DecodingError.dataCorrupted(
                    DecodingError.Context(
                        codingPath: decoder.codingPath,
                        debugDescription: "unknown sync result \"\(other)\" (succeeded, failed, cancelled)"))
            }
            self = .syncEnded(
                label: label, time: time, duration: Self.duration(try need(fields.duration, "duration")),
                result: result, status: fields.status)
        case .retryScheduled:
            self = .retryScheduled(
                label: label, time: time, delay: Self.duration(try need(fields.delay, "delay")),
                cause: try need(fields.cause, "cause"))
        case .watchdog:
            self = .watchdog(label: label, time: time, alarm: try need(fields.alarm, "alarm"))
        case .leaseTaken:
            self = .leaseTaken(label: label, time: time, leases: try need(fields.leases, "leases"))
        case .leaseReleased:
            self = .leaseReleased(label: label, time: time, leases: try need(fields.leases, "leases"))
        case .invalidated:
            self = .invalidated(label: label, time: time, deferred: try need(fields.deferred, "deferred"))
        case .cacheRestored:
            self = .cacheRestored(label: label, time: time, found: try need(fields.found, "found"))
        case .cacheSaved:
            self = .cacheSaved(label: label, time: time)
        case .cacheTouched:
            self = .cacheTouched(label: label, time: time)
        case .cacheEvicted:
            self = .cacheEvicted(label: label, time: time)
        case .outboxEnqueued:
            self = .outboxEnqueued(label: label, time: time, item: try need(fields.item, "item"))
        case .outboxSent:
            self = .outboxSent(label: label, time: time, item: try need(fields.item, "item"))
        case .outboxOutcome:
            self = .outboxOutcome(
                label: label, time: time, item: try need(fields.item, "item"),
                outcome: try need(fields.outcome, "outcome"))
        case .collectionPulled:
            self = .collectionPulled(label: label, time: time, changes: try need(fields.changes, "changes"))
        case .collectionPushed:
            self = .collectionPushed(label: label, time: time, changes: try need(fields.changes, "changes"))
        case .collectionConflict:
            self = .collectionConflict(label: label, time: time, record: try need(fields.record, "record"))
        case .paused:
            self = .paused(label: label, time: time, reason: try need(fields.reason, "reason"))
        case .resumed:
            self = .resumed(label: label, time: time)
        }
    }

    /// `duration` in seconds, to the microsecond: the same text on every platform.
    package static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds / 1_000_000_000_000) / 1_000_000
    }

    /// `seconds` as a duration, to the microsecond.
    static func duration(_ seconds: Double) -> Duration {
        guard seconds.isFinite else { return .zero }
        return .microseconds(Int64((seconds * 1_000_000).rounded()))
    }
}
