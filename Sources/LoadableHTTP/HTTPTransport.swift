public import Foundation
import Loadable

#if canImport(FoundationNetworking)
    public import FoundationNetworking
#endif

/// What sends an ``HTTPLoadable``'s requests: `URLSession` by default, or a client of your own.
///
/// A transport sends one request and returns the response with its whole body. It must stop
/// reading a body larger than `maxBodySize` and throw ``HTTPLoadableError/tooLarge(maxBodySize:)``,
/// and it should stop the request when its task is cancelled (throwing `CancellationError` or
/// `URLError(.cancelled)`). Throw `URLError` for transfers that fail; ``HTTPLoadable`` reports them
/// as ``HTTPLoadableError/transport(_:)``. Any other error is reported as it is.
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
    ///   - request: The request, with every header the loadable adds already set.
    ///   - maxBodySize: The most bytes of body to accept.
    /// - Returns: The response and its complete body.
    /// - Throws: ``HTTPLoadableError/tooLarge(maxBodySize:)`` for a body over `maxBodySize`;
    ///   `URLError` when the transfer fails; `CancellationError` when the task is cancelled.
    func send(_ request: URLRequest, maxBodySize: Int) async throws -> (HTTPURLResponse, Data)
}

extension URLSession: HTTPTransport {
    /// Sends `request` through this session, stopping the transfer as soon as the body grows past
    /// `maxBodySize`.
    ///
    /// A `Content-Length` above the limit fails before any of the body is read. On Apple platforms
    /// the body is read as it arrives (`bytes(for:)`) and the transfer stops at the limit. On
    /// Linux, where `bytes(for:)` is missing, a delegate counts the bytes as they arrive and cancels
    /// the transfer past the limit; FoundationNetworking may have buffered more than the limit by
    /// the time the cancel lands, but never hands it over.
    ///
    /// - Parameters:
    ///   - request: The request to send.
    ///   - maxBodySize: The most bytes of body to accept.
    /// - Returns: The response and its complete body.
    /// - Throws: ``HTTPLoadableError/tooLarge(maxBodySize:)``, `URLError`, or `CancellationError`.
    public func send(_ request: URLRequest, maxBodySize: Int) async throws -> (HTTPURLResponse, Data) {
        #if canImport(FoundationNetworking)
            let limiter = BodySizeLimiter(maxBodySize: maxBodySize)
            let data: Data
            let response: URLResponse
            do {
                (data, response) = try await self.data(for: request, delegate: limiter)
            } catch let error as URLError where error.code == .cancelled && limiter.isOverLimit {
                throw HTTPLoadableError.tooLarge(maxBodySize: maxBodySize)
            }
            guard data.count <= maxBodySize else { throw HTTPLoadableError.tooLarge(maxBodySize: maxBodySize) }
            return (try Self.httpResponse(response), data)
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

#if canImport(FoundationNetworking)
    /// Counts a transfer's body as it arrives and cancels the transfer past the limit (Linux).
    ///
    /// FoundationNetworking calls it on the session's delegate queue; the flag is read after the
    /// transfer ends, from another thread, so it sits behind a lock.
    private final class BodySizeLimiter: NSObject, URLSessionDataDelegate, Sendable {
        private let maxBodySize: Int
        private let received = Locked((bytes: 0, isOverLimit: false))

        init(maxBodySize: Int) {
            self.maxBodySize = maxBodySize
        }

        /// Whether the body went past the limit (and the transfer was cancelled for it).
        var isOverLimit: Bool { received.withLock { $0.isOverLimit } }

        func urlSession(
            _ session: URLSession,
            dataTask: URLSessionDataTask,
            didReceive response: URLResponse,
            completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
        ) {
            if response.expectedContentLength > Int64(maxBodySize) {
                received.withLock { $0.isOverLimit = true }
                completionHandler(.cancel)
                dataTask.cancel()
            } else {
                completionHandler(.allow)
            }
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            let cancels = received.withLock { received in
                received.bytes += data.count
                guard received.bytes > maxBodySize, !received.isOverLimit else { return false }
                received.isOverLimit = true
                return true
            }
            if cancels { dataTask.cancel() }
        }
    }
#endif
