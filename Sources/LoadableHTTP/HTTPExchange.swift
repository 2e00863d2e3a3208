import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One request and the reading of its answer, off the main actor: what an ``HTTPLoadable``'s
/// sync and an ``HTTPService``'s send share (the status rules, the body limit, the 401 retry).
struct Exchange<Contents: Sendable>: Sendable {
    /// What a request came to, short of a failure (which is thrown).
    enum Outcome: Sendable {
        /// A 2xx, read; `status` is the 2xx it was.
        case decoded(Contents, Validators, status: Int)
        /// A 304 to a conditional request.
        case notModified(Validators)
        /// A 401; the error to fail with if no retry helps.
        case unauthorized(HTTPLoadableError)
    }

    let transport: any HTTPTransport
    let maxBodySize: Int
    /// Whether the request carries validators, so that a 304 is an answer and not an error.
    var isConditional: Bool
    /// Whether a 2xx's `ETag` and `Last-Modified` are read (a loadable keeps them; a send does not).
    let readsValidators: Bool
    /// Makes the contents of a 2xx answer, off the main actor.
    let read: @Sendable (HTTPURLResponse, Data) throws -> Contents

    init(
        transport: any HTTPTransport,
        maxBodySize: Int,
        isConditional: Bool = false,
        readsValidators: Bool = false,
        read: @escaping @Sendable (HTTPURLResponse, Data) throws -> Contents
    ) {
        self.transport = transport
        self.maxBodySize = maxBodySize
        self.isConditional = isConditional
        self.readsValidators = readsValidators
        self.read = read
    }

    /// An exchange that decodes a 2xx body with `decoder` and keeps the answer's validators.
    init(transport: any HTTPTransport, decoder: JSONDecoder, maxBodySize: Int, isConditional: Bool)
    where Contents: Decodable {
        self.init(
            transport: transport, maxBodySize: maxBodySize, isConditional: isConditional, readsValidators: true
        ) { _, body in
            try decoder.decode(Contents.self, from: body)
        }
    }

    /// Sends `request` with the credential of `authorization`, if any, and reads the answer; a 401
    /// is answered with one renewal and one retry with another credential (see
    /// ``HTTPAuthorization``). A request whose body is a stream is not retried: the refused
    /// request read it, and it would go out empty. Runs in the caller's isolation; the transfers
    /// and the reading run off the main actor.
    ///
    /// - Returns: The outcome of the last request sent: ``Outcome/unauthorized(_:)`` when the
    ///   retry got a 401 too, or when there is no authorization.
    /// - Throws: An ``HTTPLoadableError``; ``HTTPService/BodyStreamSpentError`` after a renewal
    ///   for a request with a body stream; the authorization's errors; `CancellationError`; any
    ///   other error of the transport.
    func run(
        _ request: URLRequest,
        authorization: HTTPAuthorization?,
        isolation: isolated (any Actor)? = #isolation
    ) async throws -> Outcome {
        guard let authorization else { return try await run(request) }
        var request = request
        let credential = try await authorization.credential()
        request.setValue(credential.headerValue, forHTTPHeaderField: "Authorization")
        let outcome = try await run(request)
        guard case .unauthorized(let rejection) = outcome else { return outcome }
        guard let renewed = try await authorization.renewal(credential) else { throw rejection }
        if request.httpBodyStream != nil { throw HTTPService.BodyStreamSpentError(rejection: rejection) }
        request.setValue(renewed.headerValue, forHTTPHeaderField: "Authorization")
        return try await run(request)
    }

    /// Sends `request` and reads the answer.
    ///
    /// - Throws: An ``HTTPLoadableError``; `CancellationError`; any other error of the transport.
    @concurrent
    func run(_ request: URLRequest) async throws -> Outcome {
        // A task cancelled before its request goes out sends nothing (a write must not half-happen).
        try Task.checkCancellation()
        let response: HTTPURLResponse
        let body: Data
        do {
            (response, body) = try await transport.send(request, maxBodySize: maxBodySize)
        } catch let error as URLError {
            if error.code == .cancelled, Task.isCancelled { throw CancellationError() }
            throw HTTPLoadableError.transport(error)
        }
        // A transport of someone else's may not enforce the limit.
        guard body.count <= maxBodySize else { throw HTTPLoadableError.tooLarge(maxBodySize: maxBodySize) }
        switch response.statusCode {
        case 200...299:
            do {
                return .decoded(
                    try read(response, body), readsValidators ? Validators(of: response) : Validators(),
                    status: response.statusCode)
            } catch let error as DecodingError {
                throw HTTPLoadableError.decoding(error)
            }
        case 304 where isConditional:
            return .notModified(Validators(of: response))
        case 401:
            return .unauthorized(Self.statusError(response, body))
        default:
            throw Self.statusError(response, body)
        }
    }

    private static func statusError(_ response: HTTPURLResponse, _ body: Data) -> HTTPLoadableError {
        .status(
            code: response.statusCode,
            headers: response.headerFields,
            bodyPrefix: Data(body.prefix(HTTPLoadableError.bodyPrefixLimit))
        )
    }
}
