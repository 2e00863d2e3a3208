@_exported public import LoadableSyncer

// On Linux, `URLRequest`, `URLSession` and `HTTPURLResponse` live in FoundationNetworking:
// `import LoadableHTTP` brings them, so the guide's samples compile as written there too.
#if canImport(FoundationNetworking)
    @_exported public import FoundationNetworking
#endif
