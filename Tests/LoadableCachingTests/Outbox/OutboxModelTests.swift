import Foundation
import Loadable
import LoadableCaching
import LoadableCachingTestSupport
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

/// Random sequences of enqueues into a few scopes, send outcomes (applied, applied as the server's
/// version, dropped, conflicts, retryable and final errors) of any running send, activity and
/// connectivity flips, clock advances, retries, resolves, discards, logouts and relaunches, against
/// `OutboxReferenceModel`; each seed draws the scopes, the concurrency and whether the outbox
/// coalesces and rebases.
@Suite("Outbox: model")
@MainActor
struct OutboxModelTests {
    typealias Model = OutboxReferenceModel
    typealias Outcome = Model.Outcome
    typealias Change = VersionedAppend

    /// One step of a sequence.
    enum Operation: CustomStringConvertible {
        /// Enqueues a new word into the scope at this index of the configuration's.
        case enqueue(scope: Int)
        /// Ends the running send at this index (modulo their count) with the outcome.
        case finish(Int, Outcome)
        case advance(seconds: Int)
        case offline(Bool)
        case inactive(Bool)
        /// Retries the failed item at this index among the failed ones (modulo their count).
        case retry(Int)
        /// Resolves the conflicted or failed item at this index among those (modulo their count).
        case resolve(Int)
        /// Discards the item at this index (modulo the count).
        case discard(Int)
        case removeAll
        /// The app dies and starts again; the running sends end at the server with these outcomes
        /// (the first with the first, and so on, cycling).
        case relaunch(late: [Outcome])

        var description: String {
            switch self {
            case .enqueue(let scope): "enqueue(scope #\(scope))"
            case .finish(let index, let outcome): "finish(#\(index), \(outcome))"
            case .advance(let seconds): "advance(\(seconds)s)"
            case .offline(let value): "offline(\(value))"
            case .inactive(let value): "inactive(\(value))"
            case .retry(let index): "retry(#\(index))"
            case .resolve(let index): "resolve(#\(index))"
            case .discard(let index): "discard(#\(index))"
            case .removeAll: "removeAll"
            case .relaunch(let late): "relaunch(late: \(late))"
            }
        }
    }

    /// The outbox under test and what it runs on.
    @MainActor
    final class Subject {
        let configuration: Model.Configuration
        let cache: any LoadableCache
        let server = ModelOutcomeServer<Change>()
        let clock = ManualClock()
        let activity = ActivityMonitor()
        var outbox: LoadableOutbox<Change>!
        var words = 0
        /// The model's name of each idempotency key seen.
        var keyNames: [String: String] = [:]

        init(configuration: Model.Configuration) {
            self.configuration = configuration
            cache =
                configuration.sharesQueue
                ? SharingMemoryCache(base: InMemoryLoadableCache()) : InMemoryLoadableCache()
        }

        func start() async {
            let clock = clock
            let server = server
            var rebase: (@MainActor (inout Change, Change) -> Void)?
            if configuration.rebases {
                rebase = { later, applied in later = Model.rebased(later, onto: applied) }
            }
            var coalesce: (@MainActor (Change, Change) -> Change?)?
            if configuration.coalesces {
                coalesce = { earlier, later in Model.coalesced(earlier, later) }
            }
            let now: @Sendable () -> Date = {
                Date(timeIntervalSinceReferenceDate: 1_000_000 + Double(clock.now.offset.components.seconds))
            }
            outbox = LoadableOutbox<Change>(
                cache: cache,
                rebase: rebase,
                coalesce: coalesce,
                maxConcurrentSends: configuration.maxConcurrentSends,
                key: "outbox",
                activity: activity,
                retryPolicy: BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(64), multiplier: 2),
                clock: clock,
                now: now
            ) { change, key in
                try await server.send(change, key)
            }
            await outbox.restored()
            await settleOutbox()
        }

