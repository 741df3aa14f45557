import IdentityRuntime

/// The encrypted-file format, version 2, shared by ``FileProtectionManager/encryptFile(atPath:owner:)``,
/// ``FileProtectionManager/writeFile(atPath:contents:)`` and ``ProtectedFile`` (byte layout in
/// <doc:DataAndFileProtection>):
///
/// ```
/// header:      magic[8] version[1]=2 flags[1]=0 ownerLength[2] owner[L] keyID[16] salt[32] chunkSize[4]
/// size slots:  2 × 48 bytes, each a record of the 8-byte plaintext length
/// chunk i:     2 slots of (chunkSize + 40) bytes at dataStart + (2i + s) × slotSize
/// record:      generation[8] nonce[12] length[4] ciphertext[length] tag[16]
/// ```
///
/// File key: HKDF-SHA-256(ikm: the owner's key, salt: salt, info: "IdentityProtection file v2", 32 bytes).
/// Every record is sealed with a fresh random nonce; its associated data is
/// `header ‖ UInt64be(index) ‖ generation[8] ‖ length[4]` (the size record has index `UInt64.max`). A chunk
/// lives in one of its two slots: a rewrite goes into the other slot with the next generation, so a write torn
/// by a crash leaves the previous record readable. The reader takes the valid record with the highest
/// generation. A record moved to another file or position, a tail cut off below the authenticated size, and a
/// torn record fail with a typed error; they never yield plaintext.
///
/// Version 1, written by earlier builds, is still read (never written): the same header with version 1, then
/// chunk i as `ciphertext[chunkSize] tag[16]` back to back (the last one shorter), sealed with the file key of
/// info "IdentityProtection file v1", nonce `00 00 00 00 ‖ UInt64be(i)` and associated data
/// `header ‖ UInt64be(i) ‖ final (01 or 00)`. Reads go through ``EncryptedChunkStore`` like version 2; the
/// first write re-encrypts the file into version 2 (``FileProtectionManager/encryptFile(atPath:owner:)``).
enum EncryptedFileFormat {
    /// The version written.
    static let version: UInt8 = 2
    /// The versions read.
    static let readableVersions: ClosedRange<UInt8> = 1...2
    /// The earlier layout: chunks back to back, deterministic nonces, no slots and no size record.
    static let legacyVersion: UInt8 = 1
    static let saltLength = 32
    static let minimumChunkSize = 1
    static let maximumChunkSize = 16 << 20
    /// Generation, nonce, length, tag.
    static let recordOverhead = 8 + ProtectionCrypto.nonceLength + 4 + ProtectionCrypto.tagLength
    /// A size record: the overhead plus the 8-byte length.
    static let sizeSlotLength = recordOverhead + 8
    /// The index the size record is bound to.
    static let sizeRecordIndex = UInt64.max
    /// Largest content a file may hold (keeps every slot offset inside `Int64`).
    static let maximumContentLength: UInt64 = 1 << 62
    /// Longest possible header: fixed fields plus the longest owner.
    static let maximumHeaderLength = 8 + 1 + 1 + 2 + EnvelopeFormat.maximumOwnerLength + 16 + saltLength + 4

    struct Header: Sendable {
        let version: UInt8
        let owner: Identity
        let keyID: ProtectionKeyID
        let salt: [UInt8]
        let chunkSize: Int
        let bytes: [UInt8]

        var info: ProtectionInfo {
            ProtectionInfo(owner: owner, isEncrypted: true, keyID: keyID, formatVersion: version)
        }

        /// The owner as recorded: an encrypted file is always isolated. The runtime encrypts a file only for a
        /// managed owner, so its encryption is the record that the owner was managed when it was written;
        /// files of either version, written before isolation was recorded, included.
        var recordedOwner: RecordedOwner {
            RecordedOwner(owner, isolated: true)
        }

        /// Whether the file has the version 1 layout (read only).
        var isLegacy: Bool { version == EncryptedFileFormat.legacyVersion }

        /// Version 1: bytes of a full chunk record (ciphertext and tag).
        var legacyRecordLength: Int64 { Int64(chunkSize + ProtectionCrypto.tagLength) }

        /// Version 1: where chunk `index` starts.
        func legacyRecordOffset(_ index: UInt64) -> Int64 {
            Int64(bytes.count) + Int64(index) * legacyRecordLength
        }

