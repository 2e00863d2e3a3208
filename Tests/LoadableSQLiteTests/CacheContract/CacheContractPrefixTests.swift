import Foundation
import LoadableCaching
import LoadableSQLite
import Testing

// MARK: - Prefixes that end with a character an ASCII one joins

/// `removeEntries(keyPrefix:)` (and a scope's `removeAll()`) follows Swift's `hasPrefix`, over
/// every cache kind, also when the prefix ends with a grapheme-cluster "Prepend" character (U+0600
/// ARABIC NUMBER SIGN, U+110BD KAITHI NUMBER SIGN): such a character joins the character after it
/// into one, ASCII letters, digits and spaces included, so a key whose bytes continue the prefix's
/// with one of these does not start with the prefix as Swift compares strings, and is kept. A
/// control character (a line feed, a tab) does not join it: that key starts with the prefix.
@Suite("Every LoadableCache: removeEntries(keyPrefix:) after a Prepend character")
struct CacheContractPrefixTests {
    /// Prefixes that end with a Prepend character.
    static let prefixes = ["p/\u{600}", "p/\u{110BD}"]

    /// What follows the prefix in the keys: nothing, ASCII letters, digits, a space, a slash,
    /// control characters, a combining accent, a non-ASCII letter, another Prepend character.
    static let tails = [
        "", "a", "Z", "0", "7", " ", "/x", "\n", "\n1", "\t", "\r\n", "\u{301}", "\u{E9}", "\u{600}", "\u{600}a",
    ]

    @Test("as Swift compares strings, an ASCII letter, digit or space joins a Prepend character, a control does not")
    func swiftsRule() {
        for prepend in ["\u{600}", "\u{110BD}"] {
            let prefix = "x" + prepend
            #expect(!(prefix + "a").hasPrefix(prefix))
            #expect(!(prefix + "0").hasPrefix(prefix))
            #expect(!(prefix + " ").hasPrefix(prefix))
            #expect((prefix + "\n").hasPrefix(prefix))
            #expect((prefix + "\t").hasPrefix(prefix))
        }
    }

    @Test(
        "removeEntries(keyPrefix:) and a scope's removeAll() after a Prepend character remove exactly the keys hasPrefix says",
        arguments: CacheKind.allCases, prefixes)
    func prependPrefix(kind: CacheKind, prefix: String) async throws {
        let subject = try CacheSubject(kind)
        defer { subject.cleanUp() }
        let cache = subject.cache
        let keys = Self.tails.map { prefix + $0 } + ["p/", "p/a", "p/\u{601}a", "q"]
        let removed = keys.filter { $0.hasPrefix(prefix) }
        let kept = keys.filter { !$0.hasPrefix(prefix) }
        // Both kinds are there: the tails above give keys each way.
        #expect(removed.count >= 4 && kept.count >= 8, "removed \(removed.count), kept \(kept.count)")

        for removal in ["removeEntries(keyPrefix:)", "scoped(_:).removeAll()"] {
            for key in keys { try await subject.another().save(contractEntry(3), key: key) }
            if removal == "removeEntries(keyPrefix:)" {
                try await cache.removeEntries(keyPrefix: prefix)
            } else {
                try await cache.scoped(prefix).removeAll()
            }
            for key in removed {
                #expect(try await cache.load(key: key) == nil, "\(removal) kept \(key.debugDescription)")
            }
            for key in kept {
                #expect(try await cache.load(key: key) != nil, "\(removal) removed \(key.debugDescription)")
            }
            #expect(try await subject.storedCount() == kept.count, "\(removal)")
            try await cache.removeAll()
        }
    }
}
