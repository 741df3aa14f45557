import IdentityRuntime

/// The protected-stream envelope, version 1 (byte layout in <doc:DataAndFileProtection>): the data envelope's family,
/// for payloads that are protected piece by piece with bounded memory.
///
/// ```
/// magic[8] version[1]=1 flags[1] ownerLength[2] owner[L]            flags bit 0: encrypted
/// (if encrypted) keyID[16] salt[32] chunkSize[4]
/// body, encrypted:   record 0 ... record n-1, each ciphertext[chunkSize] tag[16]; the last (final) one
///                    ciphertext[0...chunkSize] tag[16]
/// body, clear:       the payload as it is, to the end
/// ```
/// Stream key: HKDF-SHA-256(ikm: the owner's key, salt: salt, info: "IdentityProtection stream v1").
/// Record i: nonce `00 00 00 00 ‖ UInt64be(i)` (each stream has its own key, each record its own index), AAD
/// `header ‖ UInt64be(i) ‖ final (01 or 00)`. A reordered, dropped, repeated or appended record, and a stream
/// cut at any length, fail authentication or framing.
enum StreamFormat {
    /// `89 49 44 50 53 0D 0A 1A`: "\x89IDPS\r\n\x1A".
    static let magic: [UInt8] = [0x89, 0x49, 0x44, 0x50, 0x53, 0x0D, 0x0A, 0x1A]
    static let version: UInt8 = 1
    static let info = Array("IdentityProtection stream v1".utf8)
    static let defaultChunkSize = 64 * 1024
    static let maximumHeaderLength = 8 + 1 + 1 + 2 + EnvelopeFormat.maximumOwnerLength + 16 + 32 + 4

    struct Header: Sendable {
        let owner: Identity
        let keyID: ProtectionKeyID?
        let salt: [UInt8]
        let chunkSize: Int
        let bytes: [UInt8]

        /// The owner as recorded: an encrypted stream is isolated (see ``DataEnvelope/recordedOwner``).
        var recordedOwner: RecordedOwner {
            RecordedOwner(owner, isolated: keyID != nil)
        }
    }

    static func makeHeader(owner: Identity, key: ProtectionKey?, chunkSize: Int) throws(ProtectionError) -> Header {
        var bytes = magic
        bytes.append(version)
        bytes.append(key == nil ? 0 : EnvelopeFormat.encryptedFlag)
        try EnvelopeFormat.appendOwner(owner, to: &bytes)
        var salt: [UInt8] = []
        if let key {
            salt = try ProtectionCrypto.randomBytes(32)
            bytes.append(contentsOf: key.id.bytes)
            bytes.append(contentsOf: salt)
            EnvelopeFormat.appendUInt32(UInt32(chunkSize), to: &bytes)
        }
        return Header(owner: owner, keyID: key?.id, salt: salt, chunkSize: chunkSize, bytes: bytes)
    }

    enum ParsedHeader {
        /// Not a stream envelope: the input passes through unchanged.
        case notAStream
        /// More bytes are needed to tell.
        case needMore
        case header(Header)
    }

    /// Parses a stream header from the first bytes of the input, as they have arrived so far.
    ///
    /// The answer never depends on how the input was split: no bytes yet, or a proper prefix of a magic, is
    /// `.needMore` until the input ends; input that ends inside a magic is truncated (an error, as it is for a
    /// data envelope), and input in another of the runtime's formats is an error, never passed through.
    static func parseHeader(_ prefix: UnsafeRawBufferPointer, atEnd: Bool) throws(ProtectionError) -> ParsedHeader {
        if prefix.isEmpty { return atEnd ? .notAStream : .needMore }
        switch EnvelopeFormat.match(prefix, magic: magic, others: true) {
        case .none: return .notAStream
        case .truncated:
            guard atEnd else { return .needMore }
            throw .invalidEnvelope(reason: "truncated in magic (\(prefix.count) bytes)")
        case let .otherFormat(name): throw .invalidEnvelope(reason: "\(name), not a protected stream")
        case .full: break
        }
        do throws(ProtectionError) {
            var reader = ByteReader(prefix)
            let (flags, owner) = try reader.commonHeader(magic: magic, version: version)
            guard flags & ~EnvelopeFormat.encryptedFlag == 0 else {
                throw .invalidEnvelope(reason: "reserved flag bits set (0x\(String(flags, radix: 16)))")
            }
            guard flags & EnvelopeFormat.encryptedFlag != 0 else {
                return .header(Header(owner: owner, keyID: nil, salt: [], chunkSize: 0, bytes: Array(UnsafeRawBufferPointer(rebasing: prefix[..<reader.offset]))))
            }
            guard !owner.isUnmanaged else {
                throw .invalidIdentity(reason: "an encrypted stream must name a managed owner, not the unmanaged identity")
            }
            let keyID = ProtectionKeyID(unchecked: Array(try reader.bytes(ProtectionKeyID.byteCount, "key id")))
            let salt = Array(try reader.bytes(32, "salt"))
            let chunkSize = Int(try reader.uint32("chunk size"))
            guard (EncryptedFileFormat.minimumChunkSize...EncryptedFileFormat.maximumChunkSize).contains(chunkSize) else {
                throw .invalidEnvelope(reason: "chunk size \(chunkSize) outside 1...\(EncryptedFileFormat.maximumChunkSize)")
            }
            return .header(Header(
                owner: owner, keyID: keyID, salt: salt, chunkSize: chunkSize,
                bytes: Array(UnsafeRawBufferPointer(rebasing: prefix[..<reader.offset]))))
        } catch .invalidEnvelope(let reason) where reason.hasPrefix("truncated") && !atEnd && prefix.count < maximumHeaderLength {
            return .needMore
        }
    }

