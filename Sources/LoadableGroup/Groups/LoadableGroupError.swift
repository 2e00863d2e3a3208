/// Why a group failed: every member that failed to sync, in member order.
///
/// A failed ``PureLoadableGroup`` (or ``LoadableGroup``, or ``CombinedLoadable``) reports one of
/// these as its `error`. Unlike MMMLoadable, which wrapped only the first failed member's error,
/// it lists all of them, including members that failed without saying why.
///
/// It is a `Sendable` value and can cross actors.
///
/// ```swift
/// let group = LoadableGroup([profile, settings, avatar])
/// let token = group.observe { group in
///     guard let error = group.groupError else { return }
///     for failure in error.failures {
///         log("member #\(failure.index) failed: \(failure.error.map { "\($0)" } ?? "no reason given")")
///     }
/// }
/// ```
public struct LoadableGroupError: Error, Sendable, CustomStringConvertible {
    /// One member that failed to sync.
    ///
    /// ```swift
    /// let failure = LoadableGroupError.Failure(index: 1, error: nil)
    /// print(failure)  // member #1 failed without an error
    /// ```
    public struct Failure: Sendable, CustomStringConvertible {
        /// The member's position in the group's `members`.
        public var index: Int
        /// The member's error; `nil` when the member failed without one.
        public var error: (any Error)?

        /// Creates a failure record.
        ///
        /// - Parameters:
        ///   - index: The member's position in the group's `members`.
        ///   - error: The member's error, or `nil` if it failed without one.
        public init(index: Int, error: (any Error)?) {
            self.index = index
            self.error = error
        }

        /// `member #<index>: <error>`, or `member #<index> failed without an error`.
        public var description: String {
            if let error { "member #\(index): \(error)" } else { "member #\(index) failed without an error" }
        }
    }

    /// The failed members, in member order.
    public var failures: [Failure]

    /// Creates an error listing `failures`.
    ///
    /// - Parameter failures: The failed members, in member order.
    public init(failures: [Failure]) {
        self.failures = failures
    }

    /// A readable summary naming every failed member and its error, for example
    /// `Could not sync 2 members of the group: member #0: timed out; member #2 failed without an error`.
    public var description: String {
        switch failures.count {
        case 0:
            "Could not sync the group"
        case 1:
            "Could not sync a member of the group: \(failures[0])"
        default:
            "Could not sync \(failures.count) members of the group: "
                + failures.map(\.description).joined(separator: "; ")
        }
    }
}
