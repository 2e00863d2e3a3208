/// A loadable whose persisted entries keep a few strings beside the contents, given back when the
/// contents are restored: an HTTP loadable's `ETag` and `Last-Modified`, so that its first sync
/// after a launch can be answered by a 304.
///
/// The persistence reads ``persistedMetadata`` on the main actor when it queues a save, together
/// with the contents it saves, and calls ``restorePersistedMetadata(_:)`` just before it restores
/// contents (never when the restore is dropped).
@MainActor
package protocol PersistedMetadataProviding: AnyObject {
    /// The strings to keep with the base contents as they are now.
    var persistedMetadata: [String: String] { get }
    /// Takes back the strings kept with contents that are about to be restored.
    func restorePersistedMetadata(_ metadata: [String: String])
}
