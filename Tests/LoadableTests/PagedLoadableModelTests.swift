import Loadable
import LoadableTestSupport
import LoadableTesting
import Testing

/// Random sequences of refreshes, next pages, answers (late ones included), cancels,
/// invalidations and moves of a `ManualClock`, run against a `PagedLoadable` and against a
/// reference model written from the paging rules (`Docs/Paging.md`) and the freshness rules
/// (`Docs/Syncing.md`). After every step the state, error, `lastError`, `consecutiveFailures`,
/// contents, `nextPageState`, `nextPageError`, `nextCursor`, `hasMorePages`, `age`, `isStale`,
/// `needsSync` and the number of page loads must match.
///
/// The rule under test above all: **paging is not syncing**. A next page, loaded or failed, never
/// restarts the age, forgets an invalidation, or touches `consecutiveFailures` and `lastError`;
/// only a refresh does.
@Suite("PagedLoadable against a reference model")
@MainActor
struct PagedLoadableModelTests {
    /// How a page load is answered. The page's items and cursor come from the index of the load,
    /// so that the model and the list compute the same ones.
    enum Answer: Equatable, CustomStringConvertible {
        case page(items: Int, hasNext: Bool)
        case failure(Int)

        var description: String {
            switch self {
            case .page(let items, let hasNext): "page(\(items)\(hasNext ? ", next" : ""))"
            case .failure(let code): "failure(\(code))"
            }
        }
    }

    enum Operation: Equatable, CustomStringConvertible {
        case sync, syncIfNeeded, loadNextPage, cancel, invalidate
        /// Answers the pending load at `index` (modulo their number), current or late.
        case answer(index: Int, Answer)
        case advance(seconds: Int)

        var description: String {
            switch self {
            case .sync: "sync"
            case .syncIfNeeded: "syncIfNeeded"
            case .loadNextPage: "loadNextPage"
            case .cancel: "cancel"
            case .invalidate: "invalidate"
            case .answer(let index, let answer): "answer(\(index), \(answer))"
            case .advance(let seconds): "advance(\(seconds)s)"
            }
        }
    }

    struct ModelError: Error, Equatable {
        var code: Int
    }

    /// The list's `maxAge`.
    nonisolated static let maxAgeSeconds = 20

    /// The items of a page answered to load `index`.
    nonisolated static func items(of index: Int, count: Int) -> [Int] {
        (0..<count).map { index * 10 + $0 }
    }

    /// The cursor a page answered to load `index` gives.
    nonisolated static func cursor(of index: Int, hasNext: Bool) -> Int? {
        hasNext ? index + 1 : nil
    }

    // MARK: - The list under test

    /// Page loads that wait until the sequence answers them, by index, in any order.
    @MainActor
    final class Pages {
        typealias Page = PagedLoadable<Int, Int>.Page

        final class Load {
            var continuation: CheckedContinuation<Page, any Error>?
            var isFinished = false
        }

        private(set) var loads: [Load] = []

        func load() async throws -> Page {
            let load = Load()
            loads.append(load)
            defer { load.isFinished = true }
            return try await withCheckedThrowingContinuation { load.continuation = $0 }
        }

        /// Answers load `index`, and returns once the list handled the answer (in the job where
        /// the load returns).
        func answer(_ index: Int, with result: Result<Page, any Error>) async {
            guard index < loads.count, let continuation = loads[index].continuation else { return }
            loads[index].continuation = nil
            continuation.resume(with: result)
            let load = loads[index]
            await settle { load.isFinished }
        }

        /// Ends every load still waiting, so that none leaks.
        func answerAll() async {
            for index in loads.indices { await answer(index, with: .failure(CancellationError())) }
        }
    }

