import Foundation
@testable import IdentityAssertions
import IdentityRuntime
import IdentityTesting
import Testing

/// A clock tests move by hand.
final class TestClock: Sendable {
    private let now = LockedValue(Date(timeIntervalSince1970: 1_800_000_000))
    var date: Date { now.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { now.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

/// The ``AssertionError/code`` `verifier` refuses `token` with, or `nil` when it accepts it.
func refusalCode(_ verifier: IdentityAssertionVerifier, _ token: String) -> Int? {
    do throws(AssertionError) { _ = try verifier.verify(token); return nil } catch { return error.code }
}

struct AssertionFixture {
    let clock = TestClock()
    let key: AssertionSigningKey
    let signer: IdentityAssertionSigner
    let verifier: IdentityAssertionVerifier

    init() throws {
        key = try AssertionSigningKey()
        signer = IdentityAssertionSigner(key: key, keyID: "k1", issuer: "frontend")
        let clock = clock
        verifier = IdentityAssertionVerifier(
            keys: ["k1": key.publicKey], issuers: ["frontend"], audience: "documents", clock: { clock.date })
    }

    func token(account: Identity = "alice@contoso.com", audience: String = "documents", lifetime: TimeInterval = 300,
               notBefore: Date? = nil, issuedAt: Date? = nil) throws -> String {
        let issued = issuedAt ?? clock.date
        return try signer.sign(IdentityAssertion(
            account: account, tenant: "contoso.com", issuer: "frontend", audience: audience, issuedAt: issued,
            notBefore: notBefore, expiresAt: issued.addingTimeInterval(lifetime)))
    }

    /// A token with the given header and claims JSON, signed (or not) with this fixture's key.
    func raw(header: String, claims: String, sign: Bool = true) throws -> String {
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        let signature = sign ? try key.signature(of: Array(input.utf8)) : []
        return input + "." + Base64URL.encode(signature)
    }

    /// Adds a new key as `id` to `verifier` (this fixture's by default); returns a token of bob signed with it.
    func tokenOfSecondKey(_ id: String = "k2", addedTo verifier: IdentityAssertionVerifier? = nil) throws -> String {
        let key = try AssertionSigningKey()
        (verifier ?? self.verifier).addKey(key.publicKey, id: id)
        return try IdentityAssertionSigner(key: key, keyID: id, issuer: "frontend")
            .sign(account: "bob@contoso.com", audience: "documents", now: clock.date)
    }

    var claims: String {
        let now = Int64(clock.date.timeIntervalSince1970)
        return #"{"aud":"documents","exp":\#(now + 300),"iat":\#(now),"iss":"frontend","jti":"\#(UUID().uuidString)","sub":"alice@contoso.com"}"#
    }
}

@Suite("Signed identity assertions: compact JWS with EdDSA (Ed25519)")
struct IdentityAssertionTests {
    @Test("a signed assertion verifies and says who, which tenant, from whom, for whom, until when")
    func roundTrip() throws {
        let f = try AssertionFixture()
        let token = try f.token()
        #expect(token.split(separator: ".").count == 3)
        let assertion = try f.verifier.verify(token)
        #expect(assertion.account == "alice@contoso.com" && assertion.tenant == "contoso.com")
        #expect(assertion.issuer == "frontend" && assertion.audience == "documents")
        #expect(assertion.expiresAt.timeIntervalSince(assertion.issuedAt) == 300)
        let header = try #require(Base64URL.decode(token.split(separator: ".")[0]))
        #expect(String(decoding: header, as: UTF8.self) == #"{"alg":"EdDSA","kid":"k1","typ":"JWT"}"#)
    }

    @Test("rotation: tokens of the old and the new key verify until the old key is removed")
    func rotation() throws {
        let f = try AssertionFixture()
        let old = try f.token(), new = try f.tokenOfSecondKey()
        #expect(try f.verifier.verify(old).account == "alice@contoso.com")
        #expect(try f.verifier.verify(new).account == "bob@contoso.com")
        f.verifier.removeKey(id: "k1")
        #expect(f.verifier.keyIDs == ["k2"])
        #expect(throws: AssertionError.unknownKey("k1")) { try f.verifier.verify(try f.token()) }
    }

    @Test("a private key round-trips through its raw bytes and derives the same public key")
    func rawKeys() throws {
        let key = try AssertionSigningKey()
        let again = try AssertionSigningKey(rawRepresentation: key.rawRepresentation)
        #expect(again.publicKey == key.publicKey)
        #expect(throws: AssertionError.invalidKey("an Ed25519 private key is 32 bytes, not 3")) {
            try AssertionSigningKey(rawRepresentation: [1, 2, 3])
        }
        #expect(throws: AssertionError.invalidKey("an Ed25519 public key is 32 bytes, not 0")) {
            try AssertionVerificationKey(rawRepresentation: [])
        }
    }

    @Test("one key object shared by many threads: concurrent signatures and verifications all check out, also as copies die")
    func sharedKeyObjects() async throws {
        let f = try AssertionFixture()
        let other = try AssertionSigningKey()
        // Every task signs with a copy of the signer and verifies with the shared verifier; half also check a
        // signature under the wrong key. Copies of the keys end with their tasks while other tasks still use them.
        let outcomes = await withTaskGroup(of: (valid: Int, refused: Int).self) { group in
            for task in 0..<8 {
                let signer = f.signer, verifier = f.verifier, wrongKey = other.publicKey
                group.addTask {
                    var valid = 0, refused = 0
                    for index in 0..<100 {
                        guard let token = try? signer.sign(
                            account: Identity("user\(task)-\(index)@contoso.com"), audience: "documents", now: f.clock.date)
                        else { continue }
                        if (try? verifier.verify(token))?.account == Identity("user\(task)-\(index)@contoso.com") { valid += 1 }
                        let parts = token.split(separator: ".")
                        if task.isMultiple(of: 2), let signature = Base64URL.decode(parts[2]),
                           (try? wrongKey.isValidSignature(signature, of: Array((parts[0] + "." + parts[1]).utf8))) == false {
                            refused += 1
                        }
                    }
                    return (valid, refused)
                }
            }
            return await group.reduce(into: (valid: 0, refused: 0)) { $0.valid += $1.valid; $0.refused += $1.refused }
        }
        #expect(outcomes.valid == 800)
        #expect(outcomes.refused == 400)
    }

    @Test("a public key the crypto library cannot use verifies nothing, and keys compare by their bytes")
    func unusablePublicKey() throws {
        let f = try AssertionFixture()
        let token = try f.token()
        let parts = token.split(separator: ".")
        let signature = try #require(Base64URL.decode(parts[2]))
        let input = Array((parts[0] + "." + parts[1]).utf8)
        #expect(try f.key.publicKey.isValidSignature(signature, of: input))
        // y = 2 is not the y of a curve point (a canonical encoding, not of small order: the key is made).
        let junk = try AssertionVerificationKey(rawRepresentation: [2] + [UInt8](repeating: 0, count: 31))
        #expect(try junk.isValidSignature(signature, of: input) == false)
        #expect(try f.key.publicKey.isValidSignature(Array(signature.dropLast()), of: input) == false)
        let same = try AssertionVerificationKey(rawRepresentation: f.key.publicKey.rawRepresentation)
        #expect(same == f.key.publicKey && Set([same, f.key.publicKey]).count == 1)
        #expect(junk != f.key.publicKey)
        // All ones is not a canonical encoding (its y is not below p): refused when the key is made.
        #expect(throws: AssertionError.invalidKey("the Ed25519 public key is not a canonical point encoding (its y is not below 2^255 - 19)")) {
            try AssertionVerificationKey(rawRepresentation: [UInt8](repeating: 0xFF, count: 32))
        }
    }

