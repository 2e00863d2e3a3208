public import Foundation
import Loadable

#if canImport(FoundationNetworking)
    public import FoundationNetworking
#endif

/// What sends the requests of an ``HTTPLoadable`` and of an ``HTTPService``: `URLSession` by
/// default, or a client of your own.
///
/// A transport sends one request and returns the response with its whole body. It must stop
/// reading a body larger than `maxBodySize` and throw ``HTTPLoadableError/tooLarge(maxBodySize:)``,
/// and it should stop the request when its task is cancelled (throwing `CancellationError` or
/// `URLError(.cancelled)`) without ever blocking the cancelling thread: a cancellation handler runs
/// with the task's lock held, so it must not wait for a queue or a lock that an arriving answer
/// holds. Throw `URLError` for transfers that fail; loadables and sends report them as
/// ``HTTPLoadableError/transport(_:)``. Any other error is reported as it is.
///
/// A server app can plug in the HTTP client it already has, and a test can script answers:
///
/// ```swift
/// struct ScriptedTransport: HTTPTransport {
///     let answer: @Sendable (URLRequest) -> (Int, Data)
///
///     func send(_ request: URLRequest, maxBodySize: Int) async throws -> (HTTPURLResponse, Data) {
///         let (status, body) = answer(request)
///         let response = HTTPURLResponse(
///             url: request.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: [:])!
///         return (response, body)
///     }
/// }
/// ```
///
/// Called from any isolation (usually not the main actor); conforming types are `Sendable`.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the response and its body.
    ///
    /// - Parameters:
    ///   - request: The request, with every header the loadable or the service adds already set.
    ///   - maxBodySize: The most bytes of body to accept.
    /// - Returns: The response and its complete body.
    /// - Throws: ``HTTPLoadableError/tooLarge(maxBodySize:)`` for a body over `maxBodySize`;
    ///   `URLError` when the transfer fails; `CancellationError` when the task is cancelled.
    func send(_ request: URLRequest, maxBodySize: Int) async throws -> (HTTPURLResponse, Data)
}

extension URLSession: HTTPTransport {
    /// Sends `request` through this session, failing as soon as the body passes `maxBodySize`.
    ///
    /// A `Content-Length` above the limit fails when the response head arrives, and a longer body
    /// once it passes the limit; nothing past the limit is ever held in memory. Cancelling the
    /// calling task ends the wait at once and drops an answer that arrives anyway.
    ///
    /// On Apple platforms the body is read as it arrives (`bytes(for:)`) and the transfer stops at
    /// the limit. On Linux, where FoundationNetworking's `data(for:)` can deadlock the thread that
    /// cancels it and a cancel during a `URLCache` lookup stops the process, the request goes
    /// through a session made once from this session's configuration without a `URLCache`, whose
    /// delegate counts the body as it is read and drops what passes the limit; tasks start and
    /// are cancelled on a queue of the transport's own, never blocking the caller. This session's
    /// own delegate is not called for these requests. A `401` or `407` comes back as a response
    /// whatever challenge it carries (FoundationNetworking never completes a `401` with a `Basic`
    /// challenge on its own), and a redirect to another origin goes without `Authorization`,
    /// `Proxy-Authorization` and `Cookie` (FoundationNetworking copies them along).
    ///
    /// - Parameters:
    ///   - request: The request to send.
    ///   - maxBodySize: The most bytes of body to accept.
    /// - Returns: The response and its complete body.
    /// - Throws: ``HTTPLoadableError/tooLarge(maxBodySize:)``, `URLError`, or `CancellationError`.
    public func send(_ request: URLRequest, maxBodySize: Int) async throws -> (HTTPURLResponse, Data) {
        #if canImport(FoundationNetworking)
            try await URLSessionTransfer.send(request, maxBodySize: maxBodySize, through: self)
        #else
            let (bytes, response) = try await self.bytes(for: request)
            let http = try Self.httpResponse(response)
            let expected = response.expectedContentLength
            guard expected <= Int64(maxBodySize) else {
                bytes.task.cancel()
                throw HTTPLoadableError.tooLarge(maxBodySize: maxBodySize)
            }
            var data = Data()
            if expected > 0 { data.reserveCapacity(Int(expected)) }
            for try await byte in bytes {
                guard data.count < maxBodySize else {
                    bytes.task.cancel()
                    throw HTTPLoadableError.tooLarge(maxBodySize: maxBodySize)
                }
                data.append(byte)
            }
            return (http, data)
        #endif
    }

    private static func httpResponse(_ response: URLResponse) throws -> HTTPURLResponse {
        guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        return http
    }
}
