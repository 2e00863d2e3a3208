import Foundation
import LoadableSyncer
import LoadableTesting
import Testing

@Suite struct RetryAfterTests {
    /// A `Retry-After` value and the delay it must give.
    struct Row: Sendable, CustomTestStringConvertible {
        var header: String
        var expected: Duration?
        var note: String

        init(_ header: String, _ expected: Duration?, _ note: String) {
            self.header = header
            self.expected = expected
            self.note = note
        }

        var testDescription: String {
            let result = expected.map { "\($0)" } ?? "nil"
            return "\(header.debugDescription) → \(result) (\(note))"
        }
    }

    /// Sun, 06 Nov 1994 08:49:37 GMT, the example date of RFC 9110.
    static let now = Date(timeIntervalSince1970: 784_111_777)
    static let largest = RetryAfter.largestDelay

    static let rows: [Row] = [
        // delay-seconds
        Row("120", .seconds(120), "delay-seconds"),
        Row("0", .zero, "zero seconds"),
        Row("007", .seconds(7), "leading zeros"),
        Row(" 120\t", .seconds(120), "spaces and tabs around"),
        Row("2147483647", .seconds(2_147_483_647), "just below the cap"),
        Row("2147483648", .seconds(2_147_483_648), "exactly the cap"),
        Row("2147483649", largest, "just above the cap"),
        Row("99999999999999999999999999999999999999", largest, "overflows Int"),
        Row("-5", nil, "negative"),
        Row("+5", nil, "explicit sign"),
        Row("1.5", nil, "fraction"),
        Row("1e3", nil, "exponent"),
        Row("1 20", nil, "inner space"),
        Row("120s", nil, "trailing garbage after a number"),
        Row("120, 130", nil, "two values"),
        Row("120\n", nil, "a newline is not OWS"),
        Row("\u{661}\u{662}", nil, "Arabic-Indic digits"),
        Row("\u{FF11}\u{FF12}\u{FF10}", nil, "full-width digits"),
        Row("", nil, "empty"),
        Row(" \t  ", nil, "whitespace only"),
        Row("soon", nil, "a word"),
        // IMF-fixdate
        Row("Sun, 06 Nov 1994 08:51:37 GMT", .seconds(120), "two minutes ahead"),
        Row("\t Sun, 06 Nov 1994 08:51:37 GMT  ", .seconds(120), "a date with OWS around"),
        Row("Sun, 06 Nov 1994 08:49:37 GMT", .zero, "the same instant"),
        Row("Sat, 05 Nov 1994 08:49:37 GMT", .zero, "a day ago"),
        Row("Sat, 01 Jan 0000 00:00:00 GMT", .zero, "year 0000"),
        Row("Fri, 24 Nov 2062 12:03:44 GMT", .seconds(2_147_483_647), "a date just below the cap"),
        Row("Fri, 24 Nov 2062 12:03:45 GMT", largest, "a date exactly at the cap"),
        Row("Fri, 24 Nov 2062 12:03:46 GMT", largest, "a date just past the cap"),
        Row("Fri, 31 Dec 9999 23:59:59 GMT", largest, "year 9999"),
        Row("Thu, 29 Feb 1996 00:00:00 GMT", .seconds(41_440_223), "Feb 29 of a leap year"),
        Row("Tue, 29 Feb 2000 00:00:00 GMT", .seconds(167_670_623), "Feb 29, 2000 (divisible by 400)"),
        Row("Wed, 29 Feb 1995 00:00:00 GMT", nil, "Feb 29 of a common year"),
        Row("Thu, 29 Feb 1900 00:00:00 GMT", nil, "Feb 29, 1900 (divisible by 100)"),
        Row("Thu, 30 Nov 1994 00:00:00 GMT", .seconds(2_041_823), "day 30 of November"),
        Row("Thu, 31 Nov 1994 00:00:00 GMT", nil, "day 31 of a 30-day month"),
        Row("Thu, 00 Nov 1994 00:00:00 GMT", nil, "day 00"),
        Row("Sun, 06 Nov 1994 24:00:00 GMT", nil, "hour 24"),
        Row("Sun, 06 Nov 1994 08:60:00 GMT", nil, "minute 60"),
        Row("Sun, 06 Nov 1994 08:49:61 GMT", nil, "second 61"),
        Row("Sun, 06 Nov 1994 08:49:60 GMT", .seconds(23), "a leap second counts as 08:50:00"),
        Row("Mon, 06 Nov 1994 08:51:37 GMT", .seconds(120), "a wrong day-name is accepted"),
        Row("Xyz, 06 Nov 1994 08:51:37 GMT", nil, "an unknown day-name"),
        Row("sun, 06 Nov 1994 08:51:37 GMT", nil, "lower-case day-name"),
        Row("Sun, 06 nov 1994 08:51:37 GMT", nil, "lower-case month"),
        Row("Sun, 06 Nov 1994 08:51:37 UTC", nil, "UTC instead of GMT"),
        Row("Sun, 06 Nov 1994 08:51:37 +0000", nil, "+0000 instead of GMT"),
        Row("Sun, 06 Nov 1994 08:51:37 gmt", nil, "lower-case GMT"),
        Row("Sun, 06 Nov 1994 08:51:37 GMTx", nil, "trailing garbage after a date"),
        Row("Sun, 06 Nov 1994 08:51:37", nil, "no zone"),
        Row("Sun, 6 Nov 1994 08:51:37 GMT", nil, "one-digit day"),
        Row("Sun,  06 Nov 1994 08:51:37 GMT", nil, "two spaces"),
        Row("Sun, 06 Nov 94 08:51:37 GMT", nil, "two-digit year"),
        Row("Sunday, 06-Nov-94 08:49:37 GMT", nil, "RFC 850 date"),
        Row("Sun Nov  6 08:49:37 1994", nil, "asctime date"),
        Row("1994-11-06T08:49:37Z", nil, "ISO 8601 date"),
    ]

