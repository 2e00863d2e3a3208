import Dispatch
import Loadable
import LoadableSupport

/// Runs `operation` on the main actor and returns what it returns, unless `seconds` of real time
/// pass first: then it cancels `operation` and throws ``RealTimeLimitExceeded`` without waiting
/// for it to end.
///
/// For a test whose regression would hang rather than fail (a request that never completes): the
/// test fails in `seconds`, and CI goes on. The deadline is a `DispatchQueue` timer, not a sleep:
/// time that the code under test reads still comes from a `ManualClock`. Swift Testing's
/// `.timeLimit` waits for a test that ignores cancellation, so it cannot end such a hang alone.
///
/// ```swift
/// let error = try await withRealTimeLimit("the send of a 401") {
///     await failure { try await api.send(.post, "comments") }
/// }
/// ```
///
/// - Parameters:
///   - what: What `operation` does, for the error.
///   - seconds: How long `operation` may take; 60 by default, far more than a request to a
///     server on 127.0.0.1 takes alone, and twice what one took in a full parallel run (a send
///     through a token waiter: 17 ms alone, 20-31 s with every suite running). Four times as
///     long under ThreadSanitizer, where every main-actor turn is many times slower still.
///   - operation: The work.
/// - Returns: What `operation` returns.
/// - Throws: What `operation` throws; ``RealTimeLimitExceeded`` after `seconds`.
@MainActor
public func withRealTimeLimit<Result: Sendable>(
    _ what: String,
    seconds: Int = 60,
    _ operation: @escaping @MainActor () async throws -> Result
) async throws -> Result {
    let outcome = OneOutcome<Result>()
    let work = Task { @MainActor in
        do {
            outcome.resolve(.success(try await operation()))
        } catch {
            outcome.resolve(.failure(error))
        }
    }
    let seconds = StressScale.isThreadSanitizerActive ? seconds * 4 : seconds
    DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(seconds)) {
        guard outcome.resolve(.failure(RealTimeLimitExceeded(what: what, seconds: seconds))) else { return }
        work.cancel()
    }
    return try await withTaskCancellationHandler {
        await outcome.value()
    } onCancel: {
        work.cancel()
    }.get()
}

/// The error of ``withRealTimeLimit(_:seconds:sourceLocation:_:)`` when its time passed.
public struct RealTimeLimitExceeded: Error, CustomStringConvertible {
    /// What did not end in time.
    public let what: String
    /// The limit, in seconds.
    public let seconds: Int

    /// `<what> did not end within <seconds> s`, and the likely cause.
    public var description: String {
        "\(what) did not end within \(seconds) s: the likely cause is a request that never completes"
    }
}

/// The first result handed to it, for one waiter.
private final class OneOutcome<Value: Sendable>: Sendable {
    private struct State {
        var result: Result<Value, any Error>?
        var waiter: CheckedContinuation<Result<Value, any Error>, Never>?
    }

    private let state = Locked(State())

    /// Keeps `result` unless one came first; `false` when one did.
    @discardableResult
    func resolve(_ result: Result<Value, any Error>) -> Bool {
        let waiter = state.withLock { state -> CheckedContinuation<Result<Value, any Error>, Never>?? in
            guard state.result == nil else { return nil }
            state.result = result
            defer { state.waiter = nil }
            return .some(state.waiter)
        }
        guard let waiter else { return false }
        waiter?.resume(returning: result)
        return true
    }

    /// The first result, once there is one.
    func value() async -> Result<Value, any Error> {
        await withCheckedContinuation { continuation in
            let result = state.withLock { state -> Result<Value, any Error>? in
                if state.result == nil { state.waiter = continuation }
                return state.result
            }
            if let result { continuation.resume(returning: result) }
        }
    }
}
