import Loadable
import LoadableTestSupport
import LoadableTesting
import Testing

/// Model-based randomized tests: random operation sequences run against a `Loadable` and against a
/// reference model written from `Docs/Concepts.md` ("The state machine", "The observer rules");
/// every state, every error, and every notification each observer sees must match.
@Suite("Loadable against a reference model")
@MainActor
struct LoadableModelTests {
    /// What an observer does when called.
    enum Reaction: Equatable, CustomStringConvertible {
        case none
        /// Calls `sync()` when it sees a failure (at most `limit` times per observer).
        case syncOnFailure
        /// Cancels its own token.
        case cancelSelf
        /// Adds a plain observer (once).
        case addObserver
        /// Cancels the observer added right after it, if any.
        case cancelNext
        /// Cancels the running sync when it sees `syncing` (at most `limit` times per observer).
        case cancelOnSyncing

        var description: String {
            switch self {
            case .none: "none"
            case .syncOnFailure: "syncOnFailure"
            case .cancelSelf: "cancelSelf"
            case .addObserver: "addObserver"
            case .cancelNext: "cancelNext"
            case .cancelOnSyncing: "cancelOnSyncing"
            }
        }
    }

    enum Operation: Equatable, CustomStringConvertible {
        case sync, syncIfNeeded, succeed(Int), succeedKeepingContents, fail(Int?), cancel, setIdle, setSyncing
        case notify, addObserver(Reaction), cancelObserver(Int), releaseObserver(Int)

        var description: String {
            switch self {
            case .sync: "sync"
            case .syncIfNeeded: "syncIfNeeded"
            case .succeed(let value): "succeed(\(value))"
            case .succeedKeepingContents: "succeedKeepingContents"
            case .fail(let code): "fail(\(code.map(String.init) ?? "nil"))"
            case .cancel: "cancel"
            case .setIdle: "setIdle"
            case .setSyncing: "setSyncing"
            case .notify: "notify"
            case .addObserver(let reaction): "addObserver(\(reaction))"
            case .cancelObserver(let index): "cancelObserver(\(index))"
            case .releaseObserver(let index): "releaseObserver(\(index))"
            }
        }
    }

    /// One observation: who saw what.
    struct Seen: Equatable, CustomStringConvertible {
        var observer: Int
        var state: LoadableState
        var contents: Int?
        var errorCode: Int?
        var description: String { "#\(observer):\(state)/\(contents.map(String.init) ?? "-")/\(errorCode ?? -1)" }
    }

    nonisolated static let reactionLimit = 2

    // MARK: - The real thing

    struct ModelError: Error { var code: Int }

    @MainActor final class Real {
        let loadable = ManualLoadable()
        var tokens: [LoadableObservation?] = []
        var reactions: [Int] = []
        var addedChild: [Bool] = []
        var log: [Seen] = []

        func add(_ reaction: Reaction) {
            let index = tokens.count
            tokens.append(nil)
            reactions.append(0)
            addedChild.append(false)
            tokens[index] = loadable.observe { [unowned self] loadable in
                log.append(
                    Seen(
                        observer: index, state: loadable.loadableState, contents: loadable.contents,
                        errorCode: (loadable.error as? ModelError)?.code))
                switch reaction {
                case .none: break
                case .syncOnFailure:
                    if loadable.loadableState == .didFailToSync, reactions[index] < LoadableModelTests.reactionLimit {
                        reactions[index] += 1
                        loadable.sync()
                    }
                case .cancelSelf:
                    tokens[index]?.cancel()
                case .addObserver:
                    if !addedChild[index] {
                        addedChild[index] = true
                        add(.none)
                    }
                case .cancelNext:
                    if index + 1 < tokens.count { tokens[index + 1]?.cancel() }
                case .cancelOnSyncing:
                    if loadable.loadableState == .syncing, reactions[index] < LoadableModelTests.reactionLimit {
                        reactions[index] += 1
                        loadable.cancelSync()
                    }
                }
            }
        }

