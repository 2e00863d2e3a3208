/// What a loadable's core tells the parts of the package that attach to a loadable (persistence,
/// a store's entry, a chain): the core knows none of them, they subscribe to the events they need.
///
/// Events are told on the main actor, after the core stored the change and before observers are
/// notified; a subscriber must not run code of the app (except on
/// ``observedChanged(isObserved:)``, which is told outside any change).
package enum LoadableCoreEvent: Equatable, Sendable {
    /// A sync confirmed the contents without changing them (a load's `LoadResult.confirmed`, such
    /// as an HTTP `304`; a `setDidSyncSuccessfully()` without contents): the age restarts, the
    /// base is the same, its metadata may have changed. What persistence touches (a new save date
    /// and the metadata, no new contents). A change of the base is
    /// ``baseContentsChanged(origin:)`` instead, which confirms too; contents restored from a
    /// cache are not confirmed now (their age is the cache's).
    case contentsConfirmed
    /// The base contents changed, and count as confirmed now: a successful sync, a write of
    /// contents, a committed optimistic change (not a restore, not an optimistic layer, not an
    /// appended page). What persistence saves.
    case baseContentsChanged(origin: BaseContentsOrigin)
    /// The state changed (it is stored; the error, if any, too).
    case stateChanged(from: LoadableState, to: LoadableState)
    /// The first use began (`true`) or the last one ended (`false`).
    case useChanged(isInUse: Bool)
    /// The first observer arrived (`true`) or the last one left (`false`), told after the
    /// observers changed and before the loadable's `didAddFirstObserver()` or
    /// `didRemoveLastObserver()`: what work that runs only while someone watches follows (an
    /// autosync's timer). Told outside any change, so a subscriber may sync the loadable.
    case observedChanged(isObserved: Bool)

    /// Event kinds, as a set: what a subscriber asks for.
    package struct Kinds: OptionSet, Sendable {
        package var rawValue: UInt8
        package init(rawValue: UInt8) { self.rawValue = rawValue }

        /// ``LoadableCoreEvent/contentsConfirmed``.
        package static let contentsConfirmed = Kinds(rawValue: 1)
        /// ``LoadableCoreEvent/baseContentsChanged``.
        package static let baseContentsChanged = Kinds(rawValue: 2)
        /// ``LoadableCoreEvent/stateChanged(from:to:)``.
        package static let stateChanged = Kinds(rawValue: 4)
        /// ``LoadableCoreEvent/useChanged(isInUse:)``.
        package static let useChanged = Kinds(rawValue: 8)
        /// ``LoadableCoreEvent/observedChanged(isObserved:)``.
        package static let observedChanged = Kinds(rawValue: 16)
    }

    /// The kind of this event.
    package var kind: Kinds {
        switch self {
        case .contentsConfirmed: .contentsConfirmed
        case .baseContentsChanged: .baseContentsChanged
        case .stateChanged: .stateChanged
        case .useChanged: .useChanged
        case .observedChanged: .observedChanged
        }
    }
}

/// Where new base contents came from: what an HTTP loadable's validators may describe.
package enum BaseContentsOrigin: Equatable, Sendable {
    /// The server: a successful sync, or a committed change reconciled with the server's answer.
    case server
    /// The app: `setContents`, `updateContents`, a committed change applied as it was shown (a
    /// `mutate` without `reconcile`, an outbox item joining). The server may not have these
    /// contents.
    case local
}

/// Something attached to a loadable that follows some of its ``LoadableCoreEvent``s.
///
/// The core holds its subscribers strongly, so a subscriber lives as long as the loadable unless
/// it unsubscribes: one that must not keep itself alive through the loadable (a chain subscribed
/// to its own core, a store that owns the loadable) holds what it tells weakly. A subscription
/// ends with the loadable; there is no "released" event, since a loadable may be released on any
/// thread.
@MainActor
package protocol LoadableCoreSubscriber: AnyObject {
    /// The kinds of event it is told; read once, when it subscribes.
    var coreEvents: LoadableCoreEvent.Kinds { get }
    /// Tells it of one event.
    func loadableCoreDidEmit(_ event: LoadableCoreEvent)
}

