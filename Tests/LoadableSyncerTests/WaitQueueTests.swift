import LoadableTesting
import Testing

@testable import LoadableSyncer

@Suite struct WaitQueueTests {
    @Test("Waits come out in the order they began, which is the order of their deadlines")
    func order() {
        var queue = WaitQueue<String>()
        let ids = ["a", "b", "c"].enumerated().map { queue.append(deadline: .seconds($0.offset), payload: $0.element) }
        #expect(ids == [0, 1, 2])
        #expect(queue.first?.id == 0 && queue.lastDeadline == .seconds(2))
        var payloads: [String] = []
        while let entry = queue.popFirst() { payloads.append(entry.payload) }
        #expect(payloads == ["a", "b", "c"])
        #expect(queue.isEmpty && queue.first == nil && queue.lastDeadline == nil)
    }

    @Test("Removing any wait keeps the others in order (checked against a list)", arguments: [1, 2, 3] as [UInt64])
    func randomOperations(seed: UInt64) {
        var random = SeededRandomNumberGenerator(seed: seed)
        var queue = WaitQueue<Int>()
        var reference: [(id: Int, deadline: Duration)] = []
        var now = Duration.zero
        for _ in 0..<4_000 {
            switch Int.random(in: 0..<5, using: &random) {
            case 0, 1:
                now += .milliseconds(Int.random(in: 0..<3, using: &random))
                let id = queue.append(deadline: now, payload: queue.nextID)
                reference.append((id, now))
            case 2, 3:
                guard let victim = reference.randomElement(using: &random) else { continue }
                #expect(queue.remove(victim.id) == victim.id)
                #expect(!queue.contains(victim.id) && queue.remove(victim.id) == nil)
                reference.removeAll { $0.id == victim.id }
            default:
                let popped = queue.popFirst()
                #expect(popped?.id == reference.first?.id && popped?.payload == reference.first?.id)
                if !reference.isEmpty { reference.removeFirst() }
            }
            #expect(queue.count == reference.count)
            #expect(queue.first?.id == reference.first?.id && queue.first?.deadline == reference.first?.deadline)
            #expect(reference.allSatisfy { queue.contains($0.id) })
        }
        #expect(queue.remove(-1) == nil && queue.remove(queue.nextID) == nil)
        #expect(queue.removeAll() == reference.map(\.id))
        #expect(queue.isEmpty)
    }

    @Test("removeAll returns the pending waits in the order they began, skipping removed ones")
    func removeAll() {
        var queue = WaitQueue<Int>()
        for id in 0..<40 { _ = queue.append(deadline: .seconds(id / 10), payload: id) }
        for id in stride(from: 1, to: 40, by: 2) { _ = queue.remove(id) }
        _ = queue.popFirst()
        #expect(queue.removeAll() == Array(stride(from: 2, to: 40, by: 2)))
        #expect(queue.isEmpty && !queue.contains(4) && queue.removeAll().isEmpty)
        #expect(queue.append(deadline: .zero, payload: 40) == 40)
    }
}

@Suite struct WaiterStateMachineTests {
    typealias Action = WaiterAction

    @Test("The first wait arms the timer and starts watching; later waits add nothing")
    func adding() {
        var machine = WaiterStateMachine<Int>(timeout: .seconds(10))
        let first = machine.add(now: .zero, payload: machine.nextID)
        #expect(first.actions == [.armTimer(after: .seconds(10)), .startWatching])
        let second = machine.add(now: .seconds(2), payload: machine.nextID)
        #expect(second.actions == [])
        #expect(machine.count == 2)
        #expect(machine.armedDeadline == .seconds(10))
    }

    @Test("The timer expires due waits in order and is armed for the next deadline")
    func expiring() {
        var machine = WaiterStateMachine<Int>(timeout: .seconds(10))
        let a = machine.add(now: .zero, payload: machine.nextID).id
        let b = machine.add(now: .seconds(3), payload: machine.nextID).id
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
        var machine = WaiterStateMachine<Int>(timeout: .seconds(10))
        let a = machine.add(now: .zero, payload: machine.nextID).id
        _ = machine.add(now: .seconds(4), payload: machine.nextID)
        let removed = machine.remove(a)
        #expect(removed.removed == a && removed.actions.isEmpty)
        let fired = machine.timerFired(now: .seconds(10))
        #expect(fired.expired == [])
        #expect(fired.actions == [.armTimer(after: .seconds(4))])
    }

    @Test("Removing the last wait cancels the timer and stops watching; removing twice does nothing")
    func removingLast() {
        var machine = WaiterStateMachine<Int>(timeout: .seconds(10))
        let a = machine.add(now: .zero, payload: machine.nextID).id
        let first = machine.remove(a)
        #expect(first.removed == a && first.actions == [.cancelTimer, .stopWatching])
        let second = machine.remove(a)
        #expect(second.removed == nil && second.actions.isEmpty)
    }

    @Test("removeAll ends every wait in the order they began")
    func removingAll() {
        var machine = WaiterStateMachine<Int>(timeout: .seconds(10))
        let ids = (0..<3).map { machine.add(now: .seconds($0), payload: machine.nextID).id }
        let all = machine.removeAll()
        #expect(all.removed == ids)
        #expect(all.actions == [.cancelTimer, .stopWatching])
        let none = machine.removeAll()
        #expect(none.removed.isEmpty && none.actions.isEmpty)
    }

    @Test("A wait begun at an earlier time than the previous one (a clock that went back) expires with it")
    func clockGoingBack() {
        var machine = WaiterStateMachine<Int>(timeout: .seconds(10))
        let a = machine.add(now: .seconds(5), payload: machine.nextID).id
        let b = machine.add(now: .seconds(2), payload: machine.nextID)
        #expect(b.actions.isEmpty)
        let fired = machine.timerFired(now: .seconds(15))
        #expect(fired.expired == [a, b.id])
        #expect(fired.actions == [.stopWatching])
    }
}
