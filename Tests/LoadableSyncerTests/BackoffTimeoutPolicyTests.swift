import LoadableSyncer
import LoadableTesting
import Testing

@Suite struct BackoffTimeoutPolicyTests {
    @Test("After failures the delays follow the reference sequence 1, 1.414, 2, … 15, 15")
    func referenceSequence() {
        var policy = BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(15))
        let delays = (0..<10).map { _ in policy.nextTimeout(afterFailure: true)! }
        expectDurations(delays, approximately: referenceBackoffSeconds)
        #expect(delays == backoffSequence(min: .seconds(1), max: .seconds(15), count: 10))
    }

    @Test("The default multiplier is the square root of two")
    func defaultMultiplier() {
        let policy = BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(2))
        #expect(policy.multiplier == 2.0.squareRoot())
        #expect(policy.jitter == .none)
        #expect(policy.period == nil)
    }

    @Test("A success returns the period and starts the backoff over")
    func successResets() {
        var policy = BackoffTimeoutPolicy(period: .seconds(60), min: .seconds(1), max: .seconds(15))
        _ = policy.nextTimeout(afterFailure: true)
        _ = policy.nextTimeout(afterFailure: true)
        #expect(abs(policy.nextRetryDelay.seconds - 2) < 1e-9)
        #expect(policy.nextTimeout(afterFailure: false) == .seconds(60))
        #expect(policy.nextTimeout(afterFailure: true) == .seconds(1))
    }

    @Test("Without a period, or with a zero period, a success asks for no refresh", arguments: [nil, Duration.zero])
    func noPeriod(period: Duration?) {
        var policy = BackoffTimeoutPolicy(period: period, min: .seconds(1), max: .seconds(4))
        #expect(policy.nextTimeout(afterFailure: false) == nil)
    }

    @Test("reset() makes the next retry delay the minimum again")
    func reset() {
        var policy = BackoffTimeoutPolicy(min: .seconds(2), max: .seconds(100), multiplier: 3)
        #expect(policy.nextTimeout(afterFailure: true) == .seconds(2))
        #expect(policy.nextTimeout(afterFailure: true) == .seconds(6))
        policy.reset()
        #expect(policy.nextTimeout(afterFailure: true) == .seconds(2))
    }

    @Test("A multiplier of one gives a constant delay")
    func constantDelay() {
        var policy = BackoffTimeoutPolicy(min: .milliseconds(500), max: .seconds(10), multiplier: 1)
        let delays = (0..<5).map { _ in policy.nextTimeout(afterFailure: true) }
        #expect(delays == Array(repeating: .milliseconds(500), count: 5))
    }

    @Test("Full jitter stays within 0...d of the backoff sequence", arguments: [1, 42, 2024] as [UInt64])
    func fullJitterBounds(seed: UInt64) {
        var policy = BackoffTimeoutPolicy(
            min: .seconds(1),
            max: .seconds(15),
            jitter: .full,
            random: SeededRandomNumberGenerator(seed: seed)
        )
        let ceilings = backoffSequence(min: .seconds(1), max: .seconds(15), count: 200)
        for ceiling in ceilings {
            let delay = policy.nextTimeout(afterFailure: true)!
            #expect(delay >= .zero && delay <= ceiling, "\(delay) outside 0...\(ceiling)")
        }
    }

    @Test("Equal jitter stays within d/2...d of the backoff sequence", arguments: [1, 42, 2024] as [UInt64])
    func equalJitterBounds(seed: UInt64) {
        var policy = BackoffTimeoutPolicy(
            min: .seconds(1),
            max: .seconds(15),
            jitter: .equal,
            random: SeededRandomNumberGenerator(seed: seed)
        )
        let ceilings = backoffSequence(min: .seconds(1), max: .seconds(15), count: 200)
        for ceiling in ceilings {
            let delay = policy.nextTimeout(afterFailure: true)!
            #expect(delay >= ceiling / 2 && delay <= ceiling, "\(delay) outside \(ceiling / 2)...\(ceiling)")
        }
    }

    @Test("Jitter with the same seed gives the same delays, and really varies them")
    func jitterIsReproducible() {
        func delays(seed: UInt64) -> [Duration] {
            var policy = BackoffTimeoutPolicy(
                min: .seconds(4),
                max: .seconds(4),
                jitter: .full,
                random: SeededRandomNumberGenerator(seed: seed)
            )
            return (0..<20).map { _ in policy.nextTimeout(afterFailure: true)! }
        }
        #expect(delays(seed: 7) == delays(seed: 7))
        #expect(delays(seed: 7) != delays(seed: 8))
        #expect(Set(delays(seed: 7)).count > 1)
    }

    @Test("Jitter never applies to the refresh period")
    func periodIsNotJittered() {
        var policy = BackoffTimeoutPolicy(
            period: .seconds(30),
            min: .seconds(1),
            max: .seconds(2),
            jitter: .full,
            random: SeededRandomNumberGenerator(seed: 3)
        )
        for _ in 0..<10 { #expect(policy.nextTimeout(afterFailure: false) == .seconds(30)) }
    }

    @Test("Jitter descriptions", arguments: BackoffTimeoutPolicy.Jitter.allCases)
    func jitterDescription(jitter: BackoffTimeoutPolicy.Jitter) {
        #expect(["none", "full", "equal"].contains(jitter.description))
    }

    // MARK: - Extreme but valid configuration

    @Test(
        "A huge multiplier jumps to max after the first retry instead of overflowing",
        arguments: [1e30, .greatestFiniteMagnitude] as [Double])
    func hugeMultiplier(multiplier: Double) {
        var policy = BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(60), multiplier: multiplier)
        let delays = (0..<4).map { _ in policy.nextTimeout(afterFailure: true) }
        #expect(delays == [.seconds(1), .seconds(60), .seconds(60), .seconds(60)])
        #expect(policy.nextRetryDelay == .seconds(60))
    }

    @Test(
        "A tiny min with a huge multiplier jumps to max without overflowing",
        arguments: [1e30, .greatestFiniteMagnitude] as [Double])
    func tinyMinHugeMultiplier(multiplier: Double) {
        let tiny = Duration(secondsComponent: 0, attosecondsComponent: 1)
        var policy = BackoffTimeoutPolicy(min: tiny, max: .seconds(60), multiplier: multiplier)
        let delays = (0..<3).map { _ in policy.nextTimeout(afterFailure: true) }
        #expect(delays == [tiny, .seconds(60), .seconds(60)])
    }

    @Test("A huge multiplier with the largest max in whole seconds jumps to max without overflowing")
    func hugeMultiplierHugeMax() {
        let huge = Duration.seconds(Int64.max)
        var policy = BackoffTimeoutPolicy(min: .seconds(1), max: huge, multiplier: 1e30)
        let delays = (0..<3).map { _ in policy.nextTimeout(afterFailure: true) }
        #expect(delays == [.seconds(1), huge, huge])
    }

    @Test("Large but ordinary growth still follows min·mⁿ exactly, capped at max")
    func largeOrdinaryGrowth() {
        let tiny = Duration(secondsComponent: 0, attosecondsComponent: 1)
        var fromTiny = BackoffTimeoutPolicy(min: tiny, max: .seconds(1), multiplier: 1e6)
        #expect(
            (0..<6).map { _ in fromTiny.nextTimeout(afterFailure: true)! }
                == backoffSequence(min: tiny, max: .seconds(1), multiplier: 1e6, count: 6)
        )
        let huge = Duration.seconds(Int64.max)
        var doubling = BackoffTimeoutPolicy(min: .seconds(1), max: huge, multiplier: 2)
        let delays = (0..<70).map { _ in doubling.nextTimeout(afterFailure: true)! }
        #expect(delays == backoffSequence(min: .seconds(1), max: huge, multiplier: 2, count: 70))
        #expect(delays.last == huge)
    }

    // MARK: - Invalid configuration

    @Test("A zero min stops the program with a message naming min")
    func zeroMinExits() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = BackoffTimeoutPolicy(min: .zero, max: .seconds(1))
        }
        #expect(bytes(result?.standardErrorContent ?? [], contain: "min must be > .zero, got 0.0 seconds"))
    }

    @Test("A max below min stops the program with a message naming max")
    func maxBelowMinExits() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = BackoffTimeoutPolicy(min: .seconds(2), max: .seconds(1))
        }
        #expect(bytes(result?.standardErrorContent ?? [], contain: "max must be >= min"))
    }

    @Test("A multiplier below one stops the program with a message naming multiplier")
    func smallMultiplierExits() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(2), multiplier: 0.5)
        }
        #expect(bytes(result?.standardErrorContent ?? [], contain: "multiplier must be a finite number >= 1, got 0.5"))
    }

    @Test("A negative period stops the program with a message naming period")
    func negativePeriodExits() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = BackoffTimeoutPolicy(period: .seconds(-1), min: .seconds(1), max: .seconds(2))
        }
        #expect(bytes(result?.standardErrorContent ?? [], contain: "period must be >= .zero"))
    }

    @Test("maxRetries hands out that many retries, then nil, until a reset or a success", arguments: [0, 1, 3])
    func maxRetries(limit: Int) {
        var policy = BackoffTimeoutPolicy(period: .seconds(60), min: .seconds(1), max: .seconds(8), maxRetries: limit)
        #expect(policy.maxRetries == limit)
        let expected = backoffSequence(min: .seconds(1), max: .seconds(8), count: limit)
        for _ in 0..<2 {
            let delays = (0..<limit).map { _ in policy.nextTimeout(afterFailure: true) }
            #expect(delays == expected.map { Optional($0) })
            #expect(policy.retryCount == limit)
            #expect(policy.nextTimeout(afterFailure: true) == nil)
            #expect(policy.nextTimeout(afterFailure: true) == nil)
            #expect(policy.retryCount == limit)  // a refused retry is not counted
            policy.reset()
            #expect(policy.retryCount == 0)
        }
        _ = policy.nextTimeout(afterFailure: true)
        #expect(policy.nextTimeout(afterFailure: false) == .seconds(60))
        #expect(policy.retryCount == 0)
    }

    @Test("Without maxRetries the retries never stop")
    func noRetryLimit() {
        var policy = BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(2))
        #expect(policy.maxRetries == nil)
        #expect((0..<10_000).allSatisfy { _ in policy.nextTimeout(afterFailure: true) != nil })
        #expect(policy.retryCount == 10_000)
    }

    @Test("A negative maxRetries stops the program with a message naming maxRetries")
    func negativeMaxRetriesExits() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = BackoffTimeoutPolicy(min: .seconds(1), max: .seconds(2), maxRetries: -1)
        }
        #expect(
            bytes(
                result?.standardErrorContent ?? [],
                contain: "BackoffTimeoutPolicy: maxRetries must be >= 0 (or nil for no limit), got -1"
            )
        )
    }
}
