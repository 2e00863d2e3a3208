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
