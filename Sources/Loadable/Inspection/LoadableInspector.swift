import LoadableSupport

/// Records what the data layer does, and why: a typed timeline of ``LoadableEvent``s, a
/// ``snapshot()`` of every live store entry, outbox item and synced collection, and the actions
/// of the inspector page (``perform(_:)``).
///
/// Attach one in a debug build, before the data layer starts; nothing is recorded while none is
/// attached, and the package's code then costs one check of a pointer per event site:
///
/// ```swift
/// #if DEBUG
/// let inspector = LoadableInspector()
/// inspector.attach()
/// Task { for await event in inspector.events { print(event.kind, event.label) } }
/// #endif
/// ```
///
/// Times are on the inspector's clock, counted from the moment it was made, so a test that gives
/// it a `ManualClock` gets a ``timeline()`` that is the same bytes on every run. The page
/// (`serve(port:)`) is in the `LoadableInspector` product.
///
/// One inspector is attached at a time; attaching another detaches the first. Isolated to the
/// main actor, where every event of the package happens.
@MainActor
public final class LoadableInspector {
    /// The inspector attached now, if any.
    public static var attached: LoadableInspector? { LoadableInspection.inspector }

    /// The recorded events, oldest first: at most `capacity`, the oldest dropped first.
    public private(set) var recordedEvents: [LoadableEvent] = []
    /// Events dropped from ``recordedEvents`` to keep it within its capacity.
    public private(set) var droppedEventCount = 0
    /// The most events ``recordedEvents`` keeps.
    public let capacity: Int

    private let clock: ElapsedClock
    /// The start time of each running sync, by object.
    private var syncStarts: [ObjectIdentifier: Duration] = [:]
    /// The HTTP status that ends each object's running sync, when it speaks HTTP.
    private var syncStatuses: [ObjectIdentifier: Int] = [:]
    /// The live ``events`` streams; they end with the inspector.
    private let streams = EventStreams()
    /// Loadables that were the subject of an event, by label: what an action may reach besides
    /// the entries of stores and the collections.
    private var targets: [String: WeakTarget] = [:]

    /// Creates an inspector, not attached yet.
    ///
    /// - Parameters:
    ///   - clock: The clock of event times; a `ManualClock` makes a replayable timeline.
    ///   - capacity: The most events kept in ``recordedEvents``, `1` or more; 10,000 by default.
    ///     Anything less stops the program with a message.
    public init(clock: any Clock<Duration> = ContinuousClock(), capacity: Int = 10_000) {
        requireValid(
            capacity >= 1, "LoadableInspector(clock:capacity:): capacity must be >= 1, got \(capacity)")
        self.clock = ElapsedClock(clock)
        self.capacity = capacity
    }

    /// Makes this the inspector that records the package's events, detaching the one attached
    /// before, if any. Attaching it again does nothing.
    ///
    /// A sync that began before the inspector was attached (or while it was detached) ends with a
    /// `duration` of zero: the inspector did not see it begin.
    public func attach() {
        guard LoadableInspection.inspector !== self else { return }
        // Starts seen before a detach may belong to syncs that ended unseen since.
        syncStarts.removeAll()
        syncStatuses.removeAll()
        LoadableInspection.inspector = self
    }

    /// Stops recording; does nothing when this inspector is not the attached one. What it
    /// recorded stays, and its ``events`` streams stay open.
    public func detach() {
        guard LoadableInspection.inspector === self else { return }
        LoadableInspection.inspector = nil
    }

    /// The time on the inspector's clock since it was made.
    public var now: Duration { clock.elapsed }

    // MARK: - Events

    /// The events recorded from now on, as they happen; the stream ends when the inspector is
    /// released. Each read makes a new stream; earlier events are in ``recordedEvents``.
    ///
    /// The stream buffers what its reader has not taken yet, up to ``capacity`` events (the oldest
    /// dropped first).
    public var events: AsyncStream<LoadableEvent> {
        let (stream, continuation) = AsyncStream<LoadableEvent>.makeStream(
            bufferingPolicy: .bufferingNewest(capacity))
        streams.add(continuation)
        return stream
    }

    /// The recorded events as JSON Lines: one flat object per event (see ``LoadableEvent``), keys
    /// in a fixed order, each line ending in a newline. The same events give the same bytes.
    public func timeline() -> String {
        var text = ""
        for event in recordedEvents {
            text += Self.jsonLine(event)
            text += "\n"
        }
        return text
    }

