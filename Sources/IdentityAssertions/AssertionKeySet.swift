/// A set of assertion verification keys by key ID (`kid`), as an ``IdentityAssertionVerifier`` holds them, with a
/// JWKS (RFC 7517) representation both ways: ``jwks`` publishes the public keys, `init(jwks:)`
/// reads a published set strictly.
///
/// Key IDs are matched byte for byte (RFC 7519 §7.3): `"café"` composed and decomposed are two IDs, as a
/// token's `kid` would name them. A value type: changing a copy changes nothing else; give a changed set to a
/// verifier with ``IdentityAssertionVerifier/replaceKeys(with:)``.
///
/// ```swift
/// var keys = AssertionKeySet()
/// keys.addKey(signingKey.publicKey, id: "2026-11")
/// let published = keys.jwks          // {"keys":[{"alg":"EdDSA","crv":"Ed25519","kid":"2026-11",…}]}
/// let verifier = IdentityAssertionVerifier(
///     keySet: try AssertionKeySet(jwks: published), issuers: ["frontend"], audience: "documents")
/// ```
public struct AssertionKeySet: Sendable, Hashable {
    /// Keys by the UTF-8 of their ID.
    var storage: [[UInt8]: AssertionVerificationKey]

    /// An empty set.
    public init() {
        storage = [:]
    }

    /// The set of `keys`, by key ID.
    public init(_ keys: [String: AssertionVerificationKey]) {
        // Distinct Strings are distinct UTF-8 unless canonically equivalent, and equivalent Strings are one
        // dictionary key: each ID here has one spelling.
        storage = Dictionary(keys.map { (Array($0.key.utf8), $0.value) }, uniquingKeysWith: { first, _ in first })
    }

    init(storage: [[UInt8]: AssertionVerificationKey]) {
        self.storage = storage
    }

    /// The key IDs, sorted by their UTF-8.
    public var keyIDs: [String] {
        storage.keys.sorted { $0.lexicographicallyPrecedes($1) }.map { String(decoding: $0, as: UTF8.self) }
    }

    /// How many keys the set holds.
    public var count: Int { storage.count }

    /// Whether the set holds no key.
    public var isEmpty: Bool { storage.isEmpty }

    /// The key whose ID is exactly `id` (byte for byte).
    public subscript(id: String) -> AssertionVerificationKey? {
        storage[Array(id.utf8)]
    }

    /// Adds the key `id`, or replaces the key of that ID.
    public mutating func addKey(_ key: AssertionVerificationKey, id: String) {
        storage[Array(id.utf8)] = key
    }

    /// Removes the key `id` (the same bytes it was added with); returns it, or `nil` when there was none.
    @discardableResult
    public mutating func removeKey(id: String) -> AssertionVerificationKey? {
        storage.removeValue(forKey: Array(id.utf8))
    }
}
