#if (canImport(UIKit) && !os(watchOS)) || canImport(AppKit)
    internal import Foundation

    // The names' raw values, so that no main-actor-isolated UIKit/AppKit API is touched here. Each
    // notification sets `isActive` to the value next to it.
    #if canImport(UIKit)
        /// `UIApplication.didEnterBackgroundNotification` (inactive) and
        /// `UIApplication.didBecomeActiveNotification` (active).
        private let activationNotifications: [(name: Notification.Name, isActive: Bool)] = [
            (Notification.Name("UIApplicationDidEnterBackgroundNotification"), false),
            (Notification.Name("UIApplicationDidBecomeActiveNotification"), true),
        ]
    #else
        /// `NSApplication.didHideNotification` (inactive), `NSApplication.didUnhideNotification`
        /// and `NSApplication.didBecomeActiveNotification` (active).
        private let activationNotifications: [(name: Notification.Name, isActive: Bool)] = [
            (Notification.Name("NSApplicationDidHideNotification"), false),
            (Notification.Name("NSApplicationDidUnhideNotification"), true),
            (Notification.Name("NSApplicationDidBecomeActiveNotification"), true),
        ]
    #endif
#endif

#if canImport(Network)
    internal import Dispatch
    internal import Network
#endif

/// What sets ``ActivityMonitor/system``: the app's activation notifications where UIKit or AppKit
/// exist, and one `NWPathMonitor` where the `Network` framework exists. Elsewhere (Linux) it does
/// nothing, and the monitor stays as the app sets it.
///
/// It lives as long as the system monitor, that is as long as the process: nothing is ever
/// removed.
@MainActor
final class SystemActivitySource {
    /// The connectivity the system monitor starts with: ``NetworkConnectivity/unknown`` until the
    /// path monitor's first answer where there is one, ``NetworkConnectivity/online`` elsewhere.
    static var startingConnectivity: NetworkConnectivity {
        #if canImport(Network)
            .unknown
        #else
            .online
        #endif
    }

    #if (canImport(UIKit) && !os(watchOS)) || canImport(AppKit)
        private var tokens: [any NSObjectProtocol] = []
    #endif
    #if canImport(Network)
        private let pathMonitor = NWPathMonitor()
    #endif

    init(_ monitor: ActivityMonitor) {
        #if (canImport(UIKit) && !os(watchOS)) || canImport(AppKit)
            for (name, isActive) in activationNotifications {
                let token = NotificationCenter.default.addObserver(forName: name, object: nil, queue: .main) {
                    [weak monitor] _ in
                    // Delivered on the main queue (`queue: .main`), which the main actor runs on,
                    // so this cannot fail.
                    MainActor.assumeIsolated { monitor?.isActive = isActive }
                }
                tokens.append(token)
            }
        #endif
        #if canImport(Network)
            pathMonitor.pathUpdateHandler = { [weak monitor] path in
                let connectivity: NetworkConnectivity =
                    switch path.status {
                    case .satisfied: .online
                    case .unsatisfied: .offline
                    // `.requiresConnection`: a connection may bring it up (VPN on demand).
                    default: .unknown
                    }
                // The monitor runs its handler on the main queue (`start(queue: .main)`), which
                // the main actor runs on, so this cannot fail.
                MainActor.assumeIsolated { monitor?.connectivity = connectivity }
            }
            pathMonitor.start(queue: .main)
        #endif
    }
}
