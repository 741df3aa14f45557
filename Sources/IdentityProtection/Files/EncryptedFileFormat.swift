import IdentityRuntime

/// The encrypted-file format, version 1 (byte layout in docs/protection.md):
///
/// ```
/// magic[8] version[1] flags[1]=0 ownerLength[2] owner[L] keyID[16] salt[32] chunkSize[4]   (the header)
/// chunk 0: ciphertext[chunkSize] tag[16]
/// ...
/// chunk n-1 (final): ciphertext[0...chunkSize] tag[16]
/// ```
///
/// File key: HKDF-SHA-256(ikm: the owner's key, salt: salt, info: "IdentityProtection file v1", 32 bytes).
/// Chunk i: nonce `00 00 00 00 ‖ UInt64be(i)`, associated data `header ‖ UInt64be(i) ‖ final (01 or 00)`.
/// A reordered, dropped, duplicated or appended chunk, and a file cut at any length, fail authentication or
/// framing.
enum EncryptedFileFormat {
    static let saltLength = 32
    static let info = Array("IdentityProtection file v1".utf8)
    static let minimumChunkSize = 1
    static let maximumChunkSize = 16 << 20
    /// Longest possible header: fixed fields plus the longest owner.
    static let maximumHeaderLength = 8 + 1 + 1 + 2 + EnvelopeFormat.maximumOwnerLength + 16 + saltLength + 4

    struct Header {
        let owner: Identity
        let keyID: ProtectionKeyID
        let salt: [UInt8]
        let chunkSize: Int
        let bytes: [UInt8]

        var info: ProtectionInfo {
            ProtectionInfo(owner: owner, isEncrypted: true, keyID: keyID, formatVersion: EnvelopeFormat.version)
        }
    }

    static func makeHeader(owner: Identity, keyID: ProtectionKeyID, salt: [UInt8], chunkSize: Int) throws(ProtectionError) -> Header {
        var bytes = EnvelopeFormat.fileMagic
        bytes.append(EnvelopeFormat.version)
        bytes.append(0)
        try EnvelopeFormat.appendOwner(owner, to: &bytes)
        bytes.append(contentsOf: keyID.bytes)
        bytes.append(contentsOf: salt)
        EnvelopeFormat.appendUInt32(UInt32(chunkSize), to: &bytes)
        return Header(owner: owner, keyID: keyID, salt: salt, chunkSize: chunkSize, bytes: bytes)
    }

    /// Parses a header from the first bytes of a file. `nil`: not an encrypted file.
    static func parseHeader(_ prefix: UnsafeRawBufferPointer) throws(ProtectionError) -> Header? {
        switch EnvelopeFormat.match(prefix, magic: EnvelopeFormat.fileMagic) {
        case .none: return nil
        case .truncated: throw .invalidEnvelope(reason: "truncated in magic (\(prefix.count) bytes)")
        case .full: break
        }
        var reader = ByteReader(prefix)
        let (flags, owner) = try reader.commonHeader(magic: EnvelopeFormat.fileMagic)
        guard flags == 0 else { throw .invalidEnvelope(reason: "reserved flag bits set (0x\(String(flags, radix: 16)))") }
        guard !owner.isUnmanaged else {
            throw .invalidIdentity(reason: "an encrypted file must name a managed owner, not the unmanaged identity")
        }
        let keyID = ProtectionKeyID(unchecked: Array(try reader.bytes(ProtectionKeyID.byteCount, "key id")))
        let salt = Array(try reader.bytes(saltLength, "salt"))
        let chunkSize = Int(try reader.uint32("chunk size"))
        guard (minimumChunkSize...maximumChunkSize).contains(chunkSize) else {
            throw .invalidEnvelope(reason: "chunk size \(chunkSize) outside \(minimumChunkSize)...\(maximumChunkSize)")
        }
        return Header(
            owner: owner, keyID: keyID, salt: salt, chunkSize: chunkSize,
            bytes: Array(UnsafeRawBufferPointer(rebasing: prefix[..<reader.offset])))
    }

