extension ContentsLoadable {
    /// The state, contents and error as one value, for views and for crossing actors.
    ///
    /// ```swift
    /// switch photos.snapshot.phase {
    /// case .loaded(let photos): show(photos)
    /// default: showPlaceholder()
    /// }
    /// ```
    public var snapshot: LoadableSnapshot<Contents> {
        let record = failureRecordIfKnown
        return LoadableSnapshot(
            state: loadableState,
            contents: contents,
            error: error,
            isContentsAvailable: isContentsAvailable,
            lastError: record?.lastError,
            consecutiveFailures: record?.consecutiveFailures
        )
    }
}

extension ContentsLoadable where Contents: Sendable {
    /// The loadable's snapshot now and after every notification, as an async sequence.
    ///
    /// Yields the current snapshot first. The sequence ends when the loadable is released or the
    /// consuming task is cancelled.
    ///
    /// ```swift
    /// for await snapshot in photos.snapshots() {
    ///     render(snapshot.phase)
    /// }
    /// ```
    ///
    /// - Parameter bufferingPolicy: What to keep while the consumer is busy; by default only the
    ///   newest snapshot (a view only needs the latest).
    public func snapshots(
        bufferingPolicy: AsyncStream<LoadableSnapshot<Contents>>.Continuation.BufferingPolicy = .bufferingNewest(1)
    ) -> AsyncStream<LoadableSnapshot<Contents>> {
        makeStream(bufferingPolicy: bufferingPolicy) { $0.snapshot }
    }
}
