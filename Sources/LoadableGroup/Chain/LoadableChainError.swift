/// Why a ``LoadableChain`` failed: one of its items ended its sync without contents.
///
/// An item whose `whenContentsAvailable` callback returns ``LoadableChain/NextAction/fail(_:)``
/// fails the chain with the callback's error as is; this type is only for items that had nothing
/// to proceed with. It is a `Sendable` value and can cross actors.
///
/// ```swift
/// let chain = LoadableChain([.init(token), .init(profile)])
/// chain.sync()
/// // ...the token fails to sync...
/// if let error = chain.error as? LoadableChainError {
///     print(error.index, error.underlying as Any)  // 0, the token's error
/// }
/// ```
public struct LoadableChainError: Error, Sendable, CustomStringConvertible {
    /// The position of the item that failed, in the chain's ``LoadableChain/items``.
    public var index: Int
    /// The item's own error, if it had one.
    public var underlying: (any Error)?

    /// Creates the error for the item at `index`.
    ///
    /// - Parameters:
    ///   - index: The position of the item that failed.
    ///   - underlying: The item's own error, if it had one.
    public init(index: Int, underlying: (any Error)?) {
        self.index = index
        self.underlying = underlying
    }

    /// `Could not sync item #<index> of the chain: <underlying>`, or a note that the item gave no
    /// error.
    public var description: String {
        if let underlying {
            "Could not sync item #\(index) of the chain: \(underlying)"
        } else {
            "Could not sync item #\(index) of the chain: it has no contents and gave no error"
        }
    }
}