    @Test("every refusal has its typed error")
    func refusals() throws {
        let f = try AssertionFixture()
        let token = try f.token()
        let parts = token.split(separator: ".").map(String.init)
        #expect(throws: AssertionError.self) { try f.verifier.verify(parts[0] + "." + parts[1]) }
        #expect(throws: AssertionError.unsupportedAlgorithm("none")) {
            try f.verifier.verify(try f.raw(header: #"{"alg":"none","kid":"k1"}"#, claims: f.claims, sign: false))
        }
        #expect(throws: AssertionError.unsupportedAlgorithm("HS256")) {
            try f.verifier.verify(try f.raw(header: #"{"alg":"HS256","kid":"k1","typ":"JWT"}"#, claims: f.claims))
        }
        #expect(throws: AssertionError.unsupportedHeader("jwk")) {
            try f.verifier.verify(try f.raw(header: #"{"alg":"EdDSA","kid":"k1","jwk":{"kty":"OKP"}}"#, claims: f.claims))
        }
        #expect(throws: AssertionError.unsupportedHeader("typ JOSE+JSON")) {
            try f.verifier.verify(try f.raw(header: #"{"alg":"EdDSA","kid":"k1","typ":"JOSE+JSON"}"#, claims: f.claims))
        }
        #expect(throws: AssertionError.unknownKey("k9")) {
            try f.verifier.verify(try f.raw(header: #"{"alg":"EdDSA","kid":"k9"}"#, claims: f.claims))
        }
        let tampered = parts[0] + "." + Base64URL.encode(Array(f.claims.replacingOccurrences(of: "alice", with: "mallo").utf8)) + "." + parts[2]
        #expect(throws: AssertionError.badSignature) { try f.verifier.verify(tampered) }
        let forger = try AssertionSigningKey()
        let forged = try IdentityAssertionSigner(key: forger, keyID: "k1", issuer: "frontend")
            .sign(account: "alice@contoso.com", audience: "documents", now: f.clock.date)
        #expect(throws: AssertionError.badSignature) { try f.verifier.verify(forged) }
        #expect(throws: AssertionError.wrongAudience("billing")) { try f.verifier.verify(try f.token(audience: "billing")) }
        let stranger = try IdentityAssertionSigner(key: f.key, keyID: "k1", issuer: "elsewhere")
            .sign(account: "alice@contoso.com", audience: "documents", now: f.clock.date)
        #expect(throws: AssertionError.wrongIssuer("elsewhere")) { try f.verifier.verify(stranger) }
        let soon = try f.token(lifetime: 30)
        f.clock.advance(91)
        #expect(throws: AssertionError.self) { try f.verifier.verify(soon) }
        let later = try f.token(notBefore: f.clock.date.addingTimeInterval(600))
        #expect(throws: AssertionError.notYetValid(until: IdentityAssertion.wholeSeconds(f.clock.date.addingTimeInterval(600)))) {
            try f.verifier.verify(later)
        }
        #expect(throws: AssertionError.self) { try f.verifier.verify(try f.token(issuedAt: f.clock.date.addingTimeInterval(3_600))) }
        let replayed = try f.token()
        _ = try f.verifier.verify(replayed)
        #expect(throws: AssertionError.self) { try f.verifier.verify(replayed) }
        #expect(throws: AssertionError.self) { try f.verifier.verify(token + "=") }
        #expect(throws: AssertionError.self) { try f.verifier.verify(String(repeating: "a", count: 9_000)) }
        let badAccount = #"{"aud":"documents","exp":\#(Int64(f.clock.date.timeIntervalSince1970) + 60),"iat":\#(Int64(f.clock.date.timeIntervalSince1970)),"iss":"frontend","jti":"x","sub":" alice@contoso.com"}"#
        #expect(throws: AssertionError.self) { try f.verifier.verify(try f.raw(header: #"{"alg":"EdDSA","kid":"k1"}"#, claims: badAccount)) }
        #expect(AssertionError.replayCacheFull.code == 11 && AssertionError.badSignature.code == 5)
    }

    /// The code of the error `verifier` refuses `token` with, or `nil` when it accepts it.
    private func refusalCode(_ verifier: IdentityAssertionVerifier, _ token: String) -> Int? {
        do throws(AssertionError) {
            _ = try verifier.verify(token)
            return nil
        } catch {
            return error.code
        }
    }

    /// Claims signed with the fixture's key, from `now`, with the given members replaced or added.
    private func claims(_ f: AssertionFixture, _ members: [String: String]) -> String {
        let now = Int64(f.clock.date.timeIntervalSince1970)
        var all: [String: String] = [
            "aud": #""documents""#, "exp": "\(now + 300)", "iat": "\(now)", "iss": #""frontend""#,
            "jti": "\"\(UUID().uuidString)\"", "sub": #""alice@contoso.com""#,
        ]
        all.merge(members) { _, new in new }
        return "{" + all.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
    }

    @Test("names compare byte for byte: a canonically equivalent issuer, audience, key ID or typ is another name")
    func byteWiseNames() throws {
        let key = try AssertionSigningKey()
        let clock = TestClock()
        // Configured precomposed (é as U+00E9) and with a plain K.
        let verifier = IdentityAssertionVerifier(
            keys: ["k\u{E9}y-K": key.publicKey], issuers: ["caf\u{E9}"], audience: "K-service", clock: { clock.date })
        let now = Int64(clock.date.timeIntervalSince1970)
        func token(kid: String = "k\u{E9}y-K", typ: String = "JWT", iss: String = "caf\u{E9}", aud: String = "K-service") throws -> String {
            let header = #"{"alg":"EdDSA","kid":"\#(kid)","typ":"\#(typ)"}"#
            let claims = #"{"aud":"\#(aud)","exp":\#(now + 60),"iat":\#(now),"iss":"\#(iss)","jti":"\#(UUID().uuidString)","sub":"alice@contoso.com"}"#
            let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
            return input + "." + Base64URL.encode(try key.signature(of: Array(input.utf8)))
        }
        // Swift's String equality calls these equal; the verifier does not.
        #expect("cafe\u{301}" == "caf\u{E9}" && "\u{212A}-service" == "K-service")
        #expect(try verifier.verify(try token()).account == "alice@contoso.com")
        #expect(throws: AssertionError.wrongIssuer("cafe\u{301}")) { try verifier.verify(try token(iss: "cafe\u{301}")) }
        #expect(throws: AssertionError.wrongAudience("\u{212A}-service")) { try verifier.verify(try token(aud: "\u{212A}-service")) }
        #expect(throws: AssertionError.unknownKey("ke\u{301}y-K")) { try verifier.verify(try token(kid: "ke\u{301}y-K")) }
        #expect(throws: AssertionError.unknownKey("k\u{E9}y-\u{212A}")) { try verifier.verify(try token(kid: "k\u{E9}y-\u{212A}")) }
        #expect(throws: AssertionError.self) { try verifier.verify(try token(typ: "jwt")) }
        // Case is not folded either.
        #expect(throws: AssertionError.wrongIssuer("CAF\u{C9}")) { try verifier.verify(try token(iss: "CAF\u{C9}")) }
        // Keys are removed by the same bytes they were added with.
        verifier.removeKey(id: "ke\u{301}y-K")
        #expect(verifier.keyIDs == ["k\u{E9}y-K"])
        verifier.removeKey(id: "k\u{E9}y-K")
        #expect(verifier.keyIDs.isEmpty)
    }

    @Test("null is a wrong type, never absent: typ, nbf, tid, kid")
    func nullIsWrongType() throws {
        let f = try AssertionFixture()
        let header = #"{"alg":"EdDSA","kid":"k1","typ":"JWT"}"#
        for (header, claims) in [
            (#"{"alg":"EdDSA","kid":"k1","typ":null}"#, claims(f, [:])),
            (#"{"alg":"EdDSA","kid":null}"#, claims(f, [:])),
            (header, claims(f, ["nbf": "null"])),
            (header, claims(f, ["tid": "null"])),
        ] {
            #expect(refusalCode(f.verifier, try f.raw(header: header, claims: claims)) == 1, "\(header) \(claims)")
        }
        // Absent, they are fine.
        #expect(try f.verifier.verify(try f.raw(header: #"{"alg":"EdDSA","kid":"k1"}"#, claims: claims(f, [:]))).tenant == nil)
    }

    @Test("a token lives at most maximumLifetime: exp = Int64.max, an hour and a second, exp before iat are refused")
    func maximumLifetime() throws {
        let f = try AssertionFixture()
        let header = #"{"alg":"EdDSA","kid":"k1"}"#
        let now = Int64(f.clock.date.timeIntervalSince1970)
        #expect(f.verifier.maximumLifetime == 3_600)
        #expect(throws: AssertionError.lifetimeTooLong(seconds: Double(Int64.max) - Double(now), maximum: 3_600)) {
            try f.verifier.verify(try f.raw(header: header, claims: claims(f, ["exp": "\(Int64.max)"])))
        }
        #expect(throws: AssertionError.lifetimeTooLong(seconds: 3_601, maximum: 3_600)) {
            try f.verifier.verify(try f.raw(header: header, claims: claims(f, ["exp": "\(now + 3_601)"])))
        }
        // iat far in the past with exp still ahead: the lifetime counts from iat.
        #expect(throws: AssertionError.lifetimeTooLong(seconds: 7_200, maximum: 3_600)) {
            try f.verifier.verify(try f.raw(header: header, claims: claims(f, ["iat": "\(now - 3_600)", "exp": "\(now + 3_600)"])))
        }
        #expect(throws: AssertionError.self) {
            try f.verifier.verify(try f.raw(header: header, claims: claims(f, ["iat": "\(now)", "exp": "\(now - 1)", "nbf": "\(now)"])))
        }
        #expect(throws: AssertionError.malformed("claims: exp is before iat")) {
            try f.verifier.verify(try f.raw(header: header, claims: claims(f, ["iat": "\(now + 30)", "exp": "\(now + 20)"])))
        }
        #expect(try f.verifier.verify(try f.raw(header: header, claims: claims(f, ["exp": "\(now + 3_600)"]))).account == "alice@contoso.com")
        // A verifier of its own maximum.
        let short = IdentityAssertionVerifier(
            keys: ["k1": f.key.publicKey], issuers: ["frontend"], audience: "documents", maximumLifetime: 60,
            clock: { [clock = f.clock] in clock.date })
        #expect(throws: AssertionError.lifetimeTooLong(seconds: 300, maximum: 60)) { try short.verify(try f.token()) }
        #expect(try short.verify(try f.token(lifetime: 60)).account == "alice@contoso.com")
        #expect(AssertionError.lifetimeTooLong(seconds: 1, maximum: 0).code == 13)
    }

    @Test("tid is validated like a tenant ID: empty, white space around it, a newline, a format character, too long")
    func tenantValidated() throws {
        let f = try AssertionFixture()
        let header = #"{"alg":"EdDSA","kid":"k1"}"#
        for tenant in [#""""#, #"" contoso.com""#, #""contoso.com\n""#, #""contoso.com\nrefused 1 x""#, #""conto\u200Bso.com""#,
                       "\"" + String(repeating: "a", count: 1_025) + "\""] {
            #expect(refusalCode(f.verifier, try f.raw(header: header, claims: claims(f, ["tid": tenant]))) == 14, "\(tenant)")
        }
        #expect(try f.verifier.verify(try f.raw(header: header, claims: claims(f, ["tid": #""contoso.com""#]))).tenant == "contoso.com")
    }

    @Test("the replay cache refuses rather than forgets: full of unexpired token IDs, new tokens are refused; expired IDs make room")
    func replayCacheBound() throws {
        let f = try AssertionFixture()
        let verifier = IdentityAssertionVerifier(
            keys: ["k1": f.key.publicKey], issuers: ["frontend"], audience: "documents", replayCacheCapacity: 2,
            clock: { [clock = f.clock] in clock.date })
        _ = try verifier.verify(try f.token(lifetime: 10))
        _ = try verifier.verify(try f.token(lifetime: 10))
        #expect(throws: AssertionError.replayCacheFull) { try verifier.verify(try f.token(lifetime: 10)) }
        f.clock.advance(120)
        #expect(try verifier.verify(try f.token()).account == "alice@contoso.com")
    }

    @Test("base64url is canonical: one encoding per byte string, padding and stray bits refused")
    func canonicalBase64() {
        for length in 0..<64 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            let text = Base64URL.encode(bytes)
            #expect(Base64URL.decode(Substring(text)) == bytes)
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
        }
        #expect(Base64URL.decode("QR") == nil)   // "QQ" is canonical for [0x41]; "QR" sets an unused bit
        #expect(Base64URL.decode("QQ") == [0x41])
        #expect(Base64URL.decode("QQ==") == nil && Base64URL.decode("Q") == nil && Base64URL.decode("Q Q") == nil)
    }