extension LoadableCore {
    /// Tells `subscriber` of the events it asks for from now on (see ``LoadableCoreSubscriber``).
    package func subscribe(_ subscriber: any LoadableCoreSubscriber) {
        let extras = extrasForWriting
        extras.subscribers.append(subscriber)
        extras.subscribedEvents.formUnion(subscriber.coreEvents)
    }

    /// Stops telling `subscriber` anything; does nothing when it is not subscribed.
    package func unsubscribe(_ subscriber: any LoadableCoreSubscriber) {
        guard let extras, extras.subscribers.remove(subscriber) else { return }
        extras.subscribedEvents = extras.subscribers.events
    }

    /// The subscriber of type `type`, if one is subscribed: how a client finds its own
    /// attachment (a loadable's persistence, the store that owns it).
    package func subscriber<Subscriber>(_ type: Subscriber.Type) -> Subscriber? {
        guard let extras else { return nil }
        if let match = extras.subscribers.first as? Subscriber { return match }
        for subscriber in extras.subscribers.rest {
            if let match = subscriber as? Subscriber { return match }
        }
        return nil
    }

    /// Whether some subscriber matches `condition`. Not generic, unlike ``subscriber(_:)``: code
    /// that runs unspecialized looks up no type metadata to ask (a class check such as
    /// `{ $0 is SomeBaseClass }` walks the superclass chain only).
    package func containsSubscriber(where condition: (any LoadableCoreSubscriber) -> Bool) -> Bool {
        guard let extras else { return false }
        if let first = extras.subscribers.first, condition(first) { return true }
        return extras.subscribers.rest.contains(where: condition)
    }

    /// Whether a subscriber of exactly `type` is subscribed. Not generic, unlike
    /// ``subscriber(_:)``: code that runs unspecialized looks up no type metadata to ask.
    package func hasSubscriber(ofType type: any LoadableCoreSubscriber.Type) -> Bool {
        guard let extras else { return false }
        let wanted = ObjectIdentifier(type)
        if let first = extras.subscribers.first, ObjectIdentifier(Swift.type(of: first)) == wanted { return true }
        return extras.subscribers.rest.contains { ObjectIdentifier(Swift.type(of: $0)) == wanted }
    }

    /// Tells the subscribers that asked for it of `event`.
    ///
    /// Costs one check of a byte when nobody asked for that kind.
    @inline(__always)
    package func emit(_ event: LoadableCoreEvent) {
        guard let extras, extras.subscribedEvents.contains(event.kind) else { return }
        emitToSubscribers(event, extras: extras)
    }

    @inline(never)
    private func emitToSubscribers(_ event: LoadableCoreEvent, extras: LoadableCoreExtras) {
        let kind = event.kind
        // A copy: a subscriber may unsubscribe (itself or another) while it is told.
        let subscribers = extras.subscribers
        if let first = subscribers.first, first.coreEvents.contains(kind) { first.loadableCoreDidEmit(event) }
        for subscriber in subscribers.rest where subscriber.coreEvents.contains(kind) {
            subscriber.loadableCoreDidEmit(event)
        }
    }
}

/// A core's subscribers, in the order they subscribed: the first one inline, so that a loadable
/// with one subscriber (a store's entry, a persisted loadable) allocates nothing for it.
package struct LoadableCoreSubscriberList {
    /// The first subscriber.
    private(set) var first: (any LoadableCoreSubscriber)?
    /// The others, in order.
    private(set) var rest: [any LoadableCoreSubscriber] = []

    /// Creates an empty list.
    init() {}

    /// The kinds of event some subscriber asks for.
    @MainActor var events: LoadableCoreEvent.Kinds {
        rest.reduce(into: first?.coreEvents ?? []) { $0.formUnion($1.coreEvents) }
    }

    /// Adds `subscriber` last.
    mutating func append(_ subscriber: any LoadableCoreSubscriber) {
        if first == nil { first = subscriber } else { rest.append(subscriber) }
    }

    /// Removes `subscriber`; returns `false` if it was not in the list.
    mutating func remove(_ subscriber: any LoadableCoreSubscriber) -> Bool {
        if let first, first === subscriber {
            self.first = rest.isEmpty ? nil : rest.removeFirst()
            return true
        }
        guard let index = rest.firstIndex(where: { $0 === subscriber }) else { return false }
        rest.remove(at: index)
        return true
    }
}
