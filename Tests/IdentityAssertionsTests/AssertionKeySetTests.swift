import Foundation
@testable import IdentityAssertions
import Testing

@Suite("AssertionKeySet: keys by kid, and JWKS (RFC 7517, OKP Ed25519) both ways")
struct AssertionKeySetTests {
    static let keyA = try! AssertionSigningKey(rawRepresentation: [UInt8](repeating: 1, count: 32))
    static let keyB = try! AssertionSigningKey(rawRepresentation: [UInt8](repeating: 2, count: 32))
    static var xA: String { Base64URL.encode(keyA.publicKey.rawRepresentation) }

    /// One JWK of key A, members as given (`nil` drops a member), plus `extra` raw members.
    static func jwk(kid: String? = #""a""#, kty: String? = #""OKP""#, crv: String? = #""Ed25519""#, x: String? = nil,
                    extra: String = "") -> String {
        var members: [String] = []
        if let kty { members.append(#""kty":\#(kty)"#) }
        if let crv { members.append(#""crv":\#(crv)"#) }
        members.append(#""x":\#(x ?? "\"\(xA)\"")"#)
        if let kid { members.append(#""kid":\#(kid)"#) }
        if !extra.isEmpty { members.append(extra) }
        return "{" + members.joined(separator: ",") + "}"
    }

    static func document(_ keys: String...) -> String { #"{"keys":[\#(keys.joined(separator: ","))]}"# }

    func refusal(_ text: String) -> AssertionKeySet.Refusal? {
        refusal(Array(text.utf8))
    }

    func refusal(_ bytes: [UInt8]) -> AssertionKeySet.Refusal? {
        do throws(AssertionError) {
            _ = try AssertionKeySet(jwks: bytes)
            return nil
        } catch {
            guard case let .invalidKeySet(refusal) = error else { Issue.record("not invalidKeySet: \(error)"); return nil }
            #expect(error.code == 18)
            return refusal
        }
    }

    @Test("published JWKS: exact members, sorted by kid, read back to an equal set")
    func roundTrip() throws {
        var keys = AssertionKeySet()
        keys.addKey(Self.keyB.publicKey, id: "b")
        keys.addKey(Self.keyA.publicKey, id: "a")
        keys.addKey(Self.keyA.publicKey, id: "caf\u{e9}")
        keys.addKey(Self.keyB.publicKey, id: "\u{212A}elvin")
        #expect(keys.count == 4)
        let text = keys.jwks
        #expect(text.hasPrefix(#"{"keys":[{"alg":"EdDSA","crv":"Ed25519","kid":"a","kty":"OKP","use":"sig","x":"\#(Self.xA)"},"#))
        #expect(!text.contains(#""d""#))
        let again = try AssertionKeySet(jwks: text)
        #expect(again == keys)
        #expect(again["caf\u{e9}"] == Self.keyA.publicKey && again["\u{212A}elvin"] == Self.keyB.publicKey)
        #expect(again["cafe\u{301}"] == nil && again["Kelvin"] == nil)
        #expect(try AssertionKeySet(jwks: Array(text.utf8)) == keys)
        #expect(try AssertionKeySet(jwks: Data(text.utf8)) == keys)
        // JSONSerialization reads it too.
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: [[String: String]]])
        #expect(parsed["keys"]?.count == 4)
        #expect(AssertionKeySet().jwks == #"{"keys":[]}"#)
        #expect(try AssertionKeySet(jwks: #"{"keys":[]}"#).isEmpty)
    }

    @Test("a verifier over a key set read from JWKS verifies the tokens of its keys")
    func verifierFromJWKS() throws {
        let published = AssertionKeySet(["k1": Self.keyA.publicKey]).jwks
        let verifier = IdentityAssertionVerifier(
            keySet: try AssertionKeySet(jwks: published), issuers: ["frontend"], audience: "documents")
        let signer = IdentityAssertionSigner(key: Self.keyA, keyID: "k1", issuer: "frontend")
        #expect(try verifier.verify(signer.sign(account: "alice@contoso.com", audience: "documents")).account == "alice@contoso.com")
        let other = IdentityAssertionSigner(key: Self.keyB, keyID: "k1", issuer: "frontend")
        #expect(throws: AssertionError.badSignature) { try verifier.verify(other.sign(account: "alice@contoso.com", audience: "documents")) }
    }

    @Test("members RFC 7517 lets a reader ignore are ignored; optional alg, use and key_ops are accepted when right")
    func ignoredMembers() throws {
        let text = Self.document(Self.jwk(extra: #""alg":"EdDSA","use":"sig","key_ops":["verify"],"ext":true,"iat":1800000000,"n":-9223372036854775808,"note":{"a":[1,2]}"#))
        let keys = try AssertionKeySet(jwks: #"{"issuer":"frontend","keys":\#(text.dropFirst(8).dropLast())}"#)
        #expect(keys.keyIDs == ["a"])
    }

    static let refusals: [(String, String, AssertionKeySet.Refusal)] = {
        let x = xA
        var cases: [(String, String, AssertionKeySet.Refusal)] = [
            // The document.
            ("no keys member", "{}", .notAKeySet("no keys member")),
            ("keys an object", #"{"keys":{}}"#, .notAKeySet("keys is not an array of objects")),
            ("keys null", #"{"keys":null}"#, .notAKeySet("keys is not an array of objects")),
            ("keys of numbers", #"{"keys":[1]}"#, .notAKeySet("keys is not an array of objects")),
            ("keys mixed", document(jwk(), #""x""#), .notAKeySet("keys is not an array of objects")),
            // Private members of every key type.
            ("OKP private key (d)", document(jwk(extra: #""d":"\#(x)""#)), .privateKeyMember(key: 0, member: "d")),
            ("oct key (k)", document(jwk(kty: #""oct""#, extra: #""k":"c2VjcmV0""#)), .privateKeyMember(key: 0, member: "k")),
            ("RSA private primes", document(jwk(kty: #""RSA""#, extra: #""p":"AQ""#)), .privateKeyMember(key: 0, member: "p")),
            ("RSA CRT member", document(jwk(kty: #""RSA""#, extra: #""qi":"AQ""#)), .privateKeyMember(key: 0, member: "qi")),
            ("RSA other primes", document(jwk(kty: #""RSA""#, extra: #""oth":[]"#)), .privateKeyMember(key: 0, member: "oth")),
            ("d in the second key", document(jwk(kid: #""z""#), jwk(extra: #""d":null"#)), .privateKeyMember(key: 1, member: "d")),
            // Key type, curve, algorithm, use.
            ("RSA key", document(jwk(kty: #""RSA""#)), .unsupportedKeyType(key: 0, "RSA")),
            ("EC key", document(jwk(kty: #""EC""#)), .unsupportedKeyType(key: 0, "EC")),
            ("kty in lower case", document(jwk(kty: #""okp""#)), .unsupportedKeyType(key: 0, "okp")),
            ("no kty", document(jwk(kty: nil)), .unsupportedKeyType(key: 0, "(missing)")),
            ("X25519 (key agreement)", document(jwk(crv: #""X25519""#)), .unsupportedCurve(key: 0, "X25519")),
            ("Ed448", document(jwk(crv: #""Ed448""#)), .unsupportedCurve(key: 0, "Ed448")),
            ("no crv", document(jwk(crv: nil)), .unsupportedCurve(key: 0, "(missing)")),
            ("alg ES256", document(jwk(extra: #""alg":"ES256""#)), .unsupportedAlgorithm(key: 0, "ES256")),
            ("alg none", document(jwk(extra: #""alg":"none""#)), .unsupportedAlgorithm(key: 0, "none")),
            ("alg Ed25519", document(jwk(extra: #""alg":"Ed25519""#)), .unsupportedAlgorithm(key: 0, "Ed25519")),
            ("use enc", document(jwk(extra: #""use":"enc""#)), .unsupportedUse(key: 0, #"use "enc""#)),
            ("key_ops sign", document(jwk(extra: #""key_ops":["sign"]"#)), .unsupportedUse(key: 0, #"key_ops ["sign"]"#)),
            ("key_ops verify and sign", document(jwk(extra: #""key_ops":["verify","sign"]"#)), .unsupportedUse(key: 0, #"key_ops ["verify", "sign"]"#)),
            ("key_ops a string", document(jwk(extra: #""key_ops":"verify""#)), .malformedKey(key: 0, "key_ops is not an array of strings")),
            ("x5c", document(jwk(extra: #""x5c":["MIIB"]"#)), .unsupportedMember(key: 0, member: "x5c")),
            ("x5u", document(jwk(extra: #""x5u":"https://example.invalid/c""#)), .unsupportedMember(key: 0, member: "x5u")),
            // Key IDs.
            ("no kid", document(jwk(kid: nil)), .missingKeyID(key: 0)),
            ("empty kid", document(jwk(kid: #""""#)), .invalidKeyID(key: 0, "is empty")),
            ("kid of 257 bytes", document(jwk(kid: "\"" + String(repeating: "k", count: 257) + "\"")), .invalidKeyID(key: 0, "is longer than 256 bytes")),
            ("kid null", document(jwk(kid: "null")), .malformedKey(key: 0, "kid is not a string")),
            ("kid a number", document(jwk(kid: "7")), .malformedKey(key: 0, "kid is not a string")),
            ("duplicate kid", document(jwk(), jwk()), .duplicateKeyID("a")),
            // The public key.
            ("no x", document(#"{"kty":"OKP","crv":"Ed25519","kid":"a"}"#), .invalidPublicKey(key: 0, "is missing")),
            ("x null", document(jwk(x: "null")), .malformedKey(key: 0, "x is not a string")),
            ("x padded", document(jwk(x: "\"\(x)=\"")), .invalidPublicKey(key: 0, "is not canonical base64url without padding")),
            ("x in base64, not base64url", document(jwk(x: "\"" + String(x.dropLast(2)) + "+/\"")), .invalidPublicKey(key: 0, "is not canonical base64url without padding")),
            ("x of 31 bytes", document(jwk(x: "\"\(Base64URL.encode([UInt8](repeating: 7, count: 31)))\"")), .invalidPublicKey(key: 0, "is 31 bytes, not 32")),
            ("x of 33 bytes", document(jwk(x: "\"\(Base64URL.encode([UInt8](repeating: 7, count: 33)))\"")), .invalidPublicKey(key: 0, "is 33 bytes, not 32")),
            ("x empty", document(jwk(x: #""""#)), .invalidPublicKey(key: 0, "is 0 bytes, not 32")),
            // Keys under which no signature verifies (and a verifier without the strict rule accepts forgeries).
            ("x the identity point", document(jwk(x: "\"\(Base64URL.encode([1] + [UInt8](repeating: 0, count: 31)))\"")),
             .invalidPublicKey(key: 0, "is a point of small order")),
            ("x all zeros (order 4)", document(jwk(x: "\"\(Base64URL.encode([UInt8](repeating: 0, count: 32)))\"")),
             .invalidPublicKey(key: 0, "is a point of small order")),
            ("x all ones (y not below p)", document(jwk(x: "\"\(Base64URL.encode([UInt8](repeating: 0xFF, count: 32)))\"")),
             .invalidPublicKey(key: 0, "is not a canonical point encoding (its y is not below 2^255 - 19)")),
        ]
        // Stray bits in the last character: another spelling of the same key.
        var stray = Array(x.utf8)
        stray[stray.count - 1] = stray[stray.count - 1] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        if Base64URL.decode(stray[...]) == nil {
            cases.append(("x with stray bits", document(jwk(x: "\"" + String(decoding: stray, as: UTF8.self) + "\"")), .invalidPublicKey(key: 0, "is not canonical base64url without padding")))
        }
        return cases
    }()

    @Test("every refusal, for the whole document", arguments: refusals)
    func refused(name: String, text: String, expected: AssertionKeySet.Refusal) {
        #expect(refusal(text) == expected, "\(name)")
    }

    @Test("hostile documents: too large, too many keys, not JSON as the strict reader takes it")
    func hostile() {
        let one = Self.document(Self.jwk())
        #expect(refusal(one + String(repeating: " ", count: AssertionKeySet.maximumJWKSLength - one.utf8.count)) == nil)
        #expect(refusal(one + String(repeating: " ", count: AssertionKeySet.maximumJWKSLength - one.utf8.count + 1))
                == .documentTooLarge(bytes: AssertionKeySet.maximumJWKSLength + 1, maximum: AssertionKeySet.maximumJWKSLength))
        let many = (0...AssertionKeySet.maximumKeyCount).map { Self.jwk(kid: "\"k\($0)\"") }
        #expect(refusal(#"{"keys":[\#(many.joined(separator: ","))]}"#) == .tooManyKeys(count: 65, maximum: 64))
        #expect(refusal(#"{"keys":[\#(many.dropLast().joined(separator: ","))]}"#) == nil)

        let notJSON: [(String, [UInt8])] = [
            ("empty", []),
            ("an array", Array("[]".utf8)),
            ("truncated", Array(one.utf8.dropLast())),
            ("text after", Array((one + "{}").utf8)),
            ("byte-order mark", [0xEF, 0xBB, 0xBF] + Array(one.utf8)),
            ("UTF-16", Array(one.utf16).flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }),
            ("invalid UTF-8 in a kid", Array(Self.document(Self.jwk(kid: "\"a\u{1}\"")).utf8).map { $0 == 1 ? 0xFF : $0 }),
            ("a lone surrogate", Array(Self.document(Self.jwk(kid: #""\ud800""#)).utf8)),
            ("duplicate member in the document", Array(#"{"keys":[],"keys":[]}"#.utf8)),
            ("duplicate member in a key", Array(Self.document(Self.jwk(extra: #""kid":"b""#)).utf8)),
            ("duplicate x", Array(Self.document(Self.jwk(extra: #""x":"\#(Self.xA)""#)).utf8)),
            ("deep nesting", Array(Self.document(Self.jwk(extra: #""n":"# + String(repeating: "[", count: 9) + String(repeating: "]", count: 9))).utf8)),
            ("a huge integer", Array(Self.document(Self.jwk(extra: #""n":"# + String(repeating: "9", count: 21))).utf8)),
            ("a huge exponent", Array(Self.document(Self.jwk(extra: #""n":1e999999999999999999"#)).utf8)),
            ("a small exponent", Array(Self.document(Self.jwk(extra: #""n":1e3"#)).utf8)),
            ("a fraction", Array(Self.document(Self.jwk(extra: #""n":0.5"#)).utf8)),
            ("just over Int64", Array(Self.document(Self.jwk(extra: #""n":9223372036854775808"#)).utf8)),
            ("just under Int64", Array(Self.document(Self.jwk(extra: #""n":-9223372036854775809"#)).utf8)),
            ("a long string", Array(Self.document(Self.jwk(extra: #""n":""# + String(repeating: "a", count: 1_025) + "\"")).utf8)),
            ("a long escaped string", Array(Self.document(Self.jwk(extra: #""n":""# + String(repeating: #"\u0061"#, count: 200) + "\"")).utf8)),
            ("a control character", Array(Self.document(Self.jwk(kid: "\"a\u{1}\"")).utf8)),
            ("single quotes", Array("{'keys':[]}".utf8)),
            ("a trailing comma", Array(#"{"keys":[],}"#.utf8)),
        ]
        for (name, bytes) in notJSON {
            guard case .notJSON = refusal(bytes) else { Issue.record("\(name): \(String(describing: refusal(bytes)))"); continue }
        }
    }

    @Test("IDs that differ only by canonical equivalence are two keys of a set, and its JWKS reads back to an equal set")
    func equivalentIDsReadBack() throws {
        var keys = AssertionKeySet()
        keys.addKey(Self.keyA.publicKey, id: "caf\u{e9}")
        keys.addKey(Self.keyB.publicKey, id: "cafe\u{301}")
        #expect(keys.count == 2)
        let again = try AssertionKeySet(jwks: keys.jwks)
        #expect(again == keys)
        #expect(again["caf\u{e9}"] == Self.keyA.publicKey)
        #expect(again["cafe\u{301}"] == Self.keyB.publicKey)
        // The same bytes twice are still one ID given twice.
        #expect(refusal(Self.document(Self.jwk(kid: "\"cafe\u{301}\""), Self.jwk(kid: "\"cafe\u{301}\""))) == .duplicateKeyID("cafe\u{301}"))
    }

    @Test("the key set's own API: add, replace, remove, look up byte for byte")
    func setAPI() throws {
        var keys = AssertionKeySet(["a": Self.keyA.publicKey])
        #expect(keys["a"] == Self.keyA.publicKey && keys["A"] == nil)
        keys.addKey(Self.keyB.publicKey, id: "a")
        #expect(keys["a"] == Self.keyB.publicKey && keys.count == 1)
        keys.addKey(Self.keyA.publicKey, id: "caf\u{e9}")
        #expect(keys["cafe\u{301}"] == nil)
        #expect(keys.removeKey(id: "a") == Self.keyB.publicKey)
        #expect(keys.removeKey(id: "a") == nil)
        #expect(keys.keyIDs == ["caf\u{e9}"])
    }
}
