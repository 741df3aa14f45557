// swift-tools-version:6.1
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "IdentityJWKS",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "IdentityJWKS", targets: ["IdentityJWKS"]),
        .executable(name: "identity-jwks-check", targets: ["identity-jwks-check"]),
    ],
    dependencies: [
        .package(name: "swift-identity-runtime", path: "../.."),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        .target(
            name: "IdentityJWKS",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "IdentityAssertions", package: "swift-identity-runtime"),
            ],
            swiftSettings: strictSettings
        ),
        // Fetches a JWKS with RemoteKeySet and verifies a token with it: the interop script's Swift side.
        .executableTarget(
            name: "identity-jwks-check",
            dependencies: [
                "IdentityJWKS",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "IdentityAssertions", package: "swift-identity-runtime"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "IdentityJWKSTests",
            dependencies: [
                "IdentityJWKS",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
                .product(name: "IdentityAssertions", package: "swift-identity-runtime"),
            ],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
