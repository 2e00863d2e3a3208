import Foundation
import Testing

/// The rule of `Docs/Testing.md`, "The guides' samples": every ```` ```swift ```` block of a guide
/// (`Docs/*.md` and `README.md`) is compiled verbatim by one of the test files that compile that
/// guide, unless the line right before its fence says `<!-- not compiled: <reason> -->`.
@Suite("Guide samples are the text of the tests that compile them")
struct GuideSamplesTests {
    /// The test files that compile the samples of each guide, from the repository's root.
    static let compilingTests: [String: [String]] = [
        "README.md": [
            "Tests/LoadableTests/DocumentationExampleTests.swift",
            "Tests/LoadableCachingTests/Outbox/OfflineGuideTests.swift",
        ],
        "Docs/Caching.md": ["Tests/LoadableCachingTests/Store/CachingGuideTests.swift"],
        "Docs/GettingStarted.md": ["Tests/LoadableTests/GettingStartedGuideTests.swift"],
        "Docs/Groups.md": ["Tests/LoadableGroupTests/GroupsGuideTests.swift"],
        "Docs/Inspector.md": ["Tests/LoadableInspectorTests/InspectorGuideTests.swift"],
        "Docs/HTTP.md": [
            "Tests/LoadableHTTPTests/HTTPGuideTests.swift", "Tests/LoadableHTTPTests/HTTPAuthorizationTests.swift",
            "Tests/LoadableHTTPTests/HTTPWritesGuideTests.swift",
            "Tests/LoadableHTTPTests/ConditionalWritesGuideTests.swift",
            "Tests/LoadableHTTPTests/HTTPPagedAutosyncGuideTests.swift",
        ],
        "Docs/Mutations.md": [
            "Tests/LoadableTests/MutationsGuideTests.swift",
            "Tests/LoadableCachingTests/Store/MutationForwardingTests.swift",
            "Tests/LoadableHTTPTests/MutationsOverHTTPTests.swift",
        ],
        "Docs/Offline.md": [
            "Tests/LoadableCachingTests/Outbox/OfflineGuideTests.swift",
            "Tests/LoadableHTTPTests/HTTPOfflineGuideTests.swift",
            "Tests/LoadableHTTPTests/OutboxConflictsGuideTests.swift",
        ],
        "Docs/Paging.md": [
            "Tests/LoadableTests/PagingGuideTests.swift", "Tests/LoadableTests/PagedLoadableTests.swift",
        ],
        "Docs/Persistence.md": ["Tests/LoadableCachingTests/Persistence/PersistenceGuideTests.swift"],
        "Docs/Sync.md": [
            "Tests/LoadableSyncTests/SyncGuideTests.swift", "Tests/LoadableSyncTests/SyncGuideKintoTests.swift",
        ],
        "Docs/Syncing.md": [
            "Tests/LoadableSyncerTests/SyncingGuideTests.swift",
            "Tests/LoadableSyncerTests/FreshnessGuideTests.swift",
        ],
        "Docs/Testing.md": [
            "Tests/LoadableTestingTests/TestingGuideTests.swift",
            "Tests/LoadableSyncerTests/SyncerTestingGuideTests.swift",
            "Tests/LoadableHTTPTests/HTTPGuideTests.swift",
        ],
    ]

    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Every guide: `README.md` and each `Docs/*.md`.
    static let guides: [String] = {
        let docs = root.appendingPathComponent("Docs").path
        let names = (try? FileManager.default.contentsOfDirectory(atPath: docs)) ?? []
        return ["README.md"] + names.filter { $0.hasSuffix(".md") }.sorted().map { "Docs/" + $0 }
    }()

