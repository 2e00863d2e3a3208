import Foundation
import LoadableHTTP
import LoadableTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// HTTP writes: sequential POSTs of a 2 KB JSON body with a 2 KB JSON answer through
/// ``HTTPService``'s `send(_:_:json:as:)`, against the same `URLSession` call made by hand.
///
/// One ``LoopbackHTTPServer`` (127.0.0.1, keep-alive) and one ephemeral `URLSession`, shared by
/// every side. The server answers `POST /echo` with a 200 and the payload.
///
/// Each round, on the main actor, the sides take turns in chunks of a tenth of the requests (the
/// order alternates between chunks):
/// - by hand: a `URLRequest` (POST, `Content-Type: application/json`) whose body `JSONEncoder`
///   encodes, sent with `URLSession.send(_:maxBodySize:)` (the call the service makes), status
///   checked, answer decoded with `JSONDecoder`;
/// - service: `service.send(.post, "echo", json: payload, as: HTTPPayload.self)` of an
///   `HTTPService` on the same session, without authorization;
/// - `data(for:)`: the by-hand side through `URLSession.data(for:)` instead, for context.
///
/// The figures are the best and the median round of each side. Allocations are the whole
/// process's (the server's and URLSession's threads count on every side alike): the service's
/// own are its side's minus the by-hand side's.
@MainActor
func runHTTPSend(_ settings: Settings, into report: inout Report) async {
    // Each round interleaves the sides in chunks of a tenth of the requests.
    let chunk = max(settings.httpRequests / 10, 1)
    let count = (settings.httpRequests / chunk) * chunk
    let runs = max(settings.runs, 1)
    let body = HTTPPayload.body
    let server: LoopbackHTTPServer
    do {
        server = try LoopbackHTTPServer(lifetime: .seconds(3_600)) { request in
            guard request.method == "POST", request.path == "/echo", request.body.count == body.count else {
                return .status(400)
            }
            return .status(
                200, headers: [.init("Content-Type", "application/json"), .init("ETag", #""v2""#)], body: body)
        }
    } catch {
        failSend("cannot start the loopback server: \(error)")
    }
    let session = URLSession(configuration: .ephemeral)
    defer {
        session.invalidateAndCancel()
        server.stop()
    }
    let payload: HTTPPayload
    do {
        payload = try JSONDecoder().decode(HTTPPayload.self, from: body)
    } catch {
        failSend("cannot decode the payload: \(error)")
    }
    let echoURL = server.url("/echo")
    let service = HTTPService(baseURL: server.url("/"), transport: session)

    /// The request by hand: what the service sends.
    func handRequest(_ encoder: JSONEncoder) throws -> URLRequest {
        var request = URLRequest(url: echoURL)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try encoder.encode(payload)
        return request
    }

    func byHand(_ requests: Int) async -> Sample {
        let (encoder, decoder) = (JSONEncoder(), JSONDecoder())
        let stopwatch = Stopwatch.start()
        for _ in 0..<requests {
            do {
                let (response, data) = try await session.send(try handRequest(encoder), maxBodySize: 10 << 20)
                guard (200...299).contains(response.statusCode) else { failSend("by hand: \(response.statusCode)") }
                blackHole(try decoder.decode(HTTPPayload.self, from: data))
            } catch {
                failSend("by hand: \(error)")
            }
        }
        return stopwatch.stop()
    }

    func dataForRequest(_ requests: Int) async -> Sample {
        let (encoder, decoder) = (JSONEncoder(), JSONDecoder())
        let stopwatch = Stopwatch.start()
        for _ in 0..<requests {
            do {
                let (data, response) = try await session.data(for: try handRequest(encoder))
                guard (response as? HTTPURLResponse)?.statusCode == 200 else { failSend("data(for:): \(response)") }
                blackHole(try decoder.decode(HTTPPayload.self, from: data))
            } catch {
                failSend("data(for:): \(error)")
            }
        }
        return stopwatch.stop()
    }

    /// By hand with `If-Match`, reading the answer's `ETag`: what a conditional write needs.
    func byHandConditional(_ requests: Int) async -> Sample {
        let (encoder, decoder) = (JSONEncoder(), JSONDecoder())
        let stopwatch = Stopwatch.start()
        for _ in 0..<requests {
            do {
                var request = try handRequest(encoder)
                request.setValue(#""v1""#, forHTTPHeaderField: "If-Match")
                let (response, data) = try await session.send(request, maxBodySize: 10 << 20)
                guard (200...299).contains(response.statusCode) else { failSend("by hand: \(response.statusCode)") }
                blackHole(try decoder.decode(HTTPPayload.self, from: data))
                blackHole(response.value(forHTTPHeaderField: "ETag"))
            } catch {
                failSend("by hand, conditional: \(error)")
            }
        }
        return stopwatch.stop()
    }

    func serviceResponse(_ requests: Int) async -> Sample {
        let stopwatch = Stopwatch.start()
        for _ in 0..<requests {
            do {
                let response = try await service.response(
                    to: .post, "echo", json: payload, as: HTTPPayload.self, precondition: .ifMatch(#""v1""#))
                blackHole(response.etag)
                blackHole(response.value)
            } catch {
                failSend("service response: \(error)")
            }
        }
        return stopwatch.stop()
    }

    func throughService(_ requests: Int) async -> Sample {
        let stopwatch = Stopwatch.start()
        for _ in 0..<requests {
            do {
                blackHole(try await service.send(.post, "echo", json: payload, as: HTTPPayload.self))
            } catch {
                failSend("service: \(error)")
            }
        }
        return stopwatch.stop()
    }

    let warmUp = settings.httpWarmUpRequests
    _ = await byHand(warmUp)
    _ = await throughService(warmUp)
    _ = await dataForRequest(warmUp)
    _ = await byHandConditional(warmUp)
    _ = await serviceResponse(warmUp)

    let rounds = await interleavedRounds(
        runs: runs, count: count, chunk: chunk,
        sides: [byHand, throughService, dataForRequest, byHandConditional, serviceResponse])
    let (hand, serviceSamples, dataFor) = (rounds[0], rounds[1], rounds[2])
    let (handConditional, responses) = (rounds[3], rounds[4])

    func microseconds(_ sample: Sample) -> Double { sample.nanoseconds(per: count) / 1e3 }
    func medianAllocations(_ samples: [Sample]) -> Double {
        samples.map { $0.allocations(per: count) }.sorted()[samples.count / 2]
    }

    let what = "\(count.formatted) POSTs of \(body.count.formatted) B JSON, answer decoded"
    print("http-send: \(what) per side and round, \(runs) rounds; allocs/op include the server's and URLSession's")
    for (kind, pick) in [("best", fastest), ("median", median)] as [(String, ([Sample]) -> Sample)] {
        let handSample = pick(hand)
        let baseline = "by hand (URLSession.send + coders), \(kind)"
        for (name, sample) in [
            ("by hand: URLSession.send + JSONEncoder + JSONDecoder, \(kind)", handSample),
            ("HTTPService.send, \(kind)", pick(serviceSamples)),
            ("by hand with URLSession.data(for:), \(kind)", pick(dataFor)),
        ] {
            let isBaseline = sample.duration == handSample.duration && name.hasPrefix("by hand: ")
            report.add(
                Row(
                    scenario: "http-send: \(name)", value: microseconds(sample), unit: "µs/req",
                    allocationsPerOperation: sample.allocations(per: count), baseline: isBaseline ? nil : baseline,
                    baselineValue: isBaseline ? nil : microseconds(handSample),
                    ratio: isBaseline ? nil : microseconds(sample) / microseconds(handSample)))
        }
    }

    // Each round's two sides ran interleaved: their ratio moves less with the load than either.
    let roundRatios = zip(serviceSamples, hand).map { $0.duration / $1.duration }.sorted()
    let (serviceMedian, handMedian) = (microseconds(median(serviceSamples)), microseconds(median(hand)))
    let (serviceBest, handBest) = (microseconds(fastest(serviceSamples)), microseconds(fastest(hand)))
    report.add(
        Goal(
            name: "http-send: \(what) through HTTPService.send vs URLSession.send + JSONEncoder + JSONDecoder",
            target: "<= 1.05x (median of the rounds' ratios)",
            measured: String(
                format:
                    "%.2fx median of %d rounds (%.2f–%.2fx); medians %.1f µs vs %.1f µs per request; best %.1f µs vs %.1f µs",
                roundRatios[roundRatios.count / 2], runs, roundRatios.first!, roundRatios.last!, serviceMedian,
                handMedian, serviceBest, handBest),
            holds: roundRatios[roundRatios.count / 2] <= 1.05))
    for (kind, pick) in [("best", fastest), ("median", median)] as [(String, ([Sample]) -> Sample)] {
        let handSample = pick(handConditional)
        report.add(
            Row(
                scenario: "http-send: by hand with If-Match, reading the ETag, \(kind)",
                value: microseconds(handSample),
                unit: "µs/req", allocationsPerOperation: handSample.allocations(per: count)))
        report.add(
            Row(
                scenario: "http-send: HTTPService.response(to:) with .ifMatch, \(kind)",
                value: microseconds(pick(responses)), unit: "µs/req",
                allocationsPerOperation: pick(responses).allocations(per: count),
                baseline: "by hand with If-Match, \(kind)", baselineValue: microseconds(handSample),
                ratio: microseconds(pick(responses)) / microseconds(handSample)))
    }
    let conditionalRatios = zip(responses, handConditional).map { $0.duration / $1.duration }.sorted()
    report.add(
        Goal(
            name: "http-send: \(what) with If-Match through HTTPService.response(to:) vs by hand with the ETag read",
            target: "<= 1.05x (median of the rounds' ratios)",
            measured: String(
                format: "%.2fx median of %d rounds (%.2f–%.2fx); medians %.1f µs vs %.1f µs per request",
                conditionalRatios[conditionalRatios.count / 2], runs, conditionalRatios.first!,
                conditionalRatios.last!, microseconds(median(responses)), microseconds(median(handConditional))),
            holds: conditionalRatios[conditionalRatios.count / 2] <= 1.05))

    let added = medianAllocations(serviceSamples) - medianAllocations(hand)
    report.add(
        Goal(
            name: "http-send: allocations HTTPService adds per request",
            target: "<= 10",
            measured: String(
                format: "%.1f (median %.1f against %.1f per request by hand)", added,
                medianAllocations(serviceSamples), medianAllocations(hand)),
            holds: added <= 10))
}

/// Stops the benchmark: a failed request makes every figure meaningless.
private func failSend(_ message: String) -> Never {
    print("http-send benchmark: \(message)")
    fflush(nil)
    exit(1)
}