    @Test("Retry-After values", arguments: rows)
    func values(row: Row) {
        #expect(RetryAfter.parse(row.header, now: Self.now) == row.expected)
    }

    @Test("The largest delay is 2^31 seconds")
    func largestDelay() {
        #expect(RetryAfter.largestDelay == .seconds(2_147_483_648))
        #expect(RetryAfter.largestDelay == .seconds(1 << 31))
    }

    /// Sun, 06 Nov 1994 08:49:37.25 GMT.
    static let fractionalNow = Date(timeIntervalSince1970: 784_111_777.25)

    static let fractionalRows: [Row] = [
        Row("Sun, 06 Nov 1994 08:49:47 GMT", .seconds(9) + .milliseconds(750), "the fraction of now is kept"),
        Row("Sun, 06 Nov 1994 08:49:38 GMT", .milliseconds(750), "less than a second ahead"),
        Row("Sun, 06 Nov 1994 08:49:37 GMT", .zero, "a quarter second ago"),
        Row("10", .seconds(10), "delay-seconds ignore now"),
        Row("Fri, 24 Nov 2062 12:03:45 GMT", .seconds(2_147_483_647) + .milliseconds(750), "just below the cap"),
        Row("Fri, 24 Nov 2062 12:03:46 GMT", .seconds(2_147_483_648), "capped"),
    ]

    @Test("A now with a fraction of a second keeps the fraction", arguments: fractionalRows)
    func fractionalNow(row: Row) {
        #expect(RetryAfter.parse(row.header, now: Self.fractionalNow) == row.expected)
    }

    @Test("A now far from any date, or not a number, does not trap")
    func extremeNow() {
        let date = "Sun, 06 Nov 1994 08:51:37 GMT"
        let largest = RetryAfter.largestDelay
        #expect(RetryAfter.parse(date, now: .distantPast) == largest)
        #expect(RetryAfter.parse(date, now: .distantFuture) == .zero)
        #expect(RetryAfter.parse(date, now: Date(timeIntervalSinceReferenceDate: -.infinity)) == largest)
        #expect(RetryAfter.parse(date, now: Date(timeIntervalSinceReferenceDate: .infinity)) == .zero)
        #expect(RetryAfter.parse(date, now: Date(timeIntervalSinceReferenceDate: .nan)) == nil)
        #expect(RetryAfter.parse("120", now: Date(timeIntervalSinceReferenceDate: .nan)) == .seconds(120))
    }

