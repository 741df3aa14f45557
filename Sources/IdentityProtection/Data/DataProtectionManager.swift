import Foundation
import IdentityRuntime

/// Protects data in memory for an owner identity: a versioned envelope naming the owner, with the body
/// encrypted (AES-256-GCM, header as associated data) when the owner is managed.
///
/// ```swift
/// let keys = try FileKeyStore(atPath: "/var/lib/app/keys")
/// let policy = StaticManagedIdentityPolicy(managed: ["alice@contoso.com"])
/// let manager = DataProtectionManager(keyStore: keys, policy: policy)
///
/// let sealed = try manager.protect(Data("salary.xlsx".utf8), owner: "alice@contoso.com")
/// try manager.protectionInfo(sealed)?.owner   // alice@contoso.com
/// try IdentityContext.withThreadIdentity("alice@contoso.com") {
///     try manager.unprotect(sealed)           // the original bytes, for alice
/// }
/// try manager.unprotect(sealed)               // ProtectionError 108: code with no identity may not read it
/// try manager.unprotect(Data("plain".utf8))   // unprotected data comes back unchanged
/// ```
///
/// Access: every read asks the policy (``ManagedIdentityPolicy/refusal(of:to:)``) with the envelope's recorded
/// owner and the effective file identity of the code asking; with the default policies a managed account's
/// data is read only under that account.
///
/// - The unmanaged identity (`""`), an identity the policy does not manage, and no identity at all get a
///   header only: the body stays in the clear, unauthenticated.
/// - ``unprotect(_:)->Data`` returns data that is not an envelope unchanged; ``protectionInfo(_:)-(Data)`` is `nil` for it.
/// - Truncated, tampered or unreadable envelopes are a ``ProtectionError``: never a crash, never plaintext
///   that did not authenticate.
///
/// > Note: Data that is a proper prefix of the 8-byte envelope magic (`89 49 44 50 44 0D 0A 1A`), for example
/// > the single byte `0x89`, is taken as a truncated envelope (``ProtectionError/invalidEnvelope(reason:)`` (100)), not as unprotected data; so is data
/// > in another of the runtime's formats (a protected stream, an encrypted file): ``ProtectionError/invalidEnvelope(reason:)`` (100), never its bytes.
///
/// Thread-safe: call it from any number of threads and tasks at once.
public final class DataProtectionManager: Sendable {
    /// Where keys come from.
    public let keyStore: any KeyStore
    /// Which identities are managed.
    public let policy: any ManagedIdentityPolicy

    /// A manager over a key store and a policy.
    public init(keyStore: any KeyStore, policy: any ManagedIdentityPolicy) {
        self.keyStore = keyStore
        self.policy = policy
    }

    // MARK: Data

    /// Wraps `data` in an envelope owned by `owner`.
    ///
    /// - Parameters:
    ///   - data: the plaintext.
    ///   - owner: the owner; `nil` means the calling thread's or task's
    ///     `IdentityContext.effectiveFileIdentity`, and if that is `nil` too, `Identity.unmanaged`.
    /// - Returns: an envelope with the body encrypted when the owner is managed, in the clear otherwise.
    /// - Throws: ``ProtectionError/invalidIdentity(reason:)`` (104) for an owner whose name `Identity(validating:)` rejects (longer than 1,024 bytes of UTF-8, a control or invisible character), with no key made, ``ProtectionError/keyNotFound(identity:keyID:)`` (103), ``ProtectionError/ioFailure(path:operation:errno:)`` (106) or ``ProtectionError/cryptoBackendFailure(_:)`` (107) from the key store or crypto.
    public func protect(_ data: Data, owner: Identity? = nil) throws(ProtectionError) -> Data {
        let owner = owner ?? IdentityContext.effectiveFileIdentity ?? .unmanaged
        return try withRawBytes(of: data) { (raw: UnsafeRawBufferPointer) throws(ProtectionError) -> Data in
            try seal(raw, owner: owner)
        }
    }

    /// The content of an envelope, authenticated; `data` itself when it is not an envelope.
    /// - Throws: ``ProtectionError/invalidEnvelope(reason:)`` (100) malformed or truncated, ``ProtectionError/unsupportedVersion(_:)`` (101) unknown version, ``ProtectionError/authenticationFailed`` (102) tampered or wrong key, ``ProtectionError/keyNotFound(identity:keyID:)`` (103) key missing
    ///   (for example destroyed by a wipe), ``ProtectionError/invalidIdentity(reason:)`` (104) invalid owner field.
    public func unprotect(_ data: Data) throws(ProtectionError) -> Data {
        try withRawBytes(of: data) { (raw: UnsafeRawBufferPointer) throws(ProtectionError) -> Data in
            try open(raw) ?? data
        }
    }

