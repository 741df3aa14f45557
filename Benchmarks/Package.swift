// swift-tools-version:6.1
import PackageDescription

// Benchmarks live in their own package so the runtime itself keeps no package dependencies.
// Run from this directory: swift package benchmark   (see ../README.md, "Benchmarks")
let package = Package(
    name: "IdentityBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "swift-identity-runtime", path: "../"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        // Only for the peer members: a `ServiceContext.withValue` rebind, what a server user may write instead.
        .package(url: "https://github.com/apple/swift-service-context", from: "1.5.1"),
    ],
    targets: [
        .executableTarget(
            name: "IdentityBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
                .product(name: "IdentityProtection", package: "swift-identity-runtime"),
                .product(name: "IdentityAssertions", package: "swift-identity-runtime"),
                .product(name: "IdentityPolicy", package: "swift-identity-runtime"),
                .product(name: "ServiceContextModule", package: "swift-service-context"),
            ],
            path: "Benchmarks/IdentityBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
