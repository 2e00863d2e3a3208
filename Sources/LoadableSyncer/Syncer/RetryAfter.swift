public import Foundation

/// An error that knows when a retry makes sense (an HTTP 429/503 with a `Retry-After` header).
///
/// When a sync fails with an error that conforms to this protocol and has a ``retryAfter`` hint,
/// ``LoadableSyncer`` uses the hint: the retry delay becomes `min(max(backoff, hint),`
/// ``LoadableSyncer/maxRetryAfter``), where `backoff` is the delay the timeout policy asked for. Jitter applies to the backoff only,
/// never to the hint, so the syncer never retries before the server said it may. Errors that do not
/// conform, or whose hint is `nil`, get the backoff alone.
///
/// The protocol has no isolation of its own; conforming errors are usually small `Sendable` values
/// built wherever the response is read, with ``RetryAfter/parse(_:now:)`` for the header:
///
/// ```swift
/// struct ServerBusy: RetryAfterProviding {
///     var retryAfter: Duration?
/// }
///
/// if response.statusCode == 429 || response.statusCode == 503 {
///     let header = response.value(forHTTPHeaderField: "Retry-After") ?? ""
///     throw ServerBusy(retryAfter: RetryAfter.parse(header, now: .now))
/// }
/// ```
public protocol RetryAfterProviding: Error {
    /// How long to wait before retrying, as the server asked; `nil` when it did not say.
    ///
    /// ```swift
    /// ServerBusy(retryAfter: .seconds(120)).retryAfter  // 120 s
    /// ```
    var retryAfter: Duration? { get }

    /// Whether a retry may succeed; `true` unless the conforming type says otherwise.
    ///
    /// ``LoadableSyncer``'s default ``LoadableSyncer/shouldRetry`` asks it, so an error that knows
    /// a retry is pointless (an HTTP 404, a body that does not decode) stops the retries without
    /// any setup:
    ///
    /// ```swift
    /// struct ServerAnswer: RetryAfterProviding {
    ///     var status: Int
    ///     var retryAfter: Duration?
    ///     var isRetryable: Bool { status == 429 || status >= 500 }
    /// }
    /// ```
    var isRetryable: Bool { get }

    /// Whether a write sent with an idempotency key may be sent again, with the same key, after
    /// this error: ``isRetryable`` unless the conforming type says otherwise.
    ///
    /// `LoadableOutbox`'s default retry rule asks it. An HTTP `409` without `Retry-After` answers
    /// `true`: to a request that carries an `Idempotency-Key` (every outbox send does), it is the
    /// IETF draft's "a request with this key is still being processed", which a later retry
    /// resolves.
    var isRetryableWithIdempotencyKey: Bool { get }
}

extension RetryAfterProviding {
    /// `true`: a retry may succeed.
    public var isRetryable: Bool { true }

    /// ``isRetryable``: a write is retried when any request would be.
    public var isRetryableWithIdempotencyKey: Bool { isRetryable }
}

/// Reading HTTP `Retry-After` header values.
///
/// A namespace of pure functions: no state, callable from any isolation. The clock is never read;
/// the caller passes `now`, so tests can fix it.
///
/// ```swift
/// let now = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT
/// RetryAfter.parse("120", now: now)                            // 120 s
/// RetryAfter.parse("Sun, 06 Nov 1994 08:51:37 GMT", now: now)  // 120 s
/// RetryAfter.parse("soon", now: now)                           // nil
/// ```
public enum RetryAfter {
    /// The largest delay `parse` returns: 2^31 seconds (about 68 years). Larger delta-seconds, and
    /// dates further ahead, are capped to it (RFC 9111 §1.2.2 does the same for delta-seconds).
    ///
    /// ```swift
    /// RetryAfter.parse("99999999999999999999", now: .now) == RetryAfter.largestDelay  // true
    /// ```
    public static let largestDelay: Duration = .seconds(2_147_483_648)

    /// ``largestDelay`` in whole seconds (2^31).
    private static let largestDelaySeconds: Int64 = 2_147_483_648

