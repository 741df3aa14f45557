import IdentityCrypto

/// The package's platform crypto (``PlatformCrypto`` of the internal IdentityCrypto target, shared with
/// IdentityAssertions) as this module uses it: its failures as ``ProtectionError``s (a tag that does not verify
/// is ``ProtectionError/authenticationFailed``, anything else ``ProtectionError/cryptoBackendFailure(_:)``).
enum ProtectionCrypto {
    static var backendName: String { PlatformCrypto.backendName }
    static let keyLength = 32
    static let nonceLength = 12
    static let tagLength = 16

    /// `count` bytes from the platform CSPRNG.
    static func randomBytes(_ count: Int) throws(ProtectionError) -> [UInt8] {
        do { return try PlatformCrypto.randomBytes(count) } catch { throw ProtectionError(error) }
    }

    /// Encrypts `plaintext` and appends the ciphertext, then the 16-byte tag, to `output`.
    static func seal(
        key: [UInt8], nonce: [UInt8], aad: UnsafeRawBufferPointer, plaintext: UnsafeRawBufferPointer,
        appendingTo output: inout [UInt8]
    ) throws(ProtectionError) {
        try withBytes(of: key, nonce) { (key, nonce) throws(CryptoFailure) in
            try PlatformCrypto.seal(key: key, nonce: nonce, aad: aad, plaintext: plaintext, appendingTo: &output)
        }
    }

    /// Encrypts `plaintext` into `output` (exactly `plaintext.count + tagLength` bytes): the ciphertext, then
    /// the 16-byte tag.
    static func seal(
        key: [UInt8], nonce: [UInt8], aad: UnsafeRawBufferPointer, plaintext: UnsafeRawBufferPointer,
        into output: UnsafeMutableRawBufferPointer
    ) throws(ProtectionError) {
        try withBytes(of: key, nonce) { (key, nonce) throws(CryptoFailure) in
            try PlatformCrypto.seal(key: key, nonce: nonce, aad: aad, plaintext: plaintext, into: output)
        }
    }

    /// Decrypts and authenticates; returns the plaintext only when the tag verifies.
    /// - Throws: ``ProtectionError/authenticationFailed`` when it does not.
    static func open(
        key: [UInt8], nonce: [UInt8], aad: UnsafeRawBufferPointer, ciphertext: UnsafeRawBufferPointer,
        tag: UnsafeRawBufferPointer
    ) throws(ProtectionError) -> [UInt8] {
        try withBytes(of: key, nonce) { (key, nonce) throws(CryptoFailure) in
            try PlatformCrypto.open(key: key, nonce: nonce, aad: aad, ciphertext: ciphertext, tag: tag)
        }
    }

    /// Decrypts and authenticates into `output` (exactly `ciphertext.count` bytes); when the tag does not
    /// verify, `output` is zeroed: unauthenticated bytes never stay behind.
    /// - Throws: ``ProtectionError/authenticationFailed`` when the tag does not verify.
    static func open(
        key: [UInt8], nonce: [UInt8], aad: UnsafeRawBufferPointer, ciphertext: UnsafeRawBufferPointer,
        tag: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) throws(ProtectionError) {
        try withBytes(of: key, nonce) { (key, nonce) throws(CryptoFailure) in
            try PlatformCrypto.open(key: key, nonce: nonce, aad: aad, ciphertext: ciphertext, tag: tag, into: output)
        }
    }

    /// Lends the bytes of `key` and `nonce` to an AEAD call of ``PlatformCrypto``, whose failure becomes a
    /// ``ProtectionError``.
    ///
    /// Only the bytes cross into IdentityCrypto, never the arrays: an array passed to another module's function
    /// counts as escaping, so a short-lived one (a stream record's nonce, made per record) could no longer be
    /// kept on the stack and would cost a heap allocation per record.
    @inline(__always)
    private static func withBytes<R>(
        of key: [UInt8], _ nonce: [UInt8],
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws(CryptoFailure) -> R
    ) throws(ProtectionError) -> R {
        do {
            return try key.withUnsafeBufferPointer { (key) throws(CryptoFailure) in
                try nonce.withUnsafeBufferPointer { (nonce) throws(CryptoFailure) in
                    try body(UnsafeRawBufferPointer(key), UnsafeRawBufferPointer(nonce))
                }
            }
        } catch { throw ProtectionError(error) }
    }

    /// HKDF-SHA-256 (RFC 5869) of `count` bytes.
    static func hkdfSHA256(key: [UInt8], salt: [UInt8], info: [UInt8], count: Int) throws(ProtectionError) -> [UInt8] {
        do { return try PlatformCrypto.hkdfSHA256(key: key, salt: salt, info: info, count: count) } catch { throw ProtectionError(error) }
    }

    /// SHA-256 digest.
    static func sha256(_ bytes: [UInt8]) throws(ProtectionError) -> [UInt8] {
        do { return try PlatformCrypto.sha256(bytes) } catch { throw ProtectionError(error) }
    }
}

extension ProtectionError {
    /// The protection error of a platform crypto failure.
    init(_ failure: CryptoFailure) {
        switch failure {
        case .authenticationFailed: self = .authenticationFailed
        case let .backend(reason): self = .cryptoBackendFailure(reason)
        }
    }
}
