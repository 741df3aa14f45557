import IdentityProtection
import Testing

@Suite("KeyWrapping: AES-256-GCM envelope encryption of keys under a key-encryption key")
struct KeyWrappingTests {
    @Test("wrap then unwrap gives the key back; the wrapped bytes do not contain the material")
    func roundTrip() throws {
        let kek = try ProtectionKey.generate().material
        let key = try ProtectionKey.generate()
        let context = Array("alice@contoso.com".utf8)
        let wrapped = try KeyWrapping.wrap(key, under: kek, context: context)
        #expect(wrapped.count == KeyWrapping.wrappedByteCount)
        #expect(!contains(wrapped, key.material))
        #expect(try KeyWrapping.unwrap(wrapped, id: key.id, under: kek, context: context) == key)
        // A fresh nonce each time: wrapping twice gives different bytes.
        #expect(try KeyWrapping.wrap(key, under: kek, context: context) != wrapped)
    }

    @Test("another KEK, another id, another context or a flipped bit: authenticationFailed (102), no key")
    func refusals() throws {
        let kek = try ProtectionKey.generate().material
        let key = try ProtectionKey.generate()
        let wrapped = try KeyWrapping.wrap(key, under: kek, context: [1, 2, 3])
        #expect(throws: ProtectionError.authenticationFailed) {
            try KeyWrapping.unwrap(wrapped, id: key.id, under: try ProtectionKey.generate().material, context: [1, 2, 3])
        }
        #expect(throws: ProtectionError.authenticationFailed) {
            try KeyWrapping.unwrap(wrapped, id: try ProtectionKeyID.random(), under: kek, context: [1, 2, 3])
        }
        #expect(throws: ProtectionError.authenticationFailed) {
            try KeyWrapping.unwrap(wrapped, id: key.id, under: kek, context: [1, 2, 4])
        }
        for index in [0, 12, 40, wrapped.count - 1] {
            var tampered = wrapped
            tampered[index] ^= 0x01
            #expect(throws: ProtectionError.authenticationFailed) {
                try KeyWrapping.unwrap(tampered, id: key.id, under: kek, context: [1, 2, 3])
            }
        }
        let short = Array(wrapped.dropLast())
        #expect(throws: (any Error).self) { try KeyWrapping.unwrap(short, id: key.id, under: kek, context: [1, 2, 3]) }
        #expect(throws: (any Error).self) { try KeyWrapping.wrap(key, under: [1, 2, 3]) }
    }

    @Test("keyStoreUnavailable has code 113")
    func unavailableCode() {
        #expect(ProtectionError.keyStoreUnavailable(reason: "down").code == 113)
        #expect(ProtectionError.keyStoreUnavailable(reason: "down").description.contains("113"))
    }

    private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        return (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<($0 + needle.count)]) == needle }
    }
}
