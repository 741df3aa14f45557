import Foundation
import IdentityAssertions
import Testing

/// Two keys whose IDs are canonically equivalent but byte-different, read from one JWKS document: each must
/// verify only the tokens that name its own bytes, and removing or replacing one must leave the other as it was.
@Suite("Canonically equivalent key IDs stay two keys through verification, caching and rotation")
struct EquivalentKeyIDAttackTests {
    static let composed = "caf\u{e9}"
    static let decomposed = "cafe\u{301}"
    static let keyA = try! AssertionSigningKey(rawRepresentation: [UInt8](repeating: 3, count: 32))
    static let keyB = try! AssertionSigningKey(rawRepresentation: [UInt8](repeating: 4, count: 32))

    static func keySet() throws -> AssertionKeySet {
        var keys = AssertionKeySet()
        keys.addKey(keyA.publicKey, id: composed)
        keys.addKey(keyB.publicKey, id: decomposed)
        return try AssertionKeySet(jwks: keys.jwks)
    }

    static func verifier(_ mode: IdentityAssertionVerifier.Mode) throws -> IdentityAssertionVerifier {
        IdentityAssertionVerifier(keySet: try keySet(), issuers: ["frontend"], audience: "documents", mode: mode)
    }

    static func token(_ key: AssertionSigningKey, kid: String) throws -> String {
        try IdentityAssertionSigner(key: key, keyID: kid, issuer: "frontend")
            .sign(account: "alice@contoso.com", audience: "documents")
    }

    @Test("a token verifies only under the key its kid names byte for byte", arguments: [
        IdentityAssertionVerifier.Mode.singleUse, .reusable,
    ])
    func eachKeyVerifiesOnlyItsOwnTokens(mode: IdentityAssertionVerifier.Mode) throws {
        let verifier = try Self.verifier(mode)
        #expect(verifier.keyIDs.count == 2)
        #expect(try verifier.verify(Self.token(Self.keyA, kid: Self.composed)).account == "alice@contoso.com")
        #expect(try verifier.verify(Self.token(Self.keyB, kid: Self.decomposed)).account == "alice@contoso.com")
        // The other key's signature under an equivalent ID is a forgery.
        #expect(throws: AssertionError.badSignature) { try verifier.verify(Self.token(Self.keyA, kid: Self.decomposed)) }
        #expect(throws: AssertionError.badSignature) { try verifier.verify(Self.token(Self.keyB, kid: Self.composed)) }
    }

    @Test("removing one of two equivalent IDs refuses its cached tokens and keeps the other's")
    func removalReachesOnlyItsOwnBytes() throws {
        let verifier = try Self.verifier(.reusable)
        let tokenA = try Self.token(Self.keyA, kid: Self.composed)
        let tokenB = try Self.token(Self.keyB, kid: Self.decomposed)
        _ = try verifier.verify(tokenA)
        _ = try verifier.verify(tokenB)
        verifier.removeKey(id: Self.composed)
        #expect(throws: AssertionError.unknownKey(Self.composed)) { try verifier.verify(tokenA) }
        #expect(try verifier.verify(tokenB).account == "alice@contoso.com")
        #expect(verifier.keyIDs == [Self.decomposed])
    }

    @Test("replacing the set with one that drops an equivalent ID refuses that key's cached tokens")
    func replaceKeysDropsByBytes() throws {
        let verifier = try Self.verifier(.reusable)
        let tokenA = try Self.token(Self.keyA, kid: Self.composed)
        let tokenB = try Self.token(Self.keyB, kid: Self.decomposed)
        _ = try verifier.verify(tokenA)
        _ = try verifier.verify(tokenB)
        var next = AssertionKeySet()
        next.addKey(Self.keyA.publicKey, id: Self.composed)
        verifier.replaceKeys(with: try AssertionKeySet(jwks: next.jwks))
        #expect(try verifier.verify(tokenA).account == "alice@contoso.com")
        #expect(throws: AssertionError.unknownKey(Self.decomposed)) { try verifier.verify(tokenB) }
        // Swapping the keys between the two IDs: each cached token now names a key that did not sign it.
        var swapped = AssertionKeySet()
        swapped.addKey(Self.keyB.publicKey, id: Self.composed)
        swapped.addKey(Self.keyA.publicKey, id: Self.decomposed)
        verifier.replaceKeys(with: swapped)
        #expect(throws: AssertionError.badSignature) { try verifier.verify(tokenA) }
        #expect(throws: AssertionError.badSignature) { try verifier.verify(tokenB) }
    }
}