    /// `header` (a `Retry-After` value) as a delay from `now`, or `nil` when it is neither form.
    ///
    /// RFC 9110 §10.2.3 allows two forms, `Retry-After = HTTP-date / delay-seconds`:
    ///
    /// - **delay-seconds**: one or more ASCII digits and nothing else, such as `120` or `007`. No
    ///   sign, no fraction, no exponent. Values above ``largestDelay`` (however many digits) give
    ///   ``largestDelay``.
    /// - **HTTP-date**, in its IMF-fixdate form only: `Sun, 06 Nov 1994 08:49:37 GMT`, with the
    ///   names spelled exactly so (case sensitive) and two-digit fields. The day must exist in its
    ///   month (leap years follow the Gregorian rules), years 0000–9999 are accepted, and the time
    ///   is in GMT. The result is the time from `now` to that date, fractions of a second included;
    ///   a date at or before `now` gives `.zero`, and a date further ahead than ``largestDelay``
    ///   gives ``largestDelay``.
    ///
    ///   The day-name must be one of `Mon` … `Sun` but need not match the date: servers rarely get
    ///   it wrong, and the date is what counts. A leap second (`23:59:60`) is read as second 0 of
    ///   the next minute (as POSIX `timegm` does), so the retry is never earlier than the server
    ///   asked.
    ///
    /// Spaces and horizontal tabs around the value are ignored. Anything else gives `nil`: an empty
    /// or blank value, `-5`, `1.5`, `soon`, the obsolete RFC 850 and asctime date formats, ISO 8601,
    /// a zone other than `GMT`, trailing characters, or two values (`120, 130`).
    ///
    /// ```swift
    /// let now = Date(timeIntervalSince1970: 784_111_777.25)  // 08:49:37.25 GMT
    /// RetryAfter.parse(" 120\t", now: now)                          // 120 s
    /// RetryAfter.parse("Sun, 06 Nov 1994 08:49:47 GMT", now: now)  // 9.75 s
    /// RetryAfter.parse("Sun, 06 Nov 1994 08:00:00 GMT", now: now)  // .zero (in the past)
    /// RetryAfter.parse("Sunday, 06-Nov-94 08:49:37 GMT", now: now) // nil (RFC 850)
    /// ```
    ///
    /// - Parameters:
    ///   - header: The value of a `Retry-After` header field.
    ///   - now: The current time, which an HTTP-date is measured from. Not used for delay-seconds.
    /// - Returns: The delay, in `.zero ... largestDelay`; `nil` when `header` is not a valid value.
    /// - Complexity: O(*n*) in the length of `header`, without allocating.
    public static func parse(_ header: String, now: Date) -> Duration? {
        let bytes = header.utf8
        var start = bytes.startIndex
        var end = bytes.endIndex
        while start < end, isOptionalWhitespace(bytes[start]) {
            bytes.formIndex(after: &start)
        }
        while start < end, isOptionalWhitespace(bytes[bytes.index(before: end)]) {
            bytes.formIndex(before: &end)
        }
        let value = bytes[start..<end]
        guard let first = value.first else { return nil }
        if isDigit(first) {
            return delaySeconds(value)
        }
        guard let seconds = secondsSince1970(imfFixdate: value) else { return nil }
        return delay(until: seconds, from: now)
    }

    /// A `Retry-After` value read against the response's own `Date` header, so that no clock of
    /// this machine is read and a client whose clock is off still waits as long as the server
    /// asked.
    ///
    /// Delay-seconds need no date. An HTTP-date is measured from `date` (the response's `Date`
    /// value); without a valid `date` it gives `nil`.
    ///
    /// - Parameters:
    ///   - header: The value of a `Retry-After` header field.
    ///   - date: The value of the response's `Date` header field, if any.
    /// - Returns: The delay, or `nil` as ``parse(_:now:)`` would, or when the value is a date and
    ///   `date` is missing or not an IMF-fixdate.
    package static func parse(_ header: String, responseDate date: String?) -> Duration? {
        let trimmed = header.utf8.drop { isOptionalWhitespace($0) }
        if let first = trimmed.first, isDigit(first) {
            return parse(header, now: Date(timeIntervalSinceReferenceDate: 0))
        }
        guard let date, let seconds = secondsSince1970(imfFixdate: Substring(date).utf8) else { return nil }
        return parse(header, now: Date(timeIntervalSinceReferenceDate: Double(seconds - secondsFrom1970To2001)))
    }

    // MARK: - delay-seconds

    /// `value` as delay-seconds (digits only), saturating at ``largestDelay``.
    private static func delaySeconds(_ value: Substring.UTF8View) -> Duration? {
        var seconds: Int64 = 0
        for byte in value {
            guard isDigit(byte) else { return nil }
            // `seconds` is at most 2^31 here, so `seconds * 10 + 9` cannot overflow.
            seconds = Swift.min(seconds * 10 + Int64(byte &- asciiZero), largestDelaySeconds)
        }
        return .seconds(seconds)
    }

    // MARK: - IMF-fixdate

