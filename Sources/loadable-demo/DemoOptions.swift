/// The demo's command-line options.
struct DemoOptions: Equatable {
    var seed: UInt64 = 42
    var failureRate = 0.3
    var duration: Duration = .seconds(30)
    var showHelp = false
    /// Run the HTTP tour (real requests to a loopback server) instead of the simulated one.
    var http = false
    /// Run the simulated tour with an inspector attached, serve its page, and keep serving.
    var inspect = false
    /// The inspector page's port with `--inspect`; `nil` for one the system picks.
    var port: Int?
    /// Run the simulated tour with an inspector attached and print its timeline (JSON Lines).
    var events = false

    static let usage = """
        usage: loadable-demo [--seed N] [--failure-rate X] [--duration S] [--help]
               loadable-demo --inspect [--port N] [--seed N] [--failure-rate X] [--duration S]
               loadable-demo --events [--seed N] [--failure-rate X] [--duration S]
               loadable-demo --http

        A tour of Loadable: an access token refreshed by a syncer with backoff, API calls that wait
        for it, and a strict group of three feeds, printed as a timeline of simulated time.

          --seed N           seed of every random choice; the same seed gives the same events (default 42)
          --failure-rate X   probability that an auth request fails, from 0 to 1 (default 0.3)
          --duration S       seconds of simulated app time, more than 0 and at most 3600 (default 30)
          --inspect          run the tour with an inspector attached and serve its page: prints the page's
                             address (http://127.0.0.1:PORT/) on a line of its own first, then the tour, then
                             keeps serving (simulated time then follows real time) until interrupted
          --port N           the page's port with --inspect, from 0 to 65535 (default 0: one the system picks)
          --events           run the tour with an inspector attached and print the inspector's timeline (JSON
                             Lines, one event per line) instead of the usual text
          --http             instead, a tour of LoadableHTTP in real time (a few seconds) against a server it
                             starts on 127.0.0.1; exits 1 if a step goes other than expected. Rejects --seed,
                             --failure-rate and --duration, which are for the simulated tour
          --help             print this help
        """

    /// A command-line mistake, with the message to print.
    struct Failure: Error, Equatable {
        var message: String
    }

    /// Parses `arguments` (without the program name).
    static func parse(_ arguments: [String]) throws(Failure) -> DemoOptions {
        var options = DemoOptions()
        var remaining = arguments[...]
        // The options of the simulated tour that were given, for the `--http` check.
        var simulationOptions: [String] = []
        while let argument = remaining.popFirst() {
            var name = argument
            var inlineValue: String?
            if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
                name = String(argument[..<equals])
                inlineValue = String(argument[argument.index(after: equals)...])
            }
            func value() throws(Failure) -> String {
                if let inlineValue { return inlineValue }
                guard let next = remaining.popFirst() else {
                    throw Failure(message: "\(name) needs a value")
                }
                return next
            }
            switch name {
            case "--help", "-h":
                options.showHelp = true
            case "--http":
                guard inlineValue == nil else { throw Failure(message: "--http takes no value") }
                options.http = true
            case "--inspect":
                guard inlineValue == nil else { throw Failure(message: "--inspect takes no value") }
                options.inspect = true
            case "--events":
                guard inlineValue == nil else { throw Failure(message: "--events takes no value") }
                options.events = true
            case "--port":
                let text = try value()
                guard let port = Int(text), (0...65535).contains(port) else {
                    throw Failure(message: "--port needs a port from 0 to 65535, got '\(text)'")
                }
                options.port = port
            case "--seed":
                simulationOptions.append(name)
                let text = try value()
                guard let seed = UInt64(text) else {
                    throw Failure(message: "--seed needs a whole number from 0 to \(UInt64.max), got '\(text)'")
                }
                options.seed = seed
            case "--failure-rate":
                simulationOptions.append(name)
                let text = try value()
                guard let rate = Double(text), rate >= 0, rate <= 1 else {
                    throw Failure(message: "--failure-rate needs a number from 0 to 1, got '\(text)'")
                }
                options.failureRate = rate
            case "--duration":
                simulationOptions.append(name)
                let text = try value()
                guard let seconds = Double(text), seconds > 0, seconds <= 3600 else {
                    throw Failure(message: "--duration needs seconds, more than 0 and at most 3600, got '\(text)'")
                }
                options.duration = .milliseconds(Int64((seconds * 1000).rounded()))
            default:
                throw Failure(message: "unknown option '\(argument)'")
            }
        }
        if options.http, let option = simulationOptions.first {
            throw Failure(
                message: "\(option) is for the simulated tour; --http runs in real time against a loopback server")
        }
        if options.http, options.inspect || options.events {
            throw Failure(
                message: "\(options.inspect ? "--inspect" : "--events") inspects the simulated tour; "
                    + "--http runs in real time against a loopback server")
        }
        if options.inspect && options.events {
            throw Failure(message: "--inspect serves the page, --events prints the timeline: choose one")
        }
        if options.port != nil && !options.inspect {
            throw Failure(message: "--port is the inspector page's port: it needs --inspect")
        }
        return options
    }
}