    @Test("100,000 mutated tokens: none is accepted")
    func mutations() throws {
        let f = try AssertionFixture()
        let verifier = IdentityAssertionVerifier(
            keys: ["k1": f.key.publicKey], issuers: ["frontend"], audience: "documents", replayCacheCapacity: 1_000_000,
            clock: { [clock = f.clock] in clock.date })
        let original = try f.token()
        let characters = Array(original.utf8)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ ".utf8)
        let headers = [#"{"alg":"none","kid":"k1"}"#, #"{"alg":"HS256","kid":"k1"}"#, #"{"alg":"EdDSA"}"#,
                       #"{"alg":"EdDSA","kid":"k1","crit":["exp"]}"#, #"{"alg":"ES256","kid":"k1"}"#, "[]", "null"]
        let count = ProcessInfo.processInfo.environment["IDENTITY_LONG_TESTS"] == "1" ? 1_000_000
            : Sanitizers.isThreadSanitizerActive ? 20_000 : 100_000
        var random = SplitMix64(seed: 8_037)
        var accepted: [String] = []
        var tried = 0
        while tried < count {
            var mutated = characters
            switch random.next() % 6 {
            case 0:   // replace one character
                let index = Int(random.next() % UInt64(mutated.count))
                mutated[index] = alphabet[Int(random.next() % UInt64(alphabet.count))]
            case 1:   // flip one bit of one character
                let index = Int(random.next() % UInt64(mutated.count))
                mutated[index] ^= UInt8(1 << (random.next() % 7))
            case 2:   // delete a run
                let index = Int(random.next() % UInt64(mutated.count))
                mutated.removeSubrange(index..<min(mutated.count, index + 1 + Int(random.next() % 4)))
            case 3:   // insert a character
                let index = Int(random.next() % UInt64(mutated.count + 1))
                mutated.insert(alphabet[Int(random.next() % UInt64(alphabet.count))], at: index)
            case 4:   // swap or repeat parts
                let parts = original.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
                let order = [[1, 0, 2], [0, 2, 1], [0, 0, 2], [0, 1, 1], [2, 1, 0], [0, 1]][Int(random.next() % 6)]
                mutated = Array(order.map { parts[$0] }.joined(separator: ".").utf8)
            default:  // another header over the same claims and signature
                let parts = original.split(separator: ".").map(String.init)
                let header = headers[Int(random.next() % UInt64(headers.count))]
                mutated = Array((Base64URL.encode(Array(header.utf8)) + "." + parts[1] + "." + parts[2]).utf8)
            }
            guard mutated != characters else { continue }
            tried += 1
            let token = String(decoding: mutated, as: UTF8.self)
            if let assertion = try? verifier.verify(token) { accepted.append("\(token) → \(assertion.account)") }
        }
        #expect(accepted.isEmpty, "\(accepted.prefix(3))")
        #expect(try verifier.verify(original).account == "alice@contoso.com")   // the original itself still verifies
    }
}