    @Test("Dates formatted by Foundation parse back to their distance from now", arguments: [1, 2, 3] as [UInt64])
    func roundTrip(seed: UInt64) {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.calendar = Calendar(identifier: .gregorian)
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        let year2100: Int64 = 4_102_444_800
        let before = Date(timeIntervalSince1970: -1)
        let after = Date(timeIntervalSince1970: TimeInterval(year2100) + 1)
        var random = SeededRandomNumberGenerator(seed: seed)
        for _ in 0..<1_000 {
            let seconds = Int64.random(in: 0..<year2100, using: &random)
            let header = formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
            let fromBefore = min(Duration.seconds(seconds + 1), RetryAfter.largestDelay)
            #expect(RetryAfter.parse(header, now: before) == fromBefore, "\(header)")
            #expect(RetryAfter.parse(header, now: after) == .zero, "\(header)")
            // And from a now a random distance before the date, up to a little past the cap.
            let distance = Int64.random(in: 1...(1 << 31) + 10, using: &random)
            let near = Date(timeIntervalSince1970: TimeInterval(seconds - distance))
            #expect(
                RetryAfter.parse(header, now: near) == min(.seconds(distance), RetryAfter.largestDelay),
                "\(header) from \(distance) s before"
            )
        }
    }

    @Test("Random and mutated values never trap and stay within bounds", arguments: [7, 8] as [UInt64])
    func robustness(seed: UInt64) {
        var random = SeededRandomNumberGenerator(seed: seed)
        let alphabet: [Character] =
            Array("0123456789SunMoTeWdhFriaJbMyplgOctNvDGT,: -+.\t") + [
                "\n", "\r", "\u{0}", "é", "\u{661}", "\u{FF11}", "🙂", "e\u{301}",
            ]
        let valid = [
            "120", "0", "007", "2147483648", "99999999999999999999",
            "Sun, 06 Nov 1994 08:49:37 GMT", "Thu, 29 Feb 1996 00:00:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT",
            " Sat, 01 Jan 0000 00:00:00 GMT\t",
        ]
        for _ in 0..<5_000 {
            let length = Int.random(in: 0...40, using: &random)
            let text = String((0..<length).map { _ in alphabet.randomElement(using: &random)! })
            check(text)

            var mutated = Array(valid.randomElement(using: &random)!)
            let position = Int.random(in: 0...mutated.count, using: &random)
            let character = alphabet.randomElement(using: &random)!
            switch Int.random(in: 0..<3, using: &random) {
            case 0 where position < mutated.count: mutated[position] = character
            case 1 where position < mutated.count: mutated.remove(at: position)
            default: mutated.insert(character, at: position)
            }
            check(String(mutated))
        }
        // Very long values: linear work, no trap.
        check(String(repeating: "9", count: 100_000))
        check(String(repeating: "Sun, 06 Nov 1994 08:49:37 GMT", count: 1_000))
        check(String(repeating: " ", count: 100_000) + "1" + String(repeating: "\t", count: 100_000))
        #expect(RetryAfter.parse(String(repeating: "9", count: 100_000), now: Self.now) == RetryAfter.largestDelay)
    }

    /// Checks the bounds of `parse(text)` and, for values made of digits, the value itself.
    private func check(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let result = RetryAfter.parse(text, now: Self.now)
        let comment: Comment = "\(text.debugDescription)"
        if let result {
            #expect(result >= .zero && result <= RetryAfter.largestDelay, comment, sourceLocation: sourceLocation)
        }
        let trimmed = text.trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
        if !trimmed.isEmpty, trimmed.unicodeScalars.allSatisfy({ ("0"..."9").contains($0) }) {
            // A reference for delay-seconds: drop leading zeros; more than 10 digits is over the cap.
            let significant = trimmed.drop { $0 == "0" }
            let seconds = significant.count > 10 ? 1 << 31 : min(Int64(significant) ?? 0, 1 << 31)
            #expect(result == .seconds(seconds), comment, sourceLocation: sourceLocation)
        } else if result != nil {
            // Anything else that parses is an IMF-fixdate: 29 ASCII characters ending in " GMT".
            #expect(trimmed.utf8.count == 29 && trimmed.hasSuffix(" GMT"), comment, sourceLocation: sourceLocation)
        }
    }

    @Test("An error can carry the server's hint")
    func providingError() {
        struct ServerBusy: RetryAfterProviding {
            var retryAfter: Duration?
        }
        let error: any Error = ServerBusy(retryAfter: RetryAfter.parse("30", now: Self.now))
        #expect((error as? any RetryAfterProviding)?.retryAfter == .seconds(30))
        #expect(ServerBusy(retryAfter: nil).retryAfter == nil)
    }
}
