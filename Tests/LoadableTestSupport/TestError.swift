/// An error with a name and a code, for telling errors apart in expectations.
///
/// `TestError()` is "test", code 0; `TestError("offline")` and `TestError(code: 3)` tell apart.
public struct TestError: Error, Hashable, CustomStringConvertible {
    /// The name, shown as the description.
    public var name: String
    /// A number, for tests that count errors.
    public var code: Int

    /// Creates an error named `name`, with `code`.
    public init(_ name: String = "test", code: Int = 0) {
        self.name = name
        self.code = code
    }

    /// Creates an error with `code`, named after it.
    public init(code: Int) {
        self.init("test \(code)", code: code)
    }

    /// The name.
    public var description: String { name }
}
