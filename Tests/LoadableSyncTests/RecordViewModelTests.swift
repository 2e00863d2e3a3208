import Foundation
import LoadableSync
import LoadableTestSupport
import LoadableTesting
import Testing

/// Random sequences of local inserts, updates and deletes, remote writes and deletes (some in
/// bursts of 20 to 40 records, which a pull brings as one page), pulls, conflicts under each
/// ``ConflictPolicy`` (held ones resolved), offline spells of the device and of the server,
/// `removeAll()`, relaunches, and live views and records made and released along the way.
///
/// After every step each live view shows what a brute-force filter and stable sort of the
/// collection's records gives (ties in the collection's order), with its `count`, and each live
/// record is the collection's record of its id. Every notification of a view or record, to its
/// observers and through Observation, told a change (``LiveRecordTracker``), and none was missed.
///
/// Views sort with ties on purpose: open ones first, by one of few titles, by a priority of four
/// values (descending), and one that ranks every record equal. A seed draws the conflict policy
/// and the server's page size (two records, five, or all of them: a burst then comes as one page of
/// more than 16 changes, which a view merges in one pass). `RECORD_VIEW_MODEL_SEEDS` sets the
/// number of sequences (100 by default).
@Suite("RecordView: model")
@MainActor
struct RecordViewModelTests {
    typealias Record = TaskRecord
    typealias Policy = SyncReferenceModel.Policy

    /// What a seed draws besides its steps.
    struct Configuration: Sendable, CustomStringConvertible {
        var policy: Policy
        var pageSize: Int
        /// The views made at the start.
        var views: [ViewKind]

        var description: String { "\(policy), pages of \(pageSize), views \(views)" }
    }

    /// The records' ids: few, so that edits meet.
    nonisolated static let ids = (0..<12).map { "r\($0)" }
    /// The ids of bursts: those and more.
    nonisolated static let burstIDs = ids + (0..<36).map { "x\($0)" }
    /// Few titles, three of them starting with "b": sorts by title tie.
    nonisolated static let titles = ["apple", "banana", "blueberry", "cherry", "bean"]
    /// Priorities, as notes.
    nonisolated static let notes = ["0", "1", "2", "3"]

    /// A view's filter and sort.
    enum ViewKind: CaseIterable, Sendable, CustomStringConvertible {
        /// Every record, open ones first: two ranks, ties everywhere.
        case allOpenFirst
        /// Open records by title.
        case openByTitle
        /// Records whose title starts with "b", by priority, highest first.
        case bTitlesByPriorityDescending
        /// Every record, by priority, then by title descending.
        case allByPriorityThenTitleDescending
        /// Done records, in the collection's order (a sort that ranks every record equal).
        case doneUnsorted

        var description: String {
            switch self {
            case .allOpenFirst: "all, open first"
            case .openByTitle: "open, by title"
            case .bTitlesByPriorityDescending: "b titles, by priority descending"
            case .allByPriorityThenTitleDescending: "all, by priority then title descending"
            case .doneUnsorted: "done, unsorted"
            }
        }

        func isIncluded(_ record: Record) -> Bool {
            switch self {
            case .allOpenFirst, .allByPriorityThenTitleDescending: true
            case .openByTitle: !record.done
            case .bTitlesByPriorityDescending: record.title.hasPrefix("b")
            case .doneUnsorted: record.done
            }
        }

        func areInIncreasingOrder(_ a: Record, _ b: Record) -> Bool {
            switch self {
            case .allOpenFirst: !a.done && b.done
            case .openByTitle: a.title < b.title
            case .bTitlesByPriorityDescending: a.note > b.note
            case .allByPriorityThenTitleDescending: a.note != b.note ? a.note < b.note : a.title > b.title
            case .doneUnsorted: false
            }
        }

        /// What the view should show: the records of `set` that match, sorted stably (ties in the
        /// set's order), by brute force.
        func expected(from set: RecordSet<Record>?) -> [Record]? {
            guard let set else { return nil }
            return set.enumerated().filter { isIncluded($0.element) }
                .sorted { a, b in
                    if areInIncreasingOrder(a.element, b.element) { return true }
                    if areInIncreasingOrder(b.element, a.element) { return false }
                    return a.offset < b.offset
                }
                .map(\.element)
        }
    }

