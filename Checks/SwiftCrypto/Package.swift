// swift-tools-version:6.1
import PackageDescription

// Check-only package: builds the CryptoKit branch of the shared crypto (IdentityCrypto) on Linux against
// apple/swift-crypto (the same API as CryptoKit) and runs the protection and assertion tests on it; it builds
// identity-harness on that branch too (the raw side of its protect pairs calls AES.GCM, not libcrypto), as an
// Apple platform would. The targets are the root package's own sources, reached through symbolic links in
// Sources/ and Tests/; the root package keeps no package dependencies.
//
//     cd Checks/SwiftCrypto && swift test
//     swift run identity-harness bench --pair unprotect-1k --side raw --count 100
let strictSettings: [SwiftSetting] = [.enableUpcomingFeature("ExistentialAny")]

let package = Package(
    name: "IdentitySwiftCryptoCheck",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
    ],
    targets: [
        .target(name: "IdentityRuntime", dependencies: ["CIdentityTask"], swiftSettings: strictSettings),
        .target(name: "CIdentityTask"),
        // Still linked on Linux for <sys/xattr.h> (file owners); the crypto itself comes from swift-crypto.
        .systemLibrary(name: "CIdentityCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .target(
            name: "IdentityCrypto",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strictSettings + [.define("IDENTITY_SWIFT_CRYPTO")]
        ),
        .target(name: "IdentityJSON", swiftSettings: strictSettings),
        .target(name: "IdentityAssertions", dependencies: ["IdentityRuntime", "IdentityCrypto", "IdentityJSON"], swiftSettings: strictSettings),
        .target(
            name: "IdentityProtection",
            dependencies: [
                "IdentityRuntime",
                "IdentityCrypto",
                "IdentityAssertions",
                .target(name: "CIdentityCrypto", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: strictSettings
        ),
        .target(name: "IdentityPolicy", dependencies: ["IdentityRuntime", "IdentityProtection", "IdentityJSON"], swiftSettings: strictSettings),
        .target(name: "IdentityTesting", dependencies: ["IdentityRuntime", "IdentityPolicy"], swiftSettings: strictSettings),
        .target(
            name: "IdentityHTTP",
            dependencies: ["IdentityRuntime", "IdentityAssertions", "IdentityProtection", "IdentityPolicy"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "IsolationStress",
            dependencies: ["IdentityRuntime", "IdentityProtection", "IdentityPolicy", "IdentityTesting"],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "identity-harness",
            dependencies: [
                "IdentityRuntime", "IdentityTesting", "IdentityProtection", "IdentityAssertions", "IdentityCrypto",
                "IdentityPolicy", "IdentityHTTP", "IsolationStress", .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings + [.define("IDENTITY_SWIFT_CRYPTO")]
        ),
        .executableTarget(
            name: "identity-crash-child",
            dependencies: ["IdentityRuntime", "IdentityProtection", "IdentityTesting"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "IdentityProtectionTests",
            dependencies: ["IdentityProtection", "IdentityRuntime", "IdentityTesting"],
            exclude: ["Fixtures"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "IdentityAssertionsTests",
            dependencies: ["IdentityAssertions", "IdentityRuntime", "IdentityTesting", "IdentityCrypto"],
            // Leaves out the Ed25519 differential suite, which compares libsodium and libcrypto (the root
            // package's branch, not this one).
            swiftSettings: strictSettings + [.define("IDENTITY_SWIFT_CRYPTO")]
        ),
        .testTarget(
            name: "BackendTests",
            dependencies: ["IdentityProtection", "IdentityCrypto"],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
