import Loadable
import LoadableTesting

/// Prints one line per event, stamped with the simulated time since the start.
@MainActor
final class Timeline {
    private let clock: ManualClock
    private let start: ManualClock.Instant
    private var observations: [LoadableObservation] = []

    init(clock: ManualClock) {
        self.clock = clock
        start = clock.now
    }

    /// The simulated time since the start, in seconds.
    var elapsed: Duration { start.duration(to: clock.now) }

    /// Prints `time  name  state  what the user sees`.
    func log(_ name: String, _ state: String, _ userSees: String) {
        let time = Self.seconds(elapsed).leftPadded(to: 8)
        print("\(time) s  \(name.padded(to: 19)) \(state.padded(to: 22)) \(userSees)")
    }

    /// Logs every later change of `loadable` under `name`, with the text `userSees` gives for it.
    func watch<Watched: PureLoadable>(
        _ loadable: Watched, as name: String, userSees: @escaping @MainActor (Watched) -> String
    ) {
        observations.append(
            loadable.observe { [weak self] loadable in
                self?.log(name, "\(loadable.loadableState)", userSees(loadable))
            })
    }

    /// The column titles, aligned with ``log(_:_:_:)``'s lines.
    static let header = "    time    object              state                  what the user sees"

    /// `duration` in seconds, as a number.
    nonisolated static func secondsValue(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// `duration` in seconds with three decimals, as in `12.345`.
    static func seconds(_ duration: Duration) -> String {
        let milliseconds =
            duration.components.seconds * 1000
            + duration.components.attoseconds / 1_000_000_000_000_000
        let fraction = String(milliseconds % 1000)
        return "\(milliseconds / 1000).\(String(repeating: "0", count: 3 - fraction.count))\(fraction)"
    }
}

extension String {
    /// The string followed by spaces up to `width` characters.
    func padded(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }

    /// The string preceded by spaces up to `width` characters.
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
