/// Why a ``LoadableAction`` refused to run.
///
/// A refused run starts nothing and changes nothing: the action's state, contents, error and
/// observers are left alone. ``LoadableAction/run(_:)`` throws it; ``LoadableAction/send(_:)``
/// returns a task that fails with it.
///
/// ```swift
/// do {
///     try await save.run(draft)
/// } catch LoadableActionError.busy {
///     // A save is already on its way; this tap is dropped.
/// }
/// ```
public enum LoadableActionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The action's concurrency is ``LoadableAction/Concurrency/dropWhileRunning`` and a run is
    /// running.
    case busy
    /// The action's ``LoadableAction/isEnabled`` is `false`.
    case disabled

    /// `"busy: a run is already running"` or `"disabled"`.
    public var description: String {
        switch self {
        case .busy: "busy: a run is already running"
        case .disabled: "disabled"
        }
    }
}
