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

    @Test("README quick start")
    func readmeQuickStart() async throws {
        // --- README: Quick start ---
        final class GreetingLoadable: Loadable<String> {
            override func doSync() {
                Task {
                    // Pretend to call a server.
                    setDidSyncSuccessfully("Hello, Loadable")
                }
            }
        }

        let greeting = GreetingLoadable()
        let observation = greeting.observe { greeting in
            print("\(greeting.loadableState): \(greeting.contents ?? "-")")
        }
        greeting.sync()  // prints "syncing: -", later "did-sync-successfully: Hello, Loadable"
        let text = try await greeting.syncedContents()  // joins the running sync
        // --- end ---
        #expect(text == "Hello, Loadable")
        observation.cancel()
    }
}
