import Foundation
import IdentityAssertions
import IdentityCrypto
import IdentityRuntime
import Testing

/// The libcrypto fallback (what a machine without libsodium, or a process with `IDENTITY_SODIUM=off`, verifies
/// with) answers exactly as the automatic backend on real tokens: it accepts the signatures of tokens the signer
/// made and refuses the tampered ones and the forgeries the strict rule is for. Runs whether or not the machine
/// has libsodium (the differential suite needs it to craft its cases); on Apple platforms and swift-crypto the
/// backend argument has no effect and both columns are CryptoKit's.
@Suite("Ed25519: the libcrypto backend, forced, gives the automatic backend's answers")
struct VerificationBackendTests {
    /// A token's signing input (`header.claims`) and its 64-byte signature.
    static func parts(of token: String) throws -> (input: [UInt8], signature: [UInt8]) {
        let pieces = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        try #require(pieces.count == 3)
        var base64 = pieces[2].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        let signature = try #require(Data(base64Encoded: base64))
        return (Array((pieces[0] + "." + pieces[1]).utf8), Array(signature))
    }

    /// Both backends' answers for one signature under one key.
    static func answers(_ key: [UInt8], _ signature: [UInt8], _ message: [UInt8]) throws -> (automatic: Bool, libcrypto: Bool) {
        let key = Ed25519.PublicKey(rawRepresentation: key)
        return (try key.isValidSignature(signature, of: message),
                try key.isValidSignature(signature, of: message, backend: .libcrypto))
    }

    @Test("tokens the signer made verify on both backends; every tampered one is refused on both")
    func tokens() throws {
        let key = try AssertionSigningKey()
        let signer = IdentityAssertionSigner(key: key, keyID: "k1", issuer: "frontend")
        let publicKey = key.publicKey.rawRepresentation
        for index in 0..<16 {
            let token = try signer.sign(account: Identity("user\(index)@contoso.com"), tenant: "contoso.com",
                                        audience: "documents", lifetime: 300)
            let (input, signature) = try Self.parts(of: token)
            let valid = try Self.answers(publicKey, signature, input)
            #expect(valid.automatic && valid.libcrypto, "token \(index): \(valid)")

            // One bit of R, one of S, one of the signing input: refused by both.
            var flippedR = signature
            flippedR[index % 32] ^= 0x01
            var flippedS = signature
            flippedS[32 + index % 31] ^= 0x10
            var flippedInput = input
            flippedInput[index % input.count] ^= 0x02
            for (name, signature, message) in [("R", flippedR, input), ("S", flippedS, input), ("input", signature, flippedInput)] {
                let answers = try Self.answers(publicKey, signature, message)
                #expect(!answers.automatic && !answers.libcrypto, "token \(index), bit flip in \(name): \(answers)")
            }
        }
    }

    @Test("the strict rule's forgeries (raw libcrypto accepts them) are refused on both backends",
          arguments: [Ed25519StrictnessTests.identityKeyForgery, Ed25519StrictnessTests.smallOrderR,
                      Ed25519StrictnessTests.allZeros])
    func forgeries(_ vector: Ed25519StrictnessTests.Vector) throws {
        let answers = try Self.answers(vector.publicKey, vector.signature, vector.message)
        #expect(!answers.automatic && !answers.libcrypto, "\(answers)")
    }

    @Test("the process names its backend")
    func backendIsNamed() {
        #if canImport(CryptoKit)
        #expect(Ed25519.verificationBackend == "CryptoKit")
        #else
        // libsodium when it loaded, else libcrypto; swift-crypto in Checks/SwiftCrypto.
        #expect(["libsodium", "libcrypto", "swift-crypto"].contains(Ed25519.verificationBackend))
        #expect(Ed25519.verificationBackendDescription.hasPrefix(Ed25519.verificationBackend))
        #endif
    }
}
