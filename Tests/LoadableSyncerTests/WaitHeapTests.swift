import LoadableTesting
import Testing

@testable import LoadableSyncer

@Suite struct WaitHeapTests {
    @Test("Waits come out by deadline, ties in the order they were added")
    func order() {
        var heap = WaitHeap()
        heap.insert(id: 0, deadline: .seconds(5))
        heap.insert(id: 1, deadline: .seconds(1))
        heap.insert(id: 2, deadline: .seconds(5))
        heap.insert(id: 3, deadline: .seconds(3))
        var ids: [Int] = []
        while let entry = heap.popFirst() { ids.append(entry.id) }
        #expect(ids == [1, 3, 0, 2])
        #expect(heap.isEmpty)
    }

    @Test("Removing any wait keeps the heap ordered (checked against a sorted list)", arguments: [1, 2, 3] as [UInt64])
    func randomOperations(seed: UInt64) {
        var random = SeededRandomNumberGenerator(seed: seed)
        var heap = WaitHeap()
        var reference: [WaitHeap.Entry] = []
        var nextID = 0
        for _ in 0..<2_000 {
            switch Int.random(in: 0..<3, using: &random) {
            case 0, 1:
                let deadline = Duration.milliseconds(Int.random(in: 0..<100, using: &random))
                heap.insert(id: nextID, deadline: deadline)
                reference.append(.init(id: nextID, deadline: deadline))
                nextID += 1
            default:
                guard let victim = reference.randomElement(using: &random) else { continue }
                let removed = heap.remove(victim.id)
                #expect(removed)
                reference.removeAll { $0.id == victim.id }
            }
            #expect(heap.count == reference.count)
            #expect(heap.first == reference.min { $0.isBefore($1) })
        }
        let removedMissing = heap.remove(-1)
        #expect(!removedMissing)
        let sorted = reference.sorted { $0.isBefore($1) }.map(\.id)
        var popped: [Int] = []
        while let entry = heap.popFirst() { popped.append(entry.id) }
        #expect(popped == sorted)
    }

    @Test("removeAll returns the waits in the order they were added")
    func removeAll() {
        var heap = WaitHeap()
        for id in [4, 2, 9, 1] { heap.insert(id: id, deadline: .seconds(10 - id)) }
        #expect(heap.removeAll() == [1, 2, 4, 9])
        #expect(heap.isEmpty && !heap.contains(4))
    }
}

@Suite struct WaiterStateMachineTests {
    typealias Action = WaiterStateMachine.Action

    @Test("The first wait arms the timer and starts watching; later waits add nothing")
    func adding() {
        var machine = WaiterStateMachine(timeout: .seconds(10))
        let first = machine.add(now: .zero)
        #expect(first.actions == [.armTimer(after: .seconds(10)), .startWatching])
        let second = machine.add(now: .seconds(2))
        #expect(second.actions == [])
        #expect(machine.count == 2)
        #expect(machine.armedDeadline == .seconds(10))
    }

    @Test("The timer expires due waits in order and is armed for the next deadline")
    func expiring() {
        var machine = WaiterStateMachine(timeout: .seconds(10))
        let a = machine.add(now: .zero).id
        let b = machine.add(now: .seconds(3)).id
        let fired = machine.timerFired(now: .seconds(10))
        #expect(fired.expired == [a])
        #expect(fired.actions == [.armTimer(after: .seconds(3))])
        let last = machine.timerFired(now: .seconds(13))
        #expect(last.expired == [b])
        #expect(last.actions == [.stopWatching])
        #expect(machine.count == 0)
    }

    @Test("Removing the earliest wait keeps the timer (it fires early and re-arms)")
    func removingEarliest() {
        var machine = WaiterStateMachine(timeout: .seconds(10))
        let a = machine.add(now: .zero).id
        _ = machine.add(now: .seconds(4))
        let removed = machine.remove(a)
        #expect(removed.removed && removed.actions.isEmpty)
        let fired = machine.timerFired(now: .seconds(10))
        #expect(fired.expired == [])
        #expect(fired.actions == [.armTimer(after: .seconds(4))])
    }

    @Test("Removing the last wait cancels the timer and stops watching; removing twice does nothing")
    func removingLast() {
        var machine = WaiterStateMachine(timeout: .seconds(10))
        let a = machine.add(now: .zero).id
        let first = machine.remove(a)
        #expect(first.removed && first.actions == [.cancelTimer, .stopWatching])
        let second = machine.remove(a)
        #expect(!second.removed && second.actions.isEmpty)
    }

    @Test("removeAll ends every wait in the order they began")
    func removingAll() {
        var machine = WaiterStateMachine(timeout: .seconds(10))
        let ids = (0..<3).map { machine.add(now: .seconds($0)).id }
        let all = machine.removeAll()
        #expect(all.ids == ids)
        #expect(all.actions == [.cancelTimer, .stopWatching])
        let none = machine.removeAll()
        #expect(none.ids.isEmpty && none.actions.isEmpty)
    }
}