    static func mismatch(in operations: [Operation], startingWith contents: [Int]?) async -> String? {
        let clock = ManualClock()
        let pages = Pages()
        let list = PagedLoadable<Int, Int>(contents: contents, clock: clock) { _ in try await pages.load() }
        list.maxAge = .seconds(maxAgeSeconds)
        var model = Model(contents: contents)
        defer { withExtendedLifetime(list) {} }
        for (step, operation) in operations.enumerated() {
            // Which load an answer goes to, before the model removes it from the pending ones.
            let answered = model.pending.isEmpty ? nil : model.pending[pendingIndex(operation) % model.pending.count]
            model.apply(operation)
            switch operation {
            case .sync: list.sync()
            case .syncIfNeeded: list.syncIfNeeded()
            case .loadNextPage: list.loadNextPage()
            case .cancel: list.cancelSync()
            case .invalidate: list.invalidate()
            case .advance(let seconds): await clock.advance(by: .seconds(seconds))
            case .answer(_, let answer):
                guard let answered else { break }
                switch answer {
                case .page(let count, let hasNext):
                    let page = Pages.Page(
                        items: items(of: answered, count: count), nextCursor: cursor(of: answered, hasNext: hasNext))
                    await pages.answer(answered, with: .success(page))
                case .failure(let code):
                    await pages.answer(answered, with: .failure(ModelError(code: code)))
                }
            }
            // A load starts in a task of its own.
            await settle { pages.loads.count >= model.loads.count }
            if let difference = difference(list, pages, model) {
                await pages.answerAll()
                return "after step \(step) (\(operation)): \(difference)"
            }
        }
        await pages.answerAll()
        return nil
    }

    private static func pendingIndex(_ operation: Operation) -> Int {
        if case .answer(let index, _) = operation { return index }
        return 0
    }

    private static func difference(_ list: PagedLoadable<Int, Int>, _ pages: Pages, _ model: Model) -> String? {
        func code(_ error: (any Error)?) -> String { text((error as? ModelError)?.code) }
        func text(_ value: Int?) -> String { value.map(String.init) ?? "nil" }
        let actual: [(String, String, String)] = [
            ("loads", "\(pages.loads.count)", "\(model.loads.count)"),
            ("state", "\(list.loadableState)", "\(model.state)"),
            ("error", code(list.error), text(model.error)),
            ("lastError", code(list.lastError), text(model.lastError)),
            ("consecutiveFailures", "\(list.consecutiveFailures)", "\(model.consecutiveFailures)"),
            ("contents", "\(list.contents ?? [-1])", "\(model.contents ?? [-1])"),
            ("nextPageState", "\(list.nextPageState)", "\(model.nextPageState)"),
            ("nextPageError", code(list.nextPageError), text(model.nextPageError)),
            ("nextCursor", text(list.nextCursor), text(model.nextCursor)),
            ("hasMorePages", "\(list.hasMorePages)", "\(model.hasMorePages)"),
            ("age", "\(list.age.map { "\($0)" } ?? "nil")", "\(model.age.map { "\(Duration.seconds($0))" } ?? "nil")"),
            ("isStale", "\(list.isStale)", "\(model.isStale)"),
            ("needsSync", "\(list.needsSync)", "\(model.needsSync)"),
        ]
        let differences = actual.filter { $0.1 != $0.2 }.map { "\($0.0) is \($0.1), expected \($0.2)" }
        return differences.isEmpty ? nil : differences.joined(separator: "; ")
    }

    static func randomOperation(_ random: inout SeededRandomNumberGenerator) -> Operation {
        switch random.next() % 16 {
        case 0, 1: return .sync
        case 2: return .syncIfNeeded
        case 3, 4, 5: return .loadNextPage
        case 6: return .cancel
        case 7: return .invalidate
        case 8, 9: return .advance(seconds: Int(random.next() % 15) + 1)
        case 10, 11, 12, 13:
            return .answer(
                index: Int(random.next() % 4), .page(items: Int(random.next() % 3), hasNext: random.next() % 4 != 0))
        default:
            return .answer(index: Int(random.next() % 4), .failure(Int(random.next() % 5)))
        }
    }

    @Test("300 random sequences of refreshes, next pages, answers, cancels, invalidations and time match the model")
    func randomSequences() async {
        for startsWithContents in [false, true] {
            let contents: [Int]? = startsWithContents ? [99] : nil
            await checkRandomSequences(count: 150, baseSeed: startsWithContents ? 0x9A6E_1000 : 0x9A6E_0000) { seed in
                var random = SeededRandomNumberGenerator(seed: seed)
                return (0..<(Int(random.next() % 30) + 1)).map { _ in Self.randomOperation(&random) }
            } mismatch: {
                await Self.mismatch(in: $0, startingWith: contents)
            }
        }
    }
}