    /// `event` as one line of JSON (no newline), as ``timeline()`` writes it.
    public static func jsonLine(_ event: LoadableEvent) -> String {
        event.jsonLine
    }

    /// Records `event`: keeps it, and hands it to every ``events`` stream.
    package func record(_ event: LoadableEvent) {
        if recordedEvents.count == capacity {
            recordedEvents.removeFirst()
            droppedEventCount += 1
        }
        recordedEvents.append(event)
        streams.yield(event)
    }

    // MARK: - Events of loadables

    /// Records an event about `loadable` with its label and the time now.
    package func record(
        _ loadable: any PureLoadable, _ make: (_ label: String, _ time: Duration) -> LoadableEvent
    ) {
        let label = loadable.inspectorLabel
        if let syncable = loadable as? any SyncableLoadable {
            if targets[label]?.loadable !== syncable { targets[label] = WeakTarget(loadable: syncable) }
        }
        record(make(label, now))
    }

    /// A loadable moved from `old` to `new` state: a sync began or ended. A sync that ends in
    /// `idle` was cancelled (the owner tells a cancelled sync as `idle`, whatever state it went
    /// back to).
    package func stateChanged(
        _ loadable: any PureLoadable, from old: LoadableState, to new: LoadableState, error: (any Error)?
    ) {
        let id = ObjectIdentifier(loadable)
        if new == .syncing {
            syncStarts[id] = now
            syncStatuses[id] = nil
            record(loadable) { .syncStarted(label: $0, time: $1) }
            return
        }
        guard old == .syncing else { return }
        let start = syncStarts.removeValue(forKey: id)
        let status = syncStatuses.removeValue(forKey: id)
        let result: LoadableEvent.SyncResult
        switch new {
        case .didSyncSuccessfully: result = .succeeded
        case .didFailToSync: result = .failed(error.map { "\($0)" } ?? "unknown error")
        case .idle, .syncing: result = .cancelled
        }
        record(loadable) { label, time in
            let duration = start.map { time - $0 } ?? .zero
            return .syncEnded(label: label, time: time, duration: duration, result: result, status: status)
        }
    }

    /// The running sync of `loadable` is ending with HTTP status `status`: told before the state
    /// changes, so that the ``LoadableEvent/syncEnded(label:time:duration:result:status:)`` event
    /// carries it.
    package func noteSyncStatus(_ loadable: any PureLoadable, status: Int) {
        syncStatuses[ObjectIdentifier(loadable)] = status
    }

    // MARK: - Snapshot

    /// Every live store entry, outbox item and synced collection, now.
    public func snapshot() -> LoadableInspectorSnapshot {
        var snapshot = LoadableInspectorSnapshot(
            time: LoadableEvent.seconds(now), isOfflineSimulated: LoadableInspection.isOfflineSimulated)
        for source in LoadableInspection.liveSources() { source.addInspection(to: &snapshot) }
        snapshot.entries.sort { ($0.label, $0.key) < ($1.label, $1.key) }
        snapshot.collections.sort { $0.label < $1.label }
        return snapshot
    }

    // MARK: - Actions

    /// The labels an action can name now: store entries, collections, and the loadables the
    /// inspector has seen events of, sorted.
    public var actionLabels: [String] {
        var labels = Set(targets.compactMap { $0.value.loadable == nil ? nil : $0.key })
        for source in LoadableInspection.liveSources() { labels.formUnion(source.inspectorTargetLabels) }
        return labels.sorted()
    }

    /// Does `action`; returns `false` when it names a label that no live object has (nothing is
    /// done then).
    @discardableResult
    public func perform(_ action: LoadableInspectorAction) -> Bool {
        switch action {
        case .sync(let label):
            guard let target = target(labeled: label) else { return false }
            target.sync()
            return true
        case .invalidate(let label):
            guard let target = target(labeled: label) else { return false }
            target.invalidate()
            return true
        case .setOffline(let offline):
            LoadableInspection.setOfflineSimulated(offline)
            return true
        }
    }

    private func target(labeled label: String) -> (any SyncableLoadable)? {
        for source in LoadableInspection.liveSources() {
            if let target = source.inspectorTarget(labeled: label) { return target }
        }
        return targets[label]?.loadable
    }

