import Loadable

/// A loadable that "downloads" a greeting.
final class GreetingLoadable: Loadable<String> {
    override func doSync() {
        Task { setDidSyncSuccessfully("Hello, Loadable") }
    }
}

@MainActor
func runDemo() async {
    let greeting = GreetingLoadable()
    let observation = greeting.observe { greeting in
        print("greeting: \(greeting.loadableState) (contents: \(greeting.contents ?? "none"))")
    }
    print("greeting: \(greeting.loadableState)")
    _ = try? await greeting.syncedContents()
    observation.cancel()
}

await runDemo()
