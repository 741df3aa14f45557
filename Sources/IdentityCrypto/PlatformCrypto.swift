#if canImport(CryptoKit)
import CryptoKit
import Foundation
#elseif IDENTITY_SWIFT_CRYPTO
// The CryptoKit branch compiled against apple/swift-crypto (the same API) on Linux: only the check package
// Checks/SwiftCrypto defines IDENTITY_SWIFT_CRYPTO, so that this branch is built and tested off Apple platforms.
import Crypto
import Foundation
#else
import CIdentityCrypto
#endif

/// Why a call into the platform crypto failed.
package enum CryptoFailure: Error, Sendable, Equatable {
    /// An AEAD tag did not verify (the input was tampered with, or the key is not the one it was sealed with).
    case authenticationFailed
    /// The crypto library reported a failure unrelated to the input.
    case backend(String)
}

/// The platform crypto of the package's modules (IdentityProtection, IdentityAssertions), and nothing else:
/// CryptoKit on Apple platforms, the system libcrypto (OpenSSL 3) on Linux. AES-256-GCM with 12-byte nonces
/// and 16-byte tags, a CSPRNG, HKDF-SHA-256, SHA-256; Ed25519 is in ``Ed25519``.
///
/// The CryptoKit branch (`canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO`) is also compiled and tested on Linux,
/// against swift-crypto, by the check package Checks/SwiftCrypto.
package enum PlatformCrypto {
    #if canImport(CryptoKit)
    package static let backendName = "CryptoKit"
    #elseif IDENTITY_SWIFT_CRYPTO
    package static let backendName = "swift-crypto (CryptoKit API)"
    #else
    package static let backendName = "libcrypto (OpenSSL 3)"
    #endif
    package static let keyLength = 32
    package static let nonceLength = 12
    package static let tagLength = 16

    /// `count` bytes from the platform CSPRNG.
    package static func randomBytes(_ count: Int) throws(CryptoFailure) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        guard count > 0 else { return bytes }
        #if canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO
        // A fresh random key of the requested size is the CSPRNG output of the crypto library itself.
        let random = SymmetricKey(size: SymmetricKeySize(bitCount: count * 8))
        random.withUnsafeBytes { bytes = Array($0) }
        #else
        let status = bytes.withUnsafeMutableBufferPointer { cidc_random_bytes($0.baseAddress, count) }
        guard status == 1 else { throw .backend("RAND_bytes failed") }
        #endif
        return bytes
    }

    // The AEAD calls take the key and nonce as bytes, not arrays: a caller in another module lends an array's
    // bytes for the call (`withUnsafeBufferPointer`), and its optimizer can then keep a short-lived array (a
    // stream record's nonce) on the stack. An array passed across the module boundary counts as escaping: one
    // more heap allocation per record (+16,384 per GiB of stream).

    /// Encrypts `plaintext` and appends the ciphertext, then the 16-byte tag, to `output`.
    /// - Precondition: `key` is 32 bytes, `nonce` 12 bytes.
    package static func seal(
        key: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer,
        plaintext: UnsafeRawBufferPointer, appendingTo output: inout [UInt8]
    ) throws(CryptoFailure) {
        let start = output.count
        let count = plaintext.count + tagLength
        var failure: CryptoFailure?
        // The sealed bytes go straight into the array's new tail: no zero fill, no intermediate buffer.
        let sealed = [UInt8](unsafeUninitializedCapacity: start + count) { buffer, initialized in
            _ = output.withUnsafeBufferPointer { buffer.initialize(fromContentsOf: $0) }
            do throws(CryptoFailure) {
                try seal(key: key, nonce: nonce, aad: aad, plaintext: plaintext,
                         into: UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(buffer)[start...]))
                initialized = start + count
            } catch {
                failure = error
                initialized = start
            }
        }
        if let failure { throw failure }
        output = sealed
    }

    /// Encrypts `plaintext` into `output` (exactly `plaintext.count + tagLength` bytes): the ciphertext, then
    /// the 16-byte tag.
    /// - Precondition: `key` is 32 bytes, `nonce` 12 bytes.
    package static func seal(
        key: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer,
        plaintext: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) throws(CryptoFailure) {
        precondition(key.count == keyLength && nonce.count == nonceLength && output.count == plaintext.count + tagLength)
        #if canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO
        do {
            let box = try AES.GCM.seal(
                plaintext, using: SymmetricKey(data: key), nonce: try AES.GCM.Nonce(data: nonce),
                authenticating: aad)
            _ = box.ciphertext.copyBytes(to: UnsafeMutableRawBufferPointer(rebasing: output[..<plaintext.count]))
            _ = box.tag.copyBytes(to: UnsafeMutableRawBufferPointer(rebasing: output[plaintext.count...]))
        } catch {
            throw .backend("AES.GCM.seal: \(error)")
        }
        #else
        let out = output.baseAddress!.assumingMemoryBound(to: UInt8.self)
        let status = cidc_aes256gcm_seal(
            key.baseAddress?.assumingMemoryBound(to: UInt8.self), nonce.baseAddress?.assumingMemoryBound(to: UInt8.self),
            aad.baseAddress?.assumingMemoryBound(to: UInt8.self), aad.count,
            plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), plaintext.count,
            out, out + plaintext.count)
        guard status == 1 else { throw .backend("EVP AES-256-GCM encryption failed") }
        #endif
    }

    /// Decrypts and authenticates; returns the plaintext only when the tag verifies.
    /// - Throws: ``CryptoFailure/authenticationFailed`` when it does not.
    package static func open(
        key: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer,
        ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer
    ) throws(CryptoFailure) -> [UInt8] {
        var failure: CryptoFailure?
        let plaintext = [UInt8](unsafeUninitializedCapacity: ciphertext.count) { buffer, initialized in
            do throws(CryptoFailure) {
                try open(key: key, nonce: nonce, aad: aad, ciphertext: ciphertext, tag: tag, into: UnsafeMutableRawBufferPointer(buffer))
                initialized = ciphertext.count
            } catch {
                failure = error
                initialized = 0
            }
        }
        if let failure { throw failure }
        return plaintext
    }

    /// Decrypts and authenticates into `output` (exactly `ciphertext.count` bytes); when the tag does not
    /// verify, `output` is zeroed: unauthenticated bytes never stay behind.
    /// - Throws: ``CryptoFailure/authenticationFailed`` when the tag does not verify.
    package static func open(
        key: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer,
        ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) throws(CryptoFailure) {
        precondition(key.count == keyLength && nonce.count == nonceLength && tag.count == tagLength && output.count == ciphertext.count)
        #if canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO
        let box: AES.GCM.SealedBox
        do {
            box = try AES.GCM.SealedBox(nonce: try AES.GCM.Nonce(data: nonce), ciphertext: ciphertext, tag: tag)
        } catch {
            throw .backend("AES.GCM.SealedBox: \(error)")
        }
        do {
            let plaintext = try AES.GCM.open(box, using: SymmetricKey(data: key), authenticating: aad)
            _ = plaintext.copyBytes(to: output)
        } catch CryptoKitError.authenticationFailure {
            throw .authenticationFailed
        } catch CryptoKitError.underlyingCoreCryptoError {
            // swift-crypto on Linux (BoringSSL) reports a tag that does not verify as BAD_DECRYPT through this
            // case, not as .authenticationFailure (found by building this branch in Checks/SwiftCrypto). The
            // box was well formed (checked above), so the open failed on the tag.
            throw .authenticationFailed
        } catch {
            throw .backend("AES.GCM.open: \(error)")
        }
        #else
        let status = cidc_aes256gcm_open(
            key.baseAddress?.assumingMemoryBound(to: UInt8.self), nonce.baseAddress?.assumingMemoryBound(to: UInt8.self),
            aad.baseAddress?.assumingMemoryBound(to: UInt8.self), aad.count,
            ciphertext.baseAddress?.assumingMemoryBound(to: UInt8.self), ciphertext.count,
            tag.baseAddress?.assumingMemoryBound(to: UInt8.self),
            output.baseAddress?.assumingMemoryBound(to: UInt8.self))
        switch status {
        case 1:
            return
        case 0:
            // Never leave unauthenticated bytes behind.
            if output.count > 0 { output.initializeMemory(as: UInt8.self, repeating: 0) }
            throw .authenticationFailed
        default:
            if output.count > 0 { output.initializeMemory(as: UInt8.self, repeating: 0) }
            throw .backend("EVP AES-256-GCM decryption failed")
        }
        #endif
    }

    /// HKDF-SHA-256 (RFC 5869) of `count` bytes.
    package static func hkdfSHA256(key: [UInt8], salt: [UInt8], info: [UInt8], count: Int) throws(CryptoFailure) -> [UInt8] {
        #if canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO
        let derived = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: key), salt: salt, info: info, outputByteCount: count)
        return derived.withUnsafeBytes { Array($0) }
        #else
        var output = [UInt8](repeating: 0, count: count)
        let status = output.withUnsafeMutableBufferPointer { out in
            key.withUnsafeBufferPointer { key in
                salt.withUnsafeBufferPointer { salt in
                    info.withUnsafeBufferPointer { info in
                        cidc_hkdf_sha256(
                            key.baseAddress, key.count, salt.baseAddress, salt.count, info.baseAddress, info.count,
                            out.baseAddress, count)
                    }
                }
            }
        }
        guard status == 1 else { throw .backend("HKDF-SHA-256 failed") }
        return output
        #endif
    }

    /// SHA-256 digest.
    package static func sha256(_ bytes: [UInt8]) throws(CryptoFailure) -> [UInt8] {
        let digest = bytes.withUnsafeBytes { buffer in Result { () throws(CryptoFailure) in try sha256(buffer) } }
        return withUnsafeBytes(of: try digest.get().words) { Array($0) }
    }

    /// SHA-256 digest of `bytes`, as a value (no allocation).
    package static func sha256(_ bytes: UnsafeRawBufferPointer) throws(CryptoFailure) -> SHA256Digest {
        var digest = SHA256Digest(words: (0, 0, 0, 0))
        #if canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO
        let hash = SHA256.hash(data: bytes)
        withUnsafeMutableBytes(of: &digest.words) { out in hash.withUnsafeBytes { out.copyMemory(from: $0) } }
        #else
        let status = withUnsafeMutableBytes(of: &digest.words) { out in
            cidc_sha256(bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count,
                        out.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        guard status == 1 else { throw .backend("SHA-256 failed") }
        #endif
        return digest
    }
}

/// A SHA-256 digest: 32 bytes in four words, compared and hashed as a value.
package struct SHA256Digest: Hashable, Sendable {
    package var words: (UInt64, UInt64, UInt64, UInt64)

    package init(words: (UInt64, UInt64, UInt64, UInt64)) { self.words = words }

    package static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.words.0 == rhs.words.0 && lhs.words.1 == rhs.words.1 && lhs.words.2 == rhs.words.2 && lhs.words.3 == rhs.words.3
    }

    package func hash(into hasher: inout Hasher) {
        // The digest is already uniform: one word feeds the hasher (which is seeded per process).
        hasher.combine(words.0)
    }
}
