import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableTestSupport
import LoadableTesting
import Testing

/// Model-based randomized tests of persistence: random sequences of steps on one key persisted
/// through a ``ScriptedPersistenceCache`` that holds every load and save, so that the test decides
/// when each of the cache's jobs completes. Steps: start a sync, a sync that succeeds with a
/// value, a sync that fails, `cancelSync()`, `setContents(_:)`, complete the next cache job,
/// relaunch (release the loadable and make a new one persisting the same key, which restores),
/// and `stop()`. The wall clock moves 1 s before every step.
///
/// The reference model is written from the rules of `persist`: a FIFO of the cache's jobs, whose
/// head is running (the test lets the queue start it before the next step) and whose tail is
/// waiting; a save replaces a save that is still waiting at the tail (no other job of the key was
/// queued after it), else it is appended; a save carries the contents and the wall-clock time of
/// its change. A restore reads the "disk" when it runs and applies only to the loadable that asked
/// for it, if it was not stopped, if its contents were not confirmed since (a successful sync,
/// `setContents`), and if the entry is no older than `maxRestoreAge`; it then notifies once and
/// sets the age. Saves are asked for only by confirmations of a persistence not stopped.
///
/// After every step the test compares the loadable's contents, state, age and notifications,
/// `isRestoring`, the disk (value and `savedAt`), the number of saves written, and the job the
/// cache holds (kind and value) with the head of the model's FIFO; at the end it drains the
/// queue, compares again, and checks that a released loadable and its persistence are gone.
@Suite("Persistence against a reference model")
@MainActor
struct PersistenceModelTests {
    /// The key every sequence persists.
    nonisolated static let key = "model"

    /// How a sequence starts.
    struct Configuration: CustomStringConvertible {
        /// Seconds; `nil`: any age restores.
        var maxRestoreAge: Int?
        /// The entry of the last launch: a value saved 2 s before the start.
        var initialValue: Int?

        var description: String {
            "maxRestoreAge \(maxRestoreAge.map { "\($0) s" } ?? "nil"), disk at start \(initialValue.map(String.init) ?? "empty")"
        }
    }

    /// One step of a sequence.
    enum Operation: Equatable, CustomStringConvertible {
        case startSync
        case succeed(Int)
        case fail
        case cancel
        case setContents(Int)
        case completeNextJob
        case relaunch
        case stop

        var description: String {
            switch self {
            case .startSync: "startSync"
            case .succeed(let value): "succeed(\(value))"
            case .fail: "fail"
            case .cancel: "cancel"
            case .setContents(let value): "setContents(\(value))"
            case .completeNextJob: "completeNextJob"
            case .relaunch: "relaunch"
            case .stop: "stop"
            }
        }
    }

    /// How often each rule was reached over all sequences.
    struct Coverage {
        var restoresApplied = 0
        var restoresDroppedAfterConfirmation = 0
        var restoresDroppedAfterStop = 0
        var restoresOfReleasedLoadables = 0
        var restoresTooOld = 0
        var restoresOfEmptyDisk = 0
        var savesCoalesced = 0
        var savesWritten = 0
        var savesAfterRelease = 0
        var changesAfterStop = 0

        mutating func add(_ other: Coverage) {
            restoresApplied += other.restoresApplied
            restoresDroppedAfterConfirmation += other.restoresDroppedAfterConfirmation
            restoresDroppedAfterStop += other.restoresDroppedAfterStop
            restoresOfReleasedLoadables += other.restoresOfReleasedLoadables
            restoresTooOld += other.restoresTooOld
            restoresOfEmptyDisk += other.restoresOfEmptyDisk
            savesCoalesced += other.savesCoalesced
            savesWritten += other.savesWritten
            savesAfterRelease += other.savesAfterRelease
            changesAfterStop += other.changesAfterStop
        }

        var counters: [(String, Int)] {
            [
                ("restores applied", restoresApplied),
                ("restores dropped after a confirmation", restoresDroppedAfterConfirmation),
                ("restores dropped after stop()", restoresDroppedAfterStop),
                ("restores of released loadables", restoresOfReleasedLoadables),
                ("restores of entries too old", restoresTooOld),
                ("restores of an empty disk", restoresOfEmptyDisk),
                ("saves coalesced", savesCoalesced),
                ("saves written", savesWritten),
                ("saves written after their loadable's release", savesAfterRelease),
                ("changes after stop()", changesAfterStop),
            ]
        }
    }

    // MARK: - The real persistence

    @MainActor final class Real {
        let configuration: Configuration
        let wall = PersistenceWallClock()
        let clock = ManualClock()
        let cache: ScriptedPersistenceCache
        var loadable: PersistedLoadable<Int>?
        var persistence: LoadablePersistence?
        var recorder: Recorder?

