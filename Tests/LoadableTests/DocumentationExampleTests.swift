import Loadable
import LoadableTestSupport
import Testing

// The `PhotosLoadable` example of `Loadable`'s documentation comment, exactly as it is given there:
// it must compile unchanged.
struct Photo: Sendable { var url: String }
protocol PhotosClient: Sendable { func photos() async throws -> [Photo] }

// swift-format-ignore
final class PhotosLoadable: Loadable<[Photo]> {
    private let client: any PhotosClient
    init(client: any PhotosClient) {
        self.client = client
        super.init()
    }
    override func doSync() {
        Task {
            do { setDidSyncSuccessfully(try await client.photos()) }
            catch { setDidFailToSync(error) }
        }
    }
}

struct FakePhotosClient: PhotosClient {
    var result: Result<[Photo], TestError>
    func photos() async throws -> [Photo] { try result.get() }
}

@Suite("The PhotosLoadable example of Loadable's documentation and the README quick start")
@MainActor
struct DesignExampleTests {
    @Test("PhotosLoadable syncs through its client")
    func photosLoadable() async throws {
        let photos = PhotosLoadable(client: FakePhotosClient(result: .success([Photo(url: "a.jpg")])))
        var seen: [LoadableState] = []
        try await observing(photos, { seen.append($0.loadableState) }) {
            let contents = try await photos.syncedContents()
            #expect(contents.map(\.url) == ["a.jpg"])
            #expect(seen == [.syncing, .didSyncSuccessfully])
        }
    }

    @Test("PhotosLoadable reports its client's error and keeps old photos")
    func photosFailure() async {
        let photos = PhotosLoadable(client: FakePhotosClient(result: .failure(TestError("offline"))))
        await #expect(throws: TestError("offline")) { try await photos.syncedContents() }
        #expect(photos.loadableState == .didFailToSync)
    }

    @Test("README quick start: the shortest right way")
    func readmeQuickStart() async throws {
        struct GreetingAPI {
            func greeting() async throws -> String { "Hello, Loadable" }
        }
        let api = GreetingAPI()
        // --- README: Quick start ---
        let greeting = AsyncLoadable { try await api.greeting() }
        let observation = greeting.observe { greeting in
            print("\(greeting.loadableState): \(greeting.contents ?? "-")")
        }
        greeting.sync()  // prints "syncing: -", later "did-sync-successfully: Hello, Loadable"
        let text = try await greeting.syncedContents()  // joins the running sync
        // --- end ---
        #expect(text == "Hello, Loadable")
        observation.cancel()
    }

    @Test("README quick start: the subclass of MMMLoadable's migrants")
    func readmeQuickStartSubclass() async throws {
        // --- README: Quick start, subclass ---
        final class GreetingLoadable: Loadable<String> {
            override func doSync() {
                Task {
                    // Pretend to call a server.
                    setDidSyncSuccessfully("Hello, Loadable")
                }
            }
        }
        // --- end ---
        let greeting = GreetingLoadable()
        #expect(try await greeting.syncedContents() == "Hello, Loadable")
    }
}
