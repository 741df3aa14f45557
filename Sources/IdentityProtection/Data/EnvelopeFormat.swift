import IdentityRuntime
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Constants and helpers shared by the data envelope and the encrypted-file format (<doc:DataAndFileProtection>).
enum EnvelopeFormat {
    /// `89 49 44 50 44 0D 0A 1A`: "\x89IDPD\r\n\x1A", a protected-data envelope.
    static let dataMagic: [UInt8] = [0x89, 0x49, 0x44, 0x50, 0x44, 0x0D, 0x0A, 0x1A]
    /// `89 49 44 50 46 0D 0A 1A`: "\x89IDPF\r\n\x1A", an encrypted file.
    static let fileMagic: [UInt8] = [0x89, 0x49, 0x44, 0x50, 0x46, 0x0D, 0x0A, 0x1A]
    /// The only data-envelope and stream version this build writes and reads (encrypted files: version 2,
    /// ``EncryptedFileFormat/version``).
    static let version: UInt8 = 1
    /// Flag bit 0 of a data envelope: the body is encrypted.
    static let encryptedFlag: UInt8 = 0x01
    /// Largest owner field, in bytes (``Identity/maximumUTF8Length``).
    static let maximumOwnerLength = Identity.maximumUTF8Length

    /// How `bytes` relates to `magic`: it starts with it, is a proper non-empty prefix of it (or of one of the
    /// `others`), starts with one of the `others` (``otherFormat(_:)``), or none of these.
    enum MagicMatch: Equatable {
        case full, truncated, none
        /// The input is another of the runtime's formats: never to be passed through as unprotected data.
        case otherFormat(String)
    }

    /// The data and stream readers' `others`: input in a format of the runtime is never unprotected data, so a
    /// stream handed to the one-shot `unprotect`, or an envelope to the streaming one, is an error, not bytes
    /// passed through unchecked. (File contents are any bytes: the file reader passes no `others`.)
    static let protectedMagics: [(name: String, magic: [UInt8])] = [
        ("a data envelope", dataMagic), ("an encrypted file", fileMagic), ("a protected stream", StreamFormat.magic),
    ]

    /// Matches `bytes` against `magic`, then against the magics of `others` (those in ``protectedMagics`` other
    /// than `magic`, when `others` is true). Empty input matches nothing.
    static func match(_ bytes: UnsafeRawBufferPointer, magic: [UInt8], others: Bool = false) -> MagicMatch {
        if bytes.isEmpty { return .none }
        if let own = compare(bytes, magic) { return own }
        guard others else { return .none }
        for format in protectedMagics where format.magic != magic {
            switch compare(bytes, format.magic) {
            case .full?: return .otherFormat(format.name)
            case .truncated?: return .truncated
            default: continue
            }
        }
        return .none
    }

    /// `.full` when `bytes` starts with `magic`, `.truncated` when it is a proper prefix of it, else `nil`.
    private static func compare(_ bytes: UnsafeRawBufferPointer, _ magic: [UInt8]) -> MagicMatch? {
        let count = min(bytes.count, magic.count)
        for index in 0..<count where bytes[index] != magic[index] { return nil }
        return bytes.count >= magic.count ? .full : .truncated
    }

    /// Encodes the owner field (2-byte big-endian length, then UTF-8).
    /// - Throws: ``ProtectionError/invalidIdentity(reason:)`` (104) for an owner ``decodeOwner(_:)`` would not
    ///   read back (``requireRecordable(_:)``), or one too long for the field.
    static func appendOwner(_ owner: Identity, to output: inout [UInt8]) throws(ProtectionError) {
        try requireRecordable(owner)
        let utf8 = owner.name.utf8
        let count = utf8.count
        guard count <= maximumOwnerLength else {
            throw .invalidIdentity(reason: "owner is \(count) bytes of UTF-8; at most \(maximumOwnerLength) fit")
        }
        appendUInt16(UInt16(count), to: &output)
        // A native string's UTF-8 is contiguous: copied in one go, with no intermediate array.
        if utf8.withContiguousStorageIfAvailable({ output.append(contentsOf: $0) }) == nil {
            output.append(contentsOf: utf8)
        }
    }

    static func appendUInt16(_ value: UInt16, to output: inout [UInt8]) {
        output.append(UInt8(value >> 8))
        output.append(UInt8(value & 0xFF))
    }