    /// The seconds since 1970 (UTC) of `value`, an IMF-fixdate such as
    /// `Sun, 06 Nov 1994 08:49:37 GMT`, or `nil` when it is not one.
    private static func secondsSince1970(imfFixdate value: Substring.UTF8View) -> Int64? {
        var reader = value.makeIterator()
        guard name(from: &reader, in: dayNames) != nil,
            literal(",", from: &reader),
            literal(" ", from: &reader),
            let day = number(digits: 2, from: &reader),
            literal(" ", from: &reader),
            let monthIndex = name(from: &reader, in: monthNames),
            literal(" ", from: &reader),
            let year = number(digits: 4, from: &reader),
            literal(" ", from: &reader),
            let hour = number(digits: 2, from: &reader),
            literal(":", from: &reader),
            let minute = number(digits: 2, from: &reader),
            literal(":", from: &reader),
            let second = number(digits: 2, from: &reader),
            literal(" GMT", from: &reader),
            reader.next() == nil
        else { return nil }
        let month = monthIndex + 1
        guard (1...daysIn(month: month, year: year)).contains(day),
            hour <= 23, minute <= 59, second <= 60
        else { return nil }
        // A leap second (60) simply counts on into the next minute, as `timegm` does.
        let days = daysSince1970(year: year, month: month, day: day)
        return days * 86_400 + hour * 3_600 + minute * 60 + second
    }

    /// The time from `now` to `seconds` (since 1970), in `.zero ... largestDelay`; `nil` only when
    /// `now` is not a number.
    private static func delay(until seconds: Int64, from now: Date) -> Duration? {
        // `Date` keeps seconds since 2001 as a `Double`; measuring from there avoids rounding `now`
        // again. Years 0000–9999 keep `target` far below 2^53, so it converts to `Double` exactly.
        let target = seconds - secondsFrom1970To2001
        let nowSeconds = now.timeIntervalSinceReferenceDate
        guard !nowSeconds.isNaN else { return nil }
        if nowSeconds >= Double(target) { return .zero }
        if nowSeconds < Double(target - largestDelaySeconds) { return largestDelay }
        // Now `now` is finite and within 2^31 s before `target`: split it into whole seconds and a
        // fraction (both exact) so the difference keeps the fraction.
        let wholeSeconds = nowSeconds.rounded(.down)
        let fraction = nowSeconds - wholeSeconds
        let difference = Duration.seconds(target - Int64(wholeSeconds)) - Duration.seconds(fraction)
        return Swift.min(difference, largestDelay)
    }

    /// Days from 1970-01-01 to the given date of the proleptic Gregorian calendar (negative before).
    ///
    /// Howard Hinnant's `days_from_civil`: years are counted from March, so that the leap day is the
    /// last day of the year, in eras of 400 years (146,097 days).
    private static func daysSince1970(year: Int64, month: Int64, day: Int64) -> Int64 {
        let marchYear = month <= 2 ? year - 1 : year
        let era = (marchYear >= 0 ? marchYear : marchYear - 399) / 400
        let yearOfEra = marchYear - era * 400  // 0 ... 399
        let monthFromMarch = month > 2 ? month - 3 : month + 9  // 0 ... 11
        let dayOfYear = (153 * monthFromMarch + 2) / 5 + day - 1  // 0 ... 365
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear  // 0 ... 146_096
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The number of days in `month` (1 ... 12) of `year`, by the Gregorian rules.
    private static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2:
            let isLeapYear = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
            return isLeapYear ? 29 : 28
        case 4, 6, 9, 11:
            return 30
        default:
            return 31
        }
    }

    /// Reads a three-letter name and returns its index in `names`, or `nil` when it is none of them.
    private static func name(
        from reader: inout Substring.UTF8View.Iterator,
        in names: [[UInt8]]
    ) -> Int64? {
        guard let first = reader.next(), let second = reader.next(), let third = reader.next() else {
            return nil
        }
        guard let index = names.firstIndex(where: { $0[0] == first && $0[1] == second && $0[2] == third })
        else { return nil }
        return Int64(index)
    }

    /// Reads exactly `digits` ASCII digits and returns their value, or `nil`.
    private static func number(digits: Int, from reader: inout Substring.UTF8View.Iterator) -> Int64? {
        var value: Int64 = 0
        for _ in 0..<digits {
            guard let byte = reader.next(), isDigit(byte) else { return nil }
            value = value * 10 + Int64(byte &- asciiZero)
        }
        return value
    }

    /// Reads the bytes of `text` and returns whether they were exactly those.
    private static func literal(_ text: StaticString, from reader: inout Substring.UTF8View.Iterator) -> Bool {
        text.withUTF8Buffer { expected in
            expected.allSatisfy { reader.next() == $0 }
        }
    }

    private static let dayNames: [[UInt8]] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"].map { Array($0.utf8) }

    private static let monthNames: [[UInt8]] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ].map { Array($0.utf8) }

    /// Seconds from 1970-01-01 to 2001-01-01, the reference date of `Date`.
    private static let secondsFrom1970To2001: Int64 = 978_307_200

    private static let asciiZero = UInt8(ascii: "0")

    private static func isDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    /// HTTP's "OWS": a space or a horizontal tab.
    private static func isOptionalWhitespace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t")
    }
}
