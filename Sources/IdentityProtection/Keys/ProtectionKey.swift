/// One AES-256 key of one identity, with its id.
///
/// > Warning: ``material`` is the secret itself. Only a ``KeyStore`` implementation should read it (to
/// > persist it); never log it.
public struct ProtectionKey: Sendable, Hashable, CustomStringConvertible {
    /// The number of bytes of key material (AES-256).
    public static let byteCount = 32

    /// The key's id, written into everything encrypted with it.
    public let id: ProtectionKeyID
    /// The 32 secret bytes.
    public let material: [UInt8]
    /// The ``FileKeyStore`` instance that handed the key out, when one did: its destruction of the key
    /// reaches the handles opened with it, whichever store passed it on (see `KeyRevocations`). Takes no part
    /// in equality.
    package private(set) var origin: UInt64?

    /// Makes a key from stored material.
    /// - Throws: ``ProtectionError/cryptoBackendFailure(_:)`` when `material` is not 32 bytes.
    public init(id: ProtectionKeyID, material: [UInt8]) throws(ProtectionError) {
        guard material.count == ProtectionKey.byteCount else {
            throw .cryptoBackendFailure("key material must be \(ProtectionKey.byteCount) bytes, not \(material.count)")
        }
        self.id = id
        self.material = material
    }

    /// A new key with a random id and random material from the crypto backend's CSPRNG.
    public static func generate() throws(ProtectionError) -> ProtectionKey {
        try ProtectionKey(id: try ProtectionKeyID.random(), material: try ProtectionCrypto.randomBytes(byteCount))
    }

    /// The key, as handed out by the store instance `origin`.
    package func handedOut(by origin: UInt64) -> ProtectionKey {
        var key = self
        key.origin = origin
        return key
    }

    public static func == (lhs: ProtectionKey, rhs: ProtectionKey) -> Bool {
        lhs.id == rhs.id && lhs.material == rhs.material
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(material)
    }

    /// Names the key id only; the material is never printed.
    public var description: String { "ProtectionKey(id: \(id))" }
}