    static func streamKey(_ key: ProtectionKey, salt: [UInt8]) throws(ProtectionError) -> [UInt8] {
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
}

/// Turns plaintext pieces into a protected stream, holding at most one chunk (plus the piece being added).
struct StreamSealer: Sendable {
    let header: StreamFormat.Header
    private let key: ProtectionKey?
    private let streamKey: [UInt8]?
    private var pending: [UInt8] = []
    private var index: UInt64 = 0
    private var headerWritten = false

    init(header: StreamFormat.Header, key: ProtectionKey?) throws(ProtectionError) {
        self.header = header
        self.key = key
        self.streamKey = try key.map { (key) throws(ProtectionError) in try StreamFormat.streamKey(key, salt: header.salt) }
        if streamKey != nil { pending.reserveCapacity(header.chunkSize) }
    }

    /// A sealer for the same owner, key and chunk size with a new random salt, so a new stream key: each
    /// sealed stream gets its own, and (key, nonce) pairs never repeat between two streams.
    func resalted() throws(ProtectionError) -> StreamSealer {
        try StreamSealer(
            header: try StreamFormat.makeHeader(owner: header.owner, key: key, chunkSize: header.chunkSize), key: key)
    }

    /// The output ready after adding `bytes`.
    mutating func append(_ bytes: UnsafeRawBufferPointer) throws(ProtectionError) -> [UInt8] {
        var output: [UInt8] = []
        if !headerWritten {
            output = header.bytes
            headerWritten = true
        }
        guard let streamKey else {
            output.append(contentsOf: bytes)
            return output
        }
        // Room for every record this piece completes, so the output grows once.
        output.reserveCapacity(output.count + pending.count + bytes.count + (bytes.count / header.chunkSize + 2) * ProtectionCrypto.tagLength)
        var offset = 0
        while offset < bytes.count {
            if pending.count == header.chunkSize {
                // More input follows a full chunk: it is not the final one.
                try seal(final: false, key: streamKey, into: &output)
            }
            if pending.isEmpty && bytes.count - offset > header.chunkSize {
                // A whole chunk with more input after it: sealed straight from the piece, without a copy.
                try seal(UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + header.chunkSize]), final: false, key: streamKey, into: &output)
                offset += header.chunkSize
                continue
            }
            let take = min(header.chunkSize - pending.count, bytes.count - offset)
            pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + take]))
            offset += take
        }
        return output
    }

    /// The rest of the stream, ending with the final record.
    mutating func finish() throws(ProtectionError) -> [UInt8] {
        var output: [UInt8] = []
        if !headerWritten {
            output = header.bytes
            headerWritten = true
        }
        if let streamKey { try seal(final: true, key: streamKey, into: &output) }
        return output
    }

    /// Seals the pending chunk and empties it.
    private mutating func seal(final: Bool, key: [UInt8], into output: inout [UInt8]) throws(ProtectionError) {
        let chunk = pending
        try withRawBytes(of: chunk) { (plaintext) throws(ProtectionError) in
            try seal(plaintext, final: final, key: key, into: &output)
        }
        pending.removeAll(keepingCapacity: true)
    }

    /// Seals `plaintext` as the next record.
    private mutating func seal(_ plaintext: UnsafeRawBufferPointer, final: Bool, key: [UInt8], into output: inout [UInt8]) throws(ProtectionError) {
        let aad = StreamFormat.aad(header, index, final: final)
        try withRawBytes(of: aad) { (aad) throws(ProtectionError) in
            try ProtectionCrypto.seal(key: key, nonce: StreamFormat.nonce(index), aad: aad, plaintext: plaintext, appendingTo: &output)
        }
        index += 1
    }
}

