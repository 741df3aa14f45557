// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "IdentityTracing",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "IdentityTracing", targets: ["IdentityTracing"]),
    ],
    dependencies: [
        .package(name: "swift-identity-runtime", path: "../.."),
        .package(url: "https://github.com/apple/swift-service-context", from: "1.5.1"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
    ],
    targets: [
        .target(
            name: "IdentityTracing",
            dependencies: [
                .product(name: "ServiceContextModule", package: "swift-service-context"),
                .product(name: "Instrumentation", package: "swift-distributed-tracing"),
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
                .product(name: "IdentityAssertions", package: "swift-identity-runtime"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
        .testTarget(
            name: "IdentityTracingTests",
            dependencies: [
                "IdentityTracing",
                .product(name: "ServiceContextModule", package: "swift-service-context"),
                .product(name: "Instrumentation", package: "swift-distributed-tracing"),
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
                .product(name: "IdentityAssertions", package: "swift-identity-runtime"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
