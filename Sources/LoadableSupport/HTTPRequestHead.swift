/// A request line and header fields, parsed: what the package's HTTP servers (`LoopbackHTTPServer`
/// for tests, the inspector's page) read before a body.
package struct HTTPRequestHead: Sendable {
    /// One header field, the name spelled as sent.
    package struct Field: Sendable, Hashable {
        /// The field name.
        package var name: String
        /// The value, without leading and trailing spaces and tabs.
        package var value: String
    }

    /// The method, as in `"GET"`.
    package var method: String
    /// The request target as sent, as in `"/feed?page=2"`.
    package var target: String
    /// The protocol version, as in `"HTTP/1.1"`.
    package var httpVersion: String
    /// The header fields in the order received.
    package var headers: [Field]
    /// The body's size from `Content-Length`, or 0.
    package var contentLength: Int
    /// Whether the connection stays open after the response, as the client asked.
    package var keepsAlive: Bool
    /// Whether the client waits for `100 Continue` before it sends the body.
    package var expectsContinue: Bool

    /// The value of the first header field called `name`, compared case-insensitively.
    package func header(_ name: String) -> String? {
        let name = name.lowercased()
        return headers.first { $0.name.lowercased() == name }?.value
    }

    /// Why a server answers a request itself, and closes the connection.
    package struct Refusal: Error, Sendable {
        /// The status to answer with.
        package var status: Int
        /// What is wrong, for the body.
        package var reason: String

        /// A refusal with `status` and `reason`.
        package init(status: Int, reason: String) {
            self.status = status
            self.reason = reason
        }

        static func badRequest(_ reason: String) -> Refusal { Refusal(status: 400, reason: reason) }
    }

    /// The offset just after the first `\r\n\r\n` of `bytes` at or after `start`: the end of a
    /// head, if one is there.
    package static func end(in bytes: [UInt8], searchingFrom start: Int = 0) -> Int? {
        let terminator: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A]
        let start = max(0, start)
        guard bytes.count - start >= 4 else { return nil }
        for index in start...(bytes.count - 4) where bytes[index] == 0x0D {
            if bytes[index..<(index + 4)].elementsEqual(terminator) { return index + 4 }
        }
        return nil
    }

    /// Parses `bytes`: the head up to, not including, the empty line that ends it.
    ///
    /// - Parameters:
    ///   - bytes: The head.
    ///   - maximumBodySize: The largest `Content-Length` taken; a larger one is refused with 413.
    /// - Returns: The head, or why the request is refused: 400 when malformed, 413 for a body
    ///   over `maximumBodySize`, 501 for a `Transfer-Encoding` body, 505 for a version not 1.x.
    package static func parse(
        _ bytes: ArraySlice<UInt8>, maximumBodySize: Int
    ) -> Result<HTTPRequestHead, Refusal> {
        var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { line in
            line.last == UInt8(ascii: "\r") ? line.dropLast() : line
        }
        guard !lines.isEmpty else { return .failure(.badRequest("empty request line")) }
        let requestLine = lines.removeFirst()
        let parts = requestLine.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ !$0.isEmpty }),
            parts[0].allSatisfy(isTokenCharacter), parts[1].allSatisfy({ $0 > 0x20 && $0 != 0x7F })
        else {
            return .failure(.badRequest("malformed request line"))
        }
        let version = Array(parts[2])
        guard version.count == 8, version[..<5].elementsEqual("HTTP/".utf8), isDigit(version[5]),
            version[6] == UInt8(ascii: "."), isDigit(version[7])
        else {
            return .failure(.badRequest("malformed HTTP version"))
        }
        guard version[5] == UInt8(ascii: "1") else {
            return .failure(Refusal(status: 505, reason: "only HTTP/1.x is supported"))
        }

        var headers: [Field] = []
        for line in lines {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
                line[..<colon].allSatisfy(isTokenCharacter)
            else {
                return .failure(.badRequest("malformed header field"))
            }
            let name = String(decoding: line[..<colon], as: UTF8.self)
            let value = String(decoding: trimmingWhitespace(line[line.index(after: colon)...]), as: UTF8.self)
            headers.append(Field(name: name, value: value))
        }

        func values(of name: String) -> [String] {
            headers.filter { $0.name.lowercased() == name }.map(\.value)
        }
        func tokens(of name: String) -> [String] {
            values(of: name).flatMap { $0.utf8.split(separator: UInt8(ascii: ",")) }.map {
                String(decoding: trimmingWhitespace($0), as: UTF8.self).lowercased()
            }
        }

        guard values(of: "transfer-encoding").isEmpty else {
            return .failure(Refusal(status: 501, reason: "Transfer-Encoding request bodies are not supported"))
        }
        var contentLength = 0
        let lengths = Set(values(of: "content-length"))
        if let length = lengths.first {
            guard lengths.count == 1, !length.isEmpty, length.utf8.allSatisfy(isDigit) else {
                return .failure(.badRequest("malformed Content-Length"))
            }
            guard length.utf8.count <= 9, let value = Int(length), value <= maximumBodySize else {
                return .failure(Refusal(status: 413, reason: "the body is over \(maximumBodySize) bytes"))
            }
            contentLength = value
        }
        let connection = tokens(of: "connection")
        let isHTTP10 = version[7] == UInt8(ascii: "0")
        let keepsAlive = isHTTP10 ? connection.contains("keep-alive") : !connection.contains("close")
        return .success(
            HTTPRequestHead(
                method: String(decoding: parts[0], as: UTF8.self),
                target: String(decoding: parts[1], as: UTF8.self),
                httpVersion: String(decoding: version, as: UTF8.self),
                headers: headers,
                contentLength: contentLength,
                keepsAlive: keepsAlive,
                expectsContinue: tokens(of: "expect").contains("100-continue")
            )
        )
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    /// `bytes` without leading and trailing spaces and tabs.
    private static func trimmingWhitespace<Bytes: BidirectionalCollection<UInt8>>(_ bytes: Bytes) -> Bytes.SubSequence {
        let isWhitespace = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        guard let first = bytes.firstIndex(where: { !isWhitespace($0) }),
            let last = bytes.lastIndex(where: { !isWhitespace($0) })
        else { return bytes[bytes.endIndex...] }
        return bytes[first...last]
    }

    /// Whether `byte` may appear in a method or a header field name (RFC 9110's `tchar`).
    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
