// swift-tools-version:6.1
import PackageDescription

// libFuzzer targets for the parsers that read untrusted bytes. Its own package, so the root keeps no extra
// targets that only build with -sanitize=fuzzer. Run: ./run.sh [SECONDS] [TARGET...]   (see README.md)
let package = Package(
    name: "IdentityFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "swift-identity-runtime", path: "../"),
    ],
    targets: [
        .target(
            name: "FuzzSupport",
            dependencies: [.product(name: "IdentityProtection", package: "swift-identity-runtime")]
        ),
        .executableTarget(
            name: "FuzzEnvelope",
            dependencies: ["FuzzSupport", .product(name: "IdentityProtection", package: "swift-identity-runtime")]
        ),
        .executableTarget(
            name: "FuzzEncryptedFile",
            dependencies: ["FuzzSupport", .product(name: "IdentityProtection", package: "swift-identity-runtime")]
        ),
        .executableTarget(
            name: "FuzzPolicyDocument",
            dependencies: [.product(name: "IdentityPolicy", package: "swift-identity-runtime")]
        ),
        .executableTarget(
            name: "FuzzSettings",
            dependencies: [.product(name: "IdentityPolicy", package: "swift-identity-runtime")]
        ),
        .executableTarget(
            name: "FuzzJWKS",
            dependencies: [.product(name: "IdentityAssertions", package: "swift-identity-runtime")]
        ),
        .executableTarget(
            name: "make-seeds",
            dependencies: [
                "FuzzSupport",
                .product(name: "IdentityProtection", package: "swift-identity-runtime"),
                .product(name: "IdentityRuntime", package: "swift-identity-runtime"),
                .product(name: "IdentityAssertions", package: "swift-identity-runtime"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
