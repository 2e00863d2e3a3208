#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// Time as the cores store it: `Int64` nanoseconds, which fit in the core's spare bytes where a
/// clock's `Instant` would not.
package enum LoadableTime {
    /// The origin of the default clock's scale.
    private static let origin = ContinuousClock.now

    /// `ContinuousClock.now`, in nanoseconds since ``origin``.
    ///
    /// Read from the system clock that `ContinuousClock` reads (`CLOCK_BOOTTIME` on Linux,
    /// `CLOCK_MONOTONIC_RAW` on Apple platforms) where it is known, since that costs a fraction
    /// of `ContinuousClock.now` followed by 128-bit `Duration` arithmetic; every loadable with
    /// the default clock records the time of each success.
    static var continuousNow: Int64 {
        #if os(Linux) || os(Android) || canImport(Darwin)
            return systemNanoseconds() &- originNanoseconds
        #else
            return nanoseconds(origin.duration(to: .now))
        #endif
    }

    #if os(Linux) || os(Android) || canImport(Darwin)
        /// The system clock's reading when the scale began: readings are kept small.
        private static let originNanoseconds = systemNanoseconds()

        /// The clock `ContinuousClock` reads, in nanoseconds.
        @inline(__always)
        private static func systemNanoseconds() -> Int64 {
            #if os(Linux) || os(Android)
                var time = timespec()
                clock_gettime(CLOCK_BOOTTIME, &time)
                return Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec)
            #else
                return Int64(bitPattern: clock_gettime_nsec_np(CLOCK_MONOTONIC_RAW))
            #endif
        }
    #endif

    /// `duration` in whole nanoseconds, saturating at the ends of `Int64`.
    package static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min + 1 : .max }
        let (sum, overflow2) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        if overflow2 { return seconds < 0 ? .min + 1 : .max }
        return sum
    }

    /// `time + duration`, saturating at `Int64.max` (a setting of centuries means "never", not a
    /// time in the past).
    package static func adding(_ duration: Int64, to time: Int64) -> Int64 {
        let (sum, overflow) = time.addingReportingOverflow(duration)
        return overflow ? (duration > 0 ? .max : .min) : sum
    }

    /// `nanoseconds` as a `Duration`.
    package static func duration(_ nanoseconds: Int64) -> Duration {
        .nanoseconds(nanoseconds)
    }
}