    static func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    @Test("every compiled sample of a guide is the text of a test that compiles it", arguments: guides)
    func samplesAreVerbatim(guide: String) throws {
        let blocks = GuideSample.blocks(in: try Self.text(guide)).filter { $0.notCompiledReason == nil }
        guard !blocks.isEmpty else { return }
        let testPaths = try #require(
            Self.compilingTests[guide],
            "\(guide) has compiled samples: name the test files that compile them in GuideSamplesTests.compilingTests"
        )
        let tests = try testPaths.map { (path: $0, text: try Self.text($0)) }
        for block in blocks {
            if let mismatch = GuideSample.mismatch(of: block, in: tests) {
                Issue.record("\(guide):\(mismatch.line) (the sample at line \(block.fenceLine)): \(mismatch.reason)")
            }
        }
    }

    @Test("the guides and every test file of the map are found")
    func findsTheFiles() {
        #expect(Self.guides.contains("Docs/Testing.md"))
        for path in Self.compilingTests.values.joined() {
            #expect(FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(path).path), "\(path)")
        }
    }

    @Test("a not-compiled mark gives its reason")
    func marksGiveReasons() throws {
        for guide in Self.guides {
            for block in GuideSample.blocks(in: try Self.text(guide)) where block.notCompiledReason?.isEmpty == true {
                Issue.record("\(guide):\(block.fenceLine): say why the sample is not compiled")
            }
        }
    }

    @Test("a sample is found with another indentation, its imports among the file's imports")
    func findsIndentedSamples() {
        let guide = """
            Text.

            - A list item:

               ```swift
               import Loadable

               func f() {
                   g()\("  ")
               }
               ```
            """
        let test = """
            import Foundation
            import Loadable

            struct T {
                func f() {
                    g()
                }
            }
            """
        let blocks = GuideSample.blocks(in: guide)
        #expect(blocks.map(\.fenceLine) == [5])
        #expect(blocks.first?.lines == ["import Loadable", "", "func f() {", "    g()", "}"])
        #expect(GuideSample.mismatch(of: blocks[0], in: [("T.swift", test)]) == nil)
    }

    @Test("a drift names the first line that differs and what the closest test has there")
    func reportsTheFirstDifference() {
        let guide = """
            ```swift
            let a = 1
            let b = 2
            ```

            <!-- not compiled: a signature listing -->
            ```swift
            func missing()
            ```
            """
        let test = """
            func t() {
                let a = 1
                let b = 3
            }
            """
        let blocks = GuideSample.blocks(in: guide)
        #expect(blocks.map(\.notCompiledReason) == [nil, "a signature listing"])
        let drift = GuideSample.mismatch(of: blocks[0], in: [("T.swift", test)])
        #expect(drift?.line == 3)
        #expect(drift?.reason == "`let b = 2` differs from T.swift:3, `let b = 3`")
        let imported = GuideSample.blocks(in: "```swift\n\nimport Other\nlet a = 1\n```")[0]
        let missingImport = GuideSample.mismatch(of: imported, in: [("T.swift", test)])
        #expect(missingImport?.line == 3)
        #expect(missingImport?.reason == "`import Other` is not an import of T.swift")
        let unknown = GuideSample.blocks(in: "```swift\nlet c = 1\n```")[0]
        let missing = GuideSample.mismatch(of: unknown, in: [("T.swift", test)])
        #expect(missing?.line == 2)
        #expect(missing?.reason == "`let c = 1` is in none of [\"T.swift\"]")
    }
}

/// A ```` ```swift ```` block of a guide, and how to find it in a test file.
struct GuideSample {
    /// The line of the opening fence, counting from 1.
    var fenceLine: Int
    /// The lines between the fences, without their common indentation, trailing whitespace and
    /// leading or trailing blank lines.
    var lines: [String]
    /// The line of the guide that `lines[0]` is, counting from 1.
    var firstLine: Int
    /// The reason given by a `<!-- not compiled: <reason> -->` line right before the fence.
    var notCompiledReason: String?

    /// The ```` ```swift ```` blocks of a Markdown text.
    static func blocks(in markdown: String) -> [GuideSample] {
        let lines = markdown.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var blocks: [GuideSample] = []
        var index = 0
        while index < lines.count {
            let fence = lines[index].trimmingCharacters(in: .whitespaces)
            guard fence.hasPrefix("```"), fence.drop(while: { $0 == "`" }) == "swift" else {
                index += 1
                continue
            }
            let ticks = String(fence.prefix(while: { $0 == "`" }))
            var end = index + 1
            while end < lines.count, lines[end].trimmingCharacters(in: .whitespaces) != ticks { end += 1 }
            let previous = index > 0 ? lines[index - 1].trimmingCharacters(in: .whitespaces) : ""
            let leadingBlankLines = lines[(index + 1)..<end].prefix(while: { $0.allSatisfy(\.isWhitespace) }).count
            blocks.append(
                GuideSample(
                    fenceLine: index + 1,
                    lines: normalized(Array(lines[(index + 1)..<end])),
                    firstLine: index + 2 + leadingBlankLines,
                    notCompiledReason: notCompiledReason(previous)
                ))
            index = end + 1
        }
        return blocks
    }

