/// The method of a request an ``HTTPService`` makes.
///
/// ```swift
/// let request = service.request(.post, "posts/7/comments")
/// let purge = HTTPMethod(rawValue: "PURGE")  // any method the server knows
/// ```
///
/// A `Sendable` value, usable anywhere.
public struct HTTPMethod: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The method as it goes on the request line, as in `"POST"`.
    public let rawValue: String

    /// A method by its name, sent as it is written (methods are case-sensitive: write `"PATCH"`).
    ///
    /// - Parameter rawValue: The method's name.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// `GET`: reads.
    public static let get = HTTPMethod(rawValue: "GET")
    /// `POST`: creates, or runs an action.
    public static let post = HTTPMethod(rawValue: "POST")
    /// `PUT`: replaces.
    public static let put = HTTPMethod(rawValue: "PUT")
    /// `PATCH`: changes part of.
    public static let patch = HTTPMethod(rawValue: "PATCH")
    /// `DELETE`: removes.
    public static let delete = HTTPMethod(rawValue: "DELETE")

    /// The method's name.
    public var description: String { rawValue }
}
