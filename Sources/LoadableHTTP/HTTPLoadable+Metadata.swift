/// An HTTP loadable's validators travel with its contents as their metadata (a ``LoadResult``'s):
/// the loadable keeps them, persistence saves them with the contents and gives them back on
/// restore, so that the first sync after a launch sends them, and a server whose data has not
/// changed answers with a 304 and no body.
extension Validators {
    /// The metadata name of the `ETag`.
    static let entityTagName = "ETag"
    /// The metadata name of the `Last-Modified`.
    static let lastModifiedName = "Last-Modified"

    /// The validators as metadata, under their header names.
    var metadata: [String: String] {
        guard !isEmpty else { return [:] }
        var metadata: [String: String] = [:]
        if let entityTag { metadata[Self.entityTagName] = entityTag }
        if let lastModified { metadata[Self.lastModifiedName] = lastModified }
        return metadata
    }

    /// The validators kept in metadata.
    init(metadata: [String: String]) {
        self.init()
        guard !metadata.isEmpty else { return }
        entityTag = metadata[Self.entityTagName]
        lastModified = metadata[Self.lastModifiedName]
    }
}
