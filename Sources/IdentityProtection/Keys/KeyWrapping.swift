/// Envelope encryption of a ``ProtectionKey`` under a key-encryption key (KEK), for ``KeyStore``
/// implementations that keep keys somewhere other than this machine (a database shared by a fleet).
///
/// The wrapped form is `nonce (12 bytes) || ciphertext (32 bytes) || tag (16 bytes)`: AES-256-GCM with a fresh
/// random nonce, from the same platform crypto as everything else in this module (CryptoKit, or the system
/// libcrypto on Linux). The key's id and the caller's `context` (for example the account name and the KEK's
/// id) are authenticated as additional data, so a wrapped key copied to another account's row, or given
/// another id, does not unwrap.
///
/// ```swift
/// let kek = try ProtectionKey.generate().material          // 32 bytes kept outside the database
/// let key = try ProtectionKey.generate()
/// let wrapped = try KeyWrapping.wrap(key, under: kek, context: Array("alice@contoso.com".utf8))
/// let back = try KeyWrapping.unwrap(wrapped, id: key.id, under: kek, context: Array("alice@contoso.com".utf8))
/// assert(back == key)
/// ```
///
/// > Note: Added for the PostgreSQL fleet backend (`Integrations/IdentityPostgres`), so that it does not carry
/// > a second copy of the crypto.
public enum KeyWrapping {
    /// The number of bytes of a key-encryption key (AES-256).
    public static let keyEncryptionKeyByteCount = ProtectionCrypto.keyLength
    /// The number of bytes of a wrapped key: nonce, encrypted material, tag.
    public static let wrappedByteCount = ProtectionCrypto.nonceLength + ProtectionKey.byteCount + ProtectionCrypto.tagLength

    /// Encrypts `key`'s material under `keyEncryptionKey` (32 bytes), binding `key.id` and `context`.
    /// - Throws: ``ProtectionError/cryptoBackendFailure(_:)`` when the KEK is not 32 bytes or the backend fails.
    public static func wrap(
        _ key: ProtectionKey, under keyEncryptionKey: [UInt8], context: [UInt8] = []
    ) throws(ProtectionError) -> [UInt8] {
        try checkKEK(keyEncryptionKey)
        let nonce = try ProtectionCrypto.randomBytes(ProtectionCrypto.nonceLength)
        var output = nonce
        output.reserveCapacity(wrappedByteCount)
        let aad = additionalData(id: key.id, context: context)
        let sealed = aad.withUnsafeBytes { aad in
            key.material.withUnsafeBytes { plaintext in
                Result { () throws(ProtectionError) -> [UInt8] in
                    var output = output
                    try ProtectionCrypto.seal(
                        key: keyEncryptionKey, nonce: nonce, aad: aad, plaintext: plaintext, appendingTo: &output)
                    return output
                }
            }
        }
        output = try sealed.get()
        return output
    }

    /// Decrypts a key made by ``wrap(_:under:context:)`` with the same KEK, id and context.
    /// - Throws: ``ProtectionError/authenticationFailed`` for another KEK, id or context, or tampered bytes;
    ///   ``ProtectionError/invalidEnvelope(reason:)`` when `wrapped` is not ``wrappedByteCount`` bytes;
    ///   ``ProtectionError/cryptoBackendFailure(_:)`` when the KEK is not 32 bytes.
    public static func unwrap(
        _ wrapped: [UInt8], id: ProtectionKeyID, under keyEncryptionKey: [UInt8], context: [UInt8] = []
    ) throws(ProtectionError) -> ProtectionKey {
        try checkKEK(keyEncryptionKey)
        guard wrapped.count == wrappedByteCount else {
            throw .invalidEnvelope(reason: "a wrapped key is \(wrappedByteCount) bytes, not \(wrapped.count)")
        }
        let nonce = Array(wrapped[0..<ProtectionCrypto.nonceLength])
        let body = wrapped[ProtectionCrypto.nonceLength..<(wrapped.count - ProtectionCrypto.tagLength)]
        let tag = wrapped[(wrapped.count - ProtectionCrypto.tagLength)...]
        let aad = additionalData(id: id, context: context)
        let opened = aad.withUnsafeBytes { aad in
            Array(body).withUnsafeBytes { ciphertext in
                Array(tag).withUnsafeBytes { tag in
                    Result { () throws(ProtectionError) -> [UInt8] in
                        try ProtectionCrypto.open(key: keyEncryptionKey, nonce: nonce, aad: aad, ciphertext: ciphertext, tag: tag)
                    }
                }
            }
        }
        let material = try opened.get()
        return try ProtectionKey(id: id, material: material)
    }

    private static func checkKEK(_ kek: [UInt8]) throws(ProtectionError) {
        guard kek.count == keyEncryptionKeyByteCount else {
            throw .cryptoBackendFailure("a key-encryption key must be \(keyEncryptionKeyByteCount) bytes, not \(kek.count)")
        }
    }

    /// `"identity-key-wrap/1" || id || context`.
    private static func additionalData(id: ProtectionKeyID, context: [UInt8]) -> [UInt8] {
        Array("identity-key-wrap/1".utf8) + id.bytes + context
    }
}
