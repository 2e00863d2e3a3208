@_exported public import Loadable