    static func appendUInt32(_ value: UInt32, to output: inout [UInt8]) {
        for shift in stride(from: 24, through: 0, by: -8) { output.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }

    static func appendUInt64(_ value: UInt64, to output: inout [UInt8]) {
        for shift in stride(from: 56, through: 0, by: -8) { output.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    /// Refuses to record `owner` when its name is no valid identity (a control or invisible character, say):
    /// every reader of an owner (``decodeOwner(_:)``, the owner index) validates it, so data recorded for such
    /// an owner would be nobody's to read, and no wipe would find it. Names made with `Identity(_:)` from any
    /// string reach here.
    /// - Throws: ``ProtectionError/invalidIdentity(reason:)`` (104).
    static func requireRecordable(_ owner: Identity) throws(ProtectionError) {
        // Every protect asks twice (its key, its header) for the same few owners: the last name accepted is
        // compared, not checked again.
        let name = owner.name
        if lastRecordable.withLock({ $0 == name }) { return }
        if let problem = Identity.problem(in: name) {
            throw .invalidIdentity(reason: "\(owner.debugDescription) cannot own data: \(problem)")
        }
        lastRecordable.withLock { $0 = name }
    }

    /// The last owner name ``requireRecordable(_:)`` accepted.
    private static let lastRecordable = LockedValue<String?>(nil)

    /// Decodes an owner field's bytes: valid UTF-8 and a valid identity, or ``ProtectionError/invalidIdentity(reason:)`` (104).
    static func decodeOwner(_ bytes: UnsafeRawBufferPointer) throws(ProtectionError) -> Identity {
        let cached = decodedOwners.withLock { (cache: inout DecodedOwners) -> Identity? in
            // The last owner decoded: compared in place, with no allocation and no hashing.
            if let last = cache.last, last.bytes.count == bytes.count,
               last.bytes.withUnsafeBytes({ bytes.count == 0 || memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 }) {
                return last.owner
            }
            guard let owner = cache.byBytes[Array(bytes)] else { return nil }
            cache.last = (Array(bytes), owner)
            return owner
        }
        if let cached { return cached }
        guard let name = String(validating: bytes, as: UTF8.self) else {
            throw .invalidIdentity(reason: "owner field is not valid UTF-8")
        }
        let owner: Identity
        do {
            owner = try Identity(validating: name)
        } catch {
            throw .invalidIdentity(reason: "owner field: \(error)")
        }
        decodedOwners.withLock { cache in
            if cache.byBytes.count >= maximumDecodedOwners { cache.byBytes.removeAll(keepingCapacity: true) }
            cache.byBytes[Array(bytes)] = owner
            cache.last = (Array(bytes), owner)
        }
        return owner
    }

    /// Owner fields already decoded, by their bytes: every envelope and file of an account names the same
    /// owner, and validating and folding a name costs more than the rest of parsing a header. A pure
    /// function of the bytes, so sharing it is safe; emptied when it reaches ``maximumDecodedOwners``.
    private struct DecodedOwners {
        var byBytes: [[UInt8]: Identity] = [:]
        var last: (bytes: [UInt8], owner: Identity)?
    }

    private static let decodedOwners = LockedValue(DecodedOwners())
    static let maximumDecodedOwners = 4096
}

/// Reads big-endian fields from a buffer; running past the end is ``ProtectionError/invalidEnvelope(reason:)``.
struct ByteReader {
    let buffer: UnsafeRawBufferPointer
    private(set) var offset: Int

    init(_ buffer: UnsafeRawBufferPointer, offset: Int = 0) {
        self.buffer = buffer
        self.offset = offset
    }

    var remaining: Int { buffer.count - offset }

    mutating func bytes(_ count: Int, _ field: String) throws(ProtectionError) -> UnsafeRawBufferPointer {
        guard count >= 0, remaining >= count else {
            throw .invalidEnvelope(reason: "truncated in \(field) (needs \(count) bytes at offset \(offset), \(remaining) left)")
        }
        let slice = UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + count])
        offset += count
        return slice
    }

    mutating func uint8(_ field: String) throws(ProtectionError) -> UInt8 {
        try bytes(1, field)[0]
    }

    mutating func uint16(_ field: String) throws(ProtectionError) -> UInt16 {
        let raw = try bytes(2, field)
        return UInt16(raw[0]) << 8 | UInt16(raw[1])
    }

    mutating func uint32(_ field: String) throws(ProtectionError) -> UInt32 {
        let raw = try bytes(4, field)
        return raw.reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func uint64(_ field: String) throws(ProtectionError) -> UInt64 {
        let raw = try bytes(8, field)
        return raw.reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The common prefix of both formats: magic (already matched), version, flags, owner.
    mutating func commonHeader(magic: [UInt8], version expected: UInt8 = EnvelopeFormat.version) throws(ProtectionError) -> (flags: UInt8, owner: Identity) {
        let (_, flags, owner) = try commonHeader(magic: magic, versions: expected...expected)
        return (flags, owner)
    }

    /// The fields every header starts with, for a format that reads several `versions`.
    /// - Throws: ``ProtectionError/unsupportedVersion(_:)`` (101) a version outside `versions`; ``ProtectionError/invalidEnvelope(reason:)`` (100) truncated; ``ProtectionError/invalidIdentity(reason:)`` (104) a bad owner field.
    mutating func commonHeader(
        magic: [UInt8], versions: ClosedRange<UInt8>
    ) throws(ProtectionError) -> (version: UInt8, flags: UInt8, owner: Identity) {
        _ = try bytes(magic.count, "magic")
        let version = try uint8("version")
        guard versions.contains(version) else { throw .unsupportedVersion(version) }
        let flags = try uint8("flags")
        let ownerLength = Int(try uint16("owner length"))
        guard ownerLength <= EnvelopeFormat.maximumOwnerLength else {
            throw .invalidIdentity(reason: "owner field is \(ownerLength) bytes; at most \(EnvelopeFormat.maximumOwnerLength) are allowed")
        }
        let owner = try EnvelopeFormat.decodeOwner(try bytes(ownerLength, "owner"))
        return (version, flags, owner)
    }
}
