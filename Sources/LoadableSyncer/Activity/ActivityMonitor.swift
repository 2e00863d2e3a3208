public import Observation

/// Whether the network can be reached, as far as the app knows.
///
/// ```swift
/// monitor.connectivity = healthCheckPassed ? .online : .offline
/// ```
///
/// ``unknown`` behaves as ``online``: syncers sync, and find out.
public enum NetworkConnectivity: Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// The network can be reached.
    case online
    /// The network cannot be reached: syncers hold their syncs back until it can.
    case offline
    /// Nobody knows yet (the system has not answered); treated as ``online``.
    case unknown

    /// `online`, `offline` or `unknown`.
    public var description: String {
        switch self {
        case .online: "online"
        case .offline: "offline"
        case .unknown: "unknown"
        }
    }
}

/// Whether the app is in the foreground and the network can be reached: what ``LoadableSyncer``
/// and ``AutosyncLoadable`` follow to pause while nobody looks or nothing can succeed, and to
/// catch up when that ends.
///
/// Syncing goes ahead while the monitor ``isActive`` and its ``connectivity`` is not
/// ``NetworkConnectivity/offline`` (``NetworkConnectivity/unknown`` counts as online). Otherwise
/// the syncers that follow it pause their timers; when syncing may go ahead again they sync what
/// failed or fell due while they waited (the rules are in the `Syncing` guide).
///
/// There are two kinds of monitors:
/// - ``system``, one shared monitor that the syncers follow unless told otherwise. On Apple
///   platforms it follows the app's activation (UIKit: inactive from
///   `didEnterBackgroundNotification` to `didBecomeActiveNotification`; AppKit: inactive while the
///   app is hidden) and one `NWPathMonitor` (`Network` framework). That wiring is compiled only
///   where those frameworks exist. On Linux nothing sets it: it stays active and online unless the
///   app sets it.
/// - `ActivityMonitor()`, a monitor only the app changes: a Linux service feeds it from its own
///   health checks, a test drives it.
///
/// ```swift
/// let activity = ActivityMonitor()
/// let syncer = LoadableSyncer(feed, timeoutPolicy: policy, activity: activity)
/// activity.connectivity = .offline  // a failure now waits for the network instead of retrying
/// activity.connectivity = .online   // a failed feed syncs at once, its backoff starts over
/// ```
///
/// A failure whose error gave a `Retry-After` hint is the exception: the catch-up retries it at
/// the failure's time plus the hint, never before (see ``LoadableSyncer``).
///
/// Setting a property to the value it has does nothing. A change is seen by Observation
/// (`withObservationTracking`, SwiftUI) and by every syncer that follows the monitor, at once, in
/// the order they were made; a change made while they are being told is told to them next.
///
/// Isolated to the main actor.
@MainActor
public final class ActivityMonitor: Observable {
    /// Whether the app is in the foreground (active). Syncers pause while it is `false`.
    public var isActive: Bool {
        get {
            registrar.access(self, keyPath: \.isActive)
            return storedIsActive
        }
        set {
            guard newValue != storedIsActive else { return }
            registrar.withMutation(of: self, keyPath: \.isActive) { storedIsActive = newValue }
            tellFollowers()
        }
    }

    /// Whether the network can be reached. Syncers pause while it is
    /// ``NetworkConnectivity/offline``.
    ///
    /// While a `LoadableInspector` simulates being offline (its page's "go offline" action), it
    /// reads ``NetworkConnectivity/offline`` whatever was set; what is set meanwhile is kept, and
    /// read again when the simulation ends.
    public var connectivity: NetworkConnectivity {
        get {
            registrar.access(self, keyPath: \.connectivity)
            return storedConnectivity
        }
        set {
            guard newValue != sourceConnectivity else { return }
            sourceConnectivity = newValue
            updateConnectivity()
        }
    }

    /// Creates a monitor that only the app changes, active and online unless told otherwise.
    ///
    /// The monitor makes itself known to `LoadableInspector`, for the inspector page's
    /// simulate-offline action (see ``connectivity``); that changes nothing until an inspector
    /// simulates being offline.
    ///
    /// - Parameters:
    ///   - isActive: Whether the app starts in the foreground; `true` by default.
    ///   - connectivity: The connectivity to start with; ``NetworkConnectivity/online`` by default.
    public init(isActive: Bool = true, connectivity: NetworkConnectivity = .online) {
        storedIsActive = isActive
        storedConnectivity = connectivity
        sourceConnectivity = connectivity
        LoadableInspection.register(self as any LoadableInspectorOfflineSwitch)
    }

