// swift-tools-version:6.1
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "IdentityPostgres",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "IdentityPostgres", targets: ["IdentityPostgres"]),
        .executable(name: "identity-postgres-node", targets: ["identity-postgres-node"]),
    ],
    dependencies: [
        .package(name: "swift-identity-runtime", path: "../.."),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // Already in postgres-nio's graph (SCRAM); the role-per-tenant mode derives names and passwords with it.
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3" ..< "5.0.0"),
    ],
    targets: [
        .target(
            name: "IdentityPostgres",
            dependencies: [
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
                .product(name: "IdentityProtection", package: "swift-identity-runtime"),
                .product(name: "IdentityPolicy", package: "swift-identity-runtime"),
            ],
            swiftSettings: strictSettings
        ),
        // A fleet member for the multi-process tests and the benchmarks: the tests spawn several of it.
        .executableTarget(
            name: "identity-postgres-node",
            dependencies: [
                "IdentityPostgres",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
                .product(name: "IdentityProtection", package: "swift-identity-runtime"),
                .product(name: "IdentityPolicy", package: "swift-identity-runtime"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "IdentityPostgresTests",
            dependencies: [
                "IdentityPostgres",
                // Built so that the multi-process tests can start it.
                "identity-postgres-node",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
                .product(name: "IdentityProtection", package: "swift-identity-runtime"),
                .product(name: "IdentityPolicy", package: "swift-identity-runtime"),
                .product(name: "IdentityTesting", package: "swift-identity-runtime"),
            ],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
