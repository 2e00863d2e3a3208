#if (canImport(UIKit) && !os(watchOS)) || canImport(AppKit)
    internal import Foundation

    // The names' raw values, so that no main-actor-isolated UIKit/AppKit API is touched here.
    #if canImport(UIKit)
        /// `UIApplication.didBecomeActiveNotification`.
        private let didBecomeActiveNotification = Notification.Name("UIApplicationDidBecomeActiveNotification")
    #else
        /// `NSApplication.didBecomeActiveNotification`.
        private let didBecomeActiveNotification = Notification.Name("NSApplicationDidBecomeActiveNotification")
    #endif
#endif

/// Calls a handler on the main actor each time the app becomes active, where the platform has such
/// a notification (UIKit, AppKit); does nothing elsewhere (Linux, watchOS).
///
/// The observation ends when this object is released.
final class AppActivationObserver {
    #if (canImport(UIKit) && !os(watchOS)) || canImport(AppKit)
        private let token: any NSObjectProtocol

        init(_ handler: @escaping @MainActor @Sendable () -> Void) {
            token = NotificationCenter.default.addObserver(
                forName: didBecomeActiveNotification,
                object: nil,
                queue: .main
            ) { _ in
                // The notification is delivered on the main queue (`queue: .main`), which the main
                // actor runs on, so this cannot fail.
                MainActor.assumeIsolated { handler() }
            }
        }

        deinit {
            NotificationCenter.default.removeObserver(token)
        }
    #else
        init(_ handler: @escaping @MainActor @Sendable () -> Void) {}
    #endif
}