        /// The model's name of a key the outbox uses.
        func name(of key: String) -> String { keyNames[key] ?? "unknown key" }
    }

    /// How the test ends a send with `outcome`.
    static func ending(for outcome: Outcome, of change: Change) -> Result<OutboxOutcome<Change>, any Error> {
        switch outcome {
        case .applied: .success(.applied)
        case .appliedAs: .success(.appliedAs(Model.serverVersion(of: change)))
        case .dropped: .success(.dropped)
        case .conflict(let remote): .success(.conflict(remote: remote ? Model.remote(of: change) : nil))
        case .busy(let seconds): .failure(Busy(retryAfter: seconds == 0 ? nil : .seconds(seconds)))
        case .refused: .failure(Refused())
        }
    }

    static func randomConfiguration(_ random: inout SeededRandomNumberGenerator) -> Model.Configuration {
        Model.Configuration(
            scopes: random.next() % 2 == 0 ? [nil, "a"] : [nil, "a", "b"],
            maxConcurrentSends: Int(random.next() % 4) + 1,
            coalesces: random.next() % 2 == 0,
            rebases: random.next() % 4 != 0,
            sharesQueue: random.next() % 2 == 0)
    }

    static func randomOutcome(_ random: inout SeededRandomNumberGenerator) -> Outcome {
        switch random.next() % 20 {
        case 0..<5: .applied
        case 5..<9: .appliedAs
        case 9..<10: .dropped
        case 10..<13: .conflict(remote: random.next() % 3 != 0)
        case 13..<16: .busy(retryAfter: 0)
        case 16..<18: .busy(retryAfter: [3, 30, 90][Int(random.next() % 3)])
        default: .refused
        }
    }

    static func randomOperation(_ random: inout SeededRandomNumberGenerator) -> Operation {
        switch random.next() % 100 {
        case 0..<22: .enqueue(scope: Int(random.next() % 3))
        case 22..<50: .finish(Int(random.next() % 4), randomOutcome(&random))
        case 50..<62: .advance(seconds: [1, 2, 5, 20, 70][Int(random.next() % 5)])
        case 62..<67: .offline(random.next() % 2 == 0)
        case 67..<71: .inactive(random.next() % 2 == 0)
        case 71..<74: .retry(Int(random.next() % 4))
        case 74..<81: .resolve(Int(random.next() % 4))
        case 81..<88: .discard(Int(random.next() % 6))
        case 88..<90: .removeAll
        // Half the running sends reach the server before the app dies, unheard.
        default: .relaunch(late: (0..<4).map { _ in random.next() % 2 == 0 ? .applied : randomOutcome(&random) })
        }
    }

    /// Counts what the sequences reached.
    @MainActor
    final class Tally {
        var reached: [Model.Reached: Int] = [:]
    }

    /// `count` random operations; a pause mostly ends a few steps later, as a lost connection or a
    /// moment in the background does (a pause that lasts leaves little to see).
    static func randomOperations(_ random: inout SeededRandomNumberGenerator, count: Int) -> [Operation] {
        var operations: [Operation] = []
        var ends: [(step: Int, operation: Operation)] = []
        while operations.count < count {
            if let index = ends.firstIndex(where: { $0.step <= operations.count }) {
                operations.append(ends.remove(at: index).operation)
                continue
            }
            let operation = randomOperation(&random)
            operations.append(operation)
            let end = operations.count + Int(random.next() % 4)
            switch operation {
            case .offline(true) where random.next() % 4 != 0: ends.append((end, .offline(false)))
            case .inactive(true) where random.next() % 4 != 0: ends.append((end, .inactive(false)))
            default: break
            }
        }
        return operations
    }

    /// Runs `operations` on a new outbox and the model; describes the first difference. `trace`
    /// is told each step and the items after it; `tally` counts what the model reached.
    static func mismatch(
        in operations: [Operation], configuration: Model.Configuration, tally: Tally? = nil,
        trace: ((String) -> Void)? = nil
    ) async -> String? {
        var model = Model(configuration: configuration)
        defer { tally?.reached.merge(model.reached, uniquingKeysWith: +) }
        let subject = Subject(configuration: configuration)
        await subject.start()
        for (step, operation) in operations.enumerated() {
            if let failure = await perform(operation, on: subject, model: &model) {
                return "at step \(step), \(operation): \(failure)"
            }
            trace?("\(operation) → \(model.items.map { "\($0.key):\($0)" })")
            // The shared path takes the lock and reads the queue through the cache's queue first:
            // more turns before its sends show.
            if subject.configuration.sharesQueue {
                for _ in 0..<2 { await settleOutbox() }
            }
            if let difference = difference(model, subject) {
                return "after step \(step), \(operation): \(difference)"
            }
        }
        return nil
    }

    /// Performs `operation` on both; describes a difference seen on the way.
    static func perform(_ operation: Operation, on subject: Subject, model: inout Model) async -> String? {
        switch operation {
        case .enqueue(let scopeIndex):
            let scopes = subject.configuration.scopes
            let scope = scopes[scopeIndex % scopes.count]
            subject.words += 1
            let change = Change(word: "w\(subject.words)", version: 0)
            let id = subject.outbox.enqueue(change, scope: scope)
            let expected = model.enqueue(change, scope: scope, newID: id)
            await settleOutbox()
            if id != expected { return "enqueue returned a new id, the model merges into \(expected)" }
        case .finish(let index, let outcome):
            let running = subject.server.runningCalls
            guard !running.isEmpty else { return nil }
            let call = running[index % running.count]
            model.finish(key: subject.name(of: call.idempotencyKey), with: outcome)
            await subject.server.finish(
                at: index % running.count, with: ending(for: outcome, of: call.change))
        case .advance(let seconds):
            model.advance(by: seconds)
            await subject.clock.advance(by: .seconds(seconds))
            await settleOutbox()
        case .offline(let offline):
            model.setOffline(offline)
            subject.activity.connectivity = offline ? .offline : .online
            await settleOutbox()
        case .inactive(let inactive):
            model.setInactive(inactive)
            subject.activity.isActive = !inactive
            await settleOutbox()
        case .retry(let index):
            let failed = subject.outbox.items.filter { $0.state == .failed }
            guard !failed.isEmpty else { return nil }
            let id = failed[index % failed.count].id
            model.retry(id)
            subject.outbox.retry(id)
            await settleOutbox()
        case .resolve(let index):
            let open = subject.outbox.items.filter { $0.state == .conflict || $0.state == .failed }
            guard !open.isEmpty else { return nil }
            let item = open[index % open.count]
            model.resolve(item.id)
            subject.outbox.resolve(item.id, with: Model.resolution(of: item.change, remote: item.remote))
            await settleOutbox()
        case .discard(let index):
            let items = subject.outbox.items
            guard !items.isEmpty else { return nil }
            let id = items[index % items.count].id
            model.discard(id)
            subject.outbox.discard(id)
            await settleOutbox()
        case .removeAll:
            model.removeAll()
            subject.outbox.removeAll()
            await settleOutbox()
        case .relaunch(let late):
            let running = subject.server.runningCalls
            let endings = running.enumerated().map { index, call in
                (key: subject.name(of: call.idempotencyKey), outcome: late[index % late.count])
            }
            model.relaunch(late: endings)
            subject.outbox = nil
            var index = 0
            await subject.server.finishAll { call in
                defer { index += 1 }
                return ending(for: late[index % late.count], of: call.change)
            }
            await subject.start()
        }
        return nil
    }

    static func difference(_ model: Model, _ subject: Subject) -> String? {
        let outbox = subject.outbox!
        let items = outbox.items.map { item in
            var text = "\(item.change):\(item.state):\(item.attempts)"
            if let scope = item.scope { text += " in \(scope)" }
            if let remote = item.remote { text += " remote \(remote)" }
            if let error = errorKind(item.lastError) { text += " after \(error)" }
            return text
        }
        let expected = model.items.map(\.description)
        if items != expected { return "items \(items), the model's \(expected)" }
        if outbox.items.map(\.id) != model.items.map(\.id) { return "the item ids differ from the model's" }
        for (item, modelItem) in zip(outbox.items, model.items) {
            if let name = subject.keyNames[item.idempotencyKey] {
                if name != modelItem.key {
                    return "\(item.change) keeps key \(name), the model gives it a new one, \(modelItem.key)"
                }
            } else if subject.keyNames.values.contains(modelItem.key) {
                return "\(item.change) has a new key, the model keeps \(modelItem.key)"
            } else {
                subject.keyNames[item.idempotencyKey] = modelItem.key
            }
        }
        if outbox.isPaused != model.isPaused { return "isPaused \(outbox.isPaused), the model's \(model.isPaused)" }
        if outbox.isSending != model.isSending {
            return "isSending \(outbox.isSending), the model's \(model.isSending)"
        }
        if outbox.pendingCount != model.pendingCount {
            return "pendingCount \(outbox.pendingCount), the model's \(model.pendingCount)"
        }
        let running = subject.server.runningCalls.map { "\(subject.name(of: $0.idempotencyKey)):\($0.change)" }.sorted()
        let expectedRunning = model.sends.map { "\($0.key):\($0.change)" }.sorted()
        if running != expectedRunning { return "the server runs \(running), the model \(expectedRunning)" }
        let applied = subject.server.applied.map { "\(subject.name(of: $0.idempotencyKey)):\($0.change)" }
        let expectedApplied = model.applied.map { "\($0.key):\($0.change)" }
        if applied != expectedApplied { return "the server applied \(applied), the model \(expectedApplied)" }
        return nil
    }

    /// `busy` or `refused` for an error of this launch or an earlier one.
    static func errorKind(_ error: (any Error)?) -> Model.ErrorKind? {
        guard let error else { return nil }
        return switch error {
        case is Busy: .busy
        case is Refused: .refused
        case let restored as OutboxRestoredError:
            restored.typeName.hasSuffix(".Busy") ? .busy : restored.typeName.hasSuffix(".Refused") ? .refused : nil
        default: nil
        }
    }

    @Test(
        "random sequences of scoped sends, outcomes, conflicts, resolves, coalescing, pauses, clock advances and relaunches match the model"
    )
    func randomSequences() async {
        let tally = Tally()
        let matched = await checkRandomSequences(
            count: StressScale.rounds(120), baseSeed: 0x0B0C_5E17,
            scenario: { seed in
                var random = SeededRandomNumberGenerator(seed: seed)
                let configuration = Self.randomConfiguration(&random)
                return (configuration, Self.randomOperations(&random, count: 40))
            },
            tracing: { configuration, operations, trace in
                // The explanation's run, which traces, counts nothing.
                await Self.mismatch(
                    in: operations, configuration: configuration, tally: trace == nil ? tally : nil, trace: trace)
            })
        guard matched, !StressScale.isThreadSanitizerActive else { return }
        for reachable in Model.Reached.allCases {
            #expect(tally.reached[reachable, default: 0] > 0, "the sequences never reached \(reachable)")
        }
    }

    /// A sequence kept: one that found a bug (as it was shrunk), or a case random ones seldom reach.
    struct KeptSequence: Sendable, CustomTestStringConvertible {
        let subject: String
        let configuration: Model.Configuration
        let operations: [Operation]

        var testDescription: String { subject }
    }

    nonisolated static let keptSequences = [
        KeptSequence(
            subject: "a resolved item is applied again though the server applied its earlier key",
            configuration: .init(scopes: [nil, "a"], maxConcurrentSends: 1, coalesces: false, rebases: false),
            operations: [
                .enqueue(scope: 0), .relaunch(late: [.applied]), .finish(0, .conflict(remote: true)), .resolve(0),
                .finish(0, .applied),
            ]),
        KeptSequence(
            subject: "a rebased item waits for the save of its new change",
            configuration: .init(scopes: [nil, "a", "b"], maxConcurrentSends: 1, coalesces: false, rebases: true),
            operations: [
                .enqueue(scope: 1), .enqueue(scope: 1), .enqueue(scope: 1), .enqueue(scope: 1), .enqueue(scope: 0),
                .finish(0, .appliedAs),
            ]),
        KeptSequence(
            subject: "a scope keeps its hold of an earlier launch when its items go",
            configuration: .init(scopes: [nil, "a", "b"], maxConcurrentSends: 4, coalesces: true, rebases: false),
            operations: [
                .enqueue(scope: 1), .finish(0, .busy(retryAfter: 0)), .relaunch(late: [.applied]), .discard(0),
                .enqueue(scope: 1),
            ]),
        KeptSequence(
            subject: "a conflict forgets the hold kept for a relaunch",
            configuration: .init(scopes: [nil, "a"], maxConcurrentSends: 2, coalesces: true, rebases: true),
            operations: [
                .enqueue(scope: 1), .enqueue(scope: 1), .finish(0, .busy(retryAfter: 0)), .inactive(true),
                .inactive(false), .finish(0, .conflict(remote: true)), .relaunch(late: [.applied]),
            ]),
        KeptSequence(
            subject: "scopes that retry on a return go in the scopes' order",
            configuration: .init(scopes: [nil, "a", "b"], maxConcurrentSends: 2, coalesces: false, rebases: false),
            operations: [
                .enqueue(scope: 1), .enqueue(scope: 2), .offline(true), .finish(0, .busy(retryAfter: 0)),
                .finish(0, .busy(retryAfter: 0)), .enqueue(scope: 0), .offline(false),
            ]),
    ]

    @Test("kept sequences match the model", arguments: keptSequences)
    func keptSequence(_ kept: KeptSequence) async {
        let failure = await Self.mismatch(in: kept.operations, configuration: kept.configuration)
        #expect(failure == nil, "\(failure ?? "")")
    }
}

/// A memory cache that says it locks across processes (its locks and updates are the protocol's
/// defaults, which hold within the process): an outbox on it takes the two-process path.
final class SharingMemoryCache: LoadableCache {
    let base: InMemoryLoadableCache

    init(base: InMemoryLoadableCache) {
        self.base = base
    }

    var locksAcrossProcesses: Bool { true }

    func load(key: String) async throws -> CachedEntry? { await base.load(key: key) }
    func save(_ entry: CachedEntry, key: String) async throws { await base.save(entry, key: key) }
    func touch(key: String, savedAt: Date, metadata: [String: String]) async throws -> Bool {
        try await base.touch(key: key, savedAt: savedAt, metadata: metadata)
    }
    func remove(key: String) async throws { await base.remove(key: key) }
    func removeAll() async throws { await base.removeAll() }
    func removeEntries(keyPrefix prefix: String) async throws { await base.removeEntries(keyPrefix: prefix) }
}