    /// The owner and encryption of an envelope, or `nil` when `data` is not an envelope. Reads the header only;
    /// it does not authenticate the body (``unprotect(_:)->Data`` does).
    /// - Throws: ``ProtectionError/invalidEnvelope(reason:)`` (100), ``ProtectionError/unsupportedVersion(_:)`` (101) or ``ProtectionError/invalidIdentity(reason:)`` (104) for a malformed header.
    public func protectionInfo(_ data: Data) throws(ProtectionError) -> ProtectionInfo? {
        try withRawBytes(of: data) { (raw: UnsafeRawBufferPointer) throws(ProtectionError) -> ProtectionInfo? in
            try DataEnvelope.parse(raw)?.info
        }
    }

    // MARK: Strings

    /// Protects the UTF-8 of `string` and returns the envelope in base64.
    public func protect(_ string: String, owner: Identity? = nil) throws(ProtectionError) -> String {
        try protect(Data(string.utf8), owner: owner).base64EncodedString()
    }

    /// The inverse of the string `protect(_:owner:)`: decodes base64, unprotects, decodes UTF-8.
    ///
    /// A string that is not base64 of an envelope is returned unchanged (it is unprotected data).
    /// - Throws: as ``unprotect(_:)``, and ``ProtectionError/invalidEnvelope(reason:)`` (100) when the content is not UTF-8.
    public func unprotect(_ string: String) throws(ProtectionError) -> String {
        guard let data = Data(base64Encoded: string), try protectionInfo(data) != nil else { return string }
        guard let text = String(validating: try unprotect(data), as: UTF8.self) else {
            throw .invalidEnvelope(reason: "the protected content is not UTF-8 text")
        }
        return text
    }

    /// ``protectionInfo(_:)`` of a base64 envelope; `nil` for any other string.
    public func protectionInfo(_ string: String) throws(ProtectionError) -> ProtectionInfo? {
        guard let data = Data(base64Encoded: string) else { return nil }
        return try protectionInfo(data)
    }

    // MARK: Internals

    func isManaged(_ identity: Identity) -> Bool {
        !identity.isUnmanaged && policy.isManaged(identity)
    }

    /// The envelope of `plaintext` for `owner`, built in place: the header, then the body sealed straight into
    /// the result (no intermediate buffer).
    func seal(_ plaintext: UnsafeRawBufferPointer, owner: Identity) throws(ProtectionError) -> Data {
        try policy.authorizeCreation(for: owner)
        guard isManaged(owner) else {
            var output = Data(try DataEnvelope.header(owner: owner, key: nil, nonce: nil, bodyLength: plaintext.count))
            output.append(contentsOf: plaintext)
            return output
        }
        let key = try keyStore.keyForNewData(of: owner)
        let nonce = try ProtectionCrypto.randomBytes(ProtectionCrypto.nonceLength)
        let header = try DataEnvelope.header(owner: owner, key: key, nonce: nonce, bodyLength: plaintext.count)
        var output = Data(count: header.count + plaintext.count + ProtectionCrypto.tagLength)
        try withMutableRawBytes(of: &output) { (out) throws(ProtectionError) in
            out.copyBytes(from: header)
            try withRawBytes(of: header) { (aad: UnsafeRawBufferPointer) throws(ProtectionError) in
                try ProtectionCrypto.seal(
                    key: key.material, nonce: nonce, aad: aad, plaintext: plaintext,
                    into: UnsafeMutableRawBufferPointer(rebasing: out[header.count...]))
            }
        }
        return output
    }

    /// The authenticated content of the envelope `bytes`, decrypted straight into the result; `nil` when
    /// `bytes` is not an envelope.
    func open(_ bytes: UnsafeRawBufferPointer) throws(ProtectionError) -> Data? {
        guard let envelope = try DataEnvelope.parse(bytes) else { return nil }
        let access = ProtectedDataAccess.read(reader: IdentityContext.effectiveFileIdentity)
        let body = UnsafeRawBufferPointer(rebasing: bytes[envelope.headerLength..<envelope.headerLength + envelope.bodyLength])
        guard envelope.isEncrypted, let keyID = envelope.keyID, let nonce = envelope.nonce else {
            try policy.authorize(access, to: envelope.recordedOwner)
            return Data(body)
        }
        let key = try policy.authorizedKey(access, to: envelope.recordedOwner) { () throws(ProtectionError) -> ProtectionKey in
            try keyStore.key(withID: keyID, for: envelope.owner)
        }
        let tagStart = envelope.headerLength + envelope.bodyLength
        var output = Data(count: envelope.bodyLength)
        try withMutableRawBytes(of: &output) { (out) throws(ProtectionError) in
            try ProtectionCrypto.open(
                key: key.material, nonce: nonce,
                aad: UnsafeRawBufferPointer(rebasing: bytes[..<envelope.headerLength]),
                ciphertext: body,
                tag: UnsafeRawBufferPointer(rebasing: bytes[tagStart..<tagStart + ProtectionCrypto.tagLength]),
                into: out)
        }
        return output
    }
}
