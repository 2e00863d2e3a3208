import Foundation
import LoadableHTTP
import LoadableTestSupport
import LoadableTesting
import Testing

// The reference model that `HTTPLoadableModelTests` runs every sequence against, written from
// `HTTPLoadable`'s documentation alone.
extension HTTPLoadableModelTests {
    struct Model {
        struct Request {
            let ifNoneMatch: String?
            var isCurrent: Bool
        }

        var state = LoadableState.idle
        var contents: Int?
        var error: String?
        var etag: String?
        var requests: [Request] = []
        /// Requests not answered yet, by index into `requests`.
        var open: [Int] = []
        /// The answer of each request answered, by index into `requests`.
        var answers: [Int: Answer] = [:]
        var before: (state: LoadableState, error: String?) = (.idle, nil)

        /// Applies `operation`; returns the request an answer went to, if any.
        @discardableResult
        mutating func apply(_ operation: Operation) -> Int? {
            switch operation {
            case .sync:
                guard state != .syncing else { return nil }
                before = (state, error)
                state = .syncing
                error = nil
                requests.append(Request(ifNoneMatch: contents == nil ? nil : etag, isCurrent: true))
                open.append(requests.count - 1)
            case .cancel:
                guard state == .syncing else { return nil }
                (state, error) = before
                endCurrentRequests()
            case .release:
                (state, contents, error, etag) = (.idle, nil, nil, nil)
                endCurrentRequests()
            case .timeOut:
                guard state == .syncing else { return nil }
                (state, error) = (.didFailToSync, "timed out")
                endCurrentRequests()
            case .answer(let index, let answer):
                guard !open.isEmpty else { return nil }
                let request = open.remove(at: index % open.count)
                answers[request] = answer
                guard requests[request].isCurrent else { return request }
                requests[request].isCurrent = false
                switch answer {
                case .ok(let value, let newTag):
                    (state, contents, error, etag) = (.didSyncSuccessfully, value, nil, newTag)
                case .notModified(let newTag) where requests[request].ifNoneMatch != nil:
                    state = .didSyncSuccessfully
                    if let newTag { etag = newTag }
                case .notModified:
                    (state, error) = (.didFailToSync, "status 304")
                case .serverError:
                    (state, error) = (.didFailToSync, "status 500")
                case .malformed:
                    (state, error) = (.didFailToSync, "decoding")
                }
                return request
            }
            return nil
        }

        private mutating func endCurrentRequests() {
            for index in requests.indices { requests[index].isCurrent = false }
        }
    }
}
