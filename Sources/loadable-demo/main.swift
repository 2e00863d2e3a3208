// The Loadable tour: `swift run loadable-demo --help`; `--http` for the tour of LoadableHTTP,
// `--inspect` for the tour with the inspector's page, `--events` for its timeline.
//
// Loadables live on the main actor. On Linux the main actor runs when the program has an async
// entry point, like this top-level `await`.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

@MainActor
func main() async -> Int32 {
    let options: DemoOptions
    do {
        options = try DemoOptions.parse(Array(CommandLine.arguments.dropFirst()))
    } catch {
        printToStandardError("loadable-demo: \(error.message)\n\n\(DemoOptions.usage)\n")
        return 2
    }
    if options.showHelp {
        print(DemoOptions.usage)
        return 0
    }
    if options.http {
        // Real time and a real server: nothing to replay, so the global executor stays as it is.
        return await HTTPTour().run()
    }
    // Simulated time is replayable only if tasks woken at the same instant run in a fixed order.
    SerialExecution.install()
    if options.events { return await Inspect.printEvents(options: options) }
    if options.inspect { return await Inspect.serve(options: options) }
    await Tour(options: options).run()
    return 0
}

/// Writes `text` to standard error.
func printToStandardError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in
        _ = write(2, bytes.baseAddress, bytes.count)
    }
}

exit(await main())
