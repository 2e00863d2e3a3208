// swift-tools-version: 6.1
import PackageDescription

// Benchmarks live in their own package so that their dependencies (OpenCombine and GRDB, the peers
// they are measured against) never reach users of the library. GRDB 7 needs tools version 6.1.
let package = Package(
    name: "Benchmarks",
    platforms: [.macOS(.v14), .iOS(.v17), .tvOS(.v17), .watchOS(.v10), .visionOS(.v1)],
    dependencies: [
        .package(name: "Loadable", path: ".."),
        .package(url: "https://github.com/OpenCombine/OpenCombine", exact: "0.14.0"),
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
    ],
    targets: [
        // Counts calls to the C allocator (malloc and friends), for allocations per operation.
        .target(name: "AllocationCounter"),
        .executableTarget(
            name: "loadable-benchmarks",
            dependencies: [
                "AllocationCounter",
                .product(name: "Loadable", package: "Loadable"),
                .product(name: "LoadableCaching", package: "Loadable"),
                .product(name: "LoadableGroup", package: "Loadable"),
                .product(name: "LoadableHTTP", package: "Loadable"),
                .product(name: "LoadableSQLite", package: "Loadable"),
                .product(name: "LoadableSync", package: "Loadable"),
                .product(name: "LoadableSyncer", package: "Loadable"),
                .product(name: "LoadableTesting", package: "Loadable"),
                .product(name: "OpenCombine", package: "OpenCombine"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"),
                .enableUpcomingFeature("MemberImportVisibility"),
                .enableUpcomingFeature("InternalImportsByDefault"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