        var slotLength: Int64 { Int64(chunkSize + EncryptedFileFormat.recordOverhead) }
        var dataStart: Int64 { Int64(bytes.count + 2 * EncryptedFileFormat.sizeSlotLength) }

        func sizeSlotOffset(_ slot: Int) -> Int64 {
            Int64(bytes.count + slot * EncryptedFileFormat.sizeSlotLength)
        }

        func slotOffset(chunk index: UInt64, slot: Int) -> Int64 {
            dataStart + (2 * Int64(index) + Int64(slot)) * slotLength
        }

        /// Largest content this file may hold: the format's limit, lowered for small chunks so that every
        /// slot offset (and the space reserved past the last chunk) stays inside `Int64`.
        var maximumContentLength: UInt64 {
            let chunks = UInt64((Int64.max - dataStart) / (2 * slotLength)) - 2 * EncryptedChunkStore.preallocationChunks
            let (product, overflow) = chunks.multipliedReportingOverflow(by: UInt64(chunkSize))
            return overflow ? EncryptedFileFormat.maximumContentLength : min(EncryptedFileFormat.maximumContentLength, product)
        }

        /// Bytes on disk of a file of `count` chunks, both slots of the last one included.
        func physicalLength(chunks count: UInt64) -> Int64 {
            dataStart + 2 * Int64(count) * slotLength
        }

        func chunkCount(_ length: UInt64) -> UInt64 {
            (length + UInt64(chunkSize) - 1) / UInt64(chunkSize)
        }
    }

    static func makeHeader(owner: Identity, keyID: ProtectionKeyID, salt: [UInt8], chunkSize: Int) throws(ProtectionError) -> Header {
        var bytes = EnvelopeFormat.fileMagic
        bytes.append(version)
        bytes.append(0)
        try EnvelopeFormat.appendOwner(owner, to: &bytes)
        bytes.append(contentsOf: keyID.bytes)
        bytes.append(contentsOf: salt)
        EnvelopeFormat.appendUInt32(UInt32(chunkSize), to: &bytes)
        return Header(version: version, owner: owner, keyID: keyID, salt: salt, chunkSize: chunkSize, bytes: bytes)
    }

    /// A new header for `owner` with a fresh salt and its current key.
    static func newHeader(owner: Identity, key: ProtectionKey, chunkSize: Int) throws(ProtectionError) -> Header {
        try makeHeader(owner: owner, keyID: key.id, salt: try ProtectionCrypto.randomBytes(saltLength), chunkSize: chunkSize)
    }