    static func notCompiledReason(_ line: String) -> String? {
        let prefix = "<!-- not compiled:"
        guard line.hasPrefix(prefix), line.hasSuffix("-->") else { return nil }
        return line.dropFirst(prefix.count).dropLast(3).trimmingCharacters(in: .whitespaces)
    }

    /// Lines without trailing whitespace, their common indentation and leading or trailing blank lines.
    static func normalized(_ lines: [String]) -> [String] {
        var lines = lines.map { trimmingTrailingWhitespace($0[...]) }
        while lines.first?.isEmpty == true { lines.removeFirst() }
        while lines.last?.isEmpty == true { lines.removeLast() }
        let indentation = lines.filter { !$0.isEmpty }.map(indentationWidth).min() ?? 0
        return lines.map { $0.isEmpty ? $0 : String($0.dropFirst(indentation)) }
    }

    static func indentationWidth(_ line: String) -> Int {
        line.prefix(while: { $0 == " " || $0 == "\t" }).count
    }

    /// Why `sample` is not the text of any of `files`, or `nil` when one of them holds it.
    ///
    /// The sample's leading `import` lines must be imports of the file; its other lines must be
    /// consecutive lines of the file, all indented by the same extra amount. A mismatch names the
    /// line of the guide that differs in the file that matches most of the sample.
    static func mismatch(
        of sample: GuideSample, in files: [(path: String, text: String)]
    ) -> (line: Int, reason: String)? {
        let imports = sample.lines.prefix(while: { $0.isEmpty || $0.hasPrefix("import ") })
        let body = Array(sample.lines.dropFirst(imports.count))
        func guideLine(_ index: Int) -> Int { sample.firstLine + index }
        var closest: (matched: Int, line: Int, reason: String)?
        for file in files {
            let fileLines = file.text.split(separator: "\n", omittingEmptySubsequences: false)
                .map(trimmingTrailingWhitespace)
            let match = longestMatch(of: body, in: fileLines)
            let mismatch: (line: Int, reason: String)
            if let missing = imports.indices.first(where: { !imports[$0].isEmpty && !fileLines.contains(imports[$0]) })
            {
                mismatch = (guideLine(missing), "`\(imports[missing])` is not an import of \(file.path)")
            } else if match.matched == body.count {
                return nil
            } else if match.matched == 0 {
                mismatch = (guideLine(imports.count), "`\(body[0])` is in none of \(files.map(\.path))")
            } else {
                let found = match.next < fileLines.count ? fileLines[match.next] : "<end of file>"
                mismatch = (
                    guideLine(imports.count + match.matched),
                    "`\(body[match.matched])` differs from \(file.path):\(match.next + 1), "
                        + "`\(found.trimmingCharacters(in: .whitespaces))`"
                )
            }
            if match.matched > closest?.matched ?? -1 { closest = (match.matched, mismatch.line, mismatch.reason) }
        }
        return closest.map { ($0.line, $0.reason) } ?? (sample.fenceLine, "no test file compiles it")
    }

    /// The longest run of `body`'s first lines that `fileLines` has, one indentation added to each
    /// non-blank line: how many lines it matched, and the index of the file's line after them.
    static func longestMatch(of body: [String], in fileLines: [String]) -> (matched: Int, next: Int) {
        guard let first = body.first else { return (0, 0) }
        var best = (matched: 0, next: 0)
        for start in fileLines.indices {
            let candidate = fileLines[start]
            guard candidate.hasSuffix(first), candidate.dropLast(first.count).allSatisfy(\.isWhitespace) else {
                continue
            }
            let indentation = String(candidate.dropLast(first.count))
            var matched = 0
            while matched < body.count, start + matched < fileLines.count,
                fileLines[start + matched] == (body[matched].isEmpty ? "" : indentation + body[matched])
            {
                matched += 1
            }
            if matched > best.matched { best = (matched, start + matched) }
        }
        return best
    }

    static func trimmingTrailingWhitespace(_ line: Substring) -> String {
        String(line.reversed().drop(while: \.isWhitespace).reversed())
    }
}
