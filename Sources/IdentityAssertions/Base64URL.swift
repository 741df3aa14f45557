/// base64url without padding (RFC 4648 §5, RFC 7515 §2), strict: only the 64 characters of the alphabet, no
/// padding, no white space, and zero in the unused bits of the last character, so that every byte string has
/// exactly one encoding.
enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, character) in alphabet.enumerated() { table[Int(character)] = UInt8(index) }
        return table
    }()

    static func encode(_ bytes: some Collection<UInt8>) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        var iterator = bytes.makeIterator()
        while let first = iterator.next() {
            let second = iterator.next(), third = iterator.next()
            let block = UInt32(first) << 16 | UInt32(second ?? 0) << 8 | UInt32(third ?? 0)
            output.append(alphabet[Int(block >> 18 & 63)])
            output.append(alphabet[Int(block >> 12 & 63)])
            if second != nil { output.append(alphabet[Int(block >> 6 & 63)]) }
            if third != nil { output.append(alphabet[Int(block & 63)]) }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// The bytes of `text`, or `nil` when it is not canonical base64url without padding.
    static func decode(_ text: Substring) -> [UInt8]? {
        decode(Array(text.utf8)[...])
    }

    /// The bytes `characters` (base64url text) encode, or `nil` when they are not canonical base64url
    /// without padding.
    static func decode(_ characters: ArraySlice<UInt8>) -> [UInt8]? {
        guard characters.count % 4 != 1 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(characters.count * 3 / 4)
        let values = Self.values
        var index = characters.startIndex
        while index < characters.endIndex {
            let end = min(index + 4, characters.endIndex)
            var block: UInt32 = 0
            for position in index..<end {
                let value = values[Int(characters[position])]
                guard value != 0xFF else { return nil }
                block |= UInt32(value) << (18 - 6 * (position - index))
            }
            let count = end - index
            output.append(UInt8(block >> 16 & 0xFF))
            if count > 2 { output.append(UInt8(block >> 8 & 0xFF)) }
            if count > 3 { output.append(UInt8(block & 0xFF)) }
            // Non-canonical: bits below the last whole byte must be zero.
            if count == 2, block & 0xFFFF != 0 { return nil }
            if count == 3, block & 0xFF != 0 { return nil }
            index = end
        }
        return output
    }
}