    private struct WeakTarget {
        weak var loadable: (any SyncableLoadable)?
    }
}

/// The continuations of an inspector's ``LoadableInspector/events`` streams: finished when the
/// inspector is released (its `deinit` may run on any thread, hence the lock), dropped when their
/// reader stops.
private final class EventStreams: Sendable {
    private let continuations = Locked<[Int: AsyncStream<LoadableEvent>.Continuation]>([:])
    private let nextID = Locked(0)

    func add(_ continuation: AsyncStream<LoadableEvent>.Continuation) {
        let id = nextID.withLock { id in
            defer { id += 1 }
            return id
        }
        continuations.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.continuations.withLock { $0.removeValue(forKey: id) }
        }
    }

    func yield(_ event: LoadableEvent) {
        for continuation in continuations.withLock({ Array($0.values) }) { continuation.yield(event) }
    }

    deinit {
        for continuation in continuations.withLock({ Array($0.values) }) { continuation.finish() }
    }
}

// MARK: - Labels

extension PureLoadable {
    /// The name of this loadable in a ``LoadableInspector``'s events and snapshot, and in the
    /// actions of its page.
    ///
    /// By default the type, with the key when the loadable belongs to a store or is persisted
    /// (`AsyncLoadable<Post>[posts/7]`). Set it to name the loadable yourself; setting it on a
    /// type of your own that has no core of the package does nothing.
    public var inspectorLabel: String {
        get {
            if let core = loadableCapabilities.owner?.core {
                if let note = core.subscriber(InspectorLabelNote.self) { return note.label }
                if let key = core.inspectorKey { return "\(type(of: self))[\(key)]" }
            }
            return "\(type(of: self))"
        }
        set {
            guard let core = loadableCapabilities.owner?.core else { return }
            if let note = core.subscriber(InspectorLabelNote.self) {
                note.label = newValue
            } else {
                core.subscribe(InspectorLabelNote(label: newValue))
            }
        }
    }
}

/// A label set on a loadable, kept as a subscriber of its core that asks for no event: a loadable
/// never labelled pays no byte for it.
@MainActor
final class InspectorLabelNote: LoadableCoreSubscriber {
    var label: String
    init(label: String) { self.label = label }
    var coreEvents: LoadableCoreEvent.Kinds { [] }
    func loadableCoreDidEmit(_ event: LoadableCoreEvent) {}
}

extension LoadableCore {
    /// The key the first subscriber that knows one gives this loadable (a store's entry, a
    /// persistence), for its default label.
    var inspectorKey: String? {
        guard let extras else { return nil }
        if let keyed = extras.subscribers.first as? any LoadableInspectorKeyed { return keyed.inspectorKey }
        for subscriber in extras.subscribers.rest {
            if let keyed = subscriber as? any LoadableInspectorKeyed { return keyed.inspectorKey }
        }
        return nil
    }
}

/// A core subscriber that knows its loadable's key (a store's entry, a persistence): the key goes
/// into the loadable's default ``PureLoadable/inspectorLabel``.
@MainActor
package protocol LoadableInspectorKeyed {
    /// The key, as text.
    var inspectorKey: String { get }
}

// MARK: - The hook

/// Where the package's code finds the attached inspector, and what the inspector reads a
/// snapshot from.
@MainActor
package enum LoadableInspection {
    /// The attached inspector. An event site reads it and does nothing more when it is `nil`:
    /// a load and a compare, no call.
    @exclusivity(unchecked) package static var inspector: LoadableInspector?

    /// Whether the inspector page asked to simulate being offline.
    package private(set) static var isOfflineSimulated = false

    /// The objects a snapshot reads, held weakly.
    private static var sources: [WeakSource] = []
    /// The activity monitors that simulate being offline when asked, held weakly.
    private static var offlineSwitches: [WeakOfflineSwitch] = []

    /// Adds `source` to what ``LoadableInspector/snapshot()`` reads, for as long as it lives.
    package static func register(_ source: any LoadableInspectorSource) {
        sources.removeAll { $0.source == nil }
        sources.append(WeakSource(source: source))
    }

    /// The live sources, in the order they registered.
    static func liveSources() -> [any LoadableInspectorSource] {
        sources.removeAll { $0.source == nil }
        return sources.compactMap(\.source)
    }

    /// Adds `offlineSwitch` to what ``LoadableInspectorAction/setOffline(_:)`` reaches, for as
    /// long as it lives; it is told at once when offline is being simulated now.
    package static func register(_ offlineSwitch: any LoadableInspectorOfflineSwitch) {
        offlineSwitches.removeAll { $0.offlineSwitch == nil }
        offlineSwitches.append(WeakOfflineSwitch(offlineSwitch: offlineSwitch))
        if isOfflineSimulated { offlineSwitch.inspectorSimulateOffline(true) }
    }

    static func setOfflineSimulated(_ offline: Bool) {
        guard offline != isOfflineSimulated else { return }
        isOfflineSimulated = offline
        offlineSwitches.removeAll { $0.offlineSwitch == nil }
        for offlineSwitch in offlineSwitches.compactMap(\.offlineSwitch) {
            offlineSwitch.inspectorSimulateOffline(offline)
        }
    }

    private struct WeakSource {
        weak var source: (any LoadableInspectorSource)?
    }

    private struct WeakOfflineSwitch {
        weak var offlineSwitch: (any LoadableInspectorOfflineSwitch)?
    }
}

