/// Whether `a` equals `b`, for contents whose type is only known to be `Equatable` at run time
/// (``PushLoadable`` and `map` are unconstrained); `false` when `Value` is not `Equatable`.
///
/// Opens the conformance found at run time over pointers to the two values, so that nothing is
/// boxed into `any Equatable` (which would allocate for a large value). The lookup of the
/// conformance is the runtime's cached one; a write calls this only when the answer matters to
/// someone (a reader of the contents, an observer that would otherwise be told, a persistence).
@inline(never)
func areEqualIfEquatable<Value>(_ a: Value, _ b: Value) -> Bool {
    guard let type = Value.self as? any Equatable.Type else { return false }
    return withUnsafePointer(to: a) { a in
        withUnsafePointer(to: b) { b in
            areEqual(type, UnsafeRawPointer(a), UnsafeRawPointer(b))
        }
    }
}

/// `==` of the two values of type `type` at `a` and `b`.
private func areEqual<Value: Equatable>(_ type: Value.Type, _ a: UnsafeRawPointer, _ b: UnsafeRawPointer) -> Bool {
    a.assumingMemoryBound(to: Value.self).pointee == b.assumingMemoryBound(to: Value.self).pointee
}