    /// A field an edit changes.
    enum Field: CaseIterable, Sendable, CustomStringConvertible {
        case title, done, note

        var description: String {
            switch self {
            case .title: "title"
            case .done: "done"
            case .note: "note"
            }
        }
    }

    /// What the app settles a held conflict with.
    enum Resolution: CaseIterable, Sendable, CustomStringConvertible {
        case local, remote, delete

        var description: String {
            switch self {
            case .local: "local"
            case .remote: "remote"
            case .delete: "delete"
            }
        }
    }

    /// One step of a sequence.
    enum Operation: Sendable, CustomStringConvertible {
        /// A local insert of a record made from `value`.
        case insert(id: String, value: Int)
        case update(id: String, Field, value: Int)
        case delete(id: String)
        /// Another device's write of a record made from `value`, straight into the server.
        case remoteWrite(id: String, value: Int)
        /// Another device's edit of the server's record (nothing if it has none).
        case remoteEdit(id: String, Field, value: Int)
        case remoteDelete(id: String)
        /// Another device's writes of `count` records of ``burstIDs`` from `first` (some deletes).
        case remoteBurst(first: Int, count: Int, value: Int)
        case pull
        /// A local edit offline, another device's edit of the same record, a pull, back online.
        case conflict(id: String, local: Field, remote: Field, value: Int)
        /// Resolves the held conflict at this index (modulo their count).
        case resolve(index: Int, Resolution)
        case deviceOffline(Bool)
        case serverOffline(Bool)
        case expireHistory
        case removeAll
        /// A new collection on the same cache; the views and records are made again before or
        /// after it restored.
        case relaunch(viewsBeforeRestore: Bool)
        case makeView(ViewKind)
        case releaseView(index: Int)
        case watchRecord(id: String)
        case releaseRecord(index: Int)

        var description: String {
            switch self {
            case .insert(let id, let value):
                "insert(\(id), \(RecordViewModelTests.brief(RecordViewModelTests.record(id, value))))"
            case .update(let id, let field, let value): "update(\(id).\(field), \(value))"
            case .delete(let id): "delete(\(id))"
            case .remoteWrite(let id, let value):
                "remoteWrite(\(RecordViewModelTests.brief(RecordViewModelTests.record(id, value))))"
            case .remoteEdit(let id, let field, let value): "remoteEdit(\(id).\(field), \(value))"
            case .remoteDelete(let id): "remoteDelete(\(id))"
            case .remoteBurst(let first, let count, let value): "remoteBurst(from \(first), \(count), \(value))"
            case .pull: "pull"
            case .conflict(let id, let local, let remote, let value):
                "conflict(\(id), local \(local), remote \(remote), \(value))"
            case .resolve(let index, let resolution): "resolve(#\(index), \(resolution))"
            case .deviceOffline(let offline): "deviceOffline(\(offline))"
            case .serverOffline(let offline): "serverOffline(\(offline))"
            case .expireHistory: "expireHistory"
            case .removeAll: "removeAll"
            case .relaunch(let before): "relaunch(views \(before ? "before" : "after") the restore)"
            case .makeView(let kind): "makeView(\(kind))"
            case .releaseView(let index): "releaseView(#\(index))"
            case .watchRecord(let id): "watchRecord(\(id))"
            case .releaseRecord(let index): "releaseRecord(#\(index))"
            }
        }
    }

    /// What the sequences reached that random ones may miss.
    enum Reached: CaseIterable, CustomStringConvertible {
        /// A pull of one page changed more than 16 records of a collection with contents and live
        /// views: the views merged them in one pass.
        case batchPull
        /// A conflict was held, then resolved.
        case resolved
        /// A relaunch restored records into views made again.
        case relaunchWithRecords
        /// A view made while the collection had records changed later.
        case lateViewChanged
        /// A view lost its contents with `removeAll()` and got them back.
        case contentsBackAfterRemoveAll

