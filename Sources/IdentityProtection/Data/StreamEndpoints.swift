import IdentityRuntime

/// The two ends of a protected stream over a key store and a policy, shared by the stream APIs of
/// ``DataProtectionManager`` and ``FileProtectionManager``: the sealer asks the policy to create data for the
/// owner, the opener asks it to let the reader read the owner named in the header, before any plaintext.
struct StreamEndpoints {
    let keyStore: any KeyStore
    let policy: any ManagedIdentityPolicy

    /// A sealer for `owner`, after ``ProtectedDataAccess/create`` was allowed.
    /// - Throws: ``ProtectionError/invalidEnvelope(reason:)`` (100) a chunk size out of range; the policy's refusal; ``ProtectionError/keyNotFound(identity:keyID:)`` (103), ``ProtectionError/invalidIdentity(reason:)`` (104) or ``ProtectionError/cryptoBackendFailure(_:)`` (107).
    func sealer(owner: Identity, chunkSize: Int) throws(ProtectionError) -> StreamSealer {
        guard (EncryptedFileFormat.minimumChunkSize...EncryptedFileFormat.maximumChunkSize).contains(chunkSize) else {
            throw .invalidEnvelope(reason: "chunk size \(chunkSize) outside 1...\(EncryptedFileFormat.maximumChunkSize)")
        }
        try policy.authorizeCreation(for: owner)
        let key = !owner.isUnmanaged && policy.isManaged(owner) ? try keyStore.keyForNewData(of: owner) : nil
        return try StreamSealer(header: try StreamFormat.makeHeader(owner: owner, key: key, chunkSize: chunkSize), key: key)
    }

    /// An opener that lets `reader` read the owner its header names (``ProtectedDataAccess/read(reader:)``)
    /// and finds the key, before a byte of plaintext comes out.
    func opener(reader: Identity?) -> StreamOpener {
        let policy = policy
        let keyStore = keyStore
        return StreamOpener { (header) throws(ProtectionError) -> ProtectionKey? in
            guard let keyID = header.keyID else {
                try policy.authorize(.read(reader: reader), to: header.recordedOwner)
                return nil
            }
            return try policy.authorizedKey(.read(reader: reader), to: header.recordedOwner) { () throws(ProtectionError) -> ProtectionKey in
                try keyStore.key(withID: keyID, for: header.owner)
            }
        }
    }
}
