internal import Loadable

/// An HTTP loadable keeps its validators with its persisted contents, so that its first sync after
/// a launch sends them, and a server whose data has not changed answers with a 304 and no body.
extension HTTPLoadable: PersistedMetadataProviding {
    /// The `ETag` and `Last-Modified` of the contents, under those names.
    package var persistedMetadata: [String: String] {
        loader.validators.metadata
    }

    /// Takes the validators kept with restored contents, unless a sync has already kept its own.
    package func restorePersistedMetadata(_ metadata: [String: String]) {
        guard loader.validators == Validators() else { return }
        loader.validators = Validators(metadata: metadata)
    }
}

extension Validators {
    /// The metadata names of the validators.
    private static let entityTagName = "ETag"
    private static let lastModifiedName = "Last-Modified"

    /// The validators as persisted metadata.
    var metadata: [String: String] {
        var metadata: [String: String] = [:]
        if let entityTag { metadata[Self.entityTagName] = entityTag }
        if let lastModified { metadata[Self.lastModifiedName] = lastModified }
        return metadata
    }

    /// The validators kept in persisted metadata.
    init(metadata: [String: String]) {
        self.init()
        entityTag = metadata[Self.entityTagName]
        lastModified = metadata[Self.lastModifiedName]
    }
}