    /// Reads and parses the header at the start of `fd`, leaving the offset just after it. `nil` (offset
    /// unspecified): not an encrypted file.
    static func readHeader(_ fd: Int32, path: String) throws(ProtectionError) -> Header? {
        guard lseek(fd, 0, SEEK_SET) == 0 else { throw POSIX.failure(path, "lseek") }
        let prefix = try POSIX.readUpTo(fd, upTo: maximumHeaderLength, path: path)
        guard let header = try withRawBytes(of: prefix, { (raw) throws(ProtectionError) in try parseHeader(raw) }) else {
            return nil
        }
        guard lseek(fd, off_t(header.bytes.count), SEEK_SET) == off_t(header.bytes.count) else {
            throw POSIX.failure(path, "lseek")
        }
        return header
    }

    static func fileKey(_ key: ProtectionKey, salt: [UInt8]) throws(ProtectionError) -> [UInt8] {
        try ProtectionCrypto.hkdfSHA256(key: key.material, salt: salt, info: info, count: ProtectionCrypto.keyLength)
    }

    static func nonce(_ index: UInt64) -> [UInt8] {
        var nonce: [UInt8] = [0, 0, 0, 0]
        EnvelopeFormat.appendUInt64(index, to: &nonce)
        return nonce
    }

    static func aad(_ header: Header, _ index: UInt64, final: Bool) -> [UInt8] {
        var aad = header.bytes
        EnvelopeFormat.appendUInt64(index, to: &aad)
        aad.append(final ? 1 : 0)
        return aad
    }

    /// Encrypts everything `source` yields into `output` (header first).
    static func encrypt(
        _ source: inout some PlaintextSource, header: Header, key: ProtectionKey, into output: AtomicFile
    ) throws(ProtectionError) {
        let fileKey = try fileKey(key, salt: header.salt)
        try output.write(header.bytes)
        var current = try source.read(upTo: header.chunkSize)
        var index: UInt64 = 0
        while true {
            let next = current.count < header.chunkSize ? [] : try source.read(upTo: header.chunkSize)
            let final = next.isEmpty
            var sealed: [UInt8] = []
            sealed.reserveCapacity(current.count + ProtectionCrypto.tagLength)
            let aad = aad(header, index, final: final)
            try withRawBytes(of: aad) { (aad) throws(ProtectionError) in
                try withRawBytes(of: current) { (plaintext) throws(ProtectionError) in
                    try ProtectionCrypto.seal(key: fileKey, nonce: nonce(index), aad: aad, plaintext: plaintext, appendingTo: &sealed)
                }
            }
            try output.write(sealed)
            if final { return }
            current = next
            index += 1
        }
    }

    /// Yields authenticated plaintext chunks of an encrypted file, positioned after its header.
    struct Decryptor {
        let fd: Int32
        let path: String
        let header: Header
        let fileKey: [UInt8]
        private var index: UInt64 = 0
        private var pending: [UInt8]?
        private var finished = false

        init(fd: Int32, path: String, header: Header, key: ProtectionKey) throws(ProtectionError) {
            self.fd = fd
            self.path = path
            self.header = header
            self.fileKey = try EncryptedFileFormat.fileKey(key, salt: header.salt)
        }

        /// The next chunk's plaintext, authenticated; `nil` after the final chunk.
        mutating func nextChunk() throws(ProtectionError) -> [UInt8]? {
            if finished { return nil }
            let recordLength = header.chunkSize + ProtectionCrypto.tagLength
            let record: [UInt8]
            if let pending {
                record = pending
            } else {
                record = try POSIX.readUpTo(fd, upTo: recordLength, path: path)
            }
            guard record.count >= ProtectionCrypto.tagLength else {
                throw .invalidEnvelope(reason: record.isEmpty
                    ? "truncated: chunk \(index) missing"
                    : "truncated: chunk \(index) is \(record.count) bytes, shorter than its tag")
            }
            let next = record.count < recordLength ? [] : try POSIX.readUpTo(fd, upTo: recordLength, path: path)
            let final = next.isEmpty
            let aad = EncryptedFileFormat.aad(header, index, final: final)
            let split = record.count - ProtectionCrypto.tagLength
            let plaintext = try withRawBytes(of: aad) { (aad) throws(ProtectionError) -> [UInt8] in
                try withRawBytes(of: record) { (raw) throws(ProtectionError) -> [UInt8] in
                    try ProtectionCrypto.open(
                        key: fileKey, nonce: EncryptedFileFormat.nonce(index), aad: aad,
                        ciphertext: UnsafeRawBufferPointer(rebasing: raw[..<split]),
                        tag: UnsafeRawBufferPointer(rebasing: raw[split...]))
                }
            }
            pending = final ? nil : next
            finished = final
            index += 1
            return plaintext
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
