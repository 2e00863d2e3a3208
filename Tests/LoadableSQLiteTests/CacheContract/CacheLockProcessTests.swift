import Foundation
import LoadableCaching
import LoadableSQLite
import LoadableTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The locks and updates of the file and SQLite caches between real processes: a child is refused
/// a lock the parent holds and takes it once released; a child that dies holding a lock (killed
/// with SIGKILL, or exiting without a release) leaves it free; and two children and the parent
/// that append to one entry through `update(key:_:)` at the same time lose no append. The tests
/// run one at a time; every wait is bounded, and none sleeps.
@Suite("FileLoadableCache and SQLiteLoadableCache: locks and updates across processes", .serialized)
struct CacheLockProcessTests {
    static let kinds = [LockCacheKind.file, .sqlite]

    // MARK: - Locks

    @Test(
        "a lock the parent holds is refused to a child (other names are not); released, a child takes it",
        arguments: kinds)
    func heldAcrossProcesses(kind: LockCacheKind) async throws {
        let subject = try LockSubject(kind)
        defer { subject.cleanUp() }
        let lock = try #require(try await subject.cache.tryLock(key: "outbox"))
        let refused = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
            [kind = kind.rawValue as String, directory = subject.directory.path as String] in
            try await CacheLockProcessTests.tryLocks(kind: kind, directory: directory, expectingHeld: true)
        }
        ChildReport.recordFailures(of: refused, context: "while the parent holds the lock")
        lock.release()
        let taken = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
            [kind = kind.rawValue as String, directory = subject.directory.path as String] in
            try await CacheLockProcessTests.tryLocks(kind: kind, directory: directory, expectingHeld: false)
        }
        ChildReport.recordFailures(of: taken, context: "after the parent released the lock")
    }

    @Test(
        "a child that dies holding a lock frees it: killed with SIGKILL, or exiting without a release",
        arguments: kinds, [true, false])
    func childDiesHolding(kind: LockCacheKind, killed: Bool) async throws {
        let subject = try LockSubject(kind)
        defer { subject.cleanUp() }
        let ending: ExitTest.Condition = killed ? .signal(SIGKILL) : .success
        let result = await #expect(processExitsWith: ending, observing: [\.standardOutputContent]) {
            [kind = kind.rawValue as String, directory = subject.directory.path as String, killed = killed as Bool] in
            try await CacheLockProcessTests.dieHoldingLock(kind: kind, directory: directory, killed: killed)
        }
        ChildReport.recordFailures(of: result, context: killed ? "killed" : "exited")
        let lock = try await subject.cache.tryLock(key: "outbox")
        #expect(lock != nil, "the lock of a child that \(killed ? "was killed" : "exited") is still held")
        withExtendedLifetime(lock) {}
    }

    /// The child: the lock `outbox` is refused when `expectingHeld` (the parent holds it), and
    /// taken otherwise; the lock `other` is taken.
    static func tryLocks(kind: String, directory: String, expectingHeld: Bool) async throws {
        let cache = try Self.cache(kind: kind, directory: directory)
        let lock = try await cache.tryLock(key: "outbox")
        if expectingHeld && lock != nil { ChildReport.fail("the child took the lock the parent holds") }
        if !expectingHeld && lock == nil { ChildReport.fail("the child was refused a free lock") }
        if try await cache.tryLock(key: "other") == nil { ChildReport.fail("the child was refused another name") }
        withExtendedLifetime(lock) {}
    }

    /// The child: takes the lock `outbox`, checks that another object of its own is refused it,
    /// and dies holding it: by SIGKILL when `killed`, else by `exit(0)`. Exits with status 3 after
    /// reporting a failure.
    static func dieHoldingLock(kind: String, directory: String, killed: Bool) async throws {
        let cache = try Self.cache(kind: kind, directory: directory)
        guard let lock = try await cache.tryLock(key: "outbox") else {
            ChildReport.fail("the child was refused the lock")
            exit(3)
        }
        if try await Self.cache(kind: kind, directory: directory).tryLock(key: "outbox") != nil {
            ChildReport.fail("another object of the child took the lock the child holds")
            exit(3)
        }
        withExtendedLifetime(lock) {
            if killed { kill(getpid(), SIGKILL) }
            exit(0)
        }
    }

    // MARK: - Updates

    @Test(
        "two children and the parent append to one entry through update at the same time: no append is lost",
        arguments: kinds)
    func appendsTogether(kind: LockCacheKind) async throws {
        let subject = try LockSubject(kind)
        defer { subject.cleanUp() }
        let appends = StressScale.rounds(200)
        let (first, second, parent) = (UInt8(ascii: "a"), UInt8(ascii: "b"), UInt8(ascii: "p"))
        async let firstChild: Void = Self.runAppendingChild(
            kind: kind, directory: subject.directory, byte: first, otherByte: second, appends: appends)
        async let secondChild: Void = Self.runAppendingChild(
            kind: kind, directory: subject.directory, byte: second, otherByte: first, appends: appends)
        for _ in 0..<appends {
            try await subject.cache.update(key: "log") { append(parent, to: &$0) }
        }
        _ = await (firstChild, secondChild)
        let data = try await subject.cache.load(key: "log")?.data ?? Data()
        #expect(data.count { $0 == first } == appends)
        #expect(data.count { $0 == second } == appends)
        #expect(data.count { $0 == parent } == appends)
        #expect(data.count == 3 * appends)
    }

    /// Runs a child that appends `byte` `appends` times, the second time and after once the
    /// other child's `otherByte` is there.
    ///
    /// The two children, not the parent, wait for each other: Swift Testing reads a child's
    /// output on a thread of the parent's cooperative pool, blocking it until the child exits, so
    /// the parent's tasks may not run while children do. Nothing is observed but the exit status
    /// (a child's issues reach the parent by Swift Testing's own channel).
    static func runAppendingChild(
        kind: LockCacheKind, directory: URL, byte: UInt8, otherByte: UInt8, appends: Int
    ) async {
        await #expect(processExitsWith: .success) {
            [
                kind = kind.rawValue as String, directory = directory.path as String, byte = byte as UInt8,
                otherByte = otherByte as UInt8, appends = appends as Int
            ] in
            try await CacheLockProcessTests.appendAsChild(
                kind: kind, directory: directory, byte: byte, other: otherByte, appends: appends)
        }
    }

    /// The child: appends `byte` once, waits for the other child's first append (`other`), then
    /// appends the rest. Exits with status 3 when the other child's append does not come.
    static func appendAsChild(kind: String, directory: String, byte: UInt8, other: UInt8, appends: Int) async throws {
        let cache = try Self.cache(kind: kind, directory: directory)
        try await cache.update(key: "log") { append(byte, to: &$0) }
        guard try await Self.wait(until: other, in: cache) else {
            Issue.record("the other child's first append did not come within 120 s")
            exit(3)
        }
        for _ in 1..<appends {
            try await cache.update(key: "log") { append(byte, to: &$0) }
        }
    }

    /// Loads the entry `log` until its data holds `byte`: `false` if it does not within 120
    /// seconds (a process that never started, or stopped). Gives other tasks a turn between
    /// loads; never sleeps.
    static func wait(until byte: UInt8, in cache: any LoadableCache) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            if try await cache.load(key: "log")?.data.contains(byte) == true { return true }
            await Task.yield()
        }
        return false
    }

    // MARK: - Children

    /// The cache of kind `kind` (`file` or `sqlite`) in `directory`, as ``LockSubject`` makes it.
    static func cache(kind: String, directory: String) throws -> any LoadableCache {
        let kind = try #require(LockCacheKind(rawValue: kind))
        return try LockSubject.make(kind, directory: URL(fileURLWithPath: directory), maxBytes: nil)
    }
}
