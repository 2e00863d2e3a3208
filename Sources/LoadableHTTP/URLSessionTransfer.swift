import LoadableSupport

#if canImport(FoundationNetworking)
    import Dispatch
    import Foundation
    import FoundationNetworking
    import Loadable

    /// How `URLSession` sends a request on Linux, where FoundationNetworking's own async API cannot
    /// be cancelled safely and cannot bound a body.
    ///
    /// Four faults of FoundationNetworking (Swift 6.3) decide the shape:
    /// - `URLSession.data(for:)` cancels its task from inside the Swift task's cancellation handler,
    ///   where `URLSessionTask.cancel()` waits for the session's queue; if that queue is finishing the
    ///   same transfer, it waits for the Swift task's lock in turn, and the cancelling thread (often
    ///   the main actor) blocks forever (swift-corelibs-foundation issue 5412).
    /// - A cancel that lands while a session with a `URLCache` looks up its cache completes the
    ///   task twice and stops the process (`TaskRegistry.swift`: "Trying to access a behaviour for a
    ///   task that in not in the registry").
    /// - The response disposition of a delegate is ignored, and body bytes are handed to the
    ///   delegate queue as fast as they arrive, with no back-pressure: a body can fill the memory
    ///   before a cancel lands.
    /// - A 401 with a `Basic` challenge (alone or among others) is handed to the delegate as an
    ///   authentication challenge once its answer is read, and with default handling and no stored
    ///   credential the task never completes.
    ///
    /// So a request goes through a session of the transport's own, made from the caller's session's
    /// configuration without a `URLCache` (no cache window). Its delegate runs **inline**, on the
    /// session's own queue, as each piece of the answer is read: the body is counted and kept up
    /// to the limit, and anything beyond is dropped as it arrives, so memory stays bounded
    /// whatever FoundationNetworking does. A cancel resumes the caller at once (from another
    /// thread, never inside the cancellation handler) and hands `URLSessionTask.cancel()` to the
    /// transport's own queue, away from any lock; what arrives after that is dropped. A challenge
    /// that comes with the server's refusal ends the transfer with that refusal, and a redirect to
    /// another origin drops the credentials that FoundationNetworking would carry along (see
    /// ``TransferRouter``).
    ///
    /// Making, resuming and cancelling a task wait for the session's queue, which may be busy
    /// reading a large body inline: they run on ``queue``, a serial queue of the transport's own,
    /// never on a thread of Swift's cooperative pool (which a wait would take from every task).
    enum URLSessionTransfer {
        /// Where tasks are made, resumed and cancelled, in that order for each task.
        static let queue = DispatchQueue(label: "Loadable.URLSessionTransfer")

        /// Sends `request` through the transport session made for `session`.
        static func send(
            _ request: URLRequest,
            maxBodySize: Int,
            through session: URLSession
        ) async throws -> (HTTPURLResponse, Data) {
            try Task.checkCancellation()
            let transferSession = TransferSessions.shared.session(for: session)
            let exchange = Transfer(maxBodySize: maxBodySize)
            return try await withTaskCancellationHandler {
                try await withUnsafeThrowingContinuation { continuation in
                    guard exchange.begin(continuation) else {
                        // Cancelled before it began; no task was made.
                        continuation.resume(throwing: CancellationError())
                        return
                    }
                    queue.async { start(request, of: exchange, on: transferSession) }
                }
            } onCancel: {
                // Runs with the Swift task's lock held: take nothing that waits, resume nothing here.
                let (continuation, task) = exchange.abandon()
                if let continuation {
                    DispatchQueue.global().async { continuation.resume(throwing: CancellationError()) }
                }
                if let task { cancelSoon(task) }
            }
        }

        /// Makes and resumes the task of `exchange`, unless its caller gave up already. On
        /// ``queue``.
        private static func start(_ request: URLRequest, of exchange: Transfer, on session: URLSession) {
            guard exchange.isWaiting else { return }
            let task = session.dataTask(with: request)
            TransferSessions.shared.router.register(exchange, for: task)
            // Abandoned meanwhile: the task, never resumed, is cancelled to leave the session.
            guard exchange.attach(task) else {
                task.cancel()
                return
            }
            task.resume()
        }

        /// Cancels `task` on ``queue``: never on the session's queue (where
        /// `URLSessionTask.cancel()` would wait for itself), never under a lock, and after the
        /// task was resumed.
        static func cancelSoon(_ task: URLSessionTask) {
            queue.async { task.cancel() }
        }
    }

    /// One request's answer as it arrives, and the caller waiting for it.
    private final class Transfer: Sendable {
        typealias Continuation = UnsafeContinuation<(HTTPURLResponse, Data), any Error>

        private struct State {
            /// The waiting caller, once it began and until it is resumed.
            var continuation: Continuation?
            /// Set once the caller's outcome is decided (resumed, or about to be): later events
            /// are dropped.
            var isDecided = false
            /// The task, once it was made; `nil` again once it completed (its last delegate call
            /// came).
            var task: URLSessionTask?
            var response: HTTPURLResponse?
            /// The response's `Content-Length`, or 0 when it has none.
            var expectedLength = 0
            var body = Data()
        }

        let maxBodySize: Int
        private let state = Locked(State())

        init(maxBodySize: Int) {
            self.maxBodySize = maxBodySize
        }

        /// Makes `continuation` the waiting caller; `false` if the transfer was abandoned already.
        func begin(_ continuation: Continuation) -> Bool {
            state.withLock { state in
                guard !state.isDecided else { return false }
                state.continuation = continuation
                return true
            }
        }

        /// Whether the caller waits for the answer still.
        var isWaiting: Bool {
            state.withLock { !$0.isDecided }
        }

        /// Keeps `task` as the transfer's task; `false` if the caller gave up meanwhile.
        func attach(_ task: URLSessionTask) -> Bool {
            state.withLock { state in
                guard !state.isDecided else { return false }
                state.task = task
                return true
            }
        }

        /// The caller gave up: returns its continuation (if it began and was not resumed) to
        /// resume with `CancellationError`, and the task to cancel, if one runs.
        func abandon() -> (Continuation?, URLSessionTask?) {
            state.withLock { state in
                let continuation = state.isDecided ? nil : state.continuation
                state.isDecided = true
                state.continuation = nil
                state.body = Data()
                return (continuation, state.task)
            }
        }

        /// The response head arrived. Returns `false` when its `Content-Length` is over the limit:
        /// the caller was failed, and the task must be cancelled.
        func receive(_ response: URLResponse) -> Bool {
            guard response.expectedContentLength <= Int64(maxBodySize) else {
                decide(.failure(HTTPLoadableError.tooLarge(maxBodySize: maxBodySize)))
                return false
            }
            state.withLock { state in
                guard !state.isDecided else { return }
                state.response = response as? HTTPURLResponse
                state.expectedLength = max(Int(response.expectedContentLength), 0)
            }
            return true
        }

        /// A piece of the body arrived. Returns `false` when the body passed the limit: the
        /// caller was failed, and the task must be cancelled.
        func receive(_ data: Data) -> Bool {
            let isOverLimit = state.withLock { state -> Bool in
                guard !state.isDecided else { return false }
                guard state.body.count + data.count <= maxBodySize else { return true }
                if state.body.isEmpty, data.count >= state.expectedLength, data.startIndex == 0 {
                    // The whole body in one piece (the usual small answer): kept as it came, uncopied;
                    // a later piece copies it once.
                    state.body = data
                } else {
                    if state.body.isEmpty { state.body.reserveCapacity(state.expectedLength) }
                    state.body.append(data)
                }
                return false
            }
            if isOverLimit { decide(.failure(HTTPLoadableError.tooLarge(maxBodySize: maxBodySize))) }
            return !isOverLimit
        }

        /// The server refused the request with `failureResponse` (a 401 or 407) and
        /// FoundationNetworking asks for credentials: the answer received so far (its head and
        /// whole body came before the challenge) is the answer, a status for the caller to read.
        func finish(refusedWith failureResponse: HTTPURLResponse) {
            let answer = state.withLock { state in (state.response ?? failureResponse, state.body) }
            decide(.success(answer))
        }

        /// The task completed, with `error` or with the answer received.
        func complete(with error: (any Error)?) {
            let answer = state.withLock { state -> (HTTPURLResponse?, Data) in
                state.task = nil
                return (state.response, state.body)
            }
            if let error {
                decide(.failure(error))
            } else if let response = answer.0 {
                decide(.success((response, answer.1)))
            } else {
                decide(.failure(URLError(.badServerResponse)))
            }
        }

        /// Resumes the caller with `result`, unless its outcome was decided already.
        private func decide(_ result: Result<(HTTPURLResponse, Data), any Error>) {
            let continuation = state.withLock { state -> Continuation? in
                guard !state.isDecided else { return nil }
                state.isDecided = true
                defer {
                    state.continuation = nil
                    state.body = Data()
                }
                return state.continuation
            }
            continuation?.resume(with: result)
        }
    }

    /// The transport's sessions, one per session a caller sends through, and the delegate they
    /// share.
    private final class TransferSessions: Sendable {
        static let shared = TransferSessions()

        /// A caller's session and the transport session made from its configuration.
        private struct Derived: Sendable {
            weak var source: URLSession?
            let session: URLSession
        }

        let router = TransferRouter()
        private let sessions = Locked([ObjectIdentifier: Derived]())

        /// The transport session for `source`, made on first use from a copy of its configuration
        /// without a `URLCache`.
        func session(for source: URLSession) -> URLSession {
            let key = ObjectIdentifier(source)
            if let derived = sessions.withLock({ $0[key] }), derived.source === source { return derived.session }
            let configuration = source.configuration.copy() as! URLSessionConfiguration
            configuration.urlCache = nil
            configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
            let made = URLSession(configuration: configuration, delegate: router, delegateQueue: InlineOperationQueue())
            let (session, retired) = sessions.withLock { sessions -> (URLSession, [URLSession]) in
                if let derived = sessions[key], derived.source === source { return (derived.session, [made]) }
                // Sessions whose caller's session is gone (or whose identifier was reused) retire.
                var retired: [URLSession] = []
                for (other, derived) in sessions where derived.source == nil || other == key {
                    retired.append(derived.session)
                    sessions[other] = nil
                }
                sessions[key] = Derived(source: source, session: made)
                return (made, retired)
            }
            for session in retired { session.finishTasksAndInvalidate() }
            return session
        }
    }

    /// The delegate of every transport session: hands each task's events to its ``Transfer``,
    /// ends a refusal that asks for credentials as the status it is, and keeps credentials to
    /// their origin on a redirect.
    ///
    /// Its methods run inline on the session's queue (see ``InlineOperationQueue``): they never
    /// call back into the session synchronously, and hand every completion handler that might
    /// (an authentication challenge's) to ``URLSessionTransfer/queue``.
    private final class TransferRouter: NSObject, URLSessionDataDelegate, Sendable {
        /// The transfers of the tasks under way, by task (identifiers are only unique per session).
        private let transfers = Locked([ObjectIdentifier: Transfer]())

        func register(_ transfer: Transfer, for task: URLSessionTask) {
            transfers.withLock { $0[ObjectIdentifier(task)] = transfer }
        }

        private func transfer(of task: URLSessionTask) -> Transfer? {
            transfers.withLock { $0[ObjectIdentifier(task)] }
        }

        func urlSession(
            _ session: URLSession,
            dataTask: URLSessionDataTask,
            didReceive response: URLResponse,
            completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
        ) {
            // FoundationNetworking ignores the disposition; a cancel is what stops a transfer.
            completionHandler(.allow)
            if transfer(of: dataTask)?.receive(response) == false { URLSessionTransfer.cancelSoon(dataTask) }
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            if transfer(of: dataTask)?.receive(data) == false { URLSessionTransfer.cancelSoon(dataTask) }
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            let transfer = transfers.withLock { $0.removeValue(forKey: ObjectIdentifier(task)) }
            transfer?.complete(with: error)
        }

        /// A challenge with a failure response is the server's refusal (a 401 with a `Basic`
        /// challenge: FoundationNetworking makes one once the answer is read, and with default
        /// handling and no stored credential it never completes the task). The refusal, already
        /// received, decides the transfer at once, and the challenge is cancelled so that
        /// FoundationNetworking ends the task; its late `URLError.cancelled` is dropped. No
        /// credential is ever given, from the session's credential storage or otherwise:
        /// authorization is ``HTTPAuthorization``'s job, and a 401 is a status it reads.
        func urlSession(
            _ session: URLSession,
            task: URLSessionTask,
            didReceive challenge: URLAuthenticationChallenge,
            completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
        ) {
            guard let refusal = challenge.failureResponse as? HTTPURLResponse else {
                // Its handling may suspend and resume the task, which waits for the session's
                // queue: it runs where the transport's other waiting calls do.
                URLSessionTransfer.queue.async { completionHandler(.performDefaultHandling, nil) }
                return
            }
            transfer(of: task)?.finish(refusedWith: refusal)
            // The cancel it causes waits for the session's queue: never here, never under a lock.
            URLSessionTransfer.queue.async { completionHandler(.cancelAuthenticationChallenge, nil) }
        }

        /// A redirect to another origin (scheme, host or port) goes without `Authorization`,
        /// `Proxy-Authorization` and `Cookie`, as on Apple platforms: FoundationNetworking copies
        /// every header of the previous request. Each hop is derived from the one before, so what
        /// is dropped once stays dropped. The handler only hands the request to the session's
        /// queue: it is called here.
        func urlSession(
            _ session: URLSession,
            task: URLSessionTask,
            willPerformHTTPRedirection response: HTTPURLResponse,
            newRequest request: URLRequest,
            completionHandler: @escaping @Sendable (URLRequest?) -> Void
        ) {
            completionHandler(Self.redirect(request, from: response.url))
        }

        /// `request` without its credentials when it goes to another origin than `previous`.
        static func redirect(_ request: URLRequest, from previous: URL?) -> URLRequest {
            if let next = request.url, let previous, Origin(next) == Origin(previous) { return request }
            var request = request
            for name in ["Authorization", "Proxy-Authorization", "Cookie"] {
                request.setValue(nil, forHTTPHeaderField: name)
            }
            return request
        }
    }

    /// The scheme, host and port of a URL, compared as URLs compare them: the scheme and the host
    /// in any case, a missing port as the scheme's default.
    private struct Origin: Equatable {
        let scheme: String?
        let host: String?
        let port: Int?

        init(_ url: URL) {
            scheme = url.scheme?.lowercased()
            host = url.host?.lowercased()
            port = url.port ?? scheme.flatMap { ["http": 80, "https": 443][$0] }
        }
    }

    /// A delegate queue that runs each operation at once, on the thread that adds it: the
    /// session's own queue, as the answer is read. Body bytes are then counted (and dropped past
    /// the limit) as they arrive instead of piling up in a queue.
    ///
    /// `@unchecked Sendable` restates `OperationQueue`'s own conformance; the subclass adds no state.
    private final class InlineOperationQueue: OperationQueue, @unchecked Sendable {
        override func addOperation(_ block: @escaping @Sendable () -> Void) {
            block()
        }

        override func addOperation(_ operation: Operation) {
            operation.start()
        }
    }
#endif
