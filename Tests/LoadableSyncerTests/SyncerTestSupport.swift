import LoadableSyncer
import Testing

/// The reference backoff sequence for min 1 s, max 15 s, ×√2, in seconds (rounded).
let referenceBackoffSeconds: [Double] = [1, 1.414, 2, 2.828, 4, 5.657, 8, 11.31, 15, 15]

/// The backoff sequence computed the way ``BackoffTimeoutPolicy`` computes it.
func backoffSequence(
    min: Duration,
    max: Duration,
    multiplier: Double = 2.0.squareRoot(),
    count: Int
) -> [Duration] {
    var delays: [Duration] = []
    var delay = min
    for _ in 0..<count {
        delays.append(delay)
        delay = Swift.min(delay * multiplier, max)
    }
    return delays
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    var seconds: Double { self / .seconds(1) }
}

/// Checks that two lists of durations match within `tolerance` seconds.
func expectDurations(
    _ actual: [Duration],
    approximately expected: [Double],
    tolerance: Double = 0.005,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(actual.count == expected.count, "\(actual) vs \(expected)", sourceLocation: sourceLocation)
    for (index, (duration, seconds)) in zip(actual, expected).enumerated() {
        #expect(
            abs(duration.seconds - seconds) <= tolerance,
            "item \(index): \(duration) is not \(seconds) seconds",
            sourceLocation: sourceLocation
        )
    }
}

/// Whether `bytes` (captured standard error) contain `text`.
func bytes(_ bytes: [UInt8], contain text: String) -> Bool {
    String(decoding: bytes, as: UTF8.self).contains(text)
}

/// A short description of a result, for comparing outcomes of waits.
func outcome<Value>(_ result: Result<Value, any Error>) -> String {
    switch result {
    case .success: "success"
    case .failure(let error as LoadableWaiterError): "\(error)"
    case .failure(is CancellationError): "cancelled"
    case .failure(let error): "failure: \(error)"
    }
}
