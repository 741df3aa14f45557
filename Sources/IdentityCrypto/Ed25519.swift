#if canImport(CryptoKit)
import CryptoKit
#elseif IDENTITY_SWIFT_CRYPTO
// The CryptoKit branch compiled against apple/swift-crypto (the same API): see Checks/SwiftCrypto.
import Crypto
#else
import CIdentityCrypto
#endif
import Synchronization

/// Ed25519 (RFC 8032) from the platform crypto: 32-byte raw private keys (seeds) and public keys, 64-byte
/// signatures.
///
/// Verification on Linux uses libsodium (`crypto_sign_verify_detached`, about 0.65 M instructions against
/// libcrypto's 1.5 M) when the system has it (loaded at run time, see ``Sodium``), libcrypto otherwise; keys and signatures always come
/// from libcrypto. Both backends only see inputs that passed ``isStrictlyEncoded(signature:publicKey:)``, on
/// which they must agree: which one runs never changes what is accepted.
///
/// With libcrypto (Linux), the library's key object is made once, when a key is made, and shared by every copy
/// and thread that uses it (making it costs as much as a signature: it derives the public key). With CryptoKit
/// or swift-crypto, whose key types are not `Sendable`, a key value is made per operation.
package enum Ed25519 {
    package static let keyLength = 32
    package static let signatureLength = 64

    /// A new random private key (seed).
    package static func generatePrivateKey() throws(CryptoFailure) -> [UInt8] {
        #if canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO
        return Array(Curve25519.Signing.PrivateKey().rawRepresentation)
        #else
        var privateKey = [UInt8](repeating: 0, count: keyLength)
        var publicKey = [UInt8](repeating: 0, count: keyLength)
        guard cidc_ed25519_generate(&privateKey, &publicKey) == 1 else {
            throw .backend("Ed25519 key generation failed")
        }
        return privateKey
        #endif
    }

    /// A private key ready to sign, with its public key.
    package struct PrivateKey: Sendable {
        /// The 32-byte seed.
        package let rawRepresentation: [UInt8]
        /// The 32-byte public key.
        package let publicKey: [UInt8]
        #if !(canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO)
        private let object: KeyObject
        #endif

        /// - Precondition: `rawRepresentation` is 32 bytes.
        package init(rawRepresentation: [UInt8]) throws(CryptoFailure) {
            precondition(rawRepresentation.count == Ed25519.keyLength)
            self.rawRepresentation = rawRepresentation
            #if canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO
            do {
                publicKey = Array(try Curve25519.Signing.PrivateKey(rawRepresentation: rawRepresentation).publicKey.rawRepresentation)
            } catch {
                throw .backend("Ed25519 private key: \(error)")
            }
            #else
            guard let object = KeyObject(privateKey: rawRepresentation) else {
                throw .backend("Ed25519 private key: the crypto library refused it")
            }
            self.object = object
            var publicKey = [UInt8](repeating: 0, count: Ed25519.keyLength)
            guard cidc_ed25519_raw_public_key(object.pointer, &publicKey) == 1 else {
                throw .backend("Ed25519 public key derivation failed")
            }
            self.publicKey = publicKey
            #endif
        }

        /// The 64-byte signature of `message`.
        package func signature(of message: [UInt8]) throws(CryptoFailure) -> [UInt8] {
            #if canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO
            do {
                return Array(try Curve25519.Signing.PrivateKey(rawRepresentation: rawRepresentation).signature(for: message))
            } catch {
                throw .backend("Ed25519 signing failed: \(error)")
            }
            #else
            var signature = [UInt8](repeating: 0, count: Ed25519.signatureLength)
            guard cidc_ed25519_sign(object.pointer, message, message.count, &signature) == 1 else {
                throw .backend("Ed25519 signing failed")
            }
            return signature
            #endif
        }
    }

    /// A public key ready to verify.
    package struct PublicKey: Sendable {
        /// The 32-byte public key.
        package let rawRepresentation: [UInt8]
        #if !(canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO)
        /// `nil` when the bytes are not a key the library accepts: every signature is then invalid.
        private let object: KeyObject?
        #endif

        /// - Precondition: `rawRepresentation` is 32 bytes.
        package init(rawRepresentation: [UInt8]) {
            precondition(rawRepresentation.count == Ed25519.keyLength)
            self.rawRepresentation = rawRepresentation
            #if !(canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO)
            object = KeyObject(publicKey: rawRepresentation)
            #endif
        }

        /// Whether `signature` is a valid signature of `message` under this key (RFC 8032, cofactorless), under
        /// the strict encoding rule:
        ///
        /// 1. ``Ed25519/isStrictlyEncoded(signature:publicKey:)`` first, in this code, whatever the backend:
        ///    a signature of other than 64 bytes, `S ≥ L`, a non-canonical `R` or public key (y ≥ p), or an `R` or
        ///    public key of small order (one of the 8 points, any encoding) is invalid, and no library sees it.
        /// 2. Then one call into the crypto library: libsodium's `crypto_sign_verify_detached` on Linux when
        ///    the library loaded at run time and `sodium_init()` succeeded (``Sodium``, once per process), else libcrypto's `EVP_DigestVerify`; CryptoKit (or
        ///    swift-crypto) on Apple platforms.
        ///
        /// On inputs that pass step 1, libsodium 1.0.18 and libcrypto (OpenSSL 3.0) accept exactly the same
        /// signatures (the differential test checks it on random and adversarial cases); on raw inputs they do
        /// not (libcrypto accepts small-order keys and `R`s, and non-canonical small-order keys): that is what
        /// step 1 is for. A point of mixed order (a key plus a point of small order) is not refused: both
        /// libraries verify it the same, cofactorless way.
        package func isValidSignature(_ signature: [UInt8], of message: [UInt8]) throws(CryptoFailure) -> Bool {
            try isValidSignature(signature, of: message, backend: .automatic)
        }

        /// ``isValidSignature(_:of:)`` with a chosen backend: `.libcrypto` forces the fallback on Linux (for the
        /// differential test, which checks both backends answer alike); no effect on Apple platforms.
        package func isValidSignature(
            _ signature: [UInt8], of message: [UInt8], backend: Ed25519.Backend
        ) throws(CryptoFailure) -> Bool {
            guard signature.count == Ed25519.signatureLength,
                  Ed25519.isStrictlyEncoded(signature: signature, publicKey: rawRepresentation) else { return false }
            #if canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO
            guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: rawRepresentation) else { return false }
            return key.isValidSignature(signature, for: message)
            #else
            #if os(Linux)
            if backend == .automatic, let sodium = Sodium.library, !Ed25519.libcryptoOnly.load(ordering: .relaxed) {
                return Self.sodiumVerify(sodium, signature, of: message, publicKey: rawRepresentation)
            }
            #endif
            return try libcryptoVerify(signature, of: message)
            #endif
        }

        #if !(canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO)
        /// libcrypto's own answer, without the strict pre-check (for the differential test): 64-byte `signature`.
        package func libcryptoVerify(_ signature: [UInt8], of message: [UInt8]) throws(CryptoFailure) -> Bool {
            precondition(signature.count == Ed25519.signatureLength)
            guard let object else { return false }
            switch cidc_ed25519_verify(object.pointer, message, message.count, signature) {
            case 1: return true
            case 0: return false
            default: throw .backend("Ed25519 verification failed")
            }
        }

        #if os(Linux)
        /// libsodium's own answer, without the strict pre-check (for the differential test): 64-byte
        /// `signature`; `nil` when libsodium is not loaded (``Sodium/library``).
        package func sodiumVerify(_ signature: [UInt8], of message: [UInt8]) -> Bool? {
            guard let sodium = Sodium.library else { return nil }
            return Self.sodiumVerify(sodium, signature, of: message, publicKey: rawRepresentation)
        }

        private static func sodiumVerify(
            _ sodium: Sodium.Library, _ signature: [UInt8], of message: [UInt8], publicKey: [UInt8]
        ) -> Bool {
            precondition(signature.count == Ed25519.signatureLength && publicKey.count == Ed25519.keyLength)
            return message.withUnsafeBufferPointer { message in
                sodium.verifyDetached(signature, message.baseAddress, UInt64(message.count), publicKey) == 0
            }
        }
        #endif
        #endif
    }

    #if !(canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO) && os(Linux)
    /// Whether libsodium verifies in this process: the library loaded at run time and `sodium_init()`
    /// succeeded (``Sodium``). When not, verification uses libcrypto: the same answers, at libcrypto's cost.
    /// libsodium 1.0.18 itself aborts the process, rather than returning -1, when it finds no randomness source
    /// at all (`getrandom` refused by a seccomp filter and no `/dev/urandom`, as in a bare chroot): such a
    /// process stops at its first verification; it never accepts a signature.
    package static var sodiumReady: Bool { Sodium.library != nil }
    #endif

    /// The library that verifies Ed25519 signatures in this process, for reports (`identity-harness bench`
    /// prints it): `libsodium` when it loaded at run time (Linux, ``Sodium``), `libcrypto` when it did not or
    /// `IDENTITY_SODIUM=off` kept it out, `CryptoKit` on Apple platforms, `swift-crypto` in Checks/SwiftCrypto.
    package static var verificationBackend: String {
        #if canImport(CryptoKit)
        "CryptoKit"
        #elseif IDENTITY_SWIFT_CRYPTO
        "swift-crypto"
        #elseif os(Linux)
        Sodium.library == nil ? "libcrypto" : "libsodium"
        #else
        "libcrypto"
        #endif
    }

    /// ``verificationBackend`` with where it came from or why libsodium is not used, e.g.
    /// `libsodium (libsodium.so.23, loaded at run time)` or `libcrypto (libsodium not used: IDENTITY_SODIUM=off)`.
    package static var verificationBackendDescription: String {
        #if !(canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO) && os(Linux)
        Sodium.backendDescription
        #else
        verificationBackend
        #endif
    }

    /// Which library verifies (Linux): the accelerator when loaded, or libcrypto whatever is loaded.
    package enum Backend: Sendable {
        case automatic
        case libcrypto
    }

    /// Set by the bench's libcrypto baseline (`identity-harness bench --pair assertion-verify-fresh --side peer`)
    /// only: verification on Linux then uses libcrypto as if `sodium_init()` had failed (the answers are the
    /// same). No effect elsewhere.
    package static let libcryptoOnly = Atomic<Bool>(false)

    #if !(canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO)
    /// Owns one libcrypto `EVP_PKEY` (an Ed25519 private or public key) and frees it with the last reference.
    ///
    /// `@unchecked Sendable`: the object is never modified after it is made, and OpenSSL 3 lets threads share a
    /// key object that nobody modifies; each signature or verification makes its own `EVP_MD_CTX`.
    private final class KeyObject: @unchecked Sendable {
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
}
