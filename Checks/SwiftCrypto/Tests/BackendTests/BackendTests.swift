import IdentityCrypto
@testable import IdentityProtection
import Testing

@Suite("The check package really runs the CryptoKit branch")
struct BackendTests {
    @Test("ProtectionCrypto is built on swift-crypto here")
    func backend() throws {
        #expect(ProtectionCrypto.backendName == "swift-crypto (CryptoKit API)")
        let key = try ProtectionCrypto.randomBytes(32)
        let nonce = try ProtectionCrypto.randomBytes(12)
        #expect(key != nonce + [UInt8](repeating: 0, count: 20))
        var sealed: [UInt8] = []
        let message: [UInt8] = Array("swift-crypto".utf8)
        try message.withUnsafeBytes { plaintext in
            try [UInt8]().withUnsafeBytes { aad in
                try ProtectionCrypto.seal(key: key, nonce: nonce, aad: aad, plaintext: plaintext, appendingTo: &sealed)
            }
        }
        #expect(sealed.count == message.count + 16)
        let opened = try sealed.withUnsafeBytes { raw in
            try [UInt8]().withUnsafeBytes { aad in
                try ProtectionCrypto.open(
                    key: key, nonce: nonce, aad: aad, ciphertext: UnsafeRawBufferPointer(rebasing: raw[..<message.count]),
                    tag: UnsafeRawBufferPointer(rebasing: raw[message.count...]))
            }
        }
        #expect(opened == message)
        #expect(try ProtectionCrypto.sha256([]) .count == 32)
    }

    @Test("the shared crypto target, Ed25519 included, is built on swift-crypto here")
    func sharedCrypto() throws {
        #expect(PlatformCrypto.backendName == "swift-crypto (CryptoKit API)")
        let key = try Ed25519.PrivateKey(rawRepresentation: try Ed25519.generatePrivateKey())
        let message = Array("swift-crypto".utf8)
        let signature = try key.signature(of: message)
        let publicKey = Ed25519.PublicKey(rawRepresentation: key.publicKey)
        #expect(try publicKey.isValidSignature(signature, of: message))
        #expect(try !publicKey.isValidSignature(signature, of: message + [0]))
    }
}
