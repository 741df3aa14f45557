import IdentityRuntime

/// The protected-data envelope, version 1 (byte layout in <doc:DataAndFileProtection>):
///
/// ```
/// magic[8] version[1] flags[1] ownerLength[2] owner[L] (keyID[16] nonce[12] if encrypted) bodyLength[8]
/// body[N] (tag[16] if encrypted)
/// ```
/// Everything before the body is the header and the AES-GCM associated data.
struct DataEnvelope {
    let owner: Identity
    let isEncrypted: Bool
    let keyID: ProtectionKeyID?
    let nonce: [UInt8]?
    let headerLength: Int
    let bodyLength: Int

    /// The owner as recorded: an encrypted envelope is isolated (the runtime encrypts exactly the envelopes
    /// created while their owner was managed, and the flag is authenticated with the header).
    var recordedOwner: RecordedOwner {
        RecordedOwner(owner, isolated: isEncrypted)
    }

    var info: ProtectionInfo {
        ProtectionInfo(owner: owner, isEncrypted: isEncrypted, keyID: keyID, formatVersion: EnvelopeFormat.version)
    }

    /// Writes the header for a body of `bodyLength` bytes.
    static func header(owner: Identity, key: ProtectionKey?, nonce: [UInt8]?, bodyLength: Int) throws(ProtectionError) -> [UInt8] {
        var header: [UInt8] = []
        header.reserveCapacity(EnvelopeFormat.dataMagic.count + 4 + owner.name.utf8.count + 16 + ProtectionCrypto.nonceLength + 8)
        header.append(contentsOf: EnvelopeFormat.dataMagic)
        header.append(EnvelopeFormat.version)
        header.append(key == nil ? 0 : EnvelopeFormat.encryptedFlag)
        try EnvelopeFormat.appendOwner(owner, to: &header)
        if let key, let nonce {
            header.append(contentsOf: key.id.bytes)
            header.append(contentsOf: nonce)
        }
        EnvelopeFormat.appendUInt64(UInt64(bodyLength), to: &header)
        return header
    }

    /// Parses the envelope structure. `nil`: `bytes` is not an envelope (unprotected data).
    /// - Throws: ``ProtectionError/invalidEnvelope(reason:)`` (100) (malformed, truncated, trailing bytes), ``ProtectionError/unsupportedVersion(_:)`` (101) (version), ``ProtectionError/invalidIdentity(reason:)`` (104) (owner field).
    static func parse(_ bytes: UnsafeRawBufferPointer) throws(ProtectionError) -> DataEnvelope? {
        switch EnvelopeFormat.match(bytes, magic: EnvelopeFormat.dataMagic, others: true) {
        case .none: return nil
        case .truncated: throw .invalidEnvelope(reason: "truncated in magic (\(bytes.count) bytes)")
        case let .otherFormat(name): throw .invalidEnvelope(reason: "\(name), not a data envelope")
        case .full: break
        }
        var reader = ByteReader(bytes)
        let (flags, owner) = try reader.commonHeader(magic: EnvelopeFormat.dataMagic)
        guard flags & ~EnvelopeFormat.encryptedFlag == 0 else {
            throw .invalidEnvelope(reason: "reserved flag bits set (0x\(String(flags, radix: 16)))")
        }
        let isEncrypted = flags & EnvelopeFormat.encryptedFlag != 0
        var keyID: ProtectionKeyID?
        var nonce: [UInt8]?
        if isEncrypted {
            guard !owner.isUnmanaged else {
                throw .invalidIdentity(reason: "an encrypted envelope must name a managed owner, not the unmanaged identity")
            }
            keyID = ProtectionKeyID(unchecked: Array(try reader.bytes(ProtectionKeyID.byteCount, "key id")))
            nonce = Array(try reader.bytes(ProtectionCrypto.nonceLength, "nonce"))
        }
        let declared = try reader.uint64("body length")
        let headerLength = reader.offset
        let trailer = isEncrypted ? ProtectionCrypto.tagLength : 0
        let available = UInt64(reader.remaining)
        guard declared <= available, available - declared >= UInt64(trailer) else {
            throw .invalidEnvelope(reason: "truncated: body length \(declared) plus \(trailer) tag bytes exceeds the \(available) bytes present")
        }
        guard available - declared == UInt64(trailer) else {
            throw .invalidEnvelope(reason: "\(available - declared - UInt64(trailer)) trailing bytes after the envelope")
        }
        return DataEnvelope(
            owner: owner, isEncrypted: isEncrypted, keyID: keyID, nonce: nonce, headerLength: headerLength,
            bodyLength: Int(declared))
    }
}
