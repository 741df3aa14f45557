// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "IdentityHummingbird",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "IdentityHummingbird", targets: ["IdentityHummingbird"]),
    ],
    dependencies: [
        .package(name: "swift-identity-runtime", path: "../.."),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
    ],
    targets: [
        .target(
            name: "IdentityHummingbird",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
                .product(name: "IdentityPolicy", package: "swift-identity-runtime"),
                .product(name: "IdentityAssertions", package: "swift-identity-runtime"),
                .product(name: "IdentityHTTP", package: "swift-identity-runtime"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
        .testTarget(
            name: "IdentityHummingbirdTests",
            dependencies: [
                "IdentityHummingbird",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
                .product(name: "IdentityPolicy", package: "swift-identity-runtime"),
                .product(name: "IdentityAssertions", package: "swift-identity-runtime"),
                .product(name: "IdentityHTTP", package: "swift-identity-runtime"),
                .product(name: "IdentityTesting", package: "swift-identity-runtime"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
