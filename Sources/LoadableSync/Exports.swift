@_exported public import Loadable
@_exported public import LoadableCaching
@_exported public import LoadableHTTP
