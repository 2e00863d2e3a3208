/// Stops the program with `message` when `condition` is false.
///
/// Used for invalid configuration. Unlike `precondition`, whose message is dropped in optimized
/// builds, `fatalError` prints the message (naming the parameter and its valid range) in every
/// build.
@usableFromInline
package func requireValid(
    _ condition: Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line
) {
    if !condition { fatalError(message(), file: file, line: line) }
}
