/// Why a ``LoadableWaiter`` wait failed.
///
/// ```swift
/// do {
///     let token = try await tokenWaiter.wait()
/// } catch LoadableWaiterError.timedOut {
///     // The token did not arrive in time.
/// }
/// ```
public enum LoadableWaiterError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The condition did not hold before the waiter's timeout.
    case timedOut

    /// A readable explanation of the error.
    public var description: String {
        switch self {
        case .timedOut: "Timed out waiting for the loadable"
        }
    }
}
