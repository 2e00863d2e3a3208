internal import Loadable
import LoadableSupport

/// The reads and writes asked of one cache object, run one at a time in the order they were asked
/// for: a save of a key never lands after a newer save of it, a restore reads the last save asked
/// for before it, and a `removeAll()` follows every save asked for before it.
///
/// One queue per store of entries, found by its identity while it has work, and forgotten when it
/// runs dry: a cache object's own identity, unless it shares its entries with other objects (the
/// ``FileLoadableCache`` objects of one folder, the `SQLiteLoadableCache` objects of one file, a
/// ``LoadableCache/scoped(_:)`` view and its cache), which then share one queue. Jobs are keyed by
/// the key in that store. A save waiting for its turn is replaced by a newer save of the same key
/// (only the newest contents matter), unless another job of that key was queued in between; a
/// touch waiting for its turn likewise (see ``enqueueTouch(in:key:save:touch:)``).
///
/// **Groups.** Repeatable saves and reads waiting in a row for a cache object that writes in groups
/// (``LoadableCacheEntries/groupWriter``: the SQLite cache) run as one ``CacheWriteGroup``, up to
/// ``groupLimit`` of them: the object writes them in one transaction, and their main-actor steps
/// are handed over once it is committed (or the jobs run again alone when it was not).
///
/// **Threads.** One task off the main actor runs the jobs' work (encode and save, load and decode)
/// one after the other, without going back to the main actor in between: a trip there and back
/// costs two thread wake-ups, several times the work of a small entry. What a job does afterwards
/// on the main actor (set restored contents, report an error, end a `saved()`) is handed over
/// without waiting, and the main actor runs these steps in job order, as many as are ready at a
/// time. A slow job never holds up the steps of the jobs before it.
package final class CacheQueue: Sendable {
    /// The queues with work, by the identity of their cache.
    @MainActor private static var queues: [ObjectIdentifier: CacheQueue] = [:]

    /// The queue of `entries` (a cache's ``LoadableCache/sharedEntries``), made if it has none.
    /// Its jobs are keyed by their keys among the entries (``LoadableCacheEntries/key(_:)``).
    @MainActor static func of(_ entries: LoadableCacheEntries) -> CacheQueue {
        let id = entries.id
        if let queue = queues[id] { return queue }
        let queue = CacheQueue(identity: id)
        queues[id] = queue
        return queue
    }

    /// Queues a save of `key` in `cache`, or replaces the save of it that waits for its turn.
    ///
    /// A `repeatable` save (its work writes what it captured, and running it twice does what
    /// running it once does) may run in a group with the saves and reads waiting next to it, for
    /// a cache that writes in groups (see ``CacheWriteGroup``): when the group's commit fails, its
    /// work runs again alone. A save that is not (an outbox's, which takes what it writes from
    /// shared state) always runs alone.
    @MainActor static func enqueueSave(
        in cache: any LoadableCache, key: String, repeatable: Bool = false, work: @escaping Work
    ) {
        let entries = cache.sharedEntries
        of(entries).enqueueSave(key: entries.key(key), writer: repeatable ? entries.groupWriter : nil, work: work)
    }

    /// Queues a touch of `key` in `cache` (a new date for contents confirmed as they are): `touch`,
    /// unless a save of the key waits for its turn, whose contents are not on disk yet; that save
    /// becomes `save` (the same contents, the new date). A save asked for later replaces a touch
    /// still waiting, as it replaces a save.
    @MainActor static func enqueueTouch(
        in cache: any LoadableCache, key: String, save: @escaping Work, touch: @escaping Work
    ) {
        let entries = cache.sharedEntries
        of(entries).enqueueTouch(key: entries.key(key), save: save, touch: touch)
    }

    /// Queues a read of `key` in `cache` (a restore), whose work may run twice: for a cache that
    /// writes in groups, it joins a group of the saves around it, and reads inside the group's
    /// transaction (run again alone when the group's commit fails).
    @MainActor static func enqueueRead(in cache: any LoadableCache, key: String, work: @escaping Work) {
        let entries = cache.sharedEntries
        of(entries).enqueue(Job(key: entries.key(key), work: work, writer: entries.groupWriter))
    }

    /// Queues a job about `key` in `cache` (about every key for `nil`) that is not a save.
    @MainActor package static func enqueue(in cache: any LoadableCache, key: String?, work: @escaping Work) {
        let entries = cache.sharedEntries
        of(entries).enqueue(Job(key: key.map { entries.key($0) }, work: work))
    }

    /// Waits until every job asked of `cache` so far has run, and its main-actor step too.
    @MainActor package static func flush(_ cache: any LoadableCache) async {
        await withCheckedContinuation { continuation in
            enqueue(in: cache, key: nil) { { continuation.resume() } }
        }
    }

    /// A job's work, off the main actor; returns what to do afterwards on the main actor, if
    /// anything.
    package typealias Work = @Sendable () async -> (@MainActor () -> Void)?

    /// One read or write.
    final class Job: @unchecked Sendable {
        /// The key the job reads or writes; `nil` for a job about every key.
        let key: String?
        /// Replaced by a newer save while the job waits; guarded by the queue's lock.
        fileprivate var work: Work
        /// Whether the job only touches its entry (its contents are on disk already); guarded by
        /// the queue's lock.
        fileprivate var isTouch: Bool
        /// For a save or a read, the cache object that runs it in a group with the saves and
        /// reads next to it (``LoadableCacheEntries/groupWriter``); `nil` for any other job, or
        /// one run alone. Guarded by the queue's lock.
        fileprivate var writer: ObjectIdentifier?

        init(key: String?, work: @escaping Work, isTouch: Bool = false, writer: ObjectIdentifier? = nil) {
            self.key = key
            self.work = work
            self.isTouch = isTouch
            self.writer = writer
        }
    }

    /// What the lock guards.
    private struct State {
        var jobs: [Job] = []
        /// The index of the next job to run in ``jobs``.
        var next = 0
        /// Saves not begun yet, by key, that a newer save of the key may replace.
        var waitingSaves: [String: Job] = [:]
        /// Whether the task that runs the jobs is running.
        var isRunning = false
        /// Main-actor steps of finished jobs, in job order, not run yet.
        var steps: [@MainActor () -> Void] = []
        /// Whether a main-actor task to run ``steps`` is on its way.
        var isRunningSteps = false
    }

    /// The identity the queue is found by.
    let identity: ObjectIdentifier
    private let state = Locked(State())

    private init(identity: ObjectIdentifier) {
        self.identity = identity
    }

    /// Queues a save of `key`, or replaces the save of `key` that is waiting for its turn.
    @MainActor private func enqueueSave(key: String, writer: ObjectIdentifier?, work: @escaping Work) {
        let startsRun = state.withLock { state -> Bool in
            if let waiting = state.waitingSaves[key] {
                waiting.work = work
                waiting.isTouch = false
                waiting.writer = writer
                return false
            }
            let job = Job(key: key, work: work, writer: writer)
            state.waitingSaves[key] = job
            return Self.append(job, to: &state)
        }
        if startsRun { startRun() }
    }

    /// Queues a touch of `key`, or turns the save of `key` that waits into `save` (a touch that
    /// waits into `touch`).
    @MainActor private func enqueueTouch(key: String, save: @escaping Work, touch: @escaping Work) {
        let startsRun = state.withLock { state -> Bool in
            if let waiting = state.waitingSaves[key] {
                waiting.work = waiting.isTouch ? touch : save
                return false
            }
            let job = Job(key: key, work: touch, isTouch: true)
            state.waitingSaves[key] = job
            return Self.append(job, to: &state)
        }
        if startsRun { startRun() }
    }

    /// Queues a job that is not a save: after it, a save of its key (of every key, for a job
    /// about every key) waits its turn behind it.
    @MainActor private func enqueue(_ job: Job) {
        let startsRun = state.withLock { state -> Bool in
            if let key = job.key { state.waitingSaves[key] = nil } else { state.waitingSaves.removeAll() }
            return Self.append(job, to: &state)
        }
        if startsRun { startRun() }
    }

    /// Appends `job`; returns whether the run must start.
    private static func append(_ job: Job, to state: inout State) -> Bool {
        state.jobs.append(job)
        guard !state.isRunning else { return false }
        state.isRunning = true
        return true
    }

    private func startRun() {
        Task.detached { await self.runJobs() }
    }

    /// Runs job after job until none is left; saves and reads waiting in a row for one writer
    /// run as a group.
    private func runJobs() async {
        while let (work, writer) = takeJob() {
            if let writer, let next = takeGroupJob(for: writer) {
                await runGroup(of: writer, [work, next])
            } else if let step = await work() {
                handOver(step)
            }
        }
        // The queue is forgotten on the main actor, after the steps of its last jobs, unless a job
        // was queued meanwhile.
        handOver { [self] in
            guard Self.queues[identity] === self, !state.withLock({ $0.isRunning }) else { return }
            Self.queues[identity] = nil
        }
    }

    /// The most saves in one group: the writer's transaction holds the file's write lock while
    /// the group runs (its work encodes too), so that another process waits for a bounded time.
    static let groupLimit = 64

    /// Runs the saves and reads `works` (two, taken) and those that follow them for `writer`, up
    /// to ``groupLimit``, as one ``CacheWriteGroup``; hands over their steps once the group is
    /// written, or runs each again alone when a save of the group was lost.
    private func runGroup(of writer: ObjectIdentifier, _ first: [Work]) async {
        let group = CacheWriteGroup(writer: writer)
        var works = first
        var steps: [(@MainActor () -> Void)?] = []
        var index = 0
        while index < works.count {
            let work = works[index]
            steps.append(await group.run { await work() })
            index += 1
            if index == works.count, works.count < Self.groupLimit, let next = takeGroupJob(for: writer) {
                works.append(next)
            }
        }
        if await group.end() {
            for case let step? in steps { handOver(step) }
        } else {
            for work in works {
                if let step = await work() { handOver(step) }
            }
        }
    }

    /// The next job's work and its group writer; `nil` (and the run ends) when there is none.
    private func takeJob() -> (Work, ObjectIdentifier?)? {
        state.withLock { state in
            guard state.next < state.jobs.count else {
                state.jobs.removeAll()
                state.next = 0
                state.isRunning = false
                return nil
            }
            return Self.take(from: &state)
        }
    }

    /// The next job's work if it is a save or a read for `writer`; `nil` (the run goes on)
    /// otherwise.
    private func takeGroupJob(for writer: ObjectIdentifier) -> Work? {
        state.withLock { state in
            guard state.next < state.jobs.count, state.jobs[state.next].writer == writer else { return nil }
            return Self.take(from: &state).0
        }
    }

    /// Takes the next job, which there is.
    private static func take(from state: inout State) -> (Work, ObjectIdentifier?) {
        let job = state.jobs[state.next]
        state.next += 1
        if let key = job.key, state.waitingSaves[key] === job { state.waitingSaves[key] = nil }
        // The job stays in the list until it is compacted; what its work holds (contents, an
        // outbox's queue) goes now, so that the app's next change of it copies nothing.
        let work = job.work
        job.work = Self.doneWork
        if state.next >= 64, state.next * 2 >= state.jobs.count {
            state.jobs.removeFirst(state.next)
            state.next = 0
        }
        return (work, job.writer)
    }

    /// The work of a job taken from the list.
    private static let doneWork: Work = { nil }

    /// Hands `step` to the main actor, behind the steps handed over before it.
    private func handOver(_ step: @escaping @MainActor () -> Void) {
        let startsTask = state.withLock { state -> Bool in
            state.steps.append(step)
            guard !state.isRunningSteps else { return false }
            state.isRunningSteps = true
            return true
        }
        if startsTask { Task { @MainActor in self.runSteps() } }
    }

    /// Runs the steps handed over, in order, until there are none.
    @MainActor private func runSteps() {
        while true {
            let steps = state.withLock { state -> [@MainActor () -> Void] in
                if state.steps.isEmpty { state.isRunningSteps = false }
                defer { state.steps.removeAll(keepingCapacity: true) }
                return state.steps
            }
            if steps.isEmpty { return }
            for step in steps { step() }
        }
    }
}
