extension LoadableGroup {
    /// Combines the contents of two loadables into one typed loadable.
    ///
    /// ```swift
    /// let services = LoadableGroup.combine(user, services) { User.Services(user: $0, services: $1) }
    /// ```
    ///
    /// - Parameters:
    ///   - first: The first member.
    ///   - second: The second member.
    ///   - transform: Builds the combined contents; runs on the main actor on every member
    ///     notification while both members have contents.
    /// - Returns: A ``CombinedLoadable`` following a strict group of the members.
    public static func combine<First: ContentsLoadable, Second: ContentsLoadable, Contents>(
        _ first: First,
        _ second: Second,
        transform: @escaping @MainActor (First.Contents, Second.Contents) -> Contents
    ) -> CombinedLoadable<Contents> {
        CombinedLoadable(members: [first, second]) {
            guard let a = first.contents, let b = second.contents else { return nil }
            return transform(a, b)
        }
    }

    /// Combines the contents of three loadables into one typed loadable.
    ///
    /// ```swift
    /// let page = LoadableGroup.combine(user, posts, friends) { Page(user: $0, posts: $1, friends: $2) }
    /// ```
    ///
    /// - Parameters:
    ///   - first: The first member.
    ///   - second: The second member.
    ///   - third: The third member.
    ///   - transform: Builds the combined contents; runs on the main actor on every member
    ///     notification while all members have contents.
    /// - Returns: A ``CombinedLoadable`` following a strict group of the members.
    public static func combine<
        First: ContentsLoadable, Second: ContentsLoadable, Third: ContentsLoadable, Contents
    >(
        _ first: First,
        _ second: Second,
        _ third: Third,
        transform: @escaping @MainActor (First.Contents, Second.Contents, Third.Contents) -> Contents
    ) -> CombinedLoadable<Contents> {
        CombinedLoadable(members: [first, second, third]) {
            guard let a = first.contents, let b = second.contents, let c = third.contents else { return nil }
            return transform(a, b, c)
        }
    }

    /// Combines the contents of four loadables into one typed loadable.
    ///
    /// ```swift
    /// let home = LoadableGroup.combine(user, feed, weather, news) { Home($0, $1, $2, $3) }
    /// ```
    ///
    /// - Parameters:
    ///   - first: The first member.
    ///   - second: The second member.
    ///   - third: The third member.
    ///   - fourth: The fourth member.
    ///   - transform: Builds the combined contents; runs on the main actor on every member
    ///     notification while all members have contents.
    /// - Returns: A ``CombinedLoadable`` following a strict group of the members.
    public static func combine<
        First: ContentsLoadable, Second: ContentsLoadable, Third: ContentsLoadable, Fourth: ContentsLoadable,
        Contents
    >(
        _ first: First,
        _ second: Second,
        _ third: Third,
        _ fourth: Fourth,
        transform: @escaping @MainActor (First.Contents, Second.Contents, Third.Contents, Fourth.Contents) -> Contents
    ) -> CombinedLoadable<Contents> {
        CombinedLoadable(members: [first, second, third, fourth]) {
            guard let a = first.contents, let b = second.contents, let c = third.contents, let d = fourth.contents
            else { return nil }
            return transform(a, b, c, d)
        }
    }
}
