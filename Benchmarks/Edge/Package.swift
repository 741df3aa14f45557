// swift-tools-version:6.1
import PackageDescription

// The identity middlewares under an outside load generator (wrk): a small release server per framework with the
// same light route with and without the middleware. Its own package, so that the landing lane's builds of
// Integrations/* never compile it, and one executable per framework, so that each builds only its own
// framework. Run it with ./run.sh (see there).
let package = Package(
    name: "IdentityEdgeBenchmark",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "swift-identity-runtime", path: "../.."),
        .package(name: "IdentityHummingbird", path: "../../Integrations/IdentityHummingbird"),
        .package(name: "IdentityVapor", path: "../../Integrations/IdentityVapor"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/vapor/vapor", from: "4.122.3"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    ],
    targets: [
        .target(
            name: "EdgeService",
            dependencies: [
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
                .product(name: "IdentityPolicy", package: "swift-identity-runtime"),
                .product(name: "IdentityAssertions", package: "swift-identity-runtime"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
        .executableTarget(
            name: "identity-edge-hummingbird",
            dependencies: [
                "EdgeService",
                .product(name: "IdentityHummingbird", package: "IdentityHummingbird"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
        .executableTarget(
            name: "identity-edge-calls-hummingbird",
            dependencies: [
                "EdgeService",
                .product(name: "IdentityHummingbird", package: "IdentityHummingbird"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
        .executableTarget(
            name: "identity-edge-calls-vapor",
            dependencies: [
                "EdgeService",
                .product(name: "IdentityVapor", package: "IdentityVapor"),
                .product(name: "Vapor", package: "vapor"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
        .executableTarget(
            name: "identity-edge-vapor",
            dependencies: [
                "EdgeService",
                .product(name: "IdentityVapor", package: "IdentityVapor"),
                .product(name: "Vapor", package: "vapor"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
