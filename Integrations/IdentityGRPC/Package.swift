// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "IdentityGRPC",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "IdentityGRPC", targets: ["IdentityGRPC"]),
    ],
    dependencies: [
        .package(name: "swift-identity-runtime", path: "../.."),
        .package(url: "https://github.com/grpc/grpc-swift-2", from: "2.4.3"),
    ],
    targets: [
        .target(
            name: "IdentityGRPC",
            dependencies: [
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
                .product(name: "IdentityPolicy", package: "swift-identity-runtime"),
                .product(name: "IdentityAssertions", package: "swift-identity-runtime"),
                .product(name: "IdentityHTTP", package: "swift-identity-runtime"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
        .executableTarget(
            name: "identity-grpc-bench",
            dependencies: [
                "IdentityGRPC",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCInProcessTransport", package: "grpc-swift-2"),
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
                .product(name: "IdentityPolicy", package: "swift-identity-runtime"),
                .product(name: "IdentityAssertions", package: "swift-identity-runtime"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
        .testTarget(
            name: "IdentityGRPCTests",
            dependencies: [
                "IdentityGRPC",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCInProcessTransport", package: "grpc-swift-2"),
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