    /// Parses a header from the first bytes of a file. `nil`: not an encrypted file.
    static func parseHeader(_ prefix: UnsafeRawBufferPointer) throws(ProtectionError) -> Header? {
        switch EnvelopeFormat.match(prefix, magic: EnvelopeFormat.fileMagic) {
        case .none, .otherFormat: return nil
        case .truncated: throw .invalidEnvelope(reason: "truncated in magic (\(prefix.count) bytes)")
        case .full: break
        }
        var reader = ByteReader(prefix)
        let (version, flags, owner) = try reader.commonHeader(magic: EnvelopeFormat.fileMagic, versions: readableVersions)
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
            version: version, owner: owner, keyID: keyID, salt: salt, chunkSize: chunkSize,
            bytes: Array(UnsafeRawBufferPointer(rebasing: prefix[..<reader.offset])))
    }

    /// Opens the file at `path` and reads its header. `nil`: not an encrypted file.
    static func header(atPath path: String) throws(ProtectionError) -> Header? {
        let fd = try POSIX.openForReading(path)
        defer { POSIX.closeFile(fd) }
        return try readHeader(fd, path: path)
    }

    /// Reads and parses the header at the start of `fd`. `nil`: not an encrypted file.
    static func readHeader(_ fd: Int32, path: String) throws(ProtectionError) -> Header? {
        let prefix = try POSIX.preadUpTo(fd, upTo: maximumHeaderLength, at: 0, path: path)
        return try withRawBytes(of: prefix) { (raw) throws(ProtectionError) in try parseHeader(raw) }
    }

    /// The key of one file: derived from the owner's key and the file's salt, with the info of its version.
    static func fileKey(_ key: ProtectionKey, header: Header) throws(ProtectionError) -> [UInt8] {
        let info = Array("IdentityProtection file v\(header.version)".utf8)
        return try ProtectionCrypto.hkdfSHA256(key: key.material, salt: header.salt, info: info, count: ProtectionCrypto.keyLength)
    }

    /// Version 1: opens chunk `index` of a file from its record (ciphertext and tag, nothing after).
    /// - Throws: ``ProtectionError/invalidEnvelope(reason:)`` (100) a record shorter than its tag; ``ProtectionError/authenticationFailed`` (102) it does not authenticate at that index and finality.
    static func openLegacyRecord(
        _ record: UnsafeRawBufferPointer, index: UInt64, final: Bool, header: Header, fileKey: [UInt8]
    ) throws(ProtectionError) -> [UInt8] {
        guard record.count >= ProtectionCrypto.tagLength else {
            throw .invalidEnvelope(reason: record.isEmpty
                ? "truncated: chunk \(index) missing"
                : "truncated: chunk \(index) is \(record.count) bytes, shorter than its tag")
        }
        var nonce: [UInt8] = [0, 0, 0, 0]
        EnvelopeFormat.appendUInt64(index, to: &nonce)
        var aad = header.bytes
        EnvelopeFormat.appendUInt64(index, to: &aad)
        aad.append(final ? 1 : 0)
        let split = record.count - ProtectionCrypto.tagLength
        return try withRawBytes(of: aad) { (aad) throws(ProtectionError) -> [UInt8] in
            try ProtectionCrypto.open(
                key: fileKey, nonce: nonce, aad: aad,
                ciphertext: UnsafeRawBufferPointer(rebasing: record[..<split]),
                tag: UnsafeRawBufferPointer(rebasing: record[split...]))
        }
    }

    static func aad(_ header: Header, index: UInt64, generation: UInt64, length: Int) -> [UInt8] {
        var aad = header.bytes
        aad.reserveCapacity(header.bytes.count + 20)
        EnvelopeFormat.appendUInt64(index, to: &aad)
        EnvelopeFormat.appendUInt64(generation, to: &aad)
        EnvelopeFormat.appendUInt32(UInt32(length), to: &aad)
        return aad
    }

    /// A sealed record: `generation[8] nonce[12] length[4] ciphertext tag[16]`, with a fresh random nonce.
    static func sealRecord(
        _ plaintext: UnsafeRawBufferPointer, index: UInt64, generation: UInt64, header: Header, fileKey: [UInt8]
    ) throws(ProtectionError) -> [UInt8] {
        let nonce = try ProtectionCrypto.randomBytes(ProtectionCrypto.nonceLength)
        var prefix: [UInt8] = []
        prefix.reserveCapacity(8 + ProtectionCrypto.nonceLength + 4)
        EnvelopeFormat.appendUInt64(generation, to: &prefix)
        prefix.append(contentsOf: nonce)
        EnvelopeFormat.appendUInt32(UInt32(plaintext.count), to: &prefix)
        let aad = aad(header, index: index, generation: generation, length: plaintext.count)
        var failure: ProtectionError?
        // Sealed straight into the record: no zero fill and no second buffer.
        let record = [UInt8](unsafeUninitializedCapacity: plaintext.count + recordOverhead) { buffer, initialized in
            let raw = UnsafeMutableRawBufferPointer(buffer)
            raw.copyBytes(from: prefix)
            do throws(ProtectionError) {
                try withRawBytes(of: aad) { (aad) throws(ProtectionError) in
                    try ProtectionCrypto.seal(
                        key: fileKey, nonce: nonce, aad: aad, plaintext: plaintext,
                        into: UnsafeMutableRawBufferPointer(rebasing: raw[prefix.count...]))
                }
                initialized = plaintext.count + recordOverhead
            } catch {
                failure = error
                initialized = 0
            }
        }
        if let failure { throw failure }
        return record
    }

    /// The generation at the start of a slot; 0 for an empty slot (a hole reads as zeros) or one cut short.
    static func generation(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        guard bytes.count >= 8 else { return 0 }
        var value: UInt64 = 0
        for index in 0..<8 { value = value << 8 | UInt64(bytes[index]) }
        return value
    }

    /// Opens a record read from a slot (it may carry stale bytes after its end), bound to `index`.
    /// - Throws: ``ProtectionError/invalidEnvelope(reason:)`` (100) when the slot is empty, cut short or its length field is impossible; ``ProtectionError/authenticationFailed`` (102) when it does not
    ///   authenticate.
    static func openRecord(
        _ slot: UnsafeRawBufferPointer, index: UInt64, header: Header, fileKey: [UInt8], maximumLength: Int
    ) throws(ProtectionError) -> (generation: UInt64, plaintext: [UInt8]) {
        var reader = ByteReader(slot)
        let generation = try reader.uint64("record generation")
        guard generation != 0 else { throw .invalidEnvelope(reason: "record \(index) is missing") }
        let nonce = Array(try reader.bytes(ProtectionCrypto.nonceLength, "record nonce"))
        let length = Int(try reader.uint32("record length"))
        guard length <= maximumLength else {
            throw .invalidEnvelope(reason: "record \(index) claims \(length) bytes; at most \(maximumLength) fit")
        }
        let ciphertext = try reader.bytes(length, "record \(index) ciphertext")
        let tag = try reader.bytes(ProtectionCrypto.tagLength, "record \(index) tag")
        let aad = aad(header, index: index, generation: generation, length: length)
        let plaintext = try withRawBytes(of: aad) { (aad) throws(ProtectionError) -> [UInt8] in
            try ProtectionCrypto.open(key: fileKey, nonce: nonce, aad: aad, ciphertext: ciphertext, tag: tag)
        }
        return (generation, plaintext)
    }

    /// Writes a complete encrypted file into `output`: the header, every chunk that `source` yields in slot 0
    /// (generation 1), then the size record.
    static func encrypt(
        _ source: inout some PlaintextSource, header: Header, key: ProtectionKey, into output: AtomicFile
    ) throws(ProtectionError) {
        let fileKey = try fileKey(key, header: header)
        try POSIX.pwriteAll(output.fd, header.bytes, at: 0, path: output.temporaryPath)
        var index: UInt64 = 0
        var length: UInt64 = 0
        while true {
            let piece = try source.read(upTo: header.chunkSize)
            if piece.isEmpty { break }
            guard length + UInt64(piece.count) <= header.maximumContentLength else {
                throw .invalidOffset(path: output.path, offset: length + UInt64(piece.count))
            }
            let record = try withRawBytes(of: piece) { (raw) throws(ProtectionError) in
                try sealRecord(raw, index: index, generation: 1, header: header, fileKey: fileKey)
            }
            try POSIX.pwriteAll(output.fd, record, at: header.slotOffset(chunk: index, slot: 0), path: output.temporaryPath)
            length += UInt64(piece.count)
            index += 1
            if piece.count < header.chunkSize { break }
        }
        try writeSizeRecord(length, generation: 1, slot: 0, fd: output.fd, path: output.temporaryPath, header: header, fileKey: fileKey)
    }

    static func writeSizeRecord(
        _ length: UInt64, generation: UInt64, slot: Int, fd: Int32, path: String, header: Header, fileKey: [UInt8]
    ) throws(ProtectionError) {
        var value: [UInt8] = []
        EnvelopeFormat.appendUInt64(length, to: &value)
        let record = try withRawBytes(of: value) { (raw) throws(ProtectionError) in
            try sealRecord(raw, index: sizeRecordIndex, generation: generation, header: header, fileKey: fileKey)
        }
        try POSIX.pwriteAll(fd, record, at: header.sizeSlotOffset(slot), path: path)
    }

    /// Yields authenticated plaintext chunks of an encrypted file in order.
    struct Decryptor {
        var store: EncryptedChunkStore
        private var index: UInt64 = 0

        init(fd: Int32, path: String, header: Header, key: ProtectionKey) throws(ProtectionError) {
            store = try EncryptedChunkStore(opening: fd, path: path, header: header, key: key, writable: false)
        }

        /// The next chunk's plaintext, authenticated; `nil` after the last chunk.
        mutating func nextChunk() throws(ProtectionError) -> [UInt8]? {
            guard index < store.header.chunkCount(store.length) else { return nil }
            defer { index += 1 }
            return try store.chunk(index)
        }
    }
}