        var description: String {
            switch self {
            case .batchPull: "a pull of more than 16 changes"
            case .resolved: "a held conflict resolved"
            case .relaunchWithRecords: "a relaunch with records"
            case .lateViewChanged: "a view made late that changed"
            case .contentsBackAfterRemoveAll: "contents back after removeAll"
            }
        }
    }

    /// Counts what the sequences reached.
    @MainActor
    final class Tally {
        var reached: [Reached: Int] = [:]
        var notifications = 0
        var observationReports = 0
    }

    // MARK: - Records

    /// The record `id` made from `value`: title, done and priority vary at different rates.
    nonisolated static func record(_ id: String, _ value: Int) -> Record {
        Record(
            id: id, title: titles[value % titles.count], done: value % 2 == 0, note: notes[(value / 2) % notes.count])
    }

    /// `record` with `field` changed by `value` (a title or a priority may stay as it is).
    nonisolated static func changing(_ record: Record, _ field: Field, value: Int) -> Record {
        var record = record
        switch field {
        case .title: record.title = titles[value % titles.count]
        case .done: record.done.toggle()
        case .note: record.note = notes[value % notes.count]
        }
        return record
    }

    /// A record in a few characters: `r3:banana+2` (`+`: done).
    nonisolated static func brief(_ record: Record?) -> String {
        guard let record else { return "nil" }
        return "\(record.id):\(record.title)\(record.done ? "+" : "-")\(record.note)"
    }

    nonisolated static func brief(_ records: [Record]?) -> String {
        guard let records else { return "nil" }
        return "[" + records.map { brief($0) }.joined(separator: ", ") + "]"
    }

    // MARK: - The subject

    /// The collection, its server, and the views and records watched.
    @MainActor
    final class Subject {
        let configuration: Configuration
        let server: SyncTestServer<Record>
        let cache = InMemoryLoadableCache()
        let clock = ManualClock()
        let activity = ActivityMonitor()
        var collection: TestCollection!
        var views: [(kind: ViewKind, tracker: LiveRecordTracker<[Record]>, isLate: Bool)] = []
        var records: [(id: String, tracker: LiveRecordTracker<Record>)] = []
        var isDeviceOffline = false
        let tally: Tally?

        init(configuration: Configuration, tally: Tally?) {
            self.configuration = configuration
            self.tally = tally
            server = SyncTestServer(pageSize: configuration.pageSize)
            collection = newCollection()
            for kind in configuration.views { makeView(kind, isLate: false) }
            for id in ids.prefix(3) { watchRecord(id) }
        }

        func newCollection() -> TestCollection {
            makeCollection(
                server: server, cache: cache, conflicts: configuration.policy.conflictPolicy, activity: activity,
                clock: clock)
        }

        func makeView(_ kind: ViewKind, isLate: Bool) {
            let view = collection.view(where: kind.isIncluded, sortedBy: kind.areInIncreasingOrder)
            views.append((kind, LiveRecordTracker(view, describe: brief), isLate && collection.contents != nil))
        }

        func watchRecord(_ id: String) {
            guard !records.contains(where: { $0.id == id }) else { return }
            records.append((id, LiveRecordTracker(collection.record(id), describe: brief)))
        }

        /// Stops watching view `index` and checks that it is released; describes what went wrong.
        func releaseView(_ index: Int) -> String? {
            weak let released = views[index].tracker.loadable
            views.remove(at: index).tracker.stop()
            return released == nil ? nil : "the released view stays alive"
        }

        /// Pulls and waits for the pull to end.
        func pull() async -> String? {
            let before = collection.contents
            collection.sync()
            guard await settle(until: { self.collection.loadableState != .syncing }) else {
                return "the pull never ended"
            }
            if configuration.pageSize > 16, let before, let after = collection.contents, !views.isEmpty {
                let ids = Set(before.ids).union(after.ids)
                if ids.count(where: { before[id: $0] != after[id: $0] }) > 16 {
                    tally?.reached[.batchPull, default: 0] += 1
                }
            }
            return nil
        }

