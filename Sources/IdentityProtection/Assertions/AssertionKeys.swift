#if canImport(CryptoKit)
import CryptoKit
#elseif IDENTITY_SWIFT_CRYPTO
// The CryptoKit branch compiled against apple/swift-crypto (the same API): see Checks/SwiftCrypto.
import Crypto
#else
import CIdentityCrypto
#endif

/// An Ed25519 private key that signs identity assertions (RFC 8032; JOSE algorithm `EdDSA`, RFC 8037).
/// Keep it secret: whoever holds it can assert any identity to the services that trust its public key.
///
/// With libcrypto (Linux), the library's key object is made once, when the key is made, and shared by every
/// copy and thread that signs with it (making it costs as much as a signature: it derives the public key).
/// With CryptoKit or swift-crypto, whose key types are not `Sendable`, a key value is made per signature.
public struct AssertionSigningKey: Sendable {
    /// The 32-byte private key (the RFC 8032 seed).
    public let rawRepresentation: [UInt8]
    /// The matching public key, for the verifiers.
    public let publicKey: AssertionVerificationKey
    #if !(canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO)
    private let backendKey: Ed25519KeyObject
    #endif

    /// A new random key.
    public init() throws(ProtectionError) {
        #if canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO
        try self.init(rawRepresentation: Array(Curve25519.Signing.PrivateKey().rawRepresentation))
        #else
        var privateKey = [UInt8](repeating: 0, count: 32)
        var publicKey = [UInt8](repeating: 0, count: 32)
        guard cidc_ed25519_generate(&privateKey, &publicKey) == 1 else {
            throw .cryptoBackendFailure("Ed25519 key generation failed")
        }
        try self.init(rawRepresentation: privateKey)
        #endif
    }

    /// The key whose 32-byte private key (seed) is `rawRepresentation`.
    /// - Throws: 104 for a length other than 32 bytes.
    public init(rawRepresentation: [UInt8]) throws(ProtectionError) {
        guard rawRepresentation.count == 32 else {
            throw .invalidIdentity(reason: "an Ed25519 private key is 32 bytes, not \(rawRepresentation.count)")
        }
        self.rawRepresentation = rawRepresentation
        #if canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO
        let key: Curve25519.Signing.PrivateKey
        do {
            key = try Curve25519.Signing.PrivateKey(rawRepresentation: rawRepresentation)
        } catch {
            throw .cryptoBackendFailure("Ed25519 private key: \(error)")
        }
        publicKey = try AssertionVerificationKey(rawRepresentation: Array(key.publicKey.rawRepresentation))
        #else
        guard let object = Ed25519KeyObject(privateKey: rawRepresentation) else {
            throw .cryptoBackendFailure("Ed25519 private key: the crypto library refused it")
        }
        backendKey = object
        var publicKey = [UInt8](repeating: 0, count: 32)
        guard cidc_ed25519_raw_public_key(object.pointer, &publicKey) == 1 else {
            throw .cryptoBackendFailure("Ed25519 public key derivation failed")
        }
        self.publicKey = try AssertionVerificationKey(rawRepresentation: publicKey)
        #endif
    }

    /// The 64-byte Ed25519 signature of `message`.
    public func signature(of message: [UInt8]) throws(ProtectionError) -> [UInt8] {
        #if canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO
        do {
            return Array(try Curve25519.Signing.PrivateKey(rawRepresentation: rawRepresentation).signature(for: message))
        } catch {
            throw .cryptoBackendFailure("Ed25519 signing failed: \(error)")
        }
        #else
        var signature = [UInt8](repeating: 0, count: 64)
        guard cidc_ed25519_sign(backendKey.pointer, message, message.count, &signature) == 1 else {
            throw .cryptoBackendFailure("Ed25519 signing failed")
        }
        return signature
        #endif
    }
}

/// An Ed25519 public key that verifies identity assertions. Equal and hashed by its 32 bytes.
///
/// As for ``AssertionSigningKey``, with libcrypto the library's key object is made once and shared.
public struct AssertionVerificationKey: Sendable, Hashable {
    /// The 32-byte public key.
    public let rawRepresentation: [UInt8]
    #if !(canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO)
    /// `nil` when the bytes are not a key the library accepts: every signature is then invalid.
    private let backendKey: Ed25519KeyObject?
    #endif

    /// - Throws: 104 for a length other than 32 bytes.
    public init(rawRepresentation: [UInt8]) throws(ProtectionError) {
        guard rawRepresentation.count == 32 else {
            throw .invalidIdentity(reason: "an Ed25519 public key is 32 bytes, not \(rawRepresentation.count)")
        }
        self.rawRepresentation = rawRepresentation
        #if !(canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO)
        backendKey = Ed25519KeyObject(publicKey: rawRepresentation)
        #endif
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.rawRepresentation == rhs.rawRepresentation }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawRepresentation) }

    /// Whether `signature` is a valid Ed25519 signature of `message` under this key: one call into the crypto
    /// library, the floor of ``IdentityAssertionVerifier/verify(_:)``.
    public func isValidSignature(_ signature: [UInt8], of message: [UInt8]) throws(ProtectionError) -> Bool {
        guard signature.count == 64 else { return false }
        #if canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: rawRepresentation) else { return false }
        return key.isValidSignature(signature, for: message)
        #else
        guard let backendKey else { return false }
        switch cidc_ed25519_verify(backendKey.pointer, message, message.count, signature) {
        case 1: return true
        case 0: return false
        default: throw .cryptoBackendFailure("Ed25519 verification failed")
        }
        #endif
    }
}

#if !(canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO)
/// Owns one libcrypto `EVP_PKEY` (an Ed25519 private or public key) and frees it with the last reference.
///
/// `@unchecked Sendable`: the object is never modified after it is made, and OpenSSL 3 lets threads share a
/// key object that nobody modifies; each signature or verification makes its own `EVP_MD_CTX`.
private final class Ed25519KeyObject: @unchecked Sendable {
    let pointer: OpaquePointer

    init?(privateKey: [UInt8]) {
        guard let pointer = cidc_ed25519_private_key_new(privateKey) else { return nil }
        self.pointer = pointer
    }

    init?(publicKey: [UInt8]) {
        guard let pointer = cidc_ed25519_public_key_new(publicKey) else { return nil }
        self.pointer = pointer
    }

    deinit { cidc_ed25519_key_free(pointer) }
}
#endif