        init(_ configuration: Configuration) throws {
            self.configuration = configuration
            var entries: [String: CachedEntry] = [:]
            if let value = configuration.initialValue {
                entries[PersistenceModelTests.key] = try persistedEntry(value, savedAt: wall.at(-2))
            }
            cache = ScriptedPersistenceCache(entries: entries)
        }

        /// Holds the cache's loads and saves, and makes the first loadable.
        func start() async {
            await cache.hold(.load, .save)
            launch()
        }

        private func launch() {
            let loadable = PersistedLoadable<Int>(clock: clock)
            recorder = Recorder(loadable)
            persistence = loadable.persist(
                in: cache, key: PersistenceModelTests.key,
                maxRestoreAge: configuration.maxRestoreAge.map { .seconds($0) }, now: wall.function)
            self.loadable = loadable
        }

        /// Runs `operation`; `expectedJobs` is the model's FIFO before it. Returns a problem, if any.
        func apply(_ operation: Operation, expectedJobs: [Model.Job]) async -> String? {
            wall.advance(by: 1)
            if operation == .relaunch { return relaunch() }
            guard let loadable else { return "no loadable" }
            switch operation {
            case .startSync: loadable.sync()
            case .succeed(let value):
                loadable.sync()
                loadable.setDidSyncSuccessfully(value)
            case .fail:
                loadable.sync()
                loadable.setDidFailToSync(TestError("offline"))
            case .cancel: loadable.cancelSync()
            case .setContents(let value): loadable.setContents(value)
            case .completeNextJob:
                guard let head = expectedJobs.first else {
                    let held = await cache.heldCalls
                    return held.isEmpty ? nil : "the model has no job, the cache holds \(held)"
                }
                if let problem = await checkHeld(head) { return problem }
                if expectedJobs.count > 1 {
                    await cache.resumeNext()
                } else {
                    // The last job: let it and anything queued by mistake run, and wait for them.
                    await cache.releaseAll()
                    await persistence?.saved()
                    await cache.hold(.load, .save)
                }
            case .relaunch: break  // above
            case .stop: persistence?.stop()
            }
            return nil
        }

        /// Releases the loadable (and with it its persistence), and makes a new one.
        private func relaunch() -> String? {
            weak let released = loadable
            weak let releasedPersistence = persistence
            loadable = nil
            recorder = nil
            persistence = nil
            if released != nil { return "the released loadable is still alive" }
            if releasedPersistence != nil { return "the released loadable's persistence is still alive" }
            launch()
            return nil
        }

        /// Whether the cache holds exactly `job`.
        func checkHeld(_ job: Model.Job) async -> String? {
            let held = await cache.heldCalls
            guard held.count == 1, let call = held.first else {
                return "the model's next job is \(job), the cache holds \(held)"
            }
            switch job {
            case .save(let value, let savedAt, _):
                let expectedDate = wall.at(TimeInterval(savedAt))
                if call.operation == .save, call.savedInt == value, call.entry?.savedAt == expectedDate {
                    return nil
                }
            case .restore:
                if call.operation == .load { return nil }
            }
            return "the model's next job is \(job), the cache holds \(call)"
        }

        /// Lets the queue start the model's next job, if there is one; returns a problem, if any.
        func letNextJobStart(expectedJobs: [Model.Job]) async -> String? {
            guard let head = expectedJobs.first else { return nil }
            guard await waitUntilHeld(cache) else { return "the model's next job is \(head), the cache holds nothing" }
            return nil
        }

        /// Lets every job run, then waits for them.
        func drain() async {
            await cache.releaseAll()
            await persistence?.saved()
        }

        func describeLoadable() -> String {
            guard let loadable, let persistence else { return "no loadable" }
            return PersistenceModelTests.describe(
                contents: loadable.contents, state: loadable.loadableState, age: loadable.age,
                notifications: recorder?.count ?? -1, isRestoring: persistence.isRestoring)
        }

        func describeDisk() async -> String {
            let entry = await cache.entry(PersistenceModelTests.key)
            let savedAt = entry.map { Int(($0.savedAt.timeIntervalSince(PersistenceWallClock.start)).rounded()) }
            return PersistenceModelTests.describeDisk(
                value: persistedInt(entry), savedAt: savedAt, saves: await cache.completedSaveCount)
        }
    }

    static func describe(
        contents: Int?, state: LoadableState, age: Duration?, notifications: Int, isRestoring: Bool
    ) -> String {
        "\(state)/\(contents.map(String.init) ?? "-") age \(age.map { "\($0)" } ?? "nil") notified×\(notifications)"
            + (isRestoring ? " restoring" : "")
    }