        /// Lets the collection end quiet: no push running, and while it can push, nothing left to
        /// push (its clock moved past each retry's delay).
        func quiet() async {
            let collection = collection!
            _ = await settle(rounds: 200) { !collection.status.isPushing }
            guard !isDeviceOffline, !server.isOffline else { return }
            for _ in 0..<8 {
                guard collection.status.pendingCount > 0 else { return }
                // A push runs, or waits on the clock for its retry.
                _ = await settle(rounds: 200) {
                    !collection.status.isPushing
                        && (collection.status.pendingCount == 0 || self.clock.pendingSleepCount > 0)
                }
                guard collection.status.pendingCount > 0 else { return }
                await clock.advance(by: .seconds(10))
            }
        }

        /// Saves, drops the collection with its views and records, waits until it is released, and
        /// makes a new one on the same cache with the same views and records; describes what went
        /// wrong.
        func relaunch(viewsBeforeRestore: Bool) async -> String? {
            await collection.saved()
            let kinds = views.map(\.kind)
            let ids = records.map(\.id)
            for view in views { view.tracker.stop() }
            for record in records { record.tracker.stop() }
            views.removeAll()
            records.removeAll()
            weak let released = collection
            collection = nil
            guard await settle(rounds: 200, until: { released == nil }) else {
                return "the collection was not released"
            }
            collection = newCollection()
            if viewsBeforeRestore {
                for kind in kinds { makeView(kind, isLate: false) }
                for id in ids { watchRecord(id) }
            }
            await collection.restored()
            if !viewsBeforeRestore {
                for kind in kinds { makeView(kind, isLate: false) }
                for id in ids { watchRecord(id) }
            }
            if collection.contents?.isEmpty == false, !kinds.isEmpty {
                tally?.reached[.relaunchWithRecords, default: 0] += 1
            }
            return nil
        }
    }

    // MARK: - Sequences

    static func randomConfiguration(_ random: inout SeededRandomNumberGenerator) -> Configuration {
        let policy = Policy.allCases[Int(random.next() % UInt64(Policy.allCases.count))]
        let pageSize = [2, 5, 1_000, 1_000][Int(random.next() % 4)]
        let views = ViewKind.allCases.shuffled(using: &random).prefix(4)
        return Configuration(policy: policy, pageSize: pageSize, views: Array(views))
    }

    static func randomOperation(_ random: inout SeededRandomNumberGenerator) -> Operation {
        let id = ids[Int(random.next() % UInt64(ids.count))]
        let field = Field.allCases[Int(random.next() % 3)]
        let value = Int(random.next() % 1_000)
        switch random.next() % 100 {
        case 0..<12: return .insert(id: id, value: value)
        case 12..<30: return .update(id: id, field, value: value)
        case 30..<36: return .delete(id: id)
        case 36..<43: return .remoteWrite(id: id, value: value)
        case 43..<49: return .remoteEdit(id: id, field, value: value)
        case 49..<53: return .remoteDelete(id: id)
        case 53..<57:
            return .remoteBurst(
                first: Int(random.next() % UInt64(burstIDs.count)), count: 20 + Int(random.next() % 21), value: value)
        case 57..<71: return .pull
        case 71..<76:
            return .conflict(id: id, local: field, remote: Field.allCases[Int(random.next() % 3)], value: value)
        case 76..<80: return .resolve(index: Int(random.next() % 3), Resolution.allCases[Int(random.next() % 3)])
        case 80..<83: return .deviceOffline(true)
        case 83..<85: return .serverOffline(true)
        case 85..<86: return .expireHistory
        case 86..<88: return .removeAll
        case 88..<90: return .relaunch(viewsBeforeRestore: random.next() % 2 == 0)
        case 90..<94: return .makeView(ViewKind.allCases[Int(random.next() % UInt64(ViewKind.allCases.count))])
        case 94..<96: return .releaseView(index: Int(random.next() % 4))
        case 96..<98: return .watchRecord(id: id)
        default: return .releaseRecord(index: Int(random.next() % 3))
        }
    }

