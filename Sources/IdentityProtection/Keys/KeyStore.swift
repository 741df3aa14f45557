import IdentityRuntime

/// Where the keys of managed identities live. Each identity has any number of keys, one of them current;
/// data records the id of the key it was encrypted with, so keys rotate while old data stays readable.
///
/// Implementations must be thread-safe. ``FileKeyStore`` is the default; an app can supply one backed by the
/// platform keychain or a hardware module.
///
/// Destroying an identity's keys (``destroyKeys(for:)``) is crypto-shredding: everything encrypted for it
/// becomes unreadable (``ProtectionError/keyNotFound(identity:keyID:)``), wherever copies of it are.
public protocol KeyStore: Sendable {
    /// The key new data for `identity` is encrypted with, created (and persisted) when it has none.
    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey

    /// The key of `identity` with id `id`, current or retired.
    /// - Throws: ``ProtectionError/keyNotFound(identity:keyID:)`` when there is no such key.
    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey

    /// Makes a new current key for `identity`; older keys stay available for reading.
    @discardableResult
    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey

    /// Destroys every key of `identity`. Succeeds when it has none.
    func destroyKeys(for identity: Identity) throws(ProtectionError)
}
