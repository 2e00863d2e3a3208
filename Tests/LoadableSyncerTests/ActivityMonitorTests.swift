import LoadableSupport
import LoadableSyncer
import LoadableTestSupport
import Observation
import Testing

@MainActor
@Suite struct ActivityMonitorTests {
    @Test("A new monitor starts active and online, or as told")
    func defaults() {
        let monitor = ActivityMonitor()
        #expect(monitor.isActive)
        #expect(monitor.connectivity == .online)
        let other = ActivityMonitor(isActive: false, connectivity: .unknown)
        #expect(!other.isActive)
        #expect(other.connectivity == .unknown)
    }

    #if !canImport(Network) && !canImport(UIKit) && !canImport(AppKit)
        @Test("Where no system framework sets it (Linux), the system monitor is active and online")
        func systemOnLinux() {
            #expect(ActivityMonitor.system.isActive)
            #expect(ActivityMonitor.system.connectivity == .online)
            #expect(ActivityMonitor.system === ActivityMonitor.system)
        }
    #endif

    @Test("Observation sees each property change, and not a set to the same value")
    func observation() {
        let monitor = ActivityMonitor()
        for change in [{ monitor.isActive = false }, { monitor.connectivity = .offline }] {
            let changes = Locked(0)
            withObservationTracking {
                _ = monitor.isActive
                _ = monitor.connectivity
            } onChange: {
                changes.withLock { $0 += 1 }
            }
            monitor.isActive = monitor.isActive
            monitor.connectivity = monitor.connectivity
            #expect(changes.withLock { $0 } == 0)
            change()
            #expect(changes.withLock { $0 } == 1)
        }
    }

    @Test("Connectivity descriptions", arguments: NetworkConnectivity.allCases)
    func descriptions(connectivity: NetworkConnectivity) {
        let names: [NetworkConnectivity: String] = [.online: "online", .offline: "offline", .unknown: "unknown"]
        #expect("\(connectivity)" == names[connectivity])
    }
}
