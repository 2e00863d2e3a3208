// swift-tools-version: 6.2
import PackageDescription

let upcomingFeatures: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "Loadable",
    platforms: [.macOS(.v14), .iOS(.v17), .tvOS(.v17), .watchOS(.v10), .visionOS(.v1)],
    products: [
        .library(name: "Loadable", targets: ["Loadable"]),
        .library(name: "LoadableGroup", targets: ["LoadableGroup"]),
        .library(name: "LoadableSyncer", targets: ["LoadableSyncer"]),
        .library(name: "LoadableTesting", targets: ["LoadableTesting"]),
        .library(name: "LoadableCaching", targets: ["LoadableCaching"]),
        .library(name: "LoadableHTTP", targets: ["LoadableHTTP"]),
        .library(name: "LoadableSQLite", targets: ["LoadableSQLite"]),
        .library(name: "LoadableSync", targets: ["LoadableSync"]),
        .library(name: "LoadableInspector", targets: ["LoadableInspector"]),
        .executable(name: "loadable-demo", targets: ["loadable-demo"]),
    ],
    targets: [
        // Utilities the modules share (locks, clocks, timers, configuration checks); not a product.
        .target(name: "LoadableSupport", swiftSettings: upcomingFeatures),
        .target(name: "Loadable", dependencies: ["LoadableSupport"], swiftSettings: upcomingFeatures),
        .target(name: "LoadableGroup", dependencies: ["Loadable"], swiftSettings: upcomingFeatures),
        .target(
            name: "LoadableSyncer",
            dependencies: ["Loadable", "LoadableSupport"],
            swiftSettings: upcomingFeatures
        ),
        .target(
            name: "LoadableTesting",
            dependencies: ["Loadable", "LoadableSupport"],
            swiftSettings: upcomingFeatures
        ),
        .target(
            name: "LoadableCaching",
            dependencies: ["Loadable", "LoadableSupport", "LoadableSyncer"],
            swiftSettings: upcomingFeatures
        ),
        .target(
            name: "LoadableHTTP",
            dependencies: ["Loadable", "LoadableSupport", "LoadableSyncer"],
            swiftSettings: upcomingFeatures
        ),
        // The system's SQLite (in Apple's SDKs; Debian's libsqlite3-dev on Linux): no package.
        .systemLibrary(
            name: "CLoadableSQLite",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .target(
            name: "LoadableSQLite",
            dependencies: ["CLoadableSQLite", "Loadable", "LoadableCaching", "LoadableSupport"],
            swiftSettings: upcomingFeatures
        ),
        .target(
            name: "LoadableSync",
            dependencies: ["Loadable", "LoadableSupport", "LoadableSyncer", "LoadableCaching", "LoadableHTTP"],
            swiftSettings: upcomingFeatures
        ),
        // The inspector's page: a server on 127.0.0.1 and the HTML, CSS and JavaScript it serves.
        .target(
            name: "LoadableInspector",
            dependencies: ["Loadable", "LoadableSupport"],
            resources: [.copy("Page")],
            swiftSettings: upcomingFeatures
        ),
        .executableTarget(
            name: "loadable-demo",
            dependencies: [
                "Loadable", "LoadableGroup", "LoadableSyncer", "LoadableTesting", "LoadableCaching", "LoadableHTTP",
                "LoadableSupport", "LoadableSync", "LoadableInspector",
            ],
            swiftSettings: upcomingFeatures
        ),
        // Helpers shared by the test targets; not a product.
        .target(
            name: "LoadableTestSupport",
            dependencies: ["Loadable"],
            path: "Tests/LoadableTestSupport",
            swiftSettings: upcomingFeatures
        ),
        .testTarget(
            name: "LoadableTests",
            dependencies: ["Loadable", "LoadableTesting", "LoadableTestSupport"],
            swiftSettings: upcomingFeatures
        ),
        .testTarget(
            name: "LoadableGroupTests",
            dependencies: ["LoadableGroup", "LoadableTesting", "LoadableTestSupport"],
            swiftSettings: upcomingFeatures
        ),
        .testTarget(
            name: "LoadableSyncerTests",
            dependencies: ["LoadableSyncer", "LoadableTesting", "LoadableTestSupport"],
            swiftSettings: upcomingFeatures
        ),
        // What every loadable type shares (one core): observer rules, Observation, async helpers.
        .testTarget(
            name: "LoadableCoreTests",
            dependencies: [
                "Loadable", "LoadableCaching", "LoadableGroup", "LoadableHTTP", "LoadableSyncer", "LoadableTesting",
                "LoadableTestSupport",
            ],
            swiftSettings: upcomingFeatures
        ),
        // Helpers shared by the caching and SQLite test targets (file-cache fixtures, a persisted
        // loadable, an outbox on a scripted server); not a product.
        .target(
            name: "LoadableCachingTestSupport",
            dependencies: ["Loadable", "LoadableCaching", "LoadableSyncer", "LoadableTesting", "LoadableTestSupport"],
            path: "Tests/LoadableCachingTestSupport",
            swiftSettings: upcomingFeatures
        ),
        // Store/, Persistence/, Outbox/ as in Sources/LoadableCaching. LoadableSQLite only for the
        // two tests that run caching code on a SQLite cache as an app does: the Persistence guide's
        // move from files to SQLite, and the outbox shared by two processes on each cache kind.
        .testTarget(
            name: "LoadableCachingTests",
            dependencies: [
                "LoadableCaching", "LoadableCachingTestSupport", "LoadableSQLite", "LoadableGroup", "LoadableSyncer",
                "LoadableTesting", "LoadableTestSupport",
            ],
            swiftSettings: upcomingFeatures
        ),
        // SQLiteLoadableCache, and the cache contract suite (CacheContract/), run over every cache
        // kind the package ships (memory, files, SQLite): the one target that can make all three.
        .testTarget(
            name: "LoadableSQLiteTests",
            dependencies: [
                "LoadableSQLite", "CLoadableSQLite", "LoadableCaching", "LoadableCachingTestSupport", "LoadableSyncer",
                "LoadableTesting", "LoadableTestSupport",
            ],
            swiftSettings: upcomingFeatures
        ),
        .testTarget(
            name: "LoadableHTTPTests",
            dependencies: [
                "LoadableCaching", "LoadableHTTP", "LoadableSyncer", "LoadableTesting", "LoadableTestSupport",
            ],
            swiftSettings: upcomingFeatures
        ),
        // Synced collections; the Kinto tests start a real Kinto (`.ci/run` installs it).
        .testTarget(
            name: "LoadableSyncTests",
            dependencies: [
                "LoadableSync", "LoadableCaching", "LoadableGroup", "LoadableHTTP", "LoadableSQLite", "LoadableSyncer",
                "LoadableTesting", "LoadableTestSupport",
            ],
            // The real Kinto's launcher, run with the Python of a virtual environment; not a resource.
            exclude: ["Kinto/kinto_server.py"],
            swiftSettings: upcomingFeatures
        ),
        // The inspector's server, the demo's golden timeline, and the page in a real headless
        // browser. The demo is a dependency so that SwiftPM builds it first: the tests run it.
        .testTarget(
            name: "LoadableInspectorTests",
            dependencies: ["LoadableInspector", "Loadable", "LoadableTesting", "LoadableTestSupport", "loadable-demo"],
            // The browser's driver (run with python3) and the golden timeline (read and written at
            // its place in the package, found from #filePath): not resources.
            exclude: ["Browser/drive_page.py", "Golden"],
            swiftSettings: upcomingFeatures
        ),
        .testTarget(
            name: "LoadableTestingTests",
            dependencies: ["LoadableTesting", "LoadableTestSupport"],
            swiftSettings: upcomingFeatures
        ),
    ],
    swiftLanguageModes: [.v6]
)
