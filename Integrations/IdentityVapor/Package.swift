// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "IdentityVapor",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "IdentityVapor", targets: ["IdentityVapor"]),
    ],
    dependencies: [
        .package(name: "swift-identity-runtime", path: "../.."),
        .package(url: "https://github.com/vapor/vapor", from: "4.122.3"),
    ],
    targets: [
        .target(
            name: "IdentityVapor",
            dependencies: [
                .product(name: "Vapor", package: "vapor"),
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
                .product(name: "IdentityPolicy", package: "swift-identity-runtime"),
                .product(name: "IdentityAssertions", package: "swift-identity-runtime"),
                .product(name: "IdentityHTTP", package: "swift-identity-runtime"),
                .product(name: "IdentityProtection", package: "swift-identity-runtime"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
        .testTarget(
            name: "IdentityVaporTests",
            dependencies: [
                "IdentityVapor",
                .product(name: "Vapor", package: "vapor"),
                .product(name: "VaporTesting", package: "vapor"),
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
                .product(name: "IdentityPolicy", package: "swift-identity-runtime"),
                .product(name: "IdentityAssertions", package: "swift-identity-runtime"),
                .product(name: "IdentityHTTP", package: "swift-identity-runtime"),
                .product(name: "IdentityTesting", package: "swift-identity-runtime"),
                .product(name: "IdentityProtection", package: "swift-identity-runtime"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