    /// `count` random operations: a sequence often begins with a burst and a pull, a remote write
    /// is often pulled at once, an offline spell mostly ends a few steps later, and the last steps
    /// go back online and pull.
    static func randomOperations(_ random: inout SeededRandomNumberGenerator, count: Int) -> [Operation] {
        var operations: [Operation] = []
        if random.next() % 3 != 0 {
            operations += [
                .remoteBurst(first: 0, count: 20 + Int(random.next() % 21), value: Int(random.next() % 1_000)), .pull,
            ]
        }
        var ends: [(step: Int, operation: Operation)] = []
        while operations.count < count {
            if let index = ends.firstIndex(where: { $0.step <= operations.count }) {
                operations.append(ends.remove(at: index).operation)
                continue
            }
            let operation = randomOperation(&random)
            operations.append(operation)
            let end = operations.count + 1 + Int(random.next() % 8)
            switch operation {
            case .deviceOffline(true) where random.next() % 5 != 0: ends.append((end, .deviceOffline(false)))
            case .serverOffline(true) where random.next() % 5 != 0: ends.append((end, .serverOffline(false)))
            case .remoteWrite, .remoteEdit, .remoteDelete, .remoteBurst:
                if random.next() % 2 == 0 { operations.append(.pull) }
            default: break
            }
        }
        return operations + [.serverOffline(false), .deviceOffline(false), .pull]
    }

    // MARK: - Running

    /// Runs `operations` on a new collection with the views and records of `configuration`;
    /// describes the first step after which a view or record is wrong. `trace` is told each step.
    static func mismatch(
        in operations: [Operation], configuration: Configuration, tally: Tally? = nil,
        trace: ((String) -> Void)? = nil
    ) async -> String? {
        let subject = Subject(configuration: configuration, tally: tally)
        defer {
            for view in subject.views { view.tracker.stop() }
            for record in subject.records { record.tracker.stop() }
        }
        if let difference = difference(subject) { return "at the start: \(difference)" }
        for (step, operation) in operations.enumerated() {
            let name = "step \(step), \(operation)"
            if let failure = await perform(operation, on: subject) { return "at \(name): \(failure)" }
            await subject.quiet()
            trace?("\(operation) → \(brief(subject.collection.contents.map(Array.init)))")
            if let difference = difference(subject) { return "after \(name): \(difference)" }
            if let tally {
                for view in subject.views where view.isLate && view.tracker.contentChanges > 0 {
                    tally.reached[.lateViewChanged, default: 0] += 1
                }
            }
        }
        if let tally {
            for view in subject.views {
                tally.notifications += view.tracker.notifications
                tally.observationReports += view.tracker.observationReports
            }
        }
        return nil
    }

    /// Performs `operation` on the subject; describes what went wrong on the way.
    static func perform(_ operation: Operation, on subject: Subject) async -> String? {
        // Kept by the subject only: a relaunch releases it.
        if case .relaunch(let viewsBeforeRestore) = operation {
            return await subject.relaunch(viewsBeforeRestore: viewsBeforeRestore)
        }
        let collection = subject.collection!
        let server = subject.server
        switch operation {
        case .insert(let id, let value):
            collection.insert(record(id, value))
        case .update(let id, let field, let value):
            collection.update(id) { $0 = changing($0, field, value: value) }
        case .delete(let id):
            collection.delete(id)
        case .remoteWrite(let id, let value):
            server.put(record(id, value))
        case .remoteEdit(let id, let field, let value):
            if let current = server.records[id] { server.put(changing(current, field, value: value)) }
        case .remoteDelete(let id):
            server.remove(id)
        case .remoteBurst(let first, let count, let value):
            let records = server.records
            for offset in 0..<count {
                let id = burstIDs[(first + offset) % burstIDs.count]
                if (value + offset) % 7 == 0, records[id] != nil {
                    server.remove(id)
                } else {
                    server.put(record(id, value + offset * 3))
                }
            }
        case .pull:
            return await subject.pull()
        case .conflict(let id, let local, let remote, let value):
            subject.activity.connectivity = .offline
            collection.update(id) { $0 = changing($0, local, value: value) }
            if let current = server.records[id] {
                server.put(changing(current, remote, value: value + 1))
            } else {
                server.put(record(id, value + 1))
            }
            if let failure = await subject.pull() { return failure }
            subject.activity.connectivity = subject.isDeviceOffline ? .offline : .online
        case .resolve(let index, let resolution):
            let conflicts = collection.conflicts.sorted { $0.id < $1.id }
            guard !conflicts.isEmpty else { return nil }
            let conflict = conflicts[index % conflicts.count]
            let record: Record? =
                switch resolution {
                case .local: conflict.local
                case .remote: conflict.remote
                case .delete: nil
                }
            collection.resolve(conflict.id, with: record)
            subject.tally?.reached[.resolved, default: 0] += 1
        case .deviceOffline(let offline):
            subject.isDeviceOffline = offline
            subject.activity.connectivity = offline ? .offline : .online
        case .serverOffline(let offline):
            server.isOffline = offline
        case .expireHistory:
            server.expireHistory()
        case .removeAll:
            let hadContents = collection.contents != nil && !subject.views.isEmpty
            collection.removeAll()
            if hadContents, let failure = await subject.pull() { return failure }
            if hadContents, subject.views.contains(where: { $0.tracker.loadable.contents?.isEmpty == false }) {
                subject.tally?.reached[.contentsBackAfterRemoveAll, default: 0] += 1
            }
        case .relaunch:
            break
        case .makeView(let kind):
            subject.makeView(kind, isLate: true)
        case .releaseView(let index):
            guard !subject.views.isEmpty else { return nil }
            return subject.releaseView(index % subject.views.count)
        case .watchRecord(let id):
            subject.watchRecord(id)
        case .releaseRecord(let index):
            guard !subject.records.isEmpty else { return nil }
            subject.records.remove(at: index % subject.records.count).tracker.stop()
        }
        return nil
    }

