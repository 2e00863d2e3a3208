import Foundation
import Loadable
import LoadableHTTP
import LoadableSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A transport whose requests wait until the test answers them, one by one, in any order.
///
/// Each `send` is recorded and suspends; `answer(_:…)` or `fail(_:with:)` ends it. Cancelling the
/// sending task ends it with `CancellationError`, unless `ignoresCancellation` is set (a transport
/// that answers late). `waitForRequests(_:)` returns once that many requests were sent.
final class ScriptedTransport: HTTPTransport, Sendable {
    typealias Answer = Result<(HTTPURLResponse, Data), any Error>

    private enum Slot {
        case waiting(CheckedContinuation<(HTTPURLResponse, Data), any Error>)
        /// Answered (or cancelled) before the request's continuation was in place.
        case endedEarly(Answer)
        case done
    }

    private struct State {
        var requests: [URLRequest] = []
        var slots: [Int: Slot] = [:]
        var countWaiters: [(id: Int, count: Int, continuation: CheckedContinuation<Void, Never>)] = []
        var nextWaiterID = 0
        var cancelledWaiters: Set<Int> = []
        var cancelledCount = 0
    }

    private let state = Locked(State())
    let ignoresCancellation: Bool

    init(ignoresCancellation: Bool = false) {
        self.ignoresCancellation = ignoresCancellation
    }

    /// The requests sent so far, in order.
    var requests: [URLRequest] { state.withLock { $0.requests } }
    /// The number of requests whose task was cancelled while they waited.
    var cancelledCount: Int { state.withLock { $0.cancelledCount } }
    /// The number of requests not answered yet.
    var openCount: Int {
        state.withLock { state in
            state.slots.values.count { if case .waiting = $0 { true } else { false } }
        }
    }

    func send(_ request: URLRequest, maxBodySize: Int) async throws -> (HTTPURLResponse, Data) {
        let (index, ready) = state.withLock { state -> (Int, [CheckedContinuation<Void, Never>]) in
            state.requests.append(request)
            let count = state.requests.count
            let ready = state.countWaiters.filter { $0.count <= count }.map(\.continuation)
            state.countWaiters.removeAll { $0.count <= count }
            return (count - 1, ready)
        }
        for continuation in ready { continuation.resume() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let early = state.withLock { state -> Answer? in
                    if case .endedEarly(let answer) = state.slots[index] {
                        state.slots[index] = .done
                        return answer
                    }
                    state.slots[index] = .waiting(continuation)
                    return nil
                }
                if let early { continuation.resume(with: early) }
            }
        } onCancel: {
            guard !ignoresCancellation else { return }
            let continuation = state.withLock { state -> CheckedContinuation<(HTTPURLResponse, Data), any Error>? in
                state.cancelledCount += 1
                guard case .waiting(let continuation) = state.slots[index] else {
                    if state.slots[index] == nil { state.slots[index] = .endedEarly(.failure(CancellationError())) }
                    return nil
                }
                state.slots[index] = .done
                return continuation
            }
            continuation?.resume(throwing: CancellationError())
        }
    }

    /// Returns once `count` requests were sent, or when the waiting task is cancelled (a test's
    /// time limit ends a wait that would never end, and the test's expectations then fail).
    func waitForRequests(_ count: Int) async {
        let id = state.withLock { state in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let isReady = state.withLock { state in
                    if state.requests.count >= count || state.cancelledWaiters.contains(id) { return true }
                    state.countWaiters.append((id, count, continuation))
                    return false
                }
                if isReady { continuation.resume() }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
                state.cancelledWaiters.insert(id)
                guard let index = state.countWaiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.countWaiters.remove(at: index).continuation
            }
            continuation?.resume()
        }
    }

    /// Ends request `index` with `result`; returns whether it was still waiting.
    @discardableResult
    func finish(_ index: Int, with result: Answer) -> Bool {
        let (continuation, accepted) = state.withLock {
            state -> (CheckedContinuation<(HTTPURLResponse, Data), any Error>?, Bool) in
            guard case .waiting(let continuation) = state.slots[index] else {
                // Sent but not yet waiting: the answer waits for it.
                guard state.slots[index] == nil, index < state.requests.count else { return (nil, false) }
                state.slots[index] = .endedEarly(result)
                return (nil, true)
            }
            state.slots[index] = .done
            return (continuation, true)
        }
        continuation?.resume(with: result)
        return accepted
    }

    /// Answers request `index` with `status`, `headers` and `body`.
    @discardableResult
    func answer(_ index: Int, status: Int = 200, headers: [String: String] = [:], body: String = "") -> Bool {
        answer(index, status: status, headers: headers, data: Data(body.utf8))
    }

    /// Answers request `index` with `status`, `headers` and `data`.
    @discardableResult
    func answer(_ index: Int, status: Int = 200, headers: [String: String] = [:], data: Data) -> Bool {
        let url = requests[index].url ?? URL(string: "http://127.0.0.1/")!
        let response = HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
        return finish(index, with: .success((response, data)))
    }

    /// Fails request `index` with `error`.
    @discardableResult
    func fail(_ index: Int, with error: any Error) -> Bool {
        finish(index, with: .failure(error))
    }
}

/// The status code of `error` when it is an `HTTPLoadableError.status`; `nil` otherwise.
func statusCode(of error: (any Error)?) -> Int? {
    guard case .status(let code, _, _)? = error as? HTTPLoadableError else { return nil }
    return code
}
