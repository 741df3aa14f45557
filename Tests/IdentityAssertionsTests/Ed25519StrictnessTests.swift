import Foundation
import IdentityAssertions
import Testing

/// The strict Ed25519 rule of every verification (`Ed25519.isStrictlyEncoded`, before any crypto library):
/// forgeries that a cofactorless verifier without small-order checks accepts (libcrypto, OpenSSL 3.0, accepts
/// all three vectors below: Ed25519DifferentialTests checks it) are refused on every backend, through the
/// public API: small-order and non-canonical keys when the key is made, the rest at verification. Compiled on
/// every platform, and by Checks/SwiftCrypto on swift-crypto.
@Suite("Ed25519: the strict encoding rule, on every backend")
struct Ed25519StrictnessTests {
    /// A universal forgery under the identity key: `(R = B, S = 1)` verifies cofactorlessly whenever
    /// `k = H(R ‖ A ‖ M)` is a multiple of 8; it is for this message.
    static let identityKeyForgery = Vector(
        publicKey: "0100000000000000000000000000000000000000000000000000000000000000",
        signature: "5866666666666666666666666666666666666666666666666666666666666666"
            + "0100000000000000000000000000000000000000000000000000000000000000",
        message: "forged under the identity key 17")

    /// `R` the identity, `S = k·a` under a real key: `[S]B − [k]A = R`, a valid cofactorless equation with a
    /// small-order `R`.
    static let smallOrderR = Vector(
        publicKey: "ed8cf3ba3bca7c6dde80f669b7d88a97ab42675f4efdb27f73d41bca51681e36",
        signature: "0100000000000000000000000000000000000000000000000000000000000000"
            + "1165fbc7d28c88bedb4022db7a35d664bfbc68984d41e4b96c8eec5534d60809",
        message: "small-order R")

    /// All zeros: the key and `R` are the point of order 4 with y = 0, `S = 0`; `−[k]A = R` for this message.
    static let allZeros = Vector(
        publicKey: String(repeating: "0", count: 64), signature: String(repeating: "0", count: 128), message: "all zeros 0")

    struct Vector: Sendable, CustomTestStringConvertible {
        let publicKey: [UInt8]
        let signature: [UInt8]
        let message: [UInt8]

        init(publicKey: String, signature: String, message: String) {
            self.publicKey = Self.bytes(publicKey)
            self.signature = Self.bytes(signature)
            self.message = Array(message.utf8)
        }

        var testDescription: String { String(decoding: message, as: UTF8.self) }

        static func bytes(_ hex: String) -> [UInt8] {
            let digits = Array(hex.utf8)
            return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
        }
    }

    @Test("small-order keys are refused when the key is made", arguments: [identityKeyForgery, allZeros])
    func smallOrderKey(_ vector: Vector) throws {
        #expect(throws: AssertionError.invalidKey("the Ed25519 public key is a point of small order")) {
            try AssertionVerificationKey(rawRepresentation: vector.publicKey)
        }
    }

    @Test("a small-order R is refused")
    func smallOrderR() throws {
        let vector = Self.smallOrderR
        let key = try AssertionVerificationKey(rawRepresentation: vector.publicKey)
        #expect(try key.isValidSignature(vector.signature, of: vector.message) == false)
    }

    @Test("S ≥ L is refused; the same signature with S < L verifies")
    func scalarBound() throws {
        let key = try AssertionSigningKey()
        let message = Array("scalar bound".utf8)
        let signature = try key.signature(of: message)
        #expect(try key.publicKey.isValidSignature(signature, of: message))
        // S + L: the same scalar modulo L.
        let order: [UInt8] = [
            0xED, 0xD3, 0xF5, 0x5C, 0x1A, 0x63, 0x12, 0x58, 0xD6, 0x9C, 0xF7, 0xA2, 0xDE, 0xF9, 0xDE, 0x14,
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
        ]
        var shifted = signature
        var carry = 0
        for i in 0..<32 {
            let total = Int(signature[32 + i]) + Int(order[i]) + carry
            shifted[32 + i] = UInt8(total & 0xFF)
            carry = total >> 8
        }
        #expect(try key.publicKey.isValidSignature(shifted, of: message) == false)
    }

    @Test("a non-canonical encoding of a key (y + p) is refused when the key is made")
    func nonCanonicalKey() throws {
        // y = p + 1: the identity, non-canonically (libcrypto reduces it modulo p); y = p + 3, a point of mixed order.
        for low: UInt8 in [0xEE, 0xF0] {
            var bytes = [UInt8](repeating: 0xFF, count: 32)
            bytes[0] = low
            bytes[31] = 0x7F
            #expect(throws: AssertionError.invalidKey("the Ed25519 public key is not a canonical point encoding (its y is not below 2^255 - 19)")) {
                try AssertionVerificationKey(rawRepresentation: bytes)
            }
        }
    }
}
