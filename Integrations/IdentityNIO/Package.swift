// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "IdentityNIO",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "IdentityNIO", targets: ["IdentityNIO"]),
    ],
    dependencies: [
        .package(name: "swift-identity-runtime", path: "../.."),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    ],
    targets: [
        .target(
            name: "IdentityNIO",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
        .executableTarget(
            name: "identity-nio-bench",
            dependencies: [
                "IdentityNIO",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
        .testTarget(
            name: "IdentityNIOTests",
            dependencies: [
                "IdentityNIO",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
                .product(name: "IdentityTesting", package: "swift-identity-runtime"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
