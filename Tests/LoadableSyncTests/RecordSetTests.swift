import Foundation
import LoadableSync
import Testing

struct Note: Identifiable, Codable, Sendable, Equatable {
    var id: String
    var title: String
    var done = false
}

@Suite struct RecordSetTests {
    @Test func keepsTheOrderOfFirstAppearanceAndFindsByID() {
        let set = RecordSet([Note(id: "a", title: "A"), Note(id: "b", title: "B"), Note(id: "a", title: "A2")])
        #expect(set.ids == ["a", "b"])
        #expect(set[id: "a"]?.title == "A2")
        #expect(set[id: "c"] == nil)
        #expect(set.count == 2)
    }
}

@Suite struct RecordChangeCodingTests {
    @Test func changesRoundTripThroughTheirFlatJSON() throws {
        let changes: [RecordChange<Note>] = [
            .create(Note(id: "a", title: "A")), .update(Note(id: "a", title: "B", done: true), base: "7"),
            .delete("a", base: "8"),
        ]
        let data = try JSONEncoder().encode(changes)
        #expect(try JSONDecoder().decode([RecordChange<Note>].self, from: data) == changes)
        let object = try JSONSerialization.jsonObject(with: JSONEncoder().encode(changes[1])) as? [String: Any]
        #expect(object?["kind"] as? String == "update")
        #expect(object?["base"] as? String == "7")
        #expect((object?["record"] as? [String: Any])?["title"] as? String == "B")
    }

    @Test func anUnknownKindIsADecodingErrorNotATrap() {
        let data = Data(#"{"kind":"rename","id":"a","base":"1"}"#.utf8)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(RecordChange<Note>.self, from: data) }
    }
}
