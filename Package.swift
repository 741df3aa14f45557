// swift-tools-version:6.1
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "swift-identity-runtime",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "IdentityRuntime", targets: ["IdentityRuntime"]),
        .library(name: "IdentityProtection", targets: ["IdentityProtection"]),
        .library(name: "IdentityAssertions", targets: ["IdentityAssertions"]),
        .library(name: "IdentityPolicy", targets: ["IdentityPolicy"]),
        .library(name: "IdentityHTTP", targets: ["IdentityHTTP"]),
        .library(name: "IdentityTesting", targets: ["IdentityTesting"]),
        .executable(name: "identity-harness", targets: ["identity-harness"]),
    ],
    targets: [
        .target(
            name: "IdentityRuntime",
            dependencies: ["CIdentityTask"],
            swiftSettings: strictSettings
        ),
        // The running task's address from the Concurrency runtime, for comparing tasks on the hot path (an
        // internal C target: Swift code may not name runtime symbols).
        .target(name: "CIdentityTask"),
        // OpenSSL 3's libcrypto (Debian's libssl-dev): the one system package the build needs on Linux. libsodium
        // is not linked: IdentityCrypto loads it at run time when the machine has it (Ed25519 verification, about
        // 0.65 M instructions against libcrypto's 1.5 M) and verifies with libcrypto otherwise, with the same answers.
        .systemLibrary(
            name: "CIdentityCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // The platform crypto (libcrypto on Linux, CryptoKit on Apple platforms) that IdentityProtection and
        // IdentityAssertions share: an internal target (`package` access), not a product.
        .target(
            name: "IdentityCrypto",
            dependencies: [
                .target(name: "CIdentityCrypto", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: strictSettings
        ),
        // The strict JSON reader (and the writer of what it reads back) that IdentityAssertions and IdentityPolicy
        // share: an internal target (`package` access), not a product.
        .target(
            name: "IdentityJSON",
            swiftSettings: strictSettings
        ),
        .target(
            name: "IdentityAssertions",
            dependencies: ["IdentityRuntime", "IdentityCrypto", "IdentityJSON"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "IdentityProtection",
            dependencies: [
                "IdentityRuntime",
                "IdentityCrypto",
                .target(name: "CIdentityCrypto", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "IdentityPolicy",
            dependencies: ["IdentityRuntime", "IdentityProtection", "IdentityJSON"],
            swiftSettings: strictSettings
        ),
        // The framework-neutral HTTP edge: the problem documents of refusals and the token rules that
        // Integrations/IdentityHummingbird and Integrations/IdentityVapor adapt to their frameworks.
        .target(
            name: "IdentityHTTP",
            dependencies: ["IdentityRuntime", "IdentityAssertions", "IdentityProtection", "IdentityPolicy"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "IdentityTesting",
            dependencies: ["IdentityRuntime", "IdentityPolicy"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "IsolationStress",
            dependencies: ["IdentityRuntime", "IdentityProtection", "IdentityPolicy", "IdentityTesting"],
            swiftSettings: strictSettings
        ),
        // libcrypto on Linux only, as in the library targets: the raw side of the protect pairs calls the
        // platform's AES-GCM directly (libcrypto there, CryptoKit on Apple platforms).
        .executableTarget(
            name: "identity-harness",
            dependencies: [
                "IdentityRuntime", "IdentityTesting", "IdentityProtection", "IdentityAssertions", "IdentityCrypto",
                "IdentityPolicy", "IdentityHTTP", "IsolationStress",
                .target(name: "CIdentityCrypto", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "identity-crash-child",
            dependencies: ["IdentityRuntime", "IdentityProtection", "IdentityTesting"],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "LegacyBridge",
            dependencies: ["IdentityRuntime"],
            path: "Examples/LegacyBridge",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "MultiTenantService",
            dependencies: ["IdentityRuntime", "IdentityProtection", "IdentityPolicy"],
            path: "Examples/MultiTenantService",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "MultiIdentityClient",
            dependencies: ["IdentityRuntime", "IdentityPolicy"],
            path: "Examples/MultiIdentityClient",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "IdentityRuntimeTests",
            dependencies: ["IdentityRuntime", "IdentityTesting"],
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
            dependencies: [
                // The Ed25519 differential test crafts its adversarial cases with libsodium's arithmetic, resolved
                // at run time like the verifier's (SodiumArithmetic.swift): skipped where the machine has none.
                "IdentityAssertions", "IdentityRuntime", "IdentityTesting", "IdentityCrypto", "IdentityJSON",
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "IdentityHTTPTests",
            dependencies: ["IdentityHTTP", "IdentityAssertions", "IdentityPolicy", "IdentityProtection", "IdentityRuntime", "IdentityTesting"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "IdentityPolicyTests",
            dependencies: ["IdentityPolicy", "IdentityProtection", "IdentityRuntime", "IdentityTesting", "IsolationStress"],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