        func apply(_ operation: Operation) {
            switch operation {
            case .sync: loadable.sync()
            case .syncIfNeeded: loadable.syncIfNeeded()
            case .succeed(let value): loadable.setDidSyncSuccessfully(value)
            case .succeedKeepingContents: if loadable.contents != nil { loadable.setDidSyncSuccessfully() }
            case .fail(let code): loadable.setDidFailToSync(code.map(ModelError.init(code:)))
            case .cancel: loadable.cancelSync()
            case .setIdle: loadable.setIdle()
            case .setSyncing: loadable.setSyncing()
            case .notify: loadable.notifyDidChange()
            case .addObserver(let reaction): add(reaction)
            case .cancelObserver(let index): if index < tokens.count { tokens[index]?.cancel() }
            case .releaseObserver(let index): if index < tokens.count { tokens[index] = nil }
            }
        }
    }

    // MARK: - Running

    static func randomOperation(_ random: inout SeededRandomNumberGenerator, observerCount: Int) -> Operation {
        let reactions: [Reaction] = [
            .none, .none, .syncOnFailure, .cancelSelf, .addObserver, .cancelNext, .cancelOnSyncing,
        ]
        switch random.next() % 13 {
        case 0, 1: return .sync
        case 2: return .syncIfNeeded
        case 3: return .succeed(Int(random.next() % 100))
        case 4: return .succeedKeepingContents
        case 5: return .fail(random.next() % 3 == 0 ? nil : Int(random.next() % 100))
        case 6: return .cancel
        case 7: return .setIdle
        case 8: return .setSyncing
        case 9: return .notify
        case 10: return .addObserver(reactions[Int(random.next() % UInt64(reactions.count))])
        case 11: return .cancelObserver(Int(random.next() % UInt64(max(observerCount, 1))))
        default: return .releaseObserver(Int(random.next() % UInt64(max(observerCount, 1))))
        }
    }

    /// Runs `operations`; returns a description of the first mismatch, or `nil`.
    static func mismatch(in operations: [Operation]) -> String? {
        let model = Model()
        let real = Real()
        for (step, operation) in operations.enumerated() {
            model.apply(operation)
            real.apply(operation)
            let loadable = real.loadable
            let realCode = (loadable.error as? ModelError)?.code
            if model.log != real.log {
                return "step \(step) \(operation): observers saw \(real.log), model says \(model.log)"
            }
            if model.state != loadable.loadableState || model.contents != loadable.contents
                || model.errorCode != realCode || model.isError != (loadable.error != nil)
            {
                return
                    "step \(step) \(operation): state \(loadable.snapshot), model \(model.state)/\(model.contents ?? -1)"
            }
            if model.doSyncCount != loadable.doSyncCount || model.doCancelSyncCount != loadable.doCancelSyncCount {
                return "step \(step) \(operation): doSync \(loadable.doSyncCount) vs \(model.doSyncCount)"
            }
            if model.needsSync != loadable.needsSync {
                return "step \(step) \(operation): needsSync \(loadable.needsSync) vs \(model.needsSync)"
            }
            if model.observers.contains(where: \.active) != loadable.hasObservers {
                return "step \(step) \(operation): hasObservers \(loadable.hasObservers)"
            }
        }
        // Releasing the loadable ends every observation.
        weak let weakLoadable = real.loadable
        let tokens = real.tokens
        _ = consume real
        if weakLoadable != nil { return "the loadable outlived its owner" }
        if tokens.contains(where: { $0?.isActive == true }) { return "a token stayed active after release" }
        return nil
    }

    @Test("10,000 random operation sequences match the model")
    func randomSequences() async {
        await checkRandomSequences(count: 10_000, baseSeed: 0x10AD_AB1E) { seed in
            var random = SeededRandomNumberGenerator(seed: seed)
            let length = Int(random.next() % 40) + 1
            var operations: [Operation] = []
            var observerCount = 0
            for _ in 0..<length {
                let operation = Self.randomOperation(&random, observerCount: observerCount)
                if case .addObserver = operation { observerCount += 1 }
                operations.append(operation)
            }
            return operations
        } mismatch: {
            Self.mismatch(in: $0)
        }
    }
}
