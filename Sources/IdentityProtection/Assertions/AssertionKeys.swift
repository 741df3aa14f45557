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
public struct AssertionSigningKey: Sendable {
    /// The 32-byte private key (the RFC 8032 seed).
    public let rawRepresentation: [UInt8]
    /// The matching public key, for the verifiers.
    public let publicKey: AssertionVerificationKey

    /// A new random key.
    public init() throws(ProtectionError) {
        #if canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO
        let key = Curve25519.Signing.PrivateKey()
        rawRepresentation = Array(key.rawRepresentation)
        publicKey = try AssertionVerificationKey(rawRepresentation: Array(key.publicKey.rawRepresentation))
        #else
        var privateKey = [UInt8](repeating: 0, count: 32)
        var publicKey = [UInt8](repeating: 0, count: 32)
        guard cidc_ed25519_generate(&privateKey, &publicKey) == 1 else {
            throw .cryptoBackendFailure("Ed25519 key generation failed")
        }
        rawRepresentation = privateKey
        self.publicKey = try AssertionVerificationKey(rawRepresentation: publicKey)
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
        do {
            let key = try Curve25519.Signing.PrivateKey(rawRepresentation: rawRepresentation)
            publicKey = try AssertionVerificationKey(rawRepresentation: Array(key.publicKey.rawRepresentation))
        } catch let error as ProtectionError {
            throw error
        } catch {
            throw .cryptoBackendFailure("Ed25519 private key: \(error)")
        }
        #else
        var publicKey = [UInt8](repeating: 0, count: 32)
        guard cidc_ed25519_public_key(rawRepresentation, &publicKey) == 1 else {
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
        guard cidc_ed25519_sign(rawRepresentation, message, message.count, &signature) == 1 else {
            throw .cryptoBackendFailure("Ed25519 signing failed")
        }
        return signature
        #endif
    }
}

/// An Ed25519 public key that verifies identity assertions.
public struct AssertionVerificationKey: Sendable, Hashable {
    /// The 32-byte public key.
    public let rawRepresentation: [UInt8]

    /// - Throws: 104 for a length other than 32 bytes.
    public init(rawRepresentation: [UInt8]) throws(ProtectionError) {
        guard rawRepresentation.count == 32 else {
            throw .invalidIdentity(reason: "an Ed25519 public key is 32 bytes, not \(rawRepresentation.count)")
        }
        self.rawRepresentation = rawRepresentation
    }

    /// Whether `signature` is a valid Ed25519 signature of `message` under this key: one call into the crypto
    /// library, the floor of ``IdentityAssertionVerifier/verify(_:)``.
    public func isValidSignature(_ signature: [UInt8], of message: [UInt8]) throws(ProtectionError) -> Bool {
        guard signature.count == 64 else { return false }
        #if canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: rawRepresentation) else { return false }
        return key.isValidSignature(signature, for: message)
        #else
        switch cidc_ed25519_verify(rawRepresentation, message, message.count, signature) {
        case 1: return true
        case 0: return false
        default: throw .cryptoBackendFailure("Ed25519 verification failed")
        }
        #endif
    }
}