    /// Describes the first view or record that is wrong: its contents, its state, or a notification
    /// that told nothing (or a change that none told).
    static func difference(_ subject: Subject) -> String? {
        let collection = subject.collection!
        let set = collection.contents
        for (index, view) in subject.views.enumerated() {
            let name = "view #\(index) (\(view.kind))"
            let tracker = view.tracker
            tracker.checkQuiet()
            if let problem = tracker.problems.first { return "\(name): \(problem)" }
            let shown = tracker.loadable.contents
            let expected = view.kind.expected(from: set)
            if shown != expected { return "\(name) shows \(brief(shown)), brute force \(brief(expected))" }
            let count = (tracker.loadable as? RecordView<Record>)?.count
            if count != expected?.count ?? 0 {
                return "\(name) counts \(String(describing: count)), shows \(expected?.count ?? 0)"
            }
            let state = tracker.loadable.loadableState
            if shown != nil, state != .didSyncSuccessfully { return "\(name) has contents and is \(state)" }
            if shown == nil, state != collection.loadableState {
                return "\(name) has no contents and is \(state), the collection \(collection.loadableState)"
            }
        }
        for (index, record) in subject.records.enumerated() {
            let name = "record #\(index) (\(record.id))"
            let tracker = record.tracker
            tracker.checkQuiet()
            if let problem = tracker.problems.first { return "\(name): \(problem)" }
            let shown = tracker.loadable.contents
            let expected = set?[id: record.id]
            if shown != expected { return "\(name) is \(brief(shown)), the collection's \(brief(expected))" }
            let state = tracker.loadable.loadableState
            let expectedState: LoadableState =
                if expected != nil { .didSyncSuccessfully } else if set != nil { .idle } else {
                    collection.loadableState
                }
            if state != expectedState { return "\(name) is \(state), not \(expectedState)" }
        }
        return nil
    }

    // MARK: - The test

    /// Sequences: `RECORD_VIEW_MODEL_SEEDS`, or 100.
    static let seeds: Int = {
        let variable = ProcessInfo.processInfo.environment["RECORD_VIEW_MODEL_SEEDS"]
        return StressScale.rounds(variable.flatMap { Int($0) } ?? 100)
    }()

    @Test(
        "after every step of random writes, pulls, conflicts, relaunches and removeAll, live views equal a brute-force filter and sort and notify only changes"
    )
    func randomSequences() async {
        let tally = Tally()
        let matched = await checkRandomSequences(
            count: Self.seeds, baseSeed: 0x71E_0000,
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
        for reachable in Reached.allCases {
            #expect(tally.reached[reachable, default: 0] > 0, "the sequences never reached \(reachable)")
        }
        #expect(tally.notifications > 0)
        #expect(tally.observationReports > 0)
    }
}
