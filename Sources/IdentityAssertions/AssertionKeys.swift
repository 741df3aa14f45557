import IdentityCrypto

/// An Ed25519 private key that signs identity assertions (RFC 8032; JOSE algorithm `EdDSA`, RFC 8037).
/// Keep it secret: whoever holds it can assert any identity to the services that trust its public key.
///
/// With libcrypto (Linux), the library's key object is made once, when the key is made, and shared by every
/// copy and thread that signs with it (making it costs as much as a signature: it derives the public key).
/// With CryptoKit or swift-crypto, whose key types are not `Sendable`, a key value is made per signature.
public struct AssertionSigningKey: Sendable {
    /// The 32-byte private key (the RFC 8032 seed).
    public var rawRepresentation: [UInt8] { backend.rawRepresentation }
    /// The matching public key, for the verifiers.
    public let publicKey: AssertionVerificationKey
    private let backend: Ed25519.PrivateKey

    /// A new random key.
    /// - Throws: ``AssertionError/cryptoBackendFailure(_:)`` when the platform crypto fails.
    public init() throws(AssertionError) {
        let seed: [UInt8]
        do { seed = try Ed25519.generatePrivateKey() } catch { throw AssertionError(error) }
        try self.init(rawRepresentation: seed)
    }

    /// The key whose 32-byte private key (seed) is `rawRepresentation`.
    /// - Throws: ``AssertionError/invalidKey(_:)`` for a length other than 32 bytes,
    ///   ``AssertionError/cryptoBackendFailure(_:)`` when the platform crypto refuses the key.
    public init(rawRepresentation: [UInt8]) throws(AssertionError) {
        guard rawRepresentation.count == Ed25519.keyLength else {
            throw .invalidKey("an Ed25519 private key is 32 bytes, not \(rawRepresentation.count)")
        }
        do { backend = try Ed25519.PrivateKey(rawRepresentation: rawRepresentation) } catch { throw AssertionError(error) }
        publicKey = try AssertionVerificationKey(rawRepresentation: backend.publicKey)
    }

    /// The 64-byte Ed25519 signature of `message`.
    /// - Throws: ``AssertionError/cryptoBackendFailure(_:)`` when the platform crypto fails.
    public func signature(of message: [UInt8]) throws(AssertionError) -> [UInt8] {
        do { return try backend.signature(of: message) } catch { throw AssertionError(error) }
    }
}

/// An Ed25519 public key that verifies identity assertions. Equal and hashed by its 32 bytes.
///
/// As for ``AssertionSigningKey``, with libcrypto the library's key object is made once and shared.
public struct AssertionVerificationKey: Sendable, Hashable {
    private let backend: Ed25519.PublicKey

    /// The 32-byte public key.
    public var rawRepresentation: [UInt8] { backend.rawRepresentation }

    /// - Throws: ``AssertionError/invalidKey(_:)`` for a length other than 32 bytes, a non-canonical encoding
    ///   (y not below 2^255 − 19) or one of the 8 points of small order: keys under which the strict rule of
    ///   ``isValidSignature(_:of:)`` would refuse every signature (and under which a verifier without that rule
    ///   would accept forgeries).
    public init(rawRepresentation: [UInt8]) throws(AssertionError) {
        guard rawRepresentation.count == Ed25519.keyLength else {
            throw .invalidKey("an Ed25519 public key is 32 bytes, not \(rawRepresentation.count)")
        }
        if let defect = Ed25519.publicKeyDefect(rawRepresentation) {
            throw .invalidKey("the Ed25519 public key \(defect)")
        }
        backend = Ed25519.PublicKey(rawRepresentation: rawRepresentation)
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.rawRepresentation == rhs.rawRepresentation }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawRepresentation) }

    /// Whether `signature` is a valid Ed25519 signature of `message` under this key, the floor of
    /// ``IdentityAssertionVerifier/verify(_:)``. A signature of other than 64 bytes verifies nothing.
    ///
    /// The strict rule first, in this code and on every platform: the signature is invalid when its `S` (last 32
    /// bytes, little-endian) is not below the group order L = 2^252 + 27742317777372353535851937790883648493,
    /// when its `R` (first 32 bytes) or this key is not a canonical encoding (y, the low 255 bits, not below
    /// p = 2^255 − 19), or when `R` or this key is one of the 8 points of small order, in any encoding. Then one
    /// call into the crypto library checks RFC 8032's cofactorless equation: libsodium on Linux (libcrypto when
    /// `sodium_init()` fails), CryptoKit on Apple platforms. Past the rule, libsodium and libcrypto accept exactly
    /// the same signatures (the differential test checks it); without it they do not: libcrypto accepts, for
    /// example, `(R = [r]B, S = r)` under the identity key for one message in eight (``init(rawRepresentation:)``
    /// refuses such keys). A key that is not a point of the curve verifies nothing.
    /// - Throws: ``AssertionError/cryptoBackendFailure(_:)`` when the platform crypto fails.
    public func isValidSignature(_ signature: [UInt8], of message: [UInt8]) throws(AssertionError) -> Bool {
        do { return try backend.isValidSignature(signature, of: message) } catch { throw AssertionError(error) }
    }
}

extension AssertionError {
    /// The assertion error of a platform crypto failure.
    init(_ failure: CryptoFailure) {
        switch failure {
        case .authenticationFailed: self = .cryptoBackendFailure("authentication failed")
        case let .backend(reason): self = .cryptoBackendFailure(reason)
        }
    }
}