    static func describeDisk(value: Int?, savedAt: Int?, saves: Int) -> String {
        "disk \(value.map(String.init) ?? "-")@\(savedAt.map(String.init) ?? "-") saves×\(saves)"
    }

    // MARK: - Comparing

    static func difference(_ model: Model, _ real: Real) async -> String? {
        let loadable = real.describeLoadable()
        if loadable != model.describeLoadable() {
            return "loadable \(loadable), model says \(model.describeLoadable())"
        }
        let disk = await real.describeDisk()
        if disk != model.describeDisk { return "\(disk), model says \(model.describeDisk)" }
        return nil
    }

    /// Runs `operations` on a real persistence and on the model; returns a description of the
    /// first mismatch, or `nil`.
    static func mismatch(
        in operations: [Operation],
        configuration: Configuration,
        coverage: inout Coverage,
        trace: ((String) -> Void)? = nil
    ) async -> String? {
        let model = Model(configuration)
        guard let real = try? Real(configuration) else { return "could not make the cache" }
        defer { coverage = model.coverage }
        await real.start()
        let result = await run(operations, model: model, real: real, trace: trace)
        // Whatever happened, let the held jobs finish.
        await real.cache.releaseAll()
        return result
    }

    private static func run(
        _ operations: [Operation], model: Model, real: Real, trace: ((String) -> Void)?
    ) async -> String? {
        if let problem = await real.letNextJobStart(expectedJobs: model.jobs) { return "at start: \(problem)" }
        if let difference = await difference(model, real) { return "at start: \(difference)" }
        for (step, operation) in operations.enumerated() {
            trace?("\(step) \(operation) jobs \(model.jobs)")
            let jobsBefore = model.jobs
            model.apply(operation)
            if let problem = await real.apply(operation, expectedJobs: jobsBefore) {
                return "step \(step) \(operation): \(problem)"
            }
            if let problem = await real.letNextJobStart(expectedJobs: model.jobs) {
                return "step \(step) \(operation): \(problem)"
            }
            if let difference = await difference(model, real) { return "step \(step) \(operation): \(difference)" }
        }
        await real.drain()
        while !model.jobs.isEmpty { model.completeNextJob() }
        if let difference = await difference(model, real) { return "after draining: \(difference)" }
        // The loadable and its persistence go with their last reference.
        weak let loadable = real.loadable
        weak let persistence = real.persistence
        real.loadable = nil
        real.persistence = nil
        real.recorder = nil
        if loadable != nil || persistence != nil { return "the loadable or its persistence outlived its release" }
        return nil
    }

    static func mismatch(in operations: [Operation], configuration: Configuration) async -> String? {
        var coverage = Coverage()
        return await mismatch(in: operations, configuration: configuration, coverage: &coverage)
    }

    // MARK: - Running

    static func randomConfiguration(_ random: inout SeededRandomNumberGenerator) -> Configuration {
        let ages: [Int?] = [nil, nil, 3, 6]
        let initial: [Int?] = [nil, 0]
        return Configuration(
            maxRestoreAge: ages[Int(random.next() % UInt64(ages.count))],
            initialValue: initial[Int(random.next() % UInt64(initial.count))])
    }

    static func randomOperation(_ random: inout SeededRandomNumberGenerator) -> Operation {
        let value = 1 + Int(random.next() % 99)
        switch random.next() % 100 {
        case 0..<8: return .startSync
        case 8..<24: return .succeed(value)
        case 24..<31: return .fail
        case 31..<37: return .cancel
        case 37..<53: return .setContents(value)
        case 53..<87: return .completeNextJob
        case 87..<96: return .relaunch
        default: return .stop
        }
    }

    @Test("300 random sequences of syncs, writes, cache completions, relaunches and stops match the model")
    func randomSequences() async {
        var total = Coverage()
        let matched = await checkRandomSequences(count: 300, baseSeed: 0x9E25_157E) { seed in
            var random = SeededRandomNumberGenerator(seed: seed)
            let configuration = Self.randomConfiguration(&random)
            return (configuration, (0..<30).map { _ in Self.randomOperation(&random) })
        } tracing: { configuration, operations, trace in
            var coverage = Coverage()
            let failure = await Self.mismatch(
                in: operations, configuration: configuration, coverage: &coverage, trace: trace)
            if trace == nil { total.add(coverage) }
            return failure
        }
        guard matched else { return }
        // The sequences reach every rule, many times.
        for (name, count) in total.counters {
            #expect(count >= 10, "\(name): \(count)")
        }
    }
}
