#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// How many rounds a stress test runs: all of them normally, a tenth under ThreadSanitizer, whose
/// instrumentation makes every round many times slower.
public enum StressScale {
    /// Whether this process runs under ThreadSanitizer (its runtime is linked in).
    public static let isThreadSanitizerActive: Bool = {
        guard let process = dlopen(nil, RTLD_NOW) else { return false }
        defer { dlclose(process) }
        return dlsym(process, "__tsan_init") != nil
    }()

    /// `count`, or a tenth of it (at least 1) under ThreadSanitizer.
    public static func rounds(_ count: Int) -> Int {
        isThreadSanitizerActive ? max(1, count / 10) : count
    }
}
