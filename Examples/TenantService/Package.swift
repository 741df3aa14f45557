// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "TenantService",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "TenantServiceKit", targets: ["TenantServiceKit"]),
        .executable(name: "tenant-load", targets: ["tenant-load"]),
    ],
    dependencies: [
        .package(name: "swift-identity-runtime", path: "../.."),
        .package(name: "IdentityHummingbird", path: "../../Integrations/IdentityHummingbird"),
        .package(name: "IdentityLogging", path: "../../Integrations/IdentityLogging"),
        .package(name: "IdentityMetrics", path: "../../Integrations/IdentityMetrics"),
        .package(name: "IdentityPostgres", path: "../../Integrations/IdentityPostgres"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        .target(
            name: "TenantServiceKit",
            dependencies: [
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
                .product(name: "IdentityPolicy", package: "swift-identity-runtime"),
                .product(name: "IdentityProtection", package: "swift-identity-runtime"),
                .product(name: "IdentityAssertions", package: "swift-identity-runtime"),
                .product(name: "IdentityHummingbird", package: "IdentityHummingbird"),
                .product(name: "IdentityLogging", package: "IdentityLogging"),
                .product(name: "IdentityMetrics", package: "IdentityMetrics"),
                .product(name: "IdentityPostgres", package: "IdentityPostgres"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
        .executableTarget(
            name: "tenant-load",
            dependencies: [
                "TenantServiceKit",
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
                .product(name: "IdentityAssertions", package: "swift-identity-runtime"),
                .product(name: "IdentityMetrics", package: "IdentityMetrics"),
                .product(name: "IdentityPostgres", package: "IdentityPostgres"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
        .testTarget(
            name: "TenantServiceTests",
            dependencies: [
                "TenantServiceKit",
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
                .product(name: "IdentityPolicy", package: "swift-identity-runtime"),
                .product(name: "IdentityAssertions", package: "swift-identity-runtime"),
                .product(name: "IdentityHummingbird", package: "IdentityHummingbird"),
                .product(name: "IdentityPostgres", package: "IdentityPostgres"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
