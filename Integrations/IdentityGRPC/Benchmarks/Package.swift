// swift-tools-version:6.1
import PackageDescription

// The HTTP/2 loopback bench of IdentityGRPC, in a package of its own: grpc-swift-nio-transport (SwiftNIO, NIOHTTP2,
// NIOSSL and its BoringSSL) stays out of IdentityGRPC's dependencies, so neither its users nor the landing lane's
// test build of IdentityGRPC compile it. Run: `swift run -c release identity-grpc-h2-bench` in this folder.
let package = Package(
    name: "IdentityGRPCBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "IdentityGRPC", path: ".."),
        .package(name: "swift-identity-runtime", path: "../../.."),
        .package(url: "https://github.com/grpc/grpc-swift-2", from: "2.4.3"),
        .package(url: "https://github.com/grpc/grpc-swift-nio-transport", from: "2.9.2"),
    ],
    targets: [
        .executableTarget(
            name: "identity-grpc-h2-bench",
            dependencies: [
                .product(name: "IdentityGRPC", package: "IdentityGRPC"),
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport"),
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
                .product(name: "IdentityPolicy", package: "swift-identity-runtime"),
                .product(name: "IdentityAssertions", package: "swift-identity-runtime"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
