// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "IdentityServiceLifecycle",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "IdentityServiceLifecycle", targets: ["IdentityServiceLifecycle"]),
    ],
    dependencies: [
        .package(name: "swift-identity-runtime", path: "../.."),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
    ],
    targets: [
        .target(
            name: "IdentityServiceLifecycle",
            dependencies: [
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "IdentityPolicy", package: "swift-identity-runtime"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
        .testTarget(
            name: "IdentityServiceLifecycleTests",
            dependencies: [
                "IdentityServiceLifecycle",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
                .product(name: "IdentityPolicy", package: "swift-identity-runtime"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
