import Foundation
import LoadableHTTP
import LoadableSyncer
import LoadableTestSupport
import LoadableTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One of the four sends of a path, with an idempotency key.
enum PathSend: String, CaseIterable, CustomTestStringConvertible {
    case jsonAs, json, bareAs, bare

    var testDescription: String { rawValue }

    func send(_ api: HTTPService, key: String) async throws {
        switch self {
        case .jsonAs:
            _ = try await api.send(.post, "comments", json: Comment(text: "Hi"), as: Comment.self, idempotencyKey: key)
        case .json: try await api.send(.post, "comments", json: Comment(text: "Hi"), idempotencyKey: key)
        case .bareAs: _ = try await api.send(.post, "comments", as: Comment.self, idempotencyKey: key)
        case .bare: try await api.send(.post, "comments", idempotencyKey: key)
        }
    }
}

/// An idempotency key that a header cannot carry fails the send before anything goes out, instead
/// of going out without a key (`URLRequest` drops such a value silently).
@MainActor
@Suite("An idempotency key a header cannot carry fails the send", .timeLimit(.minutes(3)))
struct IdempotencyKeyHeaderTests {
    /// A key, shown as a Swift literal in the test's name, so that a control character shows.
    struct Key: CustomTestStringConvertible, Sendable {
        let value: String
        var testDescription: String { value.debugDescription }
    }

    nonisolated static let invalidKeys = [
        "a\nb", "a\r\nX-Injected: 1", "", " padded ", "padded\t", "ключ", "a\u{0}b", "a\u{7F}b", "a\u{1B}b",
    ].map(Key.init)

    @Test(
        "an invalid key throws InvalidHeaderError, naming the header, and nothing is sent",
        arguments: PathSend.allCases, invalidKeys)
    func anInvalidKey(send: PathSend, key: Key) async throws {
        let server = try LoopbackHTTPServer { _ in .json(#"{"id":1,"text":"Hi"}"#) }
        let api = HTTPService(baseURL: server.url("/api"))
        let error = await failure { try await send.send(api, key: key.value) }
        let invalid = try #require(error as? HTTPService.InvalidHeaderError, "\(String(describing: error))")
        #expect(invalid.name == "Idempotency-Key")
        #expect(!invalid.reason.isEmpty)
        #expect(invalid.description.contains("Idempotency-Key"))
        #expect(!(error is any RetryAfterProviding), "not retried by an outbox")
        // One request after it, to know that none came before.
        try await api.send(.get, "after")
        #expect(server.requests.map(\.path) == ["/api/after"])
    }

    @Test("the description names the header and the reason, not the value")
    func theDescription() async throws {
        let api = HTTPService(baseURL: URL(string: "http://127.0.0.1:9/api")!)
        let error = await failure { try await api.send(.post, "comments", idempotencyKey: "secret\nX-Injected: 1") }
        #expect(
            (error as? HTTPService.InvalidHeaderError)?.description
                == "HTTPService: the Idempotency-Key header cannot carry its value: it has a line break; nothing was sent"
        )
    }

    @Test(
        "a valid key goes out verbatim",
        arguments: PathSend.allCases, ["6F9619FF-8B86-D011-B42D-00C04FC964FF", "a b", "a\tb", "!~"])
    func aValidKey(send: PathSend, key: String) async throws {
        let server = try LoopbackHTTPServer { _ in .json(#"{"id":1,"text":"Hi"}"#) }
        let api = HTTPService(baseURL: server.url("/api"))
        try await send.send(api, key: key)
        #expect(server.requests.map { $0.header("Idempotency-Key") } == [key])
    }
}
