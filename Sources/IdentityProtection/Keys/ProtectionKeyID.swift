/// The 16-byte identifier of one key of one identity. Envelopes and encrypted files name the key they were
/// made with, so an identity's key can rotate while older data stays readable.
public struct ProtectionKeyID: Hashable, Sendable, CustomStringConvertible {
    /// The number of bytes in a key id.
    public static let byteCount = 16

    /// The raw bytes (always ``byteCount`` of them).
    public let bytes: [UInt8]

    /// Makes a key id from exactly ``byteCount`` bytes; `nil` for any other length.
    public init?(bytes: some Sequence<UInt8>) {
        let bytes = Array(bytes)
        guard bytes.count == ProtectionKeyID.byteCount else { return nil }
        self.bytes = bytes
    }

    /// Parses the 32-character lowercase or uppercase hexadecimal form of ``description``.
    public init?(hex: String) {
        let utf8 = Array(hex.utf8)
        guard utf8.count == ProtectionKeyID.byteCount * 2 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(ProtectionKeyID.byteCount)
        var index = 0
        while index < utf8.count {
            guard let high = Hex.value(utf8[index]), let low = Hex.value(utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        self.bytes = bytes
    }

    /// A new random key id from the crypto backend's CSPRNG.
    public static func random() throws(ProtectionError) -> ProtectionKeyID {
        ProtectionKeyID(unchecked: try ProtectionCrypto.randomBytes(byteCount))
    }

    init(unchecked bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Hashes the 16 bytes as two words (the synthesized hash feeds them one byte at a time, and every key
    /// lookup hashes an id).
    public func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { raw in
            guard raw.count == ProtectionKeyID.byteCount else { return hasher.combine(bytes: raw) }
            hasher.combine(raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
            hasher.combine(raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        }
    }

    public static func == (lhs: ProtectionKeyID, rhs: ProtectionKeyID) -> Bool {
        lhs.bytes == rhs.bytes
    }

    /// Lowercase hexadecimal, 32 characters.
    public var description: String { Hex.encode(bytes) }
}

enum Hex {
    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var result: [UInt8] = []
        for byte in bytes {
            result.append(digits[Int(byte >> 4)])
            result.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: result, as: UTF8.self)
    }

    /// Whether `character` is a digit ``encode(_:)`` writes (`0`–`9`, `a`–`f`).
    static func isLowercaseDigit(_ character: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(character) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(character)
    }

    static func value(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return character - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return character - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