/// Something a ``LoadableInspector/snapshot()`` reads: a store, an outbox, a synced collection.
@MainActor
package protocol LoadableInspectorSource: AnyObject {
    /// Adds what it holds now to `snapshot`.
    func addInspection(to snapshot: inout LoadableInspectorSnapshot)
    /// The labels of the loadables an action may reach through it.
    var inspectorTargetLabels: [String] { get }
    /// Its loadable labelled `label`, if it has one, for an action.
    func inspectorTarget(labeled label: String) -> (any SyncableLoadable)?
}

/// Something that can simulate being offline for the inspector page (an activity monitor).
@MainActor
package protocol LoadableInspectorOfflineSwitch: AnyObject {
    /// Starts (`true`) or ends (`false`) simulating an unreachable network.
    func inspectorSimulateOffline(_ offline: Bool)
}

// MARK: - JSON Lines

extension LoadableEvent {
    /// The event as one line of JSON, keys in a fixed order: `kind`, `label`, `time`, then the
    /// case's fields.
    var jsonLine: String {
        let fields = self.fields
        var line = "{\"kind\":\"\(fields.kind.rawValue)\",\"label\":"
        Self.appendJSONString(fields.label, to: &line)
        line += ",\"time\":" + Self.jsonSeconds(fields.time)
        func add(_ name: String, _ value: String?) {
            guard let value else { return }
            line += ",\"\(name)\":" + value
        }
        func string(_ value: String?) -> String? {
            guard let value else { return nil }
            var text = ""
            Self.appendJSONString(value, to: &text)
            return text
        }
        add("duration", fields.duration.map(Self.jsonSeconds))
        add("result", string(fields.result))
        add("error", string(fields.error))
        add("status", fields.status.map { "\($0)" })
        add("delay", fields.delay.map(Self.jsonSeconds))
        add("cause", string(fields.cause?.rawValue))
        add("alarm", string(fields.alarm?.rawValue))
        add("leases", fields.leases.map { "\($0)" })
        add("deferred", fields.deferred.map { "\($0)" })
        add("found", fields.found.map { "\($0)" })
        add("item", string(fields.item))
        add("outcome", string(fields.outcome))
        add("changes", fields.changes.map { "\($0)" })
        add("record", string(fields.record))
        add("reason", string(fields.reason?.rawValue))
        line += "}"
        return line
    }

    /// Seconds to the microsecond, in plain decimal (`1.25`, `0.000001`, `3`).
    static func jsonSeconds(_ seconds: Double) -> String {
        let micros = Int64((seconds * 1_000_000).rounded())
        let sign = micros < 0 ? "-" : ""
        let magnitude = micros.magnitude
        let whole = magnitude / 1_000_000
        var fraction = magnitude % 1_000_000
        guard fraction != 0 else { return "\(sign)\(whole)" }
        var digits = 6
        while fraction % 10 == 0 {
            fraction /= 10
            digits -= 1
        }
        let text = String(fraction)
        return "\(sign)\(whole)." + String(repeating: "0", count: digits - text.count) + text
    }

    /// Appends `string` as a JSON string literal, quotes included.
    static func appendJSONString(_ string: String, to text: inout String) {
        text += "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: text.unicodeScalars.append(scalar)
            }
        }
        text += "\""
    }
}
