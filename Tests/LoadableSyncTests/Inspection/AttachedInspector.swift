import Foundation
import Loadable
import LoadableTestSupport
import LoadableTesting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Runs `body` with a new inspector on `clock` attached, and detaches it after.
///
/// The attached inspector is one for the whole process, and every test target runs in that one
/// process, in parallel: an inspector attached by another test would take this one's events.
/// So `body` runs while holding a lock of the process (an exclusive `flock` of the test
/// executable), which every inspector test of the package's targets goes through; a test waiting
/// for it gives the main actor and the executor turns, so the holder goes on.
@MainActor
func withAttachedInspector<Result>(
    clock: ManualClock, _ body: (LoadableInspector) async throws -> Result
) async rethrows -> Result {
    let lock = await InspectorTestLock.acquire()
    let inspector = LoadableInspector(clock: clock)
    inspector.attach()
    defer {
        inspector.detach()
        lock.release()
    }
    return try await body(inspector)
}

/// The process's inspector test lock: an exclusive `flock` of the test executable, taken without
/// blocking a thread.
struct InspectorTestLock {
    private let descriptor: Int32

    @MainActor
    static func acquire() async -> InspectorTestLock {
        let path = Bundle.main.executablePath ?? CommandLine.arguments[0]
        let descriptor = open(path, O_RDONLY)
        precondition(descriptor >= 0, "cannot open \(path) to lock it")
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            await Task.yield()
            await Task.detached {}.value
        }
        return InspectorTestLock(descriptor: descriptor)
    }

    func release() {
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }
}

extension LoadableInspector {
    /// The recorded events about `label`: the inspector may record other tests' events too.
    func events(of label: String) -> [LoadableEvent] {
        recordedEvents.filter { $0.label == label }
    }
}
