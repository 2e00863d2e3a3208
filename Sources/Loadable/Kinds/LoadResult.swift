/// What one load returns: new contents, or the source's word that the contents the loadable has
/// are still current (an HTTP `304 Not Modified`). Each comes with a few strings that describe the
/// contents (an HTTP answer's `ETag` and `Last-Modified`), kept by the loadable beside its contents.
///
/// ```swift
/// let feed = AsyncLoadable<[Post]>(loadResult: {
///     let answer = try await api.feed(ifNoneMatch: feedTag)
///     guard let posts = answer.posts else { return .confirmed() }   // 304: nothing new
///     return .loaded(posts, metadata: ["ETag": answer.etag])
/// })
/// ```
///
/// A load's result is a value, never an error: a failure is what the load throws.
///
/// - ``loaded(_:metadata:)`` is a successful sync with these contents: they become the base
///   contents (pending optimistic changes are applied again on top), and `metadata` replaces the
///   metadata kept with them (empty: none).
/// - ``confirmed(metadata:)`` is a successful sync that keeps the contents exactly as they are: no
///   new value is written, readers of the contents are not told, the age restarts, and a persisted
///   loadable touches its entry instead of saving it again. `metadata` is merged into the metadata
///   kept (a name it gives replaces that name's value; the others stay), unless the app wrote the
///   contents itself while the load ran: the source confirmed the contents the load was asked
///   about, not those. When the loadable has no contents to confirm, the sync fails with
///   ``LoadableError/nothingToConfirm``.
///
/// The metadata kept with the contents is saved with persisted contents and given back when they
/// are restored, and dropped by a write of the app's own (`setContents`, `updateContents`, a
/// committed `mutate` without `reconcile`): the source never described those contents.
///
/// `Sendable` when `Contents` is.
public enum LoadResult<Contents> {
    /// New contents, and the strings that describe them.
    ///
    /// - Parameters:
    ///   - contents: The new contents.
    ///   - metadata: What describes them (for example `["ETag": "\"v2\""]`); empty by default.
    case loaded(_ contents: Contents, metadata: [String: String] = [:])

    /// The source confirmed the contents the loadable has; the strings it sent with the
    /// confirmation are merged into the metadata kept.
    ///
    /// - Parameter metadata: Names and values to replace in the metadata kept (a `304` may send a
    ///   new `ETag`); empty by default.
    case confirmed(metadata: [String: String] = [:])
}

extension LoadResult: Sendable where Contents: Sendable {}

extension LoadResult: Equatable where Contents: Equatable {}
