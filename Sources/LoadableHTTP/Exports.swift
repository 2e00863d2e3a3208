@_exported public import LoadableSyncer
