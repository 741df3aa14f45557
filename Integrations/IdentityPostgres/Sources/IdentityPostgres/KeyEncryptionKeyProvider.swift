import IdentityProtection

/// Wraps and unwraps account keys for ``PostgresKeyStore``: the key-encryption key (KEK) itself never enters
/// the database, only its id does.
///
/// ``StaticKeyEncryptionKeys`` holds KEKs read from a file or the environment. A KMS or HSM stands in by
/// implementing these two calls (they may block; ``PostgresKeyStore`` calls them only on a cache miss and on
/// rotation, never on the warm path).
///
/// Rotating the KEK: give the provider the new KEK as current and keep the old one; new keys are wrapped under
/// the new one, and keys wrapped under the old one stay readable.
public protocol KeyEncryptionKeyProvider: Sendable {
    /// The id of the KEK that ``wrap(_:context:)`` uses now.
    var currentKeyEncryptionKeyID: String { get }

    /// Wraps `key` under the current KEK, authenticating `context` (the account, the KEK id).
    /// - Returns: the id of the KEK used and the wrapped bytes, both stored in the database.
    func wrap(_ key: ProtectionKey, context: [UInt8]) throws(ProtectionError) -> (keyEncryptionKeyID: String, wrapped: [UInt8])

    /// Unwraps a key wrapped by ``wrap(_:context:)`` under the KEK `keyEncryptionKeyID`.
    /// - Throws: `ProtectionError.authenticationFailed` when the bytes, the id or the context do not match;
    ///   `ProtectionError.keyStoreUnavailable` when this provider does not hold that KEK.
    func unwrap(
        _ wrapped: [UInt8], keyID: ProtectionKeyID, keyEncryptionKeyID: String, context: [UInt8]
    ) throws(ProtectionError) -> ProtectionKey
}