/// Turns a protected stream back into plaintext, authenticating each record before any of its bytes are
/// handed out; holds at most one record plus the piece being added. Input that is not a stream envelope
/// passes through unchanged.
struct StreamOpener: Sendable {
    /// Checks the owner (the policy's access check) and finds the key, once the header is read.
    let admit: @Sendable (StreamFormat.Header) throws(ProtectionError) -> ProtectionKey?
    private var buffer: [UInt8] = []
    private var header: StreamFormat.Header?
    private var streamKey: [UInt8]?
    private var passThrough = false
    private var index: UInt64 = 0
    private var sawFinal = false

    init(admit: @escaping @Sendable (StreamFormat.Header) throws(ProtectionError) -> ProtectionKey?) {
        self.admit = admit
    }

    /// The owner named by the header, once it was read.
    var owner: Identity? { header?.owner }

    /// Whether the header was read and admitted (or the input is not a stream): no key is looked up any more.
    var isSettled: Bool { header != nil || passThrough }

    mutating func append(_ bytes: UnsafeRawBufferPointer) throws(ProtectionError) -> [UInt8] {
        if passThrough { return Array(bytes) }
        buffer.append(contentsOf: bytes)
        var output: [UInt8] = []
        try drain(atEnd: false, into: &output)
        return output
    }

    mutating func finish() throws(ProtectionError) -> [UInt8] {
        if passThrough { return [] }
        var output: [UInt8] = []
        try drain(atEnd: true, into: &output)
        return output
    }

    private mutating func drain(atEnd: Bool, into output: inout [UInt8]) throws(ProtectionError) {
        if header == nil {
            let parsed = try withRawBytes(of: buffer) { (raw) throws(ProtectionError) in try StreamFormat.parseHeader(raw, atEnd: atEnd) }
            switch parsed {
            case .needMore:
                return
            case .notAStream:
                passThrough = true
                output = buffer
                buffer = []
                return
            case let .header(parsedHeader):
                let key = try admit(parsedHeader)
                streamKey = try key.map { (key) throws(ProtectionError) in try StreamFormat.streamKey(key, salt: parsedHeader.salt) }
                header = parsedHeader
                buffer.removeSubrange(..<parsedHeader.bytes.count)
            }
        }
        guard let header else { return }
        guard let streamKey else {
            // A clear stream: the body is the payload.
            output.append(contentsOf: buffer)
            buffer.removeAll(keepingCapacity: true)
            return
        }
        let recordLength = header.chunkSize + ProtectionCrypto.tagLength
        var start = 0
        defer { if start > 0 { buffer.removeSubrange(..<start) } }
        while !sawFinal {
            let available = buffer.count - start
            if available > recordLength {
                try open(start..<start + recordLength, final: false, header: header, key: streamKey, into: &output)
                start += recordLength
            } else if atEnd {
                guard available >= ProtectionCrypto.tagLength else {
                    throw .invalidEnvelope(reason: available == 0
                        ? "truncated: record \(index) missing"
                        : "truncated: record \(index) is \(available) bytes, shorter than its tag")
                }
                try open(start..<buffer.count, final: true, header: header, key: streamKey, into: &output)
                start = buffer.count
                sawFinal = true
            } else {
                return
            }
        }
        if buffer.count > start {
            throw .invalidEnvelope(reason: "\(buffer.count - start) trailing bytes after the final record")
        }
    }

    private mutating func open(
        _ range: Range<Int>, final: Bool, header: StreamFormat.Header, key: [UInt8], into output: inout [UInt8]
    ) throws(ProtectionError) {
        let aad = StreamFormat.aad(header, index, final: final)
        let split = range.upperBound - ProtectionCrypto.tagLength
        let nonce = StreamFormat.nonce(index)
        let plaintext = try withRawBytes(of: aad) { (aad) throws(ProtectionError) -> [UInt8] in
            try withRawBytes(of: buffer) { (raw) throws(ProtectionError) -> [UInt8] in
                try ProtectionCrypto.open(
                    key: key, nonce: nonce, aad: aad,
                    ciphertext: UnsafeRawBufferPointer(rebasing: raw[range.lowerBound..<split]),
                    tag: UnsafeRawBufferPointer(rebasing: raw[split..<range.upperBound]))
            }
        }
        output.append(contentsOf: plaintext)
        index += 1
    }
}