    /// The monitor that syncers follow unless given another: on Apple platforms, the app's
    /// activation and the system's network path; on Linux, active and online unless the app sets
    /// it.
    ///
    /// ```swift
    /// // A Linux service that knows better than the default:
    /// ActivityMonitor.system.connectivity = upstreamHealthy ? .online : .offline
    /// ```
    ///
    /// Made on first use (on Apple platforms, that is when its wiring starts).
    public static let system: ActivityMonitor = {
        let monitor = ActivityMonitor(connectivity: SystemActivitySource.startingConnectivity)
        monitor.source = SystemActivitySource(monitor)
        return monitor
    }()

    // MARK: - For the syncers

    /// Whether syncing may go ahead: active, and not offline. Read without Observation tracking.
    package var allowsSyncing: Bool { storedIsActive && storedConnectivity != .offline }

    /// Whether the network is known to be unreachable. Read without Observation tracking.
    package var isOffline: Bool { storedConnectivity == .offline }

    /// Adds `follower`, held weakly, to the objects told of every change.
    ///
    /// - Complexity: Amortized O(1): released followers are dropped when the list has doubled since
    ///   it was last swept.
    package func addFollower(_ follower: any ActivityMonitorFollower) {
        if followers.count >= sweepThreshold {
            followers.removeAll { $0.follower == nil }
            sweepThreshold = Swift.max(Self.smallestSweepThreshold, followers.count * 2)
        }
        followers.append(WeakFollower(follower: follower))
    }

    // MARK: - Private

    private var storedIsActive: Bool
    /// The connectivity in force: ``sourceConnectivity``, or offline while an inspector simulates
    /// it.
    private var storedConnectivity: NetworkConnectivity
    /// The connectivity the app (or the system's wiring) set last.
    private var sourceConnectivity: NetworkConnectivity
    /// Whether a `LoadableInspector` simulates being offline.
    private var isSimulatingOffline = false
    private let registrar = ObservationRegistrar()
    /// The syncers and autosync loadables that follow this monitor, in the order they started.
    private var followers: [WeakFollower] = []
    /// The follower count at which ``addFollower(_:)`` sweeps released followers out.
    private var sweepThreshold = smallestSweepThreshold
    private static let smallestSweepThreshold = 16
    /// Set while followers are being told of a change; a change meanwhile sets ``hasQueuedRound``.
    private var isTellingFollowers = false
    private var hasQueuedRound = false
    /// What sets the system monitor (kept for as long as the monitor lives).
    private var source: SystemActivitySource?

    /// Sets the connectivity in force from ``sourceConnectivity`` and the simulation; tells
    /// Observation and the followers when it changed.
    private func updateConnectivity() {
        let connectivity = isSimulatingOffline ? .offline : sourceConnectivity
        guard connectivity != storedConnectivity else { return }
        registrar.withMutation(of: self, keyPath: \.connectivity) { storedConnectivity = connectivity }
        tellFollowers()
    }

    /// Tells every follower, in order; a change made by one of them is told in one more round
    /// after this one (followers read the monitor's current values, so one round is enough however
    /// many changes were made during it).
    private func tellFollowers() {
        guard !isTellingFollowers else {
            hasQueuedRound = true
            return
        }
        isTellingFollowers = true
        defer { isTellingFollowers = false }
        repeat {
            hasQueuedRound = false
            // A copy: a follower may add followers (made during the round, they read the monitor
            // as they start and need no telling).
            for entry in followers {
                entry.follower?.activityDidChange()
            }
        } while hasQueuedRound
    }
}

extension ActivityMonitor: LoadableInspectorOfflineSwitch {
    /// Starts or ends simulating an unreachable network, for the inspector page's simulate-offline
    /// action: while it lasts the monitor reads offline (as if its source said so), and its
    /// followers pause; ending it restores what the source says now.
    package func inspectorSimulateOffline(_ offline: Bool) {
        guard offline != isSimulatingOffline else { return }
        isSimulatingOffline = offline
        updateConnectivity()
    }

    /// Records that automatic syncing of `loadable` paused (`paused`) or resumed: paused because
    /// the network is unreachable when it is, else because the app is inactive.
    package func inspectPause(_ paused: Bool, of loadable: any PureLoadable, _ inspector: LoadableInspector) {
        guard paused else {
            inspector.record(loadable) { .resumed(label: $0, time: $1) }
            return
        }
        let reason: LoadableEvent.PauseReason = isOffline ? .offline : .inactive
        inspector.record(loadable) { .paused(label: $0, time: $1, reason: reason) }
    }
}

/// An object that follows an ``ActivityMonitor`` (a syncer, an autosync loadable).
@MainActor
package protocol ActivityMonitorFollower: AnyObject {
    /// The monitor changed; read its ``ActivityMonitor/allowsSyncing`` and
    /// ``ActivityMonitor/isOffline``. Called again after each change; a call without a change that
    /// matters to the follower must do nothing.
    func activityDidChange()
}

/// A follower, held weakly (a follower released on any thread simply becomes `nil`).
private struct WeakFollower {
    weak var follower: (any ActivityMonitorFollower)?
}
